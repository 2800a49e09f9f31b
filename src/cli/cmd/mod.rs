//! One module per command; each takes the resolved settings and an output.

mod default;
pub mod export;
mod find;
pub mod import;
mod ls;
mod orphans;
pub mod query;
mod serve;
mod status;

use super::out::Out;
use super::settings::{CommandSettings, Settings};
use super::ExitStatus;
use crate::error::Error;

/// Run the resolved command.
pub fn run(settings: &Settings, out: &mut Out) -> Result<ExitStatus, Error> {
    // Commands that read and write files stop at once on SIGINT or SIGTERM,
    // removing what they have not finished; `serve` has its own shutdown.
    let name = match &settings.command {
        CommandSettings::Ls { .. } => Some("ls"),
        CommandSettings::Status { .. } => Some("status"),
        CommandSettings::Query(_) => Some("query"),
        CommandSettings::Export(_) => Some("export"),
        CommandSettings::Find(_) => Some("find"),
        _ => None,
    };
    if let Some(name) = name {
        crate::util::interrupt::install(name);
    }
    match &settings.command {
        CommandSettings::Default { set } => default::run(settings, set.as_deref(), out),
        CommandSettings::Ls {
            read,
            physical,
            timeout,
        } => ls::run(read, *physical, *timeout, out),
        CommandSettings::Status {
            read,
            max_document_bytes,
            timeout,
        } => status::run(read, *max_document_bytes, *timeout, out),
        CommandSettings::Query(q) => query::run(q, out),
        CommandSettings::Import(s) => import::run(s, out),
        CommandSettings::Export(s) => export::run(s, out),
        CommandSettings::Find(s) => find::run(s, out),
        CommandSettings::Serve {
            config,
            listen,
            open,
            gateway,
        } => {
            let config = crate::web::WarehouseConfig::load(config)?;
            let gateway = match gateway {
                Some(g) => Some(serve::GatewayPlan {
                    config: crate::gateway::GatewayConfig::load(&g.config)?,
                    dataset: g.dataset.clone(),
                    state: g.state.clone(),
                    stream_markdown: g.stream_markdown,
                    debug: g.debug,
                }),
                None => None,
            };
            serve::run(
                &crate::web::ServeOptions {
                    config,
                    listen: listen.clone(),
                    open: *open,
                    quiet: out.quiet(),
                },
                gateway.as_ref(),
            )?;
            Ok(ExitStatus::Success)
        }
    }
}

/// Print the snapshot line every read command writes to stderr, and keep
/// the snapshot for an error object.
fn report_snapshot(out: &Out, snap: &crate::catalog::CatalogSnapshot) {
    out.remember_snapshot(&snap.dataset.to_string(), &snap.snapshot_id);
    out.info(&format!("snapshot_id: {}", snap.snapshot_id));
}

/// Human-readable byte size.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `1 source`, `2 sources`.
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}
