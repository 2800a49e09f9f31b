//! `ls [DATASET] [--physical]`: list logical Sources (or physical entries).

use serde_json::{json, Value};

use super::{human_bytes, report_snapshot};
use crate::catalog::{CatalogSnapshot, Source};
use crate::cli::out::{Align, Grid, Out};
use crate::cli::settings::ReadSettings;
use crate::cli::ExitStatus;
use crate::error::Error;

/// JSON form of a Source, shared by `ls` and `status`.
pub fn source_json(s: &Source) -> Value {
    json!({
        "source_path": s.source_path,
        "format": s.format.name(),
        "kind": s.kind,
        "layout": s.layout(),
        "snapshot_ref": s.snapshot_ref.to_string(),
        "read_consistency": s.read_consistency,
        "capabilities": s.capabilities(),
        "status": s.status.name(),
        "reason": s.reason,
        "size_bytes": s.size,
    })
}

/// Read the files completely (as `status` does) on a worker thread, and
/// give up at the deadline: one large file must not hold `ls` past its
/// `--timeout`. Nothing is printed before, so failing at once is clean.
fn checked_within(
    dataset: &crate::catalog::DatasetUri,
    mut sources: Vec<crate::catalog::Source>,
    deadline: crate::catalog::Deadline,
) -> Result<Vec<crate::catalog::Source>, Error> {
    let (tx, rx) = std::sync::mpsc::channel();
    let ds = dataset.clone();
    std::thread::Builder::new()
        .name("ls-check".into())
        .spawn(move || {
            let r = crate::catalog::read::check_files(&ds, &mut sources).map(|()| sources);
            let _ = tx.send(r);
        })
        .map_err(|e| Error::Internal(format!("cannot start the check: {e}")))?;
    let left = deadline.remaining();
    match rx.recv_timeout(left + std::time::Duration::from_millis(50) + left / 20) {
        Ok(r) => Ok(r?),
        Err(_) => Err(deadline
            .check()
            .err()
            .unwrap_or(crate::catalog::CatalogError::Timeout {
                seconds: deadline.limit().as_secs_f64(),
            })
            .into()),
    }
}

pub fn run(
    read: &ReadSettings,
    physical: bool,
    timeout: std::time::Duration,
    out: &mut Out,
) -> Result<ExitStatus, Error> {
    let deadline = crate::catalog::Deadline::after(timeout);
    let limits = crate::catalog::DiscoveryLimits {
        deadline: Some(deadline),
        ..read.limits
    };
    let mut snap = CatalogSnapshot::open(&read.dataset, limits, physical)?;
    snap.sources = checked_within(&read.dataset, std::mem::take(&mut snap.sources), deadline)?;
    report_snapshot(out, &snap);
    if read.strict {
        if let Some(s) = snap
            .sources
            .iter()
            .find(|s| s.status != crate::catalog::SourceStatus::Ready)
        {
            let reason = s
                .reason
                .clone()
                .unwrap_or_else(|| crate::catalog::StatusReason::new("PC-CAT-010", "not ready"));
            return Err(crate::catalog::CatalogError::StrictSource {
                source_path: s.source_path.clone(),
                status: s.status.name(),
                reason_code: reason.code,
                reason: reason.message,
            }
            .into());
        }
    }
    for (p, e) in &snap.discovery_errors {
        out.warn("PC-CAT-009", &format!("cannot read `{p}`: {e}"));
    }
    let not_ready = snap
        .sources
        .iter()
        .filter(|s| s.status != crate::catalog::SourceStatus::Ready)
        .count();
    if physical {
        super::orphans::report(out, &snap);
    }
    out.info(&format!(
        "{} ({not_ready} not ready)",
        super::plural(snap.sources.len(), "source")
    ));
    if out.json() {
        let mut doc = json!({
            "dataset_uri": snap.dataset.to_string(),
            "snapshot_id": snap.snapshot_id,
            "sources": snap.sources.iter().map(source_json).collect::<Vec<_>>(),
            "discovery_errors": snap.discovery_errors.iter().map(|(p, e)| json!({"path": p, "reason": e})).collect::<Vec<_>>(),
        });
        if physical {
            doc["physical"] =
                serde_json::to_value(&snap.physical).map_err(|e| Error::Internal(e.to_string()))?;
            doc["orphans"] = super::orphans::list(&snap);
        }
        out.write_json(&doc)?;
    } else if physical {
        let mut t = Grid::new(&[
            ("Path", Align::Left),
            ("Type", Align::Left),
            ("Size", Align::Right),
            ("Role", Align::Left),
            ("Source", Align::Left),
            ("Reason", Align::Left),
        ]);
        t.limit(5, 80);
        for e in &snap.physical {
            t.row(vec![
                e.path.clone(),
                e.entry_type.to_string(),
                e.size.map(human_bytes).unwrap_or_default(),
                serde_json::to_value(e.role)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                e.source_path.clone().unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
            ]);
        }
        out.write_table(&t)?;
    } else {
        let mut t = Grid::new(&[
            ("Source", Align::Left),
            ("Format", Align::Left),
            ("Kind", Align::Left),
            ("Snapshot Ref", Align::Left),
            ("Consistency", Align::Left),
            ("Status", Align::Left),
            ("Size", Align::Right),
        ]);
        for s in &snap.sources {
            let status = match &s.reason {
                Some(r) => format!("{} [{}]", s.status.name(), r.code),
                None => s.status.name().to_string(),
            };
            t.row(vec![
                s.source_path.clone(),
                s.format.name().to_string(),
                crate::catalog::SourceKind::name(s.kind).to_string(),
                s.snapshot_ref.to_string(),
                s.read_consistency.to_string(),
                status,
                human_bytes(s.size),
            ]);
        }
        if t.is_empty() {
            t.footer("(0 sources)");
        }
        out.write_table(&t)?;
    }
    Ok(if snap.sources.is_empty() {
        ExitStatus::NothingFound
    } else {
        ExitStatus::Success
    })
}
