//! The `pchronicle` binary: parse arguments, run, map the outcome to an exit code.

#![forbid(unsafe_code)]

use std::process::ExitCode;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    pchronicle::cli::main()
}
