//! The `pchronicle` binary: parse arguments, run, map the outcome to an exit code.

#![forbid(unsafe_code)]

use std::process::ExitCode;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    small_pages();
    pchronicle::cli::main()
}

/// Turn transparent huge pages off for this process, unless the user chose
/// with mimalloc's own `MIMALLOC_ALLOW_THP`. mimalloc asks for huge pages on
/// its regions, and a 2 MiB page is resident as soon as one byte of it is
/// touched: with them, every query of the SQL benchmark peaked at about
/// twice the memory (for example 131 against 64 MiB), for speed only on the
/// largest scans (a LIKE over 426 MB of text, 35% faster; a whole export,
/// 13%). See docs/benchmarks.md.
///
/// mimalloc reads its options before `main`, so the setting takes effect by
/// running this same program image again with it set (`/proc/self/exe`,
/// same arguments, same process id); when that cannot be done, the command
/// runs as it is, with huge pages.
fn small_pages() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        use std::os::unix::process::CommandExt;
        let mut args = std::env::args_os();
        let mut again = std::process::Command::new("/proc/self/exe");
        if let Some(arg0) = args.next() {
            again.arg0(arg0);
        }
        // Returns only on failure.
        let _ = again.args(args).env("MIMALLOC_ALLOW_THP", "0").exec();
    }
}
