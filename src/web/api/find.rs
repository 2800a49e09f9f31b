//! The find route: a find expression or ids over one mount, with each step
//! hit's full text fields attached.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::{json, Value};

use super::rows::rows_json;
use super::trajectory::rows_for_docs;
use super::{bad, param_usize, public_text};
use crate::dataset::Mount;
use crate::error::Error;
use crate::table::Table;
use crate::web::server::{Ctx, Reply, WarehouseView};

pub(super) fn find(ctx: &mut Ctx<'_>, cat: &WarehouseView, m: &Mount) -> Result<Reply, Error> {
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
        search["fts_unavailable_reason"] = json!(public_text(ctx, r));
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
        "stats": ctx.stats(),
        "warnings": outcome.warnings.iter().map(|(c, msg)| json!({"code": c, "message": public_text(ctx, msg)})).collect::<Vec<_>>(),
        "matches": hits,
    })))
}

/// Add each step hit's full text fields (`fields`) and position (`index`),
/// reading each Source with hits once.
fn attach_fields(
    ctx: &Ctx<'_>,
    cat: &WarehouseView,
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
