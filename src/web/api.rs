//! The read-only JSON API under `/api/v1`. Handlers name Datasets only by
//! their configured mount names; nothing here writes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, AsArray};
use arrow::record_batch::RecordBatch;
use serde_json::{json, Map, Value};

use super::server::{Catalog, Ctx, Reply};
use super::WebError;
use crate::dataset::{Mount, Mounts};
use crate::error::Error;
use crate::render::cell_json;
use crate::sql::SqlError;
use crate::table::Table;

/// The OpenAPI description of this API.
pub const OPENAPI: &str = include_str!("../../assets/openapi.json");

/// Longest text of a field in a page of steps (the full text is one
/// request away).
pub const PAGE_TEXT_CHARS: usize = 2000;

/// JSON-typed columns, returned parsed.
const JSON_COLUMNS: [&str; 18] = [
    "capabilities",
    "metrics",
    "extra",
    "message_json",
    "env",
    "prompt_json",
    "reasoning_effort",
    "arguments",
    "result",
    "results",
    "response",
    "agent_extra",
    "final_metrics",
    "meta",
    "unknown_fields",
    "unknown_key_counts",
    "agent_tool_definitions",
    "children",
];

/// Route an `/api/…` request.
pub fn route(ctx: &mut Ctx<'_>) -> Result<Reply, Error> {
    let segs = ctx.segments.clone().ok_or_else(|| WebError::BadRequest {
        message: "the path is not valid percent-encoded UTF-8".into(),
    })?;
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let get = matches!(ctx.method.as_str(), "GET" | "HEAD");
    let method_ok = |allowed_post: bool| -> Result<(), Error> {
        if get || (allowed_post && ctx.method == "POST") {
            Ok(())
        } else {
            Err(WebError::MethodNotAllowed {
                method: ctx.method.clone(),
            }
            .into())
        }
    };
    match segs.as_slice() {
        ["api", "v1", "health"] => {
            method_ok(false)?;
            health(ctx)
        }
        ["api", "v1", "openapi.json"] => {
            method_ok(false)?;
            Ok(Reply {
                status: 200,
                content_type: "application/json",
                body: OPENAPI.as_bytes().to_vec(),
                headers: Vec::new(),
            })
        }
        ["api", "v1", "catalog"] => {
            method_ok(false)?;
            catalog(ctx)
        }
        ["api", "v1", "query"] => {
            method_ok(true)?;
            query(ctx)
        }
        ["api", "v1", "datasets", name, rest @ ..] => {
            method_ok(false)?;
            let cat = ctx.state.catalog();
            let mount = dataset(ctx, &cat, name)?;
            match rest {
                [] => dataset_detail(ctx, mount),
                ["sources"] => sources(mount),
                ["runs"] => list(ctx, &cat, mount, Listing::Runs),
                ["trajectories"] => list(ctx, &cat, mount, Listing::Trajectories),
                ["summary"] => summary(ctx, &cat, mount),
                ["find"] => find(ctx, &cat, mount),
                ["media"] => super::media::serve(ctx, mount),
                ["trajectories", doc] => trajectory(ctx, &cat, mount, doc),
                ["trajectories", doc, "steps"] => steps_page(ctx, &cat, mount, doc),
                ["trajectories", doc, "steps", index] => step_detail(ctx, &cat, mount, doc, index),
                ["trajectories", doc, "export"] => export(ctx, &cat, mount, doc),
                _ => Err(not_found("route")),
            }
        }
        _ => Err(not_found("route")),
    }
}

fn not_found(what: &str) -> Error {
    WebError::NotFound {
        what: what.to_string(),
    }
    .into()
}

fn bad(message: impl Into<String>) -> Error {
    WebError::BadRequest {
        message: message.into(),
    }
    .into()
}

/// The mount named `name`, after the proxy's Dataset restriction.
fn dataset<'c>(ctx: &mut Ctx<'_>, cat: &'c Catalog, name: &str) -> Result<&'c Mount, Error> {
    let shown = crate::util::text::escape_control(name).into_owned();
    let shown: String = shown.chars().take(80).collect();
    if let Some(only) = &ctx.dataset_restriction {
        if only != name {
            return Err(WebError::Forbidden { name: shown }.into());
        }
    }
    let m = cat
        .mounts
        .mounts()
        .iter()
        .find(|m| m.name == name)
        .ok_or(WebError::UnknownDataset { name: shown })?;
    ctx.dataset = Some(m.name.clone());
    ctx.snapshot_id = Some(m.snapshot.snapshot_id.clone());
    Ok(m)
}

