//! The runs and trajectories listings of a mount: every row read once per
//! WarehouseView generation, then sorted, filtered and paged per request.

use std::sync::Arc;

use serde_json::{json, Value};

use super::cache::{CacheEntry, DocKey};
use super::rows::rows_json;
use super::{bad, check_cb, param_usize, timeout_error, truncate_chars};
use crate::dataset::Mount;
use crate::error::Error;
use crate::table::Table;
use crate::web::server::{Ctx, Reply, WarehouseView};

/// Columns of the trajectories list (the `trajectories` relation).
const TRAJECTORY_COLUMNS: [&str; 21] = [
    "source_path",
    "origin_path",
    "document_id",
    "storage_ordinal",
    "run_id",
    "session_id",
    "parent_document_id",
    "agent_name",
    "model_name",
    "format",
    "step_count",
    "user_step_count",
    "agent_step_count",
    "tool_call_count",
    "started_at",
    "finished_at",
    "total_prompt_tokens",
    "total_completion_tokens",
    "total_cost_usd",
    "first_user_message",
    "agent_id",
];

/// Columns of the runs list (the `runs` relation).
const RUN_COLUMNS: [&str; 19] = [
    "source_path",
    "origin_path",
    "run_id",
    "root_document_id",
    "session_id",
    "agent_name",
    "model_name",
    "format",
    "trajectory_count",
    "subagent_count",
    "step_count",
    "tool_call_count",
    "started_at",
    "finished_at",
    "total_prompt_tokens",
    "total_completion_tokens",
    "total_cost_usd",
    "first_user_message",
    "storage_ordinal",
];

/// A list the explorer pages through: the Runs or the trajectories of a
/// mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Listing {
    Runs,
    Trajectories,
}

impl Listing {
    fn table(self) -> Table {
        match self {
            Listing::Runs => Table::Runs,
            Listing::Trajectories => Table::Trajectories,
        }
    }

    fn columns(self) -> &'static [&'static str] {
        match self {
            Listing::Runs => &RUN_COLUMNS,
            Listing::Trajectories => &TRAJECTORY_COLUMNS,
        }
    }

    /// The key of the list in the reply, and of its cache entry.
    fn name(self) -> &'static str {
        match self {
            Listing::Runs => "runs",
            Listing::Trajectories => "trajectories",
        }
    }

    /// Columns the `q` parameter searches.
    fn searched(self) -> &'static [&'static str] {
        match self {
            Listing::Runs => &[
                "root_document_id",
                "run_id",
                "session_id",
                "agent_name",
                "model_name",
                "source_path",
                "origin_path",
                "first_user_message",
            ],
            Listing::Trajectories => &[
                "document_id",
                "run_id",
                "session_id",
                "agent_name",
                "model_name",
                "source_path",
                "origin_path",
                "first_user_message",
            ],
        }
    }
}

/// Every row of a listing of a mount (cached per WarehouseView generation).
fn all_rows(
    ctx: &Ctx<'_>,
    cat: &WarehouseView,
    m: &Mount,
    listing: Listing,
) -> Result<Arc<Vec<Value>>, Error> {
    let key = DocKey {
        generation: cat.generation,
        dataset: m.name.clone(),
        source: String::new(),
        document: format!("\0{}", listing.name()),
    };
    if let Some(CacheEntry::Rows(v)) = ctx.state.docs.get(&key) {
        return Ok(v);
    }
    let check = check_cb(ctx);
    let batches = cat
        .mounts
        .scan_sources(
            &m.name,
            listing.table(),
            listing.columns(),
            &|_| true,
            &|b| Ok(b),
            &check,
        )
        .map_err(|e| timeout_error(ctx, e))?;
    let mut rows = Vec::new();
    let mut bytes = 0usize;
    for b in &batches {
        bytes += b.get_array_memory_size();
        for mut r in rows_json(b) {
            if let Some(Value::String(s)) = r.get_mut("first_user_message") {
                truncate_chars(s, 300);
            }
            rows.push(r);
        }
    }
    let rows = Arc::new(rows);
    ctx.state
        .docs
        .put(key, CacheEntry::Rows(Arc::clone(&rows)), bytes);
    Ok(rows)
}

/// Every trajectory row of a mount.
pub(super) fn all_trajectories(
    ctx: &Ctx<'_>,
    cat: &WarehouseView,
    m: &Mount,
) -> Result<Arc<Vec<Value>>, Error> {
    all_rows(ctx, cat, m, Listing::Trajectories)
}

