//! `status [DATASET]`: read every Source, report health and counts.

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use serde_json::json;

use super::ls::source_json;
use super::report_snapshot;
use crate::catalog::read::{SourceCounts, SourceRead};
use crate::catalog::{
    CatalogError, CatalogSnapshot, Deadline, DiscoveryLimits, Source, SourceStatus, StatusReason,
};
use crate::cli::out::{Align, Grid, Out};
use crate::cli::settings::ReadSettings;
use crate::cli::ExitStatus;
use crate::error::Error;
use crate::formats::DecodeOptions;

struct Report<'a> {
    source: &'a Source,
    status: SourceStatus,
    reason: Option<StatusReason>,
    read: SourceRead,
    /// False when the Source's contents were not counted (stores).
    counted: bool,
}

pub fn run(
    read: &ReadSettings,
    max_document_bytes: u64,
    timeout: std::time::Duration,
    out: &mut Out,
) -> Result<ExitStatus, Error> {
    let deadline = Deadline::after(timeout);
    let limits = DiscoveryLimits {
        deadline: Some(deadline),
        ..read.limits
    };
    let snap = CatalogSnapshot::open(&read.dataset, limits, false)?;
    // The snapshot line waits for the progress display; an error while
    // reading still names the snapshot.
    out.remember_snapshot(&snap.dataset.to_string(), &snap.snapshot_id);
    let opts = DecodeOptions {
        max_document_bytes,
        projection: crate::formats::atif::Projection::Skeleton,
    };
    let done = AtomicU64::new(0);
    let total = snap.sources.len() as u64;
    let progress = std::sync::Mutex::new(out.progress("reading sources"));
    let remote = snap.sources.iter().any(|s| s.object.is_some());
    let read_phase = crate::util::stats::phase(crate::util::stats::Phase::Read);
    let results: Vec<Result<Report<'_>, CatalogError>> = crate::util::rt::on_pool(remote, || {
        snap.sources
            .par_iter()
            .map(|s| {
                // Checked before each Source: one read in progress is
                // finished, no new one starts past the deadline.
                deadline.check()?;
                let r = report(s, opts);
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Ok(mut p) = progress.try_lock() {
                    p.tick(n, Some(total));
                }
                r
            })
            .collect()
    });
    if let Ok(mut p) = progress.lock() {
        p.finish();
    }
    drop(read_phase);
    let mut reports = Vec::with_capacity(results.len());
    for r in results {
        reports.push(r?);
    }
    deadline.check()?;
    report_snapshot(out, &snap);
    for (p, e) in &snap.discovery_errors {
        out.warn("PC-CAT-009", &format!("cannot read `{p}`: {e}"));
    }
    if read.strict {
        if let Some(r) = reports.iter().find(|r| r.status != SourceStatus::Ready) {
            let reason = r
                .reason
                .clone()
                .unwrap_or_else(|| StatusReason::new("PC-CAT-010", "not ready"));
            return Err(CatalogError::StrictSource {
                source_path: r.source.source_path.clone(),
                status: r.status.name(),
                reason_code: reason.code,
                reason: reason.message,
            }
            .into());
        }
    }
    let mut totals = SourceCounts::default();
    let (mut ready, mut degraded, mut errors, mut generated) = (0u64, 0u64, 0u64, 0u64);
    for r in &reports {
        totals.add(&r.read.counts);
        generated += r.read.generated_ids;
        match r.status {
            SourceStatus::Ready => ready += 1,
            SourceStatus::Degraded => degraded += 1,
            SourceStatus::Error => errors += 1,
        }
        if r.status != SourceStatus::Ready {
            if let Some(reason) = &r.reason {
                out.warn(
                    reason.code,
                    &format!(
                        "{}: {} ({})",
                        r.source.source_path,
                        reason.message,
                        r.status.name()
                    ),
                );
            }
        }
    }
    super::orphans::report(out, &snap);
    out.info(&format!(
        "{} ({ready} ready, {degraded} degraded, {errors} error): {} runs, {} trajectories, {} steps, {} tool calls",
        super::plural(reports.len(), "source"),
        totals.runs,
        totals.trajectories,
        totals.steps,
        totals.tool_calls
    ));
    if out.json() {
        let sources: Vec<_> = reports
            .iter()
            .map(|r| {
                let mut v = source_json(r.source);
                v["status"] = json!(r.status.name());
                v["reason"] = json!(r.reason);
                v["counts"] = if r.counted {
                    json!(r.read.counts)
                } else {
                    json!(null)
                };
                v["generated_ids"] = json!(r.read.generated_ids);
                v["diagnostics"] = json!(r.read.diagnostics);
                if let Some(e) = &r.read.events {
                    v["events"] = json!(e);
                }
                v
            })
            .collect();
        out.write_json(&json!({
            "dataset_uri": snap.dataset.to_string(),
            "snapshot_id": snap.snapshot_id,
            "sources": sources,
            "discovery_errors": snap.discovery_errors.iter().map(|(p, e)| json!({"path": p, "reason": e})).collect::<Vec<_>>(),
            "orphans": super::orphans::list(&snap),
            "totals": {
                "sources": reports.len(),
                "ready": ready,
                "degraded": degraded,
                "error": errors,
                "runs": totals.runs,
                "trajectories": totals.trajectories,
                "steps": totals.steps,
                "tool_calls": totals.tool_calls,
                "generated_ids": generated,
                "orphans": super::orphans::totals(&snap),
            },
        }))?;
    } else {
        let mut t = Grid::new(&[
            ("Source", Align::Left),
            ("Format", Align::Left),
            ("Status", Align::Left),
            ("Runs", Align::Right),
            ("Trajectories", Align::Right),
            ("Steps", Align::Right),
            ("Tool Calls", Align::Right),
            ("Problem", Align::Left),
        ]);
        t.limit(7, 100);
        for r in &reports {
            let c = &r.read.counts;
            let n = |x: u64| {
                if r.counted {
                    x.to_string()
                } else {
                    "—".to_string()
                }
            };
            t.row(vec![
                r.source.source_path.clone(),
                r.source.format.name().to_string(),
                r.status.name().to_string(),
                n(c.runs),
                n(c.trajectories),
                n(c.steps),
                n(c.tool_calls),
                r.reason
                    .as_ref()
                    .map(|x| format!("[{}] {}", x.code, x.message))
                    .unwrap_or_default(),
            ]);
        }
        t.footer(format!(
            "total: {} ({ready} ready, {degraded} degraded, {errors} error), {} runs, {} trajectories, {} steps, {} tool calls",
            super::plural(reports.len(), "source"),
            totals.runs,
            totals.trajectories,
            totals.steps,
            totals.tool_calls
        ));
        out.write_table(&t)?;
        for r in &reports {
            if let Some(e) = &r.read.events {
                out.info(&format!(
                    "{}: {} events ({} duplicate rows), {} sessions, newest {}{}",
                    r.source.source_path,
                    e.events,
                    e.duplicates,
                    e.sessions,
                    e.newest_event_at.as_deref().unwrap_or("—"),
                    match e.wal_pending_events {
                        Some(n) => format!(", {n} captured events not yet appended (gateway WAL)"),
                        None => String::new(),
                    }
                ));
            }
        }
    }
    Ok(ExitStatus::Success)
}

fn report(s: &Source, opts: DecodeOptions) -> Result<Report<'_>, CatalogError> {
    let mut a = crate::catalog::read::assess(s, opts)?;
    // Events a Gateway made durable beside a local events store but has not
    // appended yet (its state directory's write-ahead log).
    if let Some(e) = a.read.events.as_mut() {
        e.wal_pending_events = s
            .abs_path
            .parent()
            .and_then(|p| crate::gateway::sink::wal_pending(&p.join(".pchronicle-gateway")));
    }
    Ok(Report {
        source: s,
        status: a.status,
        reason: a.reason,
        read: a.read,
        counted: a.counted,
    })
}
