//! The deterministic LLM upstream of the Gateway tests, as a program for
//! benchmarks: `cargo run --release --example mock_upstream -- PORT`.
//! Listens on 127.0.0.1 only and prints its address.

#[path = "../tests/it/gateway/upstream.rs"]
mod upstream;

fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let u = upstream::Upstream::start(port);
    eprintln!("mock upstream listening: {}", u.url());
    loop {
        std::thread::park();
    }
}
