//! One trajectory: finding a document by id, decoding its steps and tool
//! calls (cached), and its summary, pages of steps and single steps.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::record_batch::RecordBatch;
use serde_json::{json, Value};

use super::cache::{CacheEntry, DocKey};
use super::lists::all_trajectories;
use super::rows::row_json;
use super::{bad, check_cb, not_found, param_usize, timeout_error, truncate_chars};
use crate::catalog::Source;
use crate::dataset::{DecodedSource, KeptDocument, Mount};
use crate::error::Error;
use crate::formats::model::Storyline;
use crate::sql::SqlError;
use crate::table::Table;
use crate::web::server::{Ctx, Reply, WarehouseView};
use crate::web::WebError;

/// Longest text of a field in a page of steps (the full text is one
/// request away).
const PAGE_TEXT_CHARS: usize = 2000;

/// One trajectory, decoded for the explorer.
pub(super) struct Doc {
    /// Its runs row.
    run: Value,
    /// Its steps and tool calls.
    body: Body,
    /// Child documents (subagents): (document_id, run row summary).
    children: Vec<Value>,
}

/// Where a trajectory's steps come from.
enum Body {
    /// A store's trajectory: its rows, read with a Lance filter.
    Rows {
        /// Steps in order (one row each).
        steps: RecordBatch,
        /// Its tool calls.
        calls: RecordBatch,
        /// Rows of `calls` per step id.
        calls_by_step: HashMap<i64, Vec<usize>>,
    },
    /// A file's trajectory: the decoded document, whole or packed (shared
    /// with the decoded file cache), its steps turned into rows a page at a
    /// time, so the file is decoded once and held once.
    Model {
        file: Arc<DecodedSource>,
        /// Its position in `file.docs`.
        index: usize,
        /// Its position in the Source (`storage_ordinal`).
        ordinal: usize,
        source: String,
    },
}

/// Rows of a run of steps, with the rows of each step's tool calls.
struct Page {
    steps: RecordBatch,
    calls: RecordBatch,
    /// Per step of the page, its rows in `calls`.
    calls_of: Vec<Vec<usize>>,
}

impl Doc {
    fn kept(&self) -> Option<&KeptDocument> {
        match &self.body {
            Body::Model { file, index, .. } => file.docs.get(*index),
            Body::Rows { .. } => None,
        }
    }

    fn step_count(&self) -> usize {
        match &self.body {
            Body::Rows { steps, .. } => steps.num_rows(),
            Body::Model { .. } => self.kept().map_or(0, KeptDocument::step_count),
        }
    }

    fn tool_call_count(&self) -> usize {
        match &self.body {
            Body::Rows { calls, .. } => calls.num_rows(),
            Body::Model { .. } => self.kept().map_or(0, KeptDocument::tool_call_count),
        }
    }

