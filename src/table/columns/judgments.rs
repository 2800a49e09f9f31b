//! `judgments`: one row per evaluation result of a trajectory.

use super::{Cell, ColType, Column, ORIGIN_PATH, SOURCE_PATH, STORAGE_ORDINAL};
use crate::table::derive as d;

pub(super) static JUDGMENTS: &[Column] = &[
    SOURCE_PATH,
    col!("document_id", Text, false, "Judged trajectory", |r| {
        Cell::str(r.doc.document_id())
    }),
    col!("run_id", Text, false, "Run id", |r| Cell::str(
        r.doc.run_id()
    )),
    col!("session_id", Text, false, "Session id", |r| Cell::str(
        &r.doc.session
    )),
    col!("attempt_id", Text, true, "Attempt id", |r| Cell::opt(
        r.doc.attempt_id.as_deref()
    )),
    col!(
        "judge",
        Text,
        false,
        "Who judged: the source format (e.g. actf) or the judgments file's judge",
        |r| d::judge(r)
    ),
    col!("correct", Bool, true, "Verdict", |r| d::result_bool(
        r,
        |x| x.correct.as_ref()
    )),
    col!("task_correct", Bool, true, "Task-level verdict", |r| {
        d::result_bool(r, |x| x.task_correct.as_ref())
    }),
    col!("score", Float, true, "Score", |r| d::result_f64(r, |x| x
        .score
        .as_ref())),
    col!(
        "max_score",
        Float,
        true,
        "Maximum score",
        |r| d::result_f64(r, |x| x.max_score.as_ref())
    ),
    col!("status", Text, true, "Status", |r| d::result_text(r, |x| x
        .status
        .as_ref())),
    col!("error", Text, true, "Error text", |r| d::result_text(
        r,
        |x| x.error.as_ref()
    )),
    col!("final_answer", Json, true, "Final answer", |r| {
        d::result_json(r, |x| x.final_answer.as_ref())
    }),
    col!("ground_truth", Json, true, "Ground truth", |r| {
        d::result_json(r, |x| x.ground_truth.as_ref())
    }),
    col!("details", Json, true, "The whole result object", |r| {
        d::json_of(r.doc.task.as_ref().and_then(|t| t.result.as_ref()))
    }),
    STORAGE_ORDINAL,
    ORIGIN_PATH,
];
