//! Reporting what interrupted imports left in a Dataset (`status`, `ls`).

use serde_json::{json, Value};

use super::human_bytes;
use crate::catalog::orphans::{Orphan, OrphanKind};
use crate::catalog::{CatalogSnapshot, DatasetUri};
use crate::cli::out::Out;

/// Where `o` is, as a path or an `s3://` URI.
fn location(dataset: &DatasetUri, o: &Orphan) -> String {
    match dataset {
        DatasetUri::Local(root) => root.join(&o.path).display().to_string(),
        DatasetUri::S3(u) => format!("{u}{}", o.path),
    }
}

/// A command that removes `o` with ordinary tools.
fn removal(dataset: &DatasetUri, o: &Orphan) -> String {
    let at = location(dataset, o);
    let quoted = format!("'{}'", at.replace('\'', r"'\''"));
    match (dataset, o.kind) {
        (DatasetUri::Local(_), OrphanKind::Lock) => format!("rm -f -- {quoted}"),
        (DatasetUri::Local(_), _) => format!("rm -rf -- {quoted}"),
        (DatasetUri::S3(_), OrphanKind::Lock) => format!("aws s3 rm {quoted}"),
        (DatasetUri::S3(_), _) => format!("aws s3 rm --recursive {quoted}"),
    }
}

fn age(seconds: Option<u64>) -> String {
    match seconds {
        None => "age unknown".into(),
        Some(s) if s < 120 => format!("{s} s old"),
        Some(s) if s < 7200 => format!("{} min old", s / 60),
        Some(s) if s < 172_800 => format!("{} h old", s / 3600),
        Some(s) => format!("{} days old", s / 86_400),
    }
}

/// One `note:` line per orphan, with what removes it (or why to leave it).
pub fn report(out: &Out, snap: &CatalogSnapshot) {
    for o in &snap.orphans {
        let size = if o.kind == OrphanKind::Lock {
            String::new()
        } else {
            format!(
                "{} in {}, ",
                human_bytes(o.bytes),
                super::plural(o.files as usize, "file")
            )
        };
        let (holder, advice) = match o.held {
            Some(true) => (
                format!(
                    "import{} still running",
                    o.pid.map(|p| format!(" {p}")).unwrap_or_default()
                ),
                "leave it".to_string(),
            ),
            Some(false) => (
                "no import holds it".into(),
                format!("remove it with: {}", removal(&snap.dataset, o)),
            ),
            None => (
                "whether an import still runs is unknown here".into(),
                format!(
                    "once no import runs, remove it with: {}",
                    removal(&snap.dataset, o)
                ),
            ),
        };
        out.note(&format!(
            "left by an import of `{}`: {} ({}, {size}{}, {holder}); {advice}",
            o.target,
            o.path,
            o.kind.name(),
            age(o.age_seconds),
        ));
    }
}

/// `(count, bytes)` of the orphans.
pub fn totals(snap: &CatalogSnapshot) -> Value {
    json!({
        "count": snap.orphans.len(),
        "bytes": snap.orphans.iter().map(|o| o.bytes).sum::<u64>(),
    })
}

/// The orphans as JSON objects, each with its location and removal command.
pub fn list(snap: &CatalogSnapshot) -> Value {
    Value::Array(
        snap.orphans
            .iter()
            .map(|o| {
                let mut v = json!(o);
                v["location"] = json!(location(&snap.dataset, o));
                v["remove_with"] = json!(removal(&snap.dataset, o));
                v
            })
            .collect(),
    )
}
