//! `query [DATASET] SQL`: plan and run read-only SQL over mounted Datasets.

use std::time::Instant;

use crate::cli::out::Out;
use crate::cli::render::{write_csv, write_jsonl, write_table, Bounded, OutputLimit};
use crate::cli::settings::{QueryFormat, QuerySettings};
use crate::cli::ExitStatus;
use crate::dataset::Mounts;
use crate::error::Error;
use crate::sql::{self, Limits, SqlError, Statement};

/// Run the command.
pub fn run(q: &QuerySettings, out: &mut Out) -> Result<ExitStatus, Error> {
    let started = Instant::now();
    let mounts = std::sync::Arc::new(Mounts::open(
        &q.mounts,
        q.limits,
        q.strict,
        q.max_document_bytes,
    )?);
    for m in mounts.mounts() {
        if mounts.mounts().len() == 1 {
            out.remember_snapshot(&m.snapshot.dataset.to_string(), &m.snapshot.snapshot_id);
            out.info(&format!("snapshot_id: {}", m.snapshot.snapshot_id));
        } else {
            out.info(&format!(
                "snapshot_id: {} ({})",
                m.snapshot.snapshot_id, m.name
            ));
        }
    }
    let statement = sql::plan(&q.sql, mounts.as_ref())?;
    let limits = Limits {
        timeout: Some(q.timeout),
        memory_budget: q.memory_budget,
        cancel: None,
        spill_limit: q.spill_limit,
    };
    // EXPLAIN prints the physical plan; EXPLAIN ANALYZE runs it first.
    let explained = match &statement {
        Statement::Explain(plan) => Some(sql::explain::physical(plan)),
        Statement::ExplainAnalyze(plan) => Some(sql::explain::analyze(
            plan,
            mounts.as_ref(),
            limits.clone(),
        )?),
        _ => None,
    };
    if let (Some(text), QueryFormat::Table) = (&explained, q.format) {
        match &q.output {
            None => out.write_text(text)?,
            Some(path) => write_new_file(path, text.as_bytes())?,
        }
        return Ok(ExitStatus::Success);
    }
    let (schema, batches) = match (statement, explained) {
        (_, Some(text)) => crate::dataset::explain_batches(&text),
        (Statement::Describe(_, rel, _), None) => crate::dataset::describe_batches(&rel),
        (Statement::Query(plan), None) => {
            let r = execute_within(
                plan,
                &mounts,
                limits,
                q.timeout.saturating_sub(started.elapsed()),
                out,
            )?;
            (r.schema, r.batches)
        }
        (Statement::Explain(_) | Statement::ExplainAnalyze(_), None) => {
            unreachable!("explained above")
        }
    };
    for (code, msg) in mounts.take_warnings() {
        out.warn(&code, &msg);
    }
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    if rows > q.max_rows {
        return Err(SqlError::TooManyRows { limit: q.max_rows }.into());
    }
    let _w = crate::util::stats::phase(crate::util::stats::Phase::Write);
    let mut buf = Bounded::new(Vec::new(), q.max_output_bytes);
    let written = match q.format {
        QueryFormat::Table => write_table(&mut buf, &schema, &batches),
        QueryFormat::Jsonl => write_jsonl(&mut buf, &schema, &batches),
        QueryFormat::Csv => write_csv(&mut buf, &schema, &batches),
    };
    if let Err(e) = written {
        if e.get_ref().is_some_and(
            <dyn std::error::Error + std::marker::Send + std::marker::Sync + 'static>::is::<
                OutputLimit,
            >,
        ) {
            return Err(SqlError::OutputTooLarge {
                limit: q.max_output_bytes,
            }
            .into());
        }
        return Err(Error::Output(e));
    }
    let mut bytes = buf.into_inner();
    if out.stats() && q.format == QueryFormat::Jsonl {
        // Asked for: one more line after the rows, told apart by its key.
        let line = serde_json::json!({ "stats": crate::cli::out::stats_json() });
        bytes.extend_from_slice(line.to_string().as_bytes());
        bytes.push(b'\n');
    }
    match &q.output {
        None => out.write_bytes(&bytes)?,
        Some(path) => write_new_file(path, &bytes)?,
    }
    out.info(&format!(
        "{rows} row{} in {} ms",
        if rows == 1 { "" } else { "s" },
        started.elapsed().as_millis()
    ));
    Ok(ExitStatus::Success)
}

/// Run `plan` on a worker thread and wait at most `left` (plus a small
/// grace) for it. The engine checks the time between operators and Sources;
/// a single long step (one huge document, one large sort) would otherwise
/// overrun the limit. Nothing has been written when the limit passes, so the
/// command can fail at once; the process then ends with the worker. A query
/// still running after two seconds shows the rows scanned so far on a
/// terminal's stderr.
fn execute_within(
    plan: sql::logical::Plan,
    mounts: &std::sync::Arc<Mounts>,
    limits: Limits,
    left: std::time::Duration,
    out: &Out,
) -> Result<sql::QueryResult, Error> {
    use std::time::{Duration, Instant};
    let (tx, rx) = std::sync::mpsc::channel();
    let m = std::sync::Arc::clone(mounts);
    let seconds = limits.timeout.map_or(0.0, |t| t.as_secs_f64());
    std::thread::Builder::new()
        .name("query".into())
        .spawn(move || {
            let _ = tx.send(sql::execute(&plan, m.as_ref(), limits));
        })
        .map_err(|e| Error::Internal(format!("cannot start the query: {e}")))?;
    let started = Instant::now();
    let deadline = started + left + Duration::from_millis(50) + left / 20;
    let mut progress = out.progress("query: rows scanned");
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        if wait.is_zero() {
            return Err(SqlError::Timeout { seconds }.into());
        }
        match rx.recv_timeout(wait.min(Duration::from_millis(250))) {
            Ok(r) => {
                progress.finish();
                return Ok(r?);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if started.elapsed() >= Duration::from_secs(2) {
                    let rows = crate::util::stats::get(crate::util::stats::Counter::RowsScanned);
                    progress.tick(rows, None);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::Internal("the query stopped without a result".into()));
            }
        }
    }
}

/// Create `path` with `bytes`, complete or not at all, never replacing
/// what is there.
pub fn write_new_file(path: &std::path::Path, bytes: &[u8]) -> Result<(), Error> {
    crate::util::fs::write_new(path, bytes).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            crate::cli::settings::SettingsError::OutputExists {
                path: path.display().to_string(),
            }
            .into()
        } else {
            Error::Output(e)
        }
    })
}
