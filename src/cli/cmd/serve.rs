//! `serve`: the read-only Warehouse, the Gateway, or both in one process,
//! until SIGINT or SIGTERM (SIGHUP pins every mount again). The two never
//! know of each other: captured events reach the Warehouse at its next
//! refresh, which this loop asks for after the Gateway appends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::web::{ServeOptions, Warehouse};

/// `--gateway` and its options, as `serve` received them.
#[derive(Debug, Clone)]
pub struct GatewayPlan {
    /// The parsed gateway.toml.
    pub config: crate::gateway::GatewayConfig,
    /// `--gateway-dataset`.
    pub dataset: Option<String>,
    /// `--gateway-state`.
    pub state: Option<std::path::PathBuf>,
    /// `--gateway-stream-markdown`.
    pub stream_markdown: bool,
    /// `--debug`.
    pub debug: bool,
}

/// Where captured events go: the Dataset's name, its `events.lance` (path
/// or URL) and the state directory.
fn gateway_target(
    config: &crate::web::WarehouseConfig,
    plan: &GatewayPlan,
) -> Result<(String, String, std::path::PathBuf), crate::gateway::GatewayError> {
    use crate::gateway::GatewayError;
    let name = match (&plan.dataset, &config.default_dataset) {
        (Some(n), _) | (None, Some(n)) => n.clone(),
        (None, None) if config.datasets.len() == 1 => config.datasets[0].name.clone(),
        (None, None) => {
            return Err(GatewayError::Target(format!(
                "the Warehouse mounts {} datasets and names no default_dataset: choose the one that receives events with --gateway-dataset",
                config.datasets.len()
            )))
        }
    };
    let d = config
        .datasets
        .iter()
        .find(|d| d.name == name)
        .ok_or_else(|| {
            GatewayError::Target(format!(
                "no dataset named `{}` is mounted",
                crate::util::text::escape_control(&name)
            ))
        })?;
    match &d.uri {
        crate::catalog::DatasetUri::Local(root) => {
            if !root.is_dir() {
                return Err(GatewayError::Target(format!(
                    "dataset `{name}` is not a directory: create it first ({})",
                    root.display()
                )));
            }
            let state = plan
                .state
                .clone()
                .unwrap_or_else(|| root.join(".pchronicle-gateway"));
            Ok((
                name,
                root.join("events.lance").to_string_lossy().into_owned(),
                state,
            ))
        }
        crate::catalog::DatasetUri::S3(u) => {
            let state = plan.state.clone().ok_or_else(|| {
                GatewayError::Target(format!(
                    "dataset `{name}` is on S3: give a local directory for the write-ahead log with --gateway-state"
                ))
            })?;
            Ok((
                name,
                format!("s3://{}/{}events.lance", u.bucket(), u.prefix()),
                state,
            ))
        }
    }
}

/// Run what `serve` was asked for until a stop signal.
pub fn run(opts: &ServeOptions, gateway: Option<&GatewayPlan>) -> Result<(), Error> {
    let warehouse = gateway.is_none() || opts.listen.is_some() || opts.config.listen.is_some();
    let info = |m: &str| {
        if !opts.quiet {
            eprintln!("{m}");
        }
    };
    let web = if warehouse {
        Some(Warehouse::start(opts)?)
    } else {
        None
    };
    // Captured events become visible to the Warehouse at the next refresh
    // after they reach events.lance.
    let captured = Arc::new(AtomicBool::new(false));
    let gateway = match gateway {
        Some(plan) => {
            let (dataset, events_path, state_dir) = gateway_target(&opts.config, plan)?;
            info(&format!("gateway: events go to dataset {dataset}"));
            let flag = Arc::clone(&captured);
            let on_flush: Option<Arc<dyn Fn() + Send + Sync>> = web.as_ref().map(|_| {
                Arc::new(move || flag.store(true, Ordering::SeqCst)) as Arc<dyn Fn() + Send + Sync>
            });
            Some(crate::gateway::start(crate::gateway::GatewayOptions {
                config: plan.config.clone(),
                dataset,
                events_path,
                state_dir,
                stream_markdown: plan.stream_markdown,
                debug: plan.debug,
                quiet: opts.quiet,
                on_flush,
            })?)
        }
        None => None,
    };
    let signals = signal_channel();
    let refresh = opts.config.refresh;
    let mut last_refresh = Instant::now();
    loop {
        let wait = match (refresh, gateway.is_some() && web.is_some()) {
            (Some(every), true) => Some(every.min(Duration::from_secs(1))),
            (Some(every), false) => Some(every),
            (None, true) => Some(Duration::from_secs(1)),
            (None, false) => None,
        };
        let got = match wait {
            Some(w) => signals.recv_timeout(w),
            None => signals
                .recv()
                .map_err(|_| std::sync::mpsc::RecvTimeoutError::Disconnected),
        };
        let due = match got {
            Ok(Signal::Refresh) => true,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                captured.swap(false, Ordering::SeqCst)
                    || refresh.is_some_and(|every| last_refresh.elapsed() >= every)
            }
            Ok(Signal::Stop) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        };
        if !due {
            continue;
        }
        let Some(w) = &web else { continue };
        last_refresh = Instant::now();
        w.refresh();
    }
    info("stopping: finishing requests in progress");
    if let Some(g) = gateway {
        g.shutdown(Duration::from_secs(30));
    }
    if let Some(w) = web {
        w.shutdown();
    }
    info("stopped");
    Ok(())
}

enum Signal {
    Refresh,
    Stop,
}

/// SIGHUP → refresh; SIGINT/SIGTERM → stop (a second one exits at once).
fn signal_channel() -> std::sync::mpsc::Receiver<Signal> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let (tx, rx) = std::sync::mpsc::channel();
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        eprintln!(
            "warning[PC-WEB-003]: cannot install signal handlers; stop the server with SIGKILL"
        );
        // Without handlers nothing ever stops the loop but the process's end.
        std::mem::forget(tx);
        return rx;
    };
    std::thread::Builder::new()
        .name("pchronicle-signals".into())
        .spawn(move || {
            let mut stopping = false;
            for sig in signals.forever() {
                let s = if sig == SIGHUP {
                    Signal::Refresh
                } else {
                    if stopping {
                        eprintln!(
                            "second interrupt: exiting without waiting for requests in progress"
                        );
                        std::process::exit(130);
                    }
                    stopping = true;
                    Signal::Stop
                };
                if tx.send(s).is_err() {
                    return;
                }
            }
        })
        .expect("signal thread starts");
    rx
}
