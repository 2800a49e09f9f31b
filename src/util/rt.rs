//! The one Tokio runtime of the process: Lance calls and S3 requests run on
//! it; everything else is synchronous and enters it with `block_on`.

use std::sync::OnceLock;

/// Threads of the pool that reads S3 Sources: reads wait on the network far
/// more than they compute, so more are in flight than there are cores.
const NETWORK_THREADS: usize = 16;

/// Run `f` — typically a Rayon parallel iteration over Sources — on a wide
/// pool when `network` (the Sources are read from S3), else on the global
/// pool sized to the cores.
pub fn on_pool<R: Send>(network: bool, f: impl FnOnce() -> R + Send) -> R {
    if !network {
        return f();
    }
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    let pool = POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(NETWORK_THREADS)
            .thread_name(|i| format!("pchronicle-net-{i}"))
            .build()
            .ok()
    });
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// The cores work is spread over: `RAYON_NUM_THREADS` when set (it sizes
/// the global Rayon pool too), else the cores this process may use.
pub fn cores() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("RAYON_NUM_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
            })
    })
}

/// Let Lance decode and encode on every core. Lance keeps two cores back
/// for I/O and so, on a machine of two, decodes one batch at a time: a
/// scan of tool output then runs on one core while the other waits. Call
/// before any thread starts (Lance reads the variable once); a value the
/// user set is kept.
pub fn share_cores_with_lance() {
    const VAR: &str = "LANCE_CPU_THREADS";
    if std::env::var_os(VAR).is_none() {
        std::env::set_var(VAR, cores().to_string());
    }
}

/// Threads of the runtime's blocking pool, where Lance reads local files
/// (one `pread` per request). Tokio's default is 512; Lance keeps eight
/// reads in flight per scan, so an export (three scans) ran on 34 threads,
/// each keeping the memory it had freed in an allocator heap of its own.
/// Reads of the page cache do not wait, so a few threads keep the disk as
/// busy; S3 requests are asynchronous and do not use this pool.
const BLOCKING_THREADS: usize = 4;

/// The process-wide runtime (two worker threads, started on first use).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| start(2, "pchronicle-io"))
}

/// A runtime for Lance reads made while a store is being written. The
/// store writer's four table writers each wait for their next batch on one
/// of the shared runtime's blocking threads, all [`BLOCKING_THREADS`] of
/// them, so a read of a local file on that runtime (a `pread` on a blocking
/// thread) would wait for a batch that waits for the read. The projection
/// of captured traffic reads the events' records while it writes.
pub fn reads_runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| start(1, "pchronicle-read"))
}

/// A runtime of `workers` threads named `name`, with [`BLOCKING_THREADS`].
fn start(workers: usize, name: &str) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("the Tokio runtime starts")
}
