//! Grouping trajectory rows into Runs (the `runs` relation): documents that
//! share (`source_path`, `origin_path`, `run_id`) are one Run, in the order
//! their first document appears.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, RecordBatch,
    RecordBatchOptions, TimestampNanosecondArray,
};
use arrow::compute::interleave;
use arrow::datatypes::{Float64Type, Int64Type, TimestampNanosecondType};
use arrow::error::ArrowError;

use super::columns::{Table, RUN_INPUTS};

/// Position of an input column in [`RUN_INPUTS`].
fn input(name: &str) -> usize {
    RUN_INPUTS
        .iter()
        .position(|c| *c == name)
        .expect("a run input column")
}

/// One Run being summed up.
struct Run {
    /// (batch, row) of its first document and of its main trajectory.
    first: (usize, usize),
    root: Option<(usize, usize)>,
    explicit: bool,
    trajectories: i64,
    subagents: i64,
    steps: i64,
    calls: i64,
    started: Option<i64>,
    finished: Option<i64>,
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
    cost: Option<f64>,
}

fn add(sum: &mut Option<i64>, v: Option<i64>) {
    if let Some(v) = v {
        *sum = Some(sum.unwrap_or(0).saturating_add(v));
    }
}

/// The `runs` rows of `batches`: `trajectories` rows projected to
/// [`RUN_INPUTS`], in that order. The result has every `runs` column.
pub fn group_runs(batches: &[RecordBatch]) -> Result<RecordBatch, ArrowError> {
    let schema = Table::Runs.schema();
    let mut index: HashMap<(String, String, String), usize> = HashMap::new();
    let mut runs: Vec<Run> = Vec::new();
    let text = |b: &RecordBatch, name: &str| b.column(input(name)).as_string::<i32>().clone();
    let int =
        |b: &RecordBatch, name: &str| b.column(input(name)).as_primitive::<Int64Type>().clone();
    for (bi, b) in batches.iter().enumerate() {
        let (src, origin, run, parent) = (
            text(b, "source_path"),
            text(b, "origin_path"),
            text(b, "run_id"),
            text(b, "parent_document_id"),
        );
        let explicit = b.column(input("run_id_explicit")).as_boolean().clone();
        let (steps, calls, prompt, completion) = (
            int(b, "step_count"),
            int(b, "tool_call_count"),
            int(b, "total_prompt_tokens"),
            int(b, "total_completion_tokens"),
        );
        let cost = b
            .column(input("total_cost_usd"))
            .as_primitive::<Float64Type>()
            .clone();
        let started = b
            .column(input("started_at"))
            .as_primitive::<TimestampNanosecondType>()
            .clone();
        let finished = b
            .column(input("finished_at"))
            .as_primitive::<TimestampNanosecondType>()
            .clone();
        let opt_i = |a: &Int64Array, r: usize| (!a.is_null(r)).then(|| a.value(r));
        for r in 0..b.num_rows() {
            let key = (
                src.value(r).to_string(),
                origin.value(r).to_string(),
                run.value(r).to_string(),
            );
            let i = *index.entry(key).or_insert_with(|| {
                runs.push(Run {
                    first: (bi, r),
                    root: None,
                    explicit: false,
                    trajectories: 0,
                    subagents: 0,
                    steps: 0,
                    calls: 0,
                    started: None,
                    finished: None,
                    prompt_tokens: None,
                    completion_tokens: None,
                    cost: None,
                });
                runs.len() - 1
            });
            let x = &mut runs[i];
            x.trajectories += 1;
            if parent.is_null(r) {
                x.root.get_or_insert((bi, r));
            } else {
                x.subagents += 1;
            }
            x.explicit |= !explicit.is_null(r) && explicit.value(r);
            x.steps += steps.value(r);
            x.calls += calls.value(r);
            add(&mut x.prompt_tokens, opt_i(&prompt, r));
            add(&mut x.completion_tokens, opt_i(&completion, r));
            if !cost.is_null(r) {
                x.cost = Some(x.cost.unwrap_or(0.0) + cost.value(r));
            }
            if !started.is_null(r) {
                let v = started.value(r);
                x.started = Some(x.started.map_or(v, |s| s.min(v)));
            }
            if !finished.is_null(r) {
                let v = finished.value(r);
                x.finished = Some(x.finished.map_or(v, |s| s.max(v)));
            }
        }
    }
    let firsts: Vec<(usize, usize)> = runs.iter().map(|x| x.first).collect();
    let roots: Vec<(usize, usize)> = runs.iter().map(|x| x.root.unwrap_or(x.first)).collect();
    let take = |name: &str, at: &[(usize, usize)]| -> Result<ArrayRef, ArrowError> {
        let cols: Vec<&dyn Array> = batches
            .iter()
            .map(|b| b.column(input(name)).as_ref())
            .collect();
        if cols.is_empty() {
            return Ok(arrow::array::new_empty_array(
                schema
                    .field_with_name(name)
                    .map_or(&arrow::datatypes::DataType::Utf8, |f| f.data_type()),
            ));
        }
        interleave(&cols, at)
    };
    let ints = |f: &dyn Fn(&Run) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(runs.iter().map(f)))
    };
    let opt_ints = |f: &dyn Fn(&Run) -> Option<i64>| -> ArrayRef {
        Arc::new(runs.iter().map(f).collect::<Int64Array>())
    };
    let times = |f: &dyn Fn(&Run) -> Option<i64>| -> ArrayRef {
        Arc::new(
            runs.iter()
                .map(f)
                .collect::<TimestampNanosecondArray>()
                .with_timezone("UTC"),
        )
    };
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let a: ArrayRef = match field.name().as_str() {
            n @ ("source_path" | "origin_path" | "run_id") => take(n, &firsts)?,
            "run_id_explicit" => Arc::new(
                runs.iter()
                    .map(|x| Some(x.explicit))
                    .collect::<BooleanArray>(),
            ),
            "root_document_id" => take("document_id", &roots)?,
            "trajectory_count" => ints(&|x| x.trajectories),
            "subagent_count" => ints(&|x| x.subagents),
            "step_count" => ints(&|x| x.steps),
            "tool_call_count" => ints(&|x| x.calls),
            "started_at" => times(&|x| x.started),
            "finished_at" => times(&|x| x.finished),
            "total_prompt_tokens" => opt_ints(&|x| x.prompt_tokens),
            "total_completion_tokens" => opt_ints(&|x| x.completion_tokens),
            "total_cost_usd" => Arc::new(runs.iter().map(|x| x.cost).collect::<Float64Array>()),
            // The main trajectory's identity and JSON parts.
            n => take(n, &roots)?,
        };
        arrays.push(a);
    }
    RecordBatch::try_new_with_options(
        schema,
        arrays,
        &RecordBatchOptions::new().with_row_count(Some(runs.len())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::model::{Parent, Storyline, Turn};
    use crate::table::TableBuilder;

    fn doc(session: &str, run: &str, parent: Option<&str>, steps: usize) -> Storyline {
        let mut d = Storyline::new(session, "agent");
        d.run = Some(run.into());
        d.parent = parent.map(|p| Parent {
            psid: p.into(),
            scid: None,
            ptid: None,
            rel: None,
        });
        for i in 0..steps {
            let mut t = Turn::new(i as i64 + 1, "agent", serde_json::json!("x"));
            t.ts = Some(serde_json::json!(format!("2026-01-01T00:00:0{i}Z")));
            d.turns.push(t);
        }
        d
    }

    #[test]
    fn documents_of_one_run_are_one_row_with_the_main_trajectory_first() {
        let cols: Vec<usize> = RUN_INPUTS
            .iter()
            .map(|c| Table::Trajectories.index_of(c).unwrap())
            .collect();
        let mut b = TableBuilder::new(Table::Trajectories, Some(&cols));
        // A subagent before its parent, another run, and a same-id run from
        // another file of the same store.
        b.push_document("store", &doc("child", "r1", Some("main"), 2), 0);
        b.push_document("store", &doc("main", "r1", None, 3), 1);
        b.push_document("store", &doc("other", "r2", None, 1), 2);
        let mut elsewhere = doc("main", "r1", None, 4);
        elsewhere.origin_path = Some("b.json".into());
        b.push_document("store", &elsewhere, 3);
        let runs = group_runs(&[b.finish()]).unwrap();
        assert_eq!(runs.num_rows(), 3);
        let col = |n: &str| runs.column(runs.schema().index_of(n).unwrap()).clone();
        let text = |n: &str, r: usize| col(n).as_string::<i32>().value(r).to_string();
        let int = |n: &str, r: usize| col(n).as_primitive::<Int64Type>().value(r);
        assert_eq!(text("run_id", 0), "r1");
        assert_eq!(text("root_document_id", 0), "main");
        assert_eq!(int("trajectory_count", 0), 2);
        assert_eq!(int("subagent_count", 0), 1);
        assert_eq!(int("step_count", 0), 5);
        assert_eq!(int("storage_ordinal", 0), 1);
        assert_eq!(text("origin_path", 2), "b.json");
        assert_eq!(int("step_count", 2), 4);
        let started = col("started_at");
        assert!(!started.is_null(0));
    }
}
