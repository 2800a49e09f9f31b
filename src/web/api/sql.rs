//! SQL over the mounts: the query route (JSON, CSV or JSON lines) and a
//! mount's summary, both through `run_query`.

use std::collections::BTreeMap;

use arrow::record_batch::RecordBatch;
use serde_json::{json, Value};

use super::rows::rows_json;
use super::{bad, public_text};
use crate::dataset::{Mount, Mounts};
use crate::error::Error;
use crate::render::cell_json;
use crate::sql::SqlError;
use crate::web::server::{Ctx, Reply, WarehouseView};
use crate::web::WebError;

pub(super) fn summary(ctx: &Ctx<'_>, cat: &WarehouseView, m: &Mount) -> Result<Reply, Error> {
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

/// The bounds of one request's query.
fn query_limits(ctx: &Ctx<'_>) -> crate::sql::Limits {
    crate::sql::Limits {
        timeout: Some(ctx.remaining()),
        memory_budget: ctx.state.config.limits.memory_budget,
        cancel: Some(std::sync::Arc::clone(&ctx.gone)),
        spill_limit: crate::sql::DEFAULT_SPILL_LIMIT,
    }
}

fn run_query(
    ctx: &Ctx<'_>,
    mounts: &Mounts,
    text: &str,
) -> Result<(arrow::datatypes::SchemaRef, Vec<RecordBatch>), Error> {
    let statement = crate::sql::plan(text, mounts)?;
    Ok(match statement {
        crate::sql::Statement::Describe(_, rel, _) => crate::dataset::describe_batches(&rel),
        crate::sql::Statement::Explain(plan) => {
            crate::dataset::explain_batches(&crate::sql::explain::physical(&plan))
        }
        crate::sql::Statement::ExplainAnalyze(plan) => crate::dataset::explain_batches(
            &crate::sql::explain::analyze(&plan, mounts, query_limits(ctx))?,
        ),
        crate::sql::Statement::Query(plan) => {
            let r = crate::sql::execute(&plan, mounts, query_limits(ctx))?;
            (r.schema, r.batches)
        }
    })
}

pub(super) fn query(ctx: &mut Ctx<'_>) -> Result<Reply, Error> {
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
        .map(|(c, m)| json!({"code": c, "message": public_text(ctx, &m)}))
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
                "stats": ctx.stats(),
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
