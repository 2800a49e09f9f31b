//! The logical tables: Arrow schemas of `runs`, `steps`, `tool_calls`,
//! `trajectories`, `judgments` and `sources`, and builders that turn
//! Storyline documents into record batches.
//!
//! One definition serves three readers: the Storyline Lance store writes
//! these columns (without `source_path`), SQL reads exchange files in place
//! through the same builders, and `DESCRIBE` / `docs/query-model.md` print
//! the column docs. Depends on `formats` only.

mod builder;
mod bytes;
mod columns;
mod derive;
mod runs;

pub use crate::formats::text::result_link;
pub use builder::{Cell, TableBuilder};
pub use bytes::{all_checked, checked_batch, checked_text};
pub(crate) use columns::RUN_INPUTS;
pub use columns::{ColType, Column, Derived, Table};
pub(crate) use derive::{call_output_of, step_call_output};
pub use derive::{json_text, metric_f64, metric_i64, prompt_text, MessageKind};
pub use runs::group_runs;
