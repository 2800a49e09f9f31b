//! The `pchronicle` binary: parse arguments, run, map the outcome to an exit code.

#![forbid(unsafe_code)]

use std::process::ExitCode;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    allocator_options();
    pchronicle::cli::main()
}

/// mimalloc's options for this run, unless the user set them: see
/// docs/build.md and docs/benchmarks.md for the measurements.
///
/// - `MIMALLOC_ALLOW_THP=0`: no transparent huge pages. mimalloc asks for
///   them on its regions, and a 2 MiB page is resident as soon as one byte
///   of it is touched: with them, every query of the SQL benchmark peaked at
///   about twice the memory (for example 131 against 64 MiB), for speed only
///   on the largest scans (a LIKE over 426 MB of text, 35% faster; a whole
///   export, 13%).
/// - `MIMALLOC_PURGE_DELAY` of 0 for `import`, 10 for `export` and `serve`
///   (`cli::purge_delay_ms`): memory freed is returned to the system at once
///   or after 10 ms instead of mimalloc's 1 s.
///   Import and export free the pages Lance decodes and encodes as fast as
///   they allocate them, and a second of them was a third of their peak
///   (a 1M-step export 489 → 330 MiB, an import 769 → 549 MiB). The server
///   decodes a large file once and keeps it packed: without the short
///   delay, the decoding's memory stayed resident (856 MiB against 122 MiB
///   after the first page of a 95 MB file). Queries keep the longer delay:
///   they are short, and returning memory costs time.
///
/// mimalloc reads its options before `main`, so they take effect by running
/// this same program image again with them set (`/proc/self/exe`, same
/// arguments, same process id); when that cannot be done, the command runs
/// as it is, with mimalloc's defaults.
fn allocator_options() {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let unset = |var: &str| std::env::var_os(var).is_none();
        let mut wanted = Vec::new();
        if unset("MIMALLOC_ALLOW_THP") {
            wanted.push(("MIMALLOC_ALLOW_THP", "0"));
        }
        // The command line is parsed here only while the delay is unset.
        if unset("MIMALLOC_PURGE_DELAY") {
            if let Some(ms) = pchronicle::cli::purge_delay_ms(std::env::args_os()) {
                wanted.push(("MIMALLOC_PURGE_DELAY", ms));
            }
        }
        // Once every option is set (as in the second run), the command runs.
        if wanted.is_empty() {
            return;
        }
        let mut again = std::process::Command::new("/proc/self/exe");
        again.envs(wanted);
        let mut args = std::env::args_os();
        if let Some(arg0) = args.next() {
            again.arg0(arg0);
        }
        // Returns only on failure.
        let _ = again.args(args).exec();
    }
}