/// A page of a listing, sorted, filtered by equality on a few columns and
/// by a case-insensitive substring (`q`).
pub(super) fn list(
    ctx: &Ctx<'_>,
    cat: &WarehouseView,
    m: &Mount,
    listing: Listing,
) -> Result<Reply, Error> {
    let columns = listing.columns();
    let limits = ctx.state.config.limits;
    let offset = param_usize(ctx, "offset", 0, usize::MAX)?;
    let limit = param_usize(ctx, "limit", 50, limits.max_page_size)?.max(1);
    let sort = ctx.param("sort").unwrap_or("source_path");
    if !columns.contains(&sort) {
        return Err(bad(format!(
            "`sort` must be one of: {}",
            columns.join(", ")
        )));
    }
    let desc = match ctx.param("order").unwrap_or("asc") {
        "asc" => false,
        "desc" => true,
        _ => return Err(bad("`order` must be asc or desc")),
    };
    let all = all_rows(ctx, cat, m, listing)?;
    let order = sorted_order(ctx, cat, m, listing, &all, sort, desc);
    let eq_filters: Vec<(&str, &str)> = [
        "agent_name",
        "model_name",
        "source_path",
        "format",
        "session_id",
        "run_id",
        "origin_path",
    ]
    .into_iter()
    .filter_map(|k| ctx.param(k).filter(|v| !v.is_empty()).map(|v| (k, v)))
    .collect();
    let q = ctx
        .param("q")
        .map(str::to_lowercase)
        .filter(|s| !s.is_empty());
    let keep = |r: &Value| {
        eq_filters
            .iter()
            .all(|(k, v)| r.get(*k).and_then(Value::as_str) == Some(*v))
            && q.as_ref().is_none_or(|q| {
                listing.searched().iter().any(|k| {
                    r.get(*k)
                        .and_then(Value::as_str)
                        .is_some_and(|s| s.to_lowercase().contains(q.as_str()))
                })
            })
    };
    let (total, page): (usize, Vec<&Value>) = if eq_filters.is_empty() && q.is_none() {
        let page = order
            .iter()
            .skip(offset)
            .take(limit)
            .filter_map(|&i| all.get(i as usize))
            .collect();
        (order.len(), page)
    } else {
        let mut total = 0usize;
        let mut page = Vec::new();
        for r in order.iter().filter_map(|&i| all.get(i as usize)) {
            if keep(r) {
                if total >= offset && page.len() < limit {
                    page.push(r);
                }
                total += 1;
            }
        }
        (total, page)
    };
    ctx.check()?;
    let next = (offset + page.len() < total).then_some(offset + page.len());
    let mut reply = json!({
        "dataset": m.name,
        "snapshot_id": m.snapshot.snapshot_id,
        "offset": offset,
        "limit": limit,
        "total": total,
        "next_offset": next,
        "sort": sort,
        "order": if desc { "desc" } else { "asc" },
    });
    reply[listing.name()] = json!(page);
    Ok(Reply::json(&reply))
}

/// Row positions of `all` sorted by `sort` (ties by Source and position),
/// cached per WarehouseView generation.
fn sorted_order(
    ctx: &Ctx<'_>,
    cat: &WarehouseView,
    m: &Mount,
    listing: Listing,
    all: &[Value],
    sort: &str,
    desc: bool,
) -> Arc<Vec<u32>> {
    let key = DocKey {
        generation: cat.generation,
        dataset: m.name.clone(),
        source: String::new(),
        document: format!("\0order:{}:{sort}:{desc}", listing.name()),
    };
    if let Some(CacheEntry::Order(o)) = ctx.state.docs.get(&key) {
        // The runs list may have been rebuilt (evicted, then read again).
        if o.len() == all.len() {
            return o;
        }
    }
    let mut order: Vec<u32> = (0..all.len() as u32).collect();
    order.sort_by(|&x, &y| {
        let (a, b) = (&all[x as usize], &all[y as usize]);
        let o = cmp_json(&a[sort], &b[sort]);
        let o = if desc { o.reverse() } else { o };
        o.then_with(|| cmp_json(&a["source_path"], &b["source_path"]))
            .then_with(|| cmp_json(&a["storage_ordinal"], &b["storage_ordinal"]))
    });
    let order = Arc::new(order);
    let bytes = order.len() * 4;
    ctx.state
        .docs
        .put(key, CacheEntry::Order(Arc::clone(&order)), bytes);
    order
}

/// Total order on JSON scalars: nulls last, numbers by value, text by text.
fn cmp_json(a: &Value, b: &Value) -> std::cmp::Ordering {
    use std::cmp::Ordering as O;
    match (a, b) {
        (Value::Null, Value::Null) => O::Equal,
        (Value::Null, _) => O::Greater,
        (_, Value::Null) => O::Less,
        (Value::Number(x), Value::Number(y)) => x
            .as_f64()
            .unwrap_or(0.0)
            .total_cmp(&y.as_f64().unwrap_or(0.0)),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        _ => a.to_string().cmp(&b.to_string()),
    }
}
