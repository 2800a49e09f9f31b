//! What is mounted: health, the catalog of Datasets, one Dataset's summary
//! and its Sources.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::rows::rows_json;
use crate::dataset::Mount;
use crate::error::Error;
use crate::web::server::{Ctx, Reply, WarehouseView};

/// The mounts this request may see (the proxy's Dataset restriction).
fn visible<'c>(ctx: &Ctx<'_>, cat: &'c WarehouseView) -> Vec<&'c Mount> {
    cat.mounts
        .mounts()
        .iter()
        .filter(|m| {
            ctx.dataset_restriction
                .as_ref()
                .is_none_or(|only| *only == m.name)
        })
        .collect()
}

pub(super) fn health(ctx: &Ctx<'_>) -> Result<Reply, Error> {
    let cat = ctx.state.catalog();
    Ok(Reply::json(&json!({
        "status": "ok",
        "mode": "read_only",
        "version": env!("CARGO_PKG_VERSION"),
        "datasets": visible(ctx, &cat).len(),
        "catalog_generation": cat.generation,
        "catalog_created_at": cat.created_at,
        "uptime_seconds": (ctx.state.uptime() * 10.0).round() / 10.0,
    })))
}

fn status_counts(m: &Mount) -> Value {
    let mut counts = BTreeMap::new();
    for s in &m.snapshot.sources {
        *counts.entry(s.status.name()).or_insert(0u64) += 1;
    }
    json!(counts)
}

fn dataset_summary(m: &Mount) -> Value {
    let mut formats = BTreeMap::new();
    for s in &m.snapshot.sources {
        *formats.entry(s.format.name()).or_insert(0u64) += 1;
    }
    json!({
        "name": m.name,
        "kind": if m.snapshot.dataset.s3().is_some() { "s3" } else { "local" },
        "snapshot_id": m.snapshot.snapshot_id,
        "source_count": m.snapshot.sources.len(),
        "status_counts": status_counts(m),
        "format_counts": formats,
        "bytes": m.snapshot.sources.iter().map(|s| s.size).sum::<u64>(),
        "discovery_errors": m.snapshot.discovery_errors.len(),
    })
}

pub(super) fn catalog(ctx: &Ctx<'_>) -> Result<Reply, Error> {
    let cat = ctx.state.catalog();
    let ds: Vec<Value> = visible(ctx, &cat)
        .into_iter()
        .map(dataset_summary)
        .collect();
    Ok(Reply::json(&json!({
        "created_at": cat.created_at,
        "generation": cat.generation,
        "default_dataset": ctx.state.config.default_dataset,
        "datasets": ds,
    })))
}

pub(super) fn dataset_detail(_ctx: &Ctx<'_>, m: &Mount) -> Result<Reply, Error> {
    Ok(Reply::json(&dataset_summary(m)))
}

pub(super) fn sources(m: &Mount) -> Result<Reply, Error> {
    let b = crate::dataset::sources_batch(&m.snapshot.sources)?;
    Ok(Reply::json(&json!({
        "snapshot_id": m.snapshot.snapshot_id,
        "sources": rows_json(&b),
    })))
}
