//! The one Tokio runtime of the process: Lance calls and S3 requests run on
//! it; everything else is synchronous and enters it with `block_on`.

use std::sync::OnceLock;

/// The process-wide runtime (two worker threads, started on first use).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("pchronicle-io")
            .enable_all()
            .build()
            .expect("the Tokio runtime starts")
    })
}
