//! Deterministic corpus generator for tests and benchmarks.
//!
//! ```text
//! cargo run --release --example gen_corpus -- --out DIR --runs N --steps M [--seed S]
//!     [--format atif|actf|openai] [--subagent-every K] [--files-per-dir D]
//! ```

use std::path::PathBuf;

use pchronicle::corpus::{generate, Options};

fn main() {
    let mut a = Options::default();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--out" => a.out = PathBuf::from(v),
            "--runs" => a.runs = v.parse().expect("--runs N"),
            "--steps" => a.steps = v.parse().expect("--steps M"),
            "--seed" => a.seed = v.parse().expect("--seed S"),
            "--format" => a.format = v,
            "--subagent-every" => a.subagent_every = v.parse().expect("--subagent-every K"),
            "--files-per-dir" => a.files_per_dir = v.parse().expect("--files-per-dir D"),
            other => panic!("unknown flag {other}"),
        }
    }
    match generate(&a) {
        Ok(bytes) => eprintln!(
            "wrote {} {} runs ({:.1} MB) to {}",
            a.runs,
            a.format,
            bytes as f64 / 1e6,
            a.out.display()
        ),
        Err(e) => {
            eprintln!("gen_corpus: {e}");
            std::process::exit(2);
        }
    }
}
