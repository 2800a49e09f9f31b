//! The small synchronous HTTP/1.1 layer that `serve` (the Warehouse) and the
//! Gateway both run on: request heads and bodies under bounds and timeouts,
//! streamed responses, and the loopback address rules. It knows nothing of
//! Datasets or model traffic; `web` and `gateway` use it, neither imports
//! the other. May call `util` only.

mod addr;
mod server;

pub use addr::{host_name, listen_addr, loopback_host};
pub use server::*;