fn visible<'c>(ctx: &Ctx<'_>, cat: &'c Catalog) -> Vec<&'c Mount> {
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

fn health(ctx: &Ctx<'_>) -> Result<Reply, Error> {
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

fn catalog(ctx: &Ctx<'_>) -> Result<Reply, Error> {
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

fn dataset_detail(_ctx: &Ctx<'_>, m: &Mount) -> Result<Reply, Error> {
    Ok(Reply::json(&dataset_summary(m)))
}

fn sources(m: &Mount) -> Result<Reply, Error> {
    let b = crate::dataset::sources_batch(&m.snapshot.sources)?;
    Ok(Reply::json(&json!({
        "snapshot_id": m.snapshot.snapshot_id,
        "sources": rows_json(&b),
    })))
}

/// Rows of a batch as JSON objects; JSON columns parsed.
pub fn rows_json(b: &RecordBatch) -> Vec<Value> {
    (0..b.num_rows()).map(|r| row_json(b, r)).collect()
}

/// One row of a batch as a JSON object; JSON columns parsed.
pub fn row_json(b: &RecordBatch, r: usize) -> Value {
    let schema = b.schema();
    let mut o = Map::with_capacity(schema.fields().len());
    for (c, f) in schema.fields().iter().enumerate() {
        o.insert(f.name().clone(), cell(b.column(c).as_ref(), r, f.name()));
    }
    Value::Object(o)
}

fn cell(a: &dyn Array, r: usize, name: &str) -> Value {
    let v = cell_json(a, r);
    if JSON_COLUMNS.contains(&name) {
        if let Value::String(s) = &v {
            if let Ok(p) = serde_json::from_str::<Value>(s) {
                return p;
            }
        }
    }
    v
}

/// Parse a non-negative integer parameter with a default and a cap.
fn param_usize(ctx: &Ctx<'_>, name: &str, default: usize, max: usize) -> Result<usize, Error> {
    match ctx.param(name) {
        None | Some("") => Ok(default.min(max)),
        Some(v) => {
            let n: usize = v
                .parse()
                .map_err(|_| bad(format!("`{name}` must be a non-negative integer")))?;
            Ok(n.min(max))
        }
    }
}

fn check_cb(ctx: &Ctx<'_>) -> impl Fn() -> Result<(), SqlError> + Sync {
    let seconds = ctx.state.config.limits.request_timeout.as_secs_f64();
    let deadline = ctx.deadline;
    move || {
        if std::time::Instant::now() > deadline {
            Err(SqlError::Timeout { seconds })
        } else {
            Ok(())
        }
    }
}

fn timeout_error(ctx: &Ctx<'_>, e: SqlError) -> Error {
    match e {
        SqlError::Timeout { .. } => WebError::Timeout {
            seconds: ctx.state.config.limits.request_timeout.as_secs_f64(),
        }
        .into(),
        e => e.into(),
    }
}

// ---------------------------------------------------------------- runs

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
enum Listing {
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

/// Every row of a listing of a mount (cached per Catalog generation).
fn all_rows(
    ctx: &Ctx<'_>,
    cat: &Catalog,
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
fn all_trajectories(ctx: &Ctx<'_>, cat: &Catalog, m: &Mount) -> Result<Arc<Vec<Value>>, Error> {
    all_rows(ctx, cat, m, Listing::Trajectories)
}

fn truncate_chars(s: &mut String, n: usize) -> bool {
    if let Some((i, _)) = s.char_indices().nth(n) {
        s.truncate(i);
        s.push('…');
        true
    } else {
        false
    }
}

/// A page of a listing, sorted, filtered by equality on a few columns and
/// by a case-insensitive substring (`q`).
fn list(ctx: &Ctx<'_>, cat: &Catalog, m: &Mount, listing: Listing) -> Result<Reply, Error> {
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
/// cached per Catalog generation.
fn sorted_order(
    ctx: &Ctx<'_>,
    cat: &Catalog,
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

// ---------------------------------------------------------------- trajectories

/// One trajectory, decoded for the explorer.
pub struct Doc {
    /// Its runs row.
    pub run: Value,
    /// Steps in order (one row each); turned into JSON a page at a time.
    pub steps: RecordBatch,
    /// Its tool calls.
    pub calls: RecordBatch,
    /// Rows of `calls` per step id.
    pub calls_by_step: HashMap<i64, Vec<usize>>,
    /// Child documents (subagents): (document_id, run row summary).
    pub children: Vec<Value>,
}

impl Doc {
    fn step_count(&self) -> usize {
        self.steps.num_rows()
    }
}

/// Columns of steps read for the explorer.
const STEP_COLUMNS: [&str; 28] = [
    "document_id",
    "storage_ordinal",
    "step_id",
    "turn_ordinal",
    "timestamp",
    "step_source",
    "kind",
    "effective_kind",
    "model_name",
    "message_kind",
    "message_value",
    "message_json",
    "reasoning_content",
    "observation",
    "observation_text",
    "prompt",
    "tool_call_count",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cost_usd",
    "latency_ms",
    "ttft_ms",
    "metrics",
    "extra",
    "is_copied_context",
    "finished_at",
    "llm_call_count",
];

const CALL_COLUMNS: [&str; 14] = [
    "document_id",
    "storage_ordinal",
    "step_id",
    "call_index",
    "tool_call_id",
    "function_name",
    "arguments",
    "result",
    "results",
    "results_text",
    "status",
    "exit_code",
    "duration_ms",
    "kind",
];

/// Rows of `table` in Source `source` of the documents at the positions
/// `docs` (`storage_ordinal`; ids may repeat within a Source). `cols` must
/// include `storage_ordinal`.
fn rows_for_docs(
    ctx: &Ctx<'_>,
    cat: &Catalog,
    m: &Mount,
    table: Table,
    cols: &[&str],
    source: &str,
    docs: &HashSet<i64>,
) -> Result<Vec<RecordBatch>, Error> {
    let check = check_cb(ctx);
    let post = |b: RecordBatch| -> Result<RecordBatch, SqlError> {
        let at = b
            .column_by_name("storage_ordinal")
            .map(|c| c.as_primitive::<arrow::datatypes::Int64Type>().clone())
            .ok_or_else(|| SqlError::Internal("storage_ordinal missing".into()))?;
        let mask: arrow::array::BooleanArray = (0..b.num_rows())
            .map(|i| Some(!at.is_null(i) && docs.contains(&at.value(i))))
            .collect();
        arrow::compute::filter_record_batch(&b, &mask)
            .map_err(|e| SqlError::Internal(e.to_string()))
    };
    // Stores decode only the rows of these documents.
    let mut at: Vec<i64> = docs.iter().copied().collect();
    at.sort_unstable();
    let filter = format!(
        "storage_ordinal IN ({})",
        at.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
    );
    cat.mounts
        .scan_sources_where(
            &m.name,
            table,
            cols,
            &|s| s.source_path == source,
            Some(&filter),
            &post,
            &check,
        )
        .map_err(|e| timeout_error(ctx, e))
}

/// Resolve the document `doc`: its Source (the `source` parameter, or the
/// only Source holding that document id) and its position there (the
/// `ordinal` parameter, or the only document of that id in the Source).
/// Returns the Source path and the document's `trajectories` row.
fn locate(
    ctx: &mut Ctx<'_>,
    cat: &Catalog,
    m: &Mount,
    doc: &str,
) -> Result<(String, Value), Error> {
    let all = all_trajectories(ctx, cat, m)?;
    let want_source = ctx.param("source").map(str::to_string);
    let want_ordinal = match ctx.param("ordinal") {
        None | Some("") => None,
        Some(v) => Some(
            v.parse::<i64>()
                .map_err(|_| bad("`ordinal` must be an integer"))?,
        ),
    };
    let matches: Vec<&Value> = all
        .iter()
        .filter(|r| r["document_id"].as_str() == Some(doc))
        .filter(|r| {
            want_source
                .as_deref()
                .is_none_or(|s| r["source_path"].as_str() == Some(s))
        })
        .filter(|r| want_ordinal.is_none_or(|o| r["storage_ordinal"].as_i64() == Some(o)))
        .collect();
    match matches.as_slice() {
        [] => {
            if let Some(s) = &want_source {
                ctx.source_path = Some(s.clone());
            }
            Err(not_found("trajectory"))
        }
        [one] => {
            let src = one["source_path"].as_str().unwrap_or_default().to_string();
            ctx.source_path = Some(src.clone());
            Ok((src, (*one).clone()))
        }
        many => {
            // Several documents with this id: in several Sources (name the
            // Source), or in one (a store of several files: name the
            // position). Never pick one silently.
            let mut sources: Vec<&str> = many
                .iter()
                .filter_map(|r| r["source_path"].as_str())
                .collect();
            sources.dedup();
            let places: Vec<String> = if sources.len() == 1 {
                ctx.source_path = Some(sources[0].to_string());
                many.iter()
                    .map(|r| {
                        format!(
                            "ordinal {} ({})",
                            r["storage_ordinal"],
                            r["origin_path"].as_str().unwrap_or_default()
                        )
                    })
                    .collect()
            } else {
                sources.iter().map(|s| (*s).to_string()).collect()
            };
            Err(WebError::Ambiguous {
                document_id: crate::util::text::escape_control(doc).into_owned(),
                count: places.len(),
                sources: places
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            }
            .into())
        }
    }
}

/// The steps and tool calls of one trajectory: a store reads only its rows
/// (Lance filter); a file is decoded once for both tables.
fn read_doc_tables(
    ctx: &Ctx<'_>,
    cat: &Catalog,
    m: &Mount,
    source: &str,
    doc: i64,
) -> Result<(RecordBatch, RecordBatch), Error> {
    let concat =
        |table: Table, cols: &[&str], batches: Vec<RecordBatch>| -> Result<RecordBatch, Error> {
            let schema = match batches.first() {
                Some(b) => b.schema(),
                None => {
                    let idx = column_indices(table, cols)?;
                    crate::table::TableBuilder::new(table, Some(&idx)).schema()
                }
            };
            arrow::compute::concat_batches(&schema, &batches)
                .map_err(|e| Error::Internal(e.to_string()))
        };
    let src = m
        .snapshot
        .sources
        .iter()
        .find(|s| s.source_path == source)
        .ok_or_else(|| not_found("source"))?;
    if src.format == crate::formats::SourceFormat::StorylineLance {
        let want: HashSet<i64> = std::iter::once(doc).collect();
        let steps = rows_for_docs(ctx, cat, m, Table::Steps, &STEP_COLUMNS, source, &want)?;
        let calls = rows_for_docs(ctx, cat, m, Table::ToolCalls, &CALL_COLUMNS, source, &want)?;
        return Ok((
            concat(Table::Steps, &STEP_COLUMNS, steps)?,
            concat(Table::ToolCalls, &CALL_COLUMNS, calls)?,
        ));
    }
    let step_idx = column_indices(Table::Steps, &STEP_COLUMNS)?;
    let call_idx = column_indices(Table::ToolCalls, &CALL_COLUMNS)?;
    let mut steps = crate::table::TableBuilder::new(Table::Steps, Some(&step_idx));
    let mut calls = crate::table::TableBuilder::new(Table::ToolCalls, Some(&call_idx));
    let mut ordinal = 0usize;
    let opts = crate::formats::DecodeOptions::full(ctx.state.config.limits.max_document_bytes);
    let r = crate::catalog::read::read_source(src, opts, &mut |d| {
        if ordinal as i64 == doc {
            steps.push_document(source, d, ordinal);
            calls.push_document(source, d, ordinal);
        }
        ordinal += 1;
    });
    match r {
        Ok(_) => {}
        Err(crate::catalog::read::ReadFailure::Fatal(e)) => return Err(e.into()),
        Err(crate::catalog::read::ReadFailure::Source(e)) => return Err(e.into()),
    }
    ctx.check()?;
    Ok((steps.finish(), calls.finish()))
}

fn column_indices(table: Table, names: &[&str]) -> Result<Vec<usize>, Error> {
    let cols = table.columns();
    names
        .iter()
        .map(|n| {
            cols.iter()
                .position(|c| c.name == *n)
                .ok_or_else(|| Error::Internal(format!("no column {n} in {}", table.name())))
        })
        .collect()
}

fn load_doc(ctx: &mut Ctx<'_>, cat: &Catalog, m: &Mount, doc: &str) -> Result<Arc<Doc>, Error> {
    let (source, summary) = locate(ctx, cat, m, doc)?;
    let ordinal = summary["storage_ordinal"].as_i64().unwrap_or(-1);
    let key = DocKey {
        generation: cat.generation,
        dataset: m.name.clone(),
        source: source.clone(),
        document: format!("{doc}\0{ordinal}"),
    };
    if let Some(CacheEntry::Doc(d)) = ctx.state.docs.get(&key) {
        return Ok(d);
    }
    let (steps, calls) = read_doc_tables(ctx, cat, m, &source, ordinal)?;
    let bytes = steps.get_array_memory_size() + calls.get_array_memory_size();
    let mut calls_by_step: HashMap<i64, Vec<usize>> = HashMap::new();
    if let Some(ids) = calls.column_by_name("step_id") {
        let ids = ids.as_primitive::<arrow::datatypes::Int64Type>();
        for r in 0..calls.num_rows() {
            let id = if ids.is_null(r) { -1 } else { ids.value(r) };
            calls_by_step.entry(id).or_default().push(r);
        }
    }
    // Subagents: documents naming this one as parent, read from the same file.
    let all = all_trajectories(ctx, cat, m)?;
    let children: Vec<Value> = all
        .iter()
        .filter(|r| {
            r["parent_document_id"].as_str() == Some(doc)
                && r["source_path"].as_str() == Some(source.as_str())
                && r["origin_path"] == summary["origin_path"]
        })
        .map(|r| {
            json!({
                "document_id": r["document_id"],
                "storage_ordinal": r["storage_ordinal"],
                "agent_name": r["agent_name"],
                "step_count": r["step_count"],
                "source_path": r["source_path"],
            })
        })
        .collect();
    let d = Arc::new(Doc {
        run: summary,
        steps,
        calls,
        calls_by_step,
        children,
    });
    ctx.state
        .docs
        .put(key, CacheEntry::Doc(Arc::clone(&d)), bytes);
    Ok(d)
}

fn trajectory(ctx: &mut Ctx<'_>, cat: &Catalog, m: &Mount, doc: &str) -> Result<Reply, Error> {
    let d = load_doc(ctx, cat, m, doc)?;
    Ok(Reply::json(&json!({
        "dataset": m.name,
        "snapshot_id": m.snapshot.snapshot_id,
        "source_path": d.run["source_path"],
        "document_id": doc,
        "run": d.run,
        "step_count": d.step_count(),
        "tool_call_count": d.calls.num_rows(),
        "children": d.children,
    })))
}

/// A step with its tool calls; long text cut to `limit` characters when
/// given (the cut fields are listed under `truncated`).
fn step_json(d: &Doc, index: usize, limit: Option<usize>) -> Value {
    let mut s = row_json(&d.steps, index);
    let mut cut = Vec::new();
    let step_id = s["step_id"].as_i64().unwrap_or(-1);
    let mut calls: Vec<Value> = d
        .calls_by_step
        .get(&step_id)
        .map(|rows| rows.iter().map(|&r| row_json(&d.calls, r)).collect())
        .unwrap_or_default();
    // Each result under the call it answers; the rest once under the step.
    let ids: Vec<String> = calls
        .iter()
        .map(|c| c["tool_call_id"].as_str().unwrap_or_default().to_string())
        .collect();
    let (by_call, unlinked) = super::output::split_results(s["observation"].as_str(), &ids, limit);
    for (c, (id, mut out)) in calls.iter_mut().zip(by_call) {
        if let Some(own) = c
            .get("result")
            .and_then(|r| super::output::own_result(r, &id, limit))
        {
            out.insert(0, own);
        }
        c["output"] = Value::Array(out);
    }
    let message_media = crate::formats::text::media(&s["message_json"]);
    if let Value::Object(o) = &mut s {
        o.insert("output".into(), Value::Array(unlinked));
        o.insert("message_media".into(), json!(message_media));
    }
    if let Some(n) = limit {
        if let Value::Object(o) = &mut s {
            for k in [
                "message_value",
                "reasoning_content",
                "observation",
                "observation_text",
                "prompt",
            ] {
                if let Some(Value::String(t)) = o.get_mut(k) {
                    if truncate_chars(t, n) {
                        cut.push(k.to_string());
                    }
                }
            }
            for k in ["message_json", "metrics", "extra"] {
                if let Some(v) = o.get_mut(k) {
                    let text = v.to_string();
                    if text.chars().count() > n {
                        let mut t = text;
                        truncate_chars(&mut t, n);
                        *v = Value::String(t);
                        cut.push(k.to_string());
                    }
                }
            }
        }
        for (i, c) in calls.iter_mut().enumerate() {
            if let Value::Object(o) = c {
                for k in ["arguments", "result", "results", "results_text"] {
                    if let Some(v) = o.get_mut(k) {
                        let text = match &*v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        if text.chars().count() > n {
                            let mut t = text;
                            truncate_chars(&mut t, n);
                            *v = Value::String(t);
                            cut.push(format!("tool_calls[{i}].{k}"));
                        }
                    }
                }
            }
        }
    }
    if let Value::Object(o) = &mut s {
        o.insert("index".into(), json!(index));
        o.insert("tool_calls".into(), Value::Array(calls));
        o.insert("truncated".into(), json!(cut));
    }
    s
}

fn steps_page(ctx: &mut Ctx<'_>, cat: &Catalog, m: &Mount, doc: &str) -> Result<Reply, Error> {
    let limits = ctx.state.config.limits;
    let offset = param_usize(ctx, "offset", 0, usize::MAX)?;
    let limit = param_usize(ctx, "limit", 100, limits.max_page_size)?.max(1);
    let text = param_usize(ctx, "text_chars", PAGE_TEXT_CHARS, 1 << 20)?;
    let d = load_doc(ctx, cat, m, doc)?;
    let end = offset.saturating_add(limit).min(d.step_count());
    let steps: Vec<Value> = (offset.min(end)..end)
        .map(|i| step_json(&d, i, Some(text)))
        .collect();
    Ok(Reply::json(&json!({
        "dataset": m.name,
        "snapshot_id": m.snapshot.snapshot_id,
        "source_path": d.run["source_path"],
        "document_id": doc,
        "offset": offset,
        "limit": limit,
        "total": d.step_count(),
        "next_offset": (end < d.step_count()).then_some(end),
        "steps": steps,
    })))
}

fn step_detail(
    ctx: &mut Ctx<'_>,
    cat: &Catalog,
    m: &Mount,
    doc: &str,
    index: &str,
) -> Result<Reply, Error> {
    let i: usize = index
        .parse()
        .map_err(|_| bad("the step index must be a non-negative integer"))?;
    let d = load_doc(ctx, cat, m, doc)?;
    if i >= d.step_count() {
        return Err(not_found("step"));
    }
    let mut v = step_json(&d, i, None);
    v["dataset"] = json!(m.name);
    v["snapshot_id"] = json!(m.snapshot.snapshot_id);
    v["source_path"] = d.run["source_path"].clone();
    Ok(Reply::json(&v))
}

fn export(ctx: &mut Ctx<'_>, cat: &Catalog, m: &Mount, doc: &str) -> Result<Reply, Error> {
    use crate::formats::ExportFormat as F;
    let format = match ctx.param("format").unwrap_or("storyline") {
        "atif" => F::Atif,
        "openai-messages" => F::OpenAiMessages,
        "storyline" => F::Storyline,
        "actf" => F::Actf,
        other => {
            return Err(bad(format!(
                "`format` must be atif, openai-messages, storyline or actf, not `{}`",
                crate::util::text::escape_control(other)
            )))
        }
    };
    let (source, row) = locate(ctx, cat, m, doc)?;
    let want = row["storage_ordinal"].as_i64().unwrap_or(-1);
    let src = m
        .snapshot
        .sources
        .iter()
        .find(|s| s.source_path == source)
        .ok_or_else(|| not_found("source"))?;
    let mut docs = Vec::new();
    let mut ordinal = 0i64;
    let opts = crate::formats::DecodeOptions::full(ctx.state.config.limits.max_document_bytes);
    let r = crate::catalog::read::read_source(src, opts, &mut |d| {
        if ordinal == want {
            docs.push(d.clone());
        }
        ordinal += 1;
    });
    match r {
        Ok(_) => {}
        Err(crate::catalog::read::ReadFailure::Fatal(e)) => return Err(e.into()),
        Err(crate::catalog::read::ReadFailure::Source(e)) => return Err(e.into()),
    }
    ctx.check()?;
    if docs.is_empty() {
        return Err(not_found("trajectory"));
    }
    let (records, losses) = crate::formats::encode_documents(format, &docs);
    let mut body = Vec::new();
    if records.len() == 1 {
        serde_json::to_writer_pretty(&mut body, &records[0])
            .map_err(|e| Error::Internal(e.to_string()))?;
        body.push(b'\n');
    } else {
        for r in &records {
            serde_json::to_writer(&mut body, r).map_err(|e| Error::Internal(e.to_string()))?;
            body.push(b'\n');
        }
    }
    let ext = if records.len() == 1 { "json" } else { "jsonl" };
    let safe: String = doc
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let name = format!(
        "{safe}.{}.{ext}",
        ctx.param("format").unwrap_or("storyline")
    );
    let mut dropped: Vec<String> = losses
        .iter()
        .map(|l| format!("{}: {}", l.field, l.reason))
        .collect();
    dropped.sort();
    dropped.dedup();
    let mut headers = vec![
        (
            "Content-Disposition",
            format!("attachment; filename=\"{name}\""),
        ),
        ("X-Pchronicle-Snapshot-Id", m.snapshot.snapshot_id.clone()),
    ];
    if !dropped.is_empty() {
        headers.push(("X-Pchronicle-Dropped", dropped.len().to_string()));
    }
    Ok(Reply {
        status: 200,
        content_type: "application/json",
        body,
        headers,
    })
}

// ---------------------------------------------------------------- find

fn find(ctx: &mut Ctx<'_>, cat: &Catalog, m: &Mount) -> Result<Reply, Error> {
    use crate::find::{scope, search};
    let limits = ctx.state.config.limits;
    let q = ctx.param("q").unwrap_or("").to_string();
    let expr = if q.trim().is_empty() {
        None
    } else {
        Some(crate::find::parse_match_expression(&q)?)
    };
    let given = |name: &str| {
        ctx.param(name)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let step_id = match given("step_id") {
        None => None,
        Some(v) => Some(
            v.parse::<i64>()
                .map_err(|_| bad("`step_id` must be an integer"))?,
        ),
    };
    // As on the command line: step ids are only unique within a session.
    if step_id.is_some() && given("session_id").is_none() {
        return Err(crate::find::FindError::InvalidArgument {
            message: "step_id needs session_id (step ids are only unique within a session)".into(),
        }
        .into());
    }
    let identity = crate::find::exec::Identity {
        source: given("source"),
        run_id: given("run_id"),
        document_id: given("document_id"),
        session_id: given("session_id"),
        step_id,
    };
    if expr.is_none() && !identity.has_id() {
        return Err(crate::find::FindError::InvalidArgument {
            message: "give `q` (a find expression) or an id (run_id, document_id, session_id)"
                .into(),
        }
        .into());
    }
    let explicit = match ctx.param("scope") {
        None | Some("" | "auto") => None,
        Some("steps") => Some(scope::Scope::Steps),
        Some("runs") => Some(scope::Scope::Runs),
        Some(_) => return Err(bad("`scope` must be auto, steps or runs")),
    };
    let (sc, mode) = scope::resolve(expr.as_ref(), explicit, step_id.is_some())?;
    if ctx.param("explain") == Some("1") {
        return Ok(Reply::json(&json!({
            "dataset": m.name,
            "query": {
                "q": q,
                "expression": expr.as_ref().map(ToString::to_string),
            },
            "search": {
                "mode": mode.name(),
                "scope": sc.name(),
                "tokenizer": crate::find::TOKENIZER_NAME,
                "notes": crate::find::operator_notes(&q),
            },
            "highlight_terms": search::highlight_terms(expr.as_ref()),
        })));
    }
    let limit = param_usize(ctx, "limit", 50, limits.max_find_results)?.max(1);
    let with_fields = ctx.param("fields") != Some("false");
    let started = std::time::Instant::now();
    let run = |build_index: bool| {
        search::search(
            &cat.mounts,
            &search::Request {
                mount: &m.name,
                dataset: &m.snapshot.dataset,
                expr: expr.as_ref(),
                identity: &identity,
                scope: sc,
                max_results: limit,
                timeout: ctx.remaining(),
                build_index,
            },
            &|_| {},
        )
    };
    // Searches of current indexes run side by side; when an index is missing
    // or stale, one request per Dataset builds it while others wait.
    let mut outcome = run(false)?;
    if !outcome.fts_available {
        let lock = ctx.state.index_lock(&m.name);
        let _g = lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        outcome = run(true)?;
    }
    let truncated = outcome.hits.total > outcome.hits.hits.len() as u64;
    let mut hits: Vec<Value> = Vec::with_capacity(outcome.hits.hits.len());
    for h in &outcome.hits.hits {
        let mut v = serde_json::to_value(h).map_err(|e| Error::Internal(e.to_string()))?;
        // The explorer opens the document at its position (ids may repeat).
        if let Some(o) = h.storage_ordinal {
            v["storage_ordinal"] = json!(o);
        }
        hits.push(v);
    }
    if with_fields && sc == scope::Scope::Steps {
        attach_fields(ctx, cat, m, &outcome.hits.hits, &mut hits)?;
    }
    let mut search = json!({
        "mode": mode.name(),
        "scope": sc.name(),
        "fts_available": outcome.fts_available,
        "tokenizer": crate::find::TOKENIZER_NAME,
    });
    if let Some(r) = &outcome.reason {
        search["fts_unavailable_reason"] = json!(redact_text(ctx, r));
    }
    let notes = crate::find::operator_notes(&q);
    if !notes.is_empty() {
        search["notes"] = json!(notes);
    }
    Ok(Reply::json(&json!({
        "dataset": m.name,
        "snapshot_id": m.snapshot.snapshot_id,
        "query": {
            "q": q,
            "expression": expr.as_ref().map(ToString::to_string),
        },
        "search": search,
        "highlight_terms": search::highlight_terms(expr.as_ref()),
        "total": outcome.hits.total,
        "truncated": truncated,
        "elapsed_ms": started.elapsed().as_secs_f64() * 1000.0,
        "warnings": outcome.warnings.iter().map(|(c, msg)| json!({"code": c, "message": redact_text(ctx, msg)})).collect::<Vec<_>>(),
        "matches": hits,
    })))
}

fn redact_text(ctx: &Ctx<'_>, s: &str) -> String {
    super::server::redact(&ctx.state.config, s)
}

/// Add each step hit's full text fields (`fields`) and position (`index`),
/// reading each Source with hits once.
fn attach_fields(
    ctx: &Ctx<'_>,
    cat: &Catalog,
    m: &Mount,
    hits: &[crate::find::exec::Hit],
    out: &mut [Value],
) -> Result<(), Error> {
    let mut by_source: BTreeMap<&str, HashSet<i64>> = BTreeMap::new();
    for h in hits {
        if let Some(o) = h.storage_ordinal {
            by_source
                .entry(h.source_path.as_str())
                .or_default()
                .insert(o as i64);
        }
    }
    let mut found: HashMap<(String, i64, i64), (Value, usize)> = HashMap::new();
    let cols = [
        "storage_ordinal",
        "step_id",
        "message_value",
        "reasoning_content",
        "observation_text",
        "prompt",
    ];
    for (source, docs) in by_source {
        let batches = rows_for_docs(ctx, cat, m, Table::Steps, &cols, source, &docs)?;
        let mut pos: HashMap<i64, usize> = HashMap::new();
        for b in &batches {
            for r in rows_json(b) {
                let doc = r["storage_ordinal"].as_i64().unwrap_or(-1);
                let n = pos.entry(doc).or_insert(0);
                let step = r["step_id"].as_i64().unwrap_or(-1);
                found.insert((source.to_string(), doc, step), (r, *n));
                *n += 1;
            }
        }
    }
    for (h, v) in hits.iter().zip(out.iter_mut()) {
        let (Some(step), Some(doc)) = (h.step_id, h.storage_ordinal) else {
            continue;
        };
        if let Some((r, index)) = found.get(&(h.source_path.clone(), doc as i64, step)) {
            let mut fields = r.clone();
            if let Value::Object(o) = &mut fields {
                o.remove("storage_ordinal");
                o.remove("step_id");
            }
            v["fields"] = fields;
            v["index"] = json!(index);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- summary

fn summary(ctx: &Ctx<'_>, cat: &Catalog, m: &Mount) -> Result<Reply, Error> {
    let schema = quote_ident(&m.name);
    let by_model = format!(
        "SELECT model_name, count(*) AS steps, sum(prompt_tokens) AS prompt_tokens, \
         sum(completion_tokens) AS completion_tokens, sum(cost_usd) AS cost_usd \
         FROM {schema}.steps WHERE step_source = 'agent' GROUP BY model_name ORDER BY steps DESC LIMIT 20"
    );
    let by_tool = format!(
        "SELECT function_name, count(*) AS calls FROM {schema}.tool_calls \
         GROUP BY function_name ORDER BY calls DESC, function_name LIMIT 20"
    );
    let run_sql = |text: &str| -> Result<Vec<Value>, Error> {
        let r = run_query(ctx, &cat.mounts, text)?;
        Ok(r.1.iter().flat_map(rows_json).collect())
    };
    Ok(Reply::json(&json!({
        "dataset": m.name,
        "snapshot_id": m.snapshot.snapshot_id,
        "models": run_sql(&by_model)?,
        "tools": run_sql(&by_tool)?,
    })))
}

/// `"name"` with embedded quotes doubled.
fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

// ---------------------------------------------------------------- SQL

fn run_query(
    ctx: &Ctx<'_>,
    mounts: &Mounts,
    text: &str,
) -> Result<(arrow::datatypes::SchemaRef, Vec<RecordBatch>), Error> {
    let limits = ctx.state.config.limits;
    let statement = crate::sql::plan(text, mounts)?;
    Ok(match statement {
        crate::sql::Statement::Describe(_, rel, _) => crate::dataset::describe_batches(&rel),
        crate::sql::Statement::Explain(plan) => crate::dataset::explain_batches(&plan),
        crate::sql::Statement::Query(plan) => {
            let r = crate::sql::execute(
                &plan,
                mounts,
                crate::sql::Limits {
                    timeout: Some(ctx.remaining()),
                    memory_budget: limits.memory_budget,
                },
            )?;
            (r.schema, r.batches)
        }
    })
}

fn query(ctx: &mut Ctx<'_>) -> Result<Reply, Error> {
    let limits = ctx.state.config.limits;
    let (sql, format, max_rows) = if ctx.method == "POST" {
        let v: Value = serde_json::from_slice(&ctx.body).map_err(|e| WebError::MalformedBody {
            message: e.to_string(),
        })?;
        let sql = v
            .get("sql")
            .and_then(Value::as_str)
            .ok_or_else(|| WebError::MalformedBody {
                message: "expected an object with a string `sql`".into(),
            })?
            .to_string();
        let format = v
            .get("format")
            .and_then(Value::as_str)
            .unwrap_or("json")
            .to_string();
        let max_rows = match v.get("max_rows") {
            None | Some(Value::Null) => None,
            Some(n) => Some(n.as_u64().ok_or_else(|| WebError::MalformedBody {
                message: "`max_rows` must be a non-negative integer".into(),
            })?),
        };
        (sql, format, max_rows)
    } else {
        let sql = ctx
            .param("sql")
            .ok_or_else(|| bad("give the statement as `sql`"))?
            .to_string();
        let max_rows = match ctx.param("max_rows") {
            None | Some("") => None,
            Some(v) => Some(
                v.parse::<u64>()
                    .map_err(|_| bad("`max_rows` must be an integer"))?,
            ),
        };
        (
            sql,
            ctx.param("format").unwrap_or("json").to_string(),
            max_rows,
        )
    };
    let cat = ctx.state.catalog();
    let restricted;
    let mounts: &Mounts = match &ctx.dataset_restriction {
        Some(only) => {
            let m: Vec<Mount> = cat
                .mounts
                .mounts()
                .iter()
                .filter(|m| &m.name == only)
                .cloned()
                .collect();
            restricted = Mounts::from_mounts(m, false, limits.max_document_bytes);
            &restricted
        }
        None => &cat.mounts,
    };
    if mounts.mounts().len() == 1 {
        let m = &mounts.mounts()[0];
        ctx.dataset = Some(m.name.clone());
        ctx.snapshot_id = Some(m.snapshot.snapshot_id.clone());
    }
    let (schema, batches) = run_query(ctx, mounts, &sql)?;
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    let snapshots: BTreeMap<&str, &str> = mounts
        .mounts()
        .iter()
        .map(|m| (m.name.as_str(), m.snapshot.snapshot_id.as_str()))
        .collect();
    let warnings: Vec<Value> = mounts
        .take_warnings()
        .into_iter()
        .map(|(c, m)| json!({"code": c, "message": redact_text(ctx, &m)}))
        .collect();
    match format.as_str() {
        "json" => {
            let cap = max_rows.unwrap_or(1000).min(limits.max_rows);
            let mut out_rows = Vec::new();
            'outer: for b in &batches {
                for r in 0..b.num_rows() {
                    if out_rows.len() as u64 >= cap {
                        break 'outer;
                    }
                    out_rows.push(Value::Array(
                        (0..b.num_columns())
                            .map(|c| cell_json(b.column(c).as_ref(), r))
                            .collect(),
                    ));
                }
            }
            let columns: Vec<Value> = schema
                .fields()
                .iter()
                .map(|f| json!({"name": f.name(), "type": f.data_type().to_string()}))
                .collect();
            Ok(Reply::json(&json!({
                "snapshot_ids": snapshots,
                "columns": columns,
                "rows": out_rows,
                "row_count": rows,
                "truncated": rows > cap,
                "max_rows": cap,
                "warnings": warnings,
            })))
        }
        "csv" | "jsonl" => {
            let cap = max_rows.unwrap_or(limits.max_rows).min(limits.max_rows);
            if rows > cap {
                return Err(SqlError::TooManyRows { limit: cap }.into());
            }
            let mut buf = crate::render::Bounded::new(Vec::new(), limits.max_response_bytes);
            let r = if format == "csv" {
                crate::render::write_csv(&mut buf, &schema, &batches)
            } else {
                crate::render::write_jsonl(&mut buf, &schema, &batches)
            };
            if r.is_err() {
                return Err(WebError::ResponseTooLarge {
                    limit: limits.max_response_bytes,
                }
                .into());
            }
            let (ct, ext) = if format == "csv" {
                ("text/csv; charset=utf-8", "csv")
            } else {
                ("application/x-ndjson", "jsonl")
            };
            Ok(Reply {
                status: 200,
                content_type: ct,
                body: buf.into_inner(),
                headers: vec![
                    (
                        "Content-Disposition",
                        format!("attachment; filename=\"query.{ext}\""),
                    ),
                    ("X-Pchronicle-Row-Count", rows.to_string()),
                ],
            })
        }
        other => Err(bad(format!(
            "`format` must be json, csv or jsonl, not `{}`",
            crate::util::text::escape_control(other)
        ))),
    }
}

// ---------------------------------------------------------------- cache

/// Key of a cached trajectory or runs list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DocKey {
    generation: u64,
    dataset: String,
    source: String,
    document: String,
}

/// A cached value.
#[derive(Clone)]
pub enum CacheEntry {
    /// A decoded trajectory.
    Doc(Arc<Doc>),
    /// The runs list of a Dataset.
    Rows(Arc<Vec<Value>>),
    /// A sort order of the runs list.
    Order(Arc<Vec<u32>>),
}

/// A byte-bounded least-recently-used cache of decoded trajectories and
/// runs lists, keyed by Catalog generation so a refresh never serves old
/// content.
pub struct DocCache {
    budget: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    map: HashMap<DocKey, (CacheEntry, usize, u64)>,
    bytes: usize,
    tick: u64,
}

impl DocCache {
    /// A cache holding at most about `budget` bytes.
    pub fn new(budget: usize) -> Self {
        DocCache {
            budget,
            inner: Mutex::new(CacheInner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A cached entry.
    pub fn get(&self, k: &DocKey) -> Option<CacheEntry> {
        let mut g = self.lock();
        g.tick += 1;
        let tick = g.tick;
        g.map.get_mut(k).map(|e| {
            e.2 = tick;
            e.0.clone()
        })
    }

    /// Insert, evicting the least recently used; entries larger than the
    /// whole budget are not kept.
    pub fn put(&self, k: DocKey, v: CacheEntry, bytes: usize) {
        if bytes > self.budget {
            return;
        }
        let mut g = self.lock();
        g.tick += 1;
        let tick = g.tick;
        if let Some(old) = g.map.insert(k, (v, bytes, tick)) {
            g.bytes -= old.1;
        }
        g.bytes += bytes;
        while g.bytes > self.budget {
            let Some(oldest) = g
                .map
                .iter()
                .min_by_key(|(_, e)| e.2)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(e) = g.map.remove(&oldest) {
                g.bytes -= e.1;
            }
        }
    }

    /// Drop entries of other generations.
    pub fn retain_generation(&self, generation: u64) {
        let mut g = self.lock();
        g.map.retain(|k, _| k.generation == generation);
        g.bytes = g.map.values().map(|e| e.1).sum();
    }
}