    /// The rows of steps `range` (already within the step count).
    fn page(&self, range: std::ops::Range<usize>) -> Result<Page, Error> {
        match &self.body {
            Body::Rows {
                steps,
                calls,
                calls_by_step,
            } => {
                let steps = steps.slice(range.start, range.len());
                let ids = steps
                    .column_by_name("step_id")
                    .map(|c| c.as_primitive::<arrow::datatypes::Int64Type>().clone());
                let calls_of = (0..steps.num_rows())
                    .map(|i| {
                        let id = match &ids {
                            Some(a) if !a.is_null(i) => a.value(i),
                            _ => -1,
                        };
                        calls_by_step.get(&id).cloned().unwrap_or_default()
                    })
                    .collect();
                Ok(Page {
                    steps,
                    calls: calls.clone(),
                    calls_of,
                })
            }
            Body::Model {
                file,
                index,
                ordinal,
                source,
            } => {
                let Some(kept) = file.docs.get(*index) else {
                    return Err(Error::Internal("decoded document missing".into()));
                };
                let step_idx = Table::Steps
                    .indexes_of(&STEP_COLUMNS)
                    .map_err(Error::Internal)?;
                let call_idx = Table::ToolCalls
                    .indexes_of(&CALL_COLUMNS)
                    .map_err(Error::Internal)?;
                let mut steps = crate::table::TableBuilder::new(Table::Steps, Some(&step_idx));
                let mut calls = crate::table::TableBuilder::new(Table::ToolCalls, Some(&call_idx));
                // Only the page's steps are turned back into the model, if
                // the document is kept packed.
                let calls_of = kept.with_steps(range, |d, first, range| {
                    steps.push_turns_from(source, d, *ordinal, first, range.clone());
                    calls.push_turns_from(source, d, *ordinal, first, range.clone());
                    let mut next = 0;
                    d.turns[range.start - first..range.end - first]
                        .iter()
                        .map(|t| {
                            let n = t.tool_calls.as_ref().map_or(0, Vec::len);
                            next += n;
                            (next - n..next).collect()
                        })
                        .collect()
                });
                Ok(Page {
                    steps: steps.finish(),
                    calls: calls.finish(),
                    calls_of,
                })
            }
        }
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
pub(super) fn rows_for_docs(
    ctx: &Ctx<'_>,
    cat: &WarehouseView,
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
pub(super) fn locate(
    ctx: &mut Ctx<'_>,
    cat: &WarehouseView,
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
                hint: if sources.len() == 1 {
                    "ordinal=N"
                } else {
                    "source=PATH"
                },
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
/// (Lance filter); a file is decoded once, and kept decoded when large.
fn read_body(
    ctx: &Ctx<'_>,
    cat: &WarehouseView,
    m: &Mount,
    source: &str,
    doc: i64,
) -> Result<(Body, usize), Error> {
    let src = source_of(m, source)?;
    if src.format == crate::formats::SourceFormat::StorylineLance {
        let concat = |table: Table,
                      cols: &[&str],
                      batches: Vec<RecordBatch>|
         -> Result<RecordBatch, Error> {
            let schema = match batches.first() {
                Some(b) => b.schema(),
                None => {
                    let idx = table.indexes_of(cols).map_err(Error::Internal)?;
                    crate::table::TableBuilder::new(table, Some(&idx)).schema()
                }
            };
            arrow::compute::concat_batches(&schema, &batches)
                .map_err(|e| Error::Internal(e.to_string()))
        };
        let want: HashSet<i64> = std::iter::once(doc).collect();
        let steps = rows_for_docs(ctx, cat, m, Table::Steps, &STEP_COLUMNS, source, &want)?;
        let calls = rows_for_docs(ctx, cat, m, Table::ToolCalls, &CALL_COLUMNS, source, &want)?;
        let steps = concat(Table::Steps, &STEP_COLUMNS, steps)?;
        let calls = concat(Table::ToolCalls, &CALL_COLUMNS, calls)?;
        let bytes = steps.get_array_memory_size() + calls.get_array_memory_size();
        let mut calls_by_step: HashMap<i64, Vec<usize>> = HashMap::new();
        if let Some(ids) = calls.column_by_name("step_id") {
            let ids = ids.as_primitive::<arrow::datatypes::Int64Type>();
            for r in 0..calls.num_rows() {
                let id = if ids.is_null(r) { -1 } else { ids.value(r) };
                calls_by_step.entry(id).or_default().push(r);
            }
        }
        let body = Body::Rows {
            steps,
            calls,
            calls_by_step,
        };
        return Ok((body, bytes));
    }
    let ordinal = usize::try_from(doc).map_err(|_| not_found("trajectory"))?;
    if let Some(file) = cat.mounts.kept_file(src) {
        let file = file.map_err(read_failure)?;
        ctx.check()?;
        if ordinal >= file.docs.len() {
            return Err(not_found("trajectory"));
        }
        // The decoded-file cache holds the file; this entry charges its
        // document, which it keeps alive if that cache lets go.
        let share = file.docs[ordinal].held_bytes();
        let body = Body::Model {
            file,
            index: ordinal,
            ordinal,
            source: source.to_string(),
        };
        return Ok((body, share));
    }
    // A small file, one too large to keep decoded, or an events store: read
    // it through and keep this document only.
    let mut found = None;
    read_documents(ctx, cat, src, &mut |d, at| {
        if at == ordinal {
            found = Some(d.clone());
        }
    })?;
    let d = KeptDocument::packed(found.ok_or_else(|| not_found("trajectory"))?);
    let bytes = d.held_bytes();
    let file = Arc::new(DecodedSource {
        docs: vec![d],
        read: crate::catalog::read::SourceRead::default(),
        trajectories: None,
    });
    let body = Body::Model {
        file,
        index: 0,
        ordinal,
        source: source.to_string(),
    };
    Ok((body, bytes))
}

fn read_failure(f: crate::catalog::read::ReadFailure) -> Error {
    match f {
        crate::catalog::read::ReadFailure::Fatal(e) => e.into(),
        crate::catalog::read::ReadFailure::Source(e) => e.into(),
    }
}

/// The Source at `source` in the mount's snapshot.
pub(super) fn source_of<'m>(m: &'m Mount, source: &str) -> Result<&'m Source, Error> {
    m.snapshot
        .sources
        .iter()
        .find(|s| s.source_path == source)
        .ok_or_else(|| not_found("source"))
}

/// Every document of `src` in full, passing each with its position in the
/// Source; fails when the Source cannot be read or the request is out of
/// time.
pub(super) fn read_documents(
    ctx: &Ctx<'_>,
    cat: &WarehouseView,
    src: &Source,
    sink: &mut dyn FnMut(&Storyline, usize),
) -> Result<(), Error> {
    let opts = crate::formats::DecodeOptions::full(ctx.state.config.limits.max_document_bytes);
    let mut ordinal = 0usize;
    cat.mounts
        .read_documents(src, opts, &mut |d| {
            sink(d, ordinal);
            ordinal += 1;
        })
        .map_err(read_failure)?;
    ctx.check()?;
    Ok(())
}

fn load_doc(
    ctx: &mut Ctx<'_>,
    cat: &WarehouseView,
    m: &Mount,
    doc: &str,
) -> Result<Arc<Doc>, Error> {
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
    let (body, bytes) = read_body(ctx, cat, m, &source, ordinal)?;
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
        body,
        children,
    });
    ctx.state
        .docs
        .put(key, CacheEntry::Doc(Arc::clone(&d)), bytes);
    Ok(d)
}

pub(super) fn trajectory(
    ctx: &mut Ctx<'_>,
    cat: &WarehouseView,
    m: &Mount,
    doc: &str,
) -> Result<Reply, Error> {
    let d = load_doc(ctx, cat, m, doc)?;
    Ok(Reply::json(&json!({
        "dataset": m.name,
        "snapshot_id": m.snapshot.snapshot_id,
        "source_path": d.run["source_path"],
        "document_id": doc,
        "run": d.run,
        "step_count": d.step_count(),
        "tool_call_count": d.tool_call_count(),
        "children": d.children,
    })))
}

/// A step with its tool calls; long text cut to `limit` characters when
/// given (the cut fields are listed under `truncated`).
fn step_json(p: &Page, row: usize, index: usize, limit: Option<usize>) -> Value {
    let mut s = row_json(&p.steps, row);
    let mut cut = Vec::new();
    let mut calls: Vec<Value> = p.calls_of[row]
        .iter()
        .map(|&r| row_json(&p.calls, r))
        .collect();
    // Each result under the call it answers; the rest once under the step.
    let ids: Vec<String> = calls
        .iter()
        .map(|c| c["tool_call_id"].as_str().unwrap_or_default().to_string())
        .collect();
    let (by_call, unlinked) =
        crate::web::output::split_results(s["observation"].as_str(), &ids, limit);
    for (c, (id, mut out)) in calls.iter_mut().zip(by_call) {
        if let Some(own) = c
            .get("result")
            .and_then(|r| crate::web::output::own_result(r, &id, limit))
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

pub(super) fn steps_page(
    ctx: &mut Ctx<'_>,
    cat: &WarehouseView,
    m: &Mount,
    doc: &str,
) -> Result<Reply, Error> {
    let limits = ctx.state.config.limits;
    let offset = param_usize(ctx, "offset", 0, usize::MAX)?;
    let limit = param_usize(ctx, "limit", 100, limits.max_page_size)?.max(1);
    let text = param_usize(ctx, "text_chars", PAGE_TEXT_CHARS, 1 << 20)?;
    let d = load_doc(ctx, cat, m, doc)?;
    let end = offset.saturating_add(limit).min(d.step_count());
    let start = offset.min(end);
    let page = d.page(start..end)?;
    let steps: Vec<Value> = (start..end)
        .map(|i| step_json(&page, i - start, i, Some(text)))
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

pub(super) fn step_detail(
    ctx: &mut Ctx<'_>,
    cat: &WarehouseView,
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
    let mut v = step_json(&d.page(i..i + 1)?, 0, i, None);
    v["dataset"] = json!(m.name);
    v["snapshot_id"] = json!(m.snapshot.snapshot_id);
    v["source_path"] = d.run["source_path"].clone();
    Ok(Reply::json(&v))
}
