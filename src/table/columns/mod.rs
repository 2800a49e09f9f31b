//! Column definitions. Each column names its type, nullability, whether it
//! holds JSON text, a doc string, and how to compute it from a row. One file
//! per table; the per-document columns are shared by `trajectories` and the
//! store's `documents` table.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use super::builder::Cell;
use super::derive::{self as d, RowCtx};

/// SQL-visible column types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
    /// UTF-8 text.
    Text,
    /// UTF-8 JSON text.
    Json,
    /// 64-bit integer.
    Int,
    /// 64-bit float.
    Float,
    /// Boolean.
    Bool,
    /// Timestamp, nanoseconds, UTC.
    Timestamp,
}

impl ColType {
    /// The Arrow type.
    pub fn arrow(self) -> DataType {
        match self {
            ColType::Text | ColType::Json => DataType::Utf8,
            ColType::Int => DataType::Int64,
            ColType::Float => DataType::Float64,
            ColType::Bool => DataType::Boolean,
            ColType::Timestamp => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        }
    }

    /// The name shown by `DESCRIBE`.
    pub fn sql_name(self) -> &'static str {
        match self {
            ColType::Text => "TEXT",
            ColType::Json => "JSON",
            ColType::Int => "BIGINT",
            ColType::Float => "DOUBLE",
            ColType::Bool => "BOOLEAN",
            ColType::Timestamp => "TIMESTAMP",
        }
    }
}

/// One column of a logical table.
pub struct Column {
    /// Column name.
    pub name: &'static str,
    /// Type.
    pub ty: ColType,
    /// May be NULL.
    pub nullable: bool,
    /// One-line description for `DESCRIBE` and the docs.
    pub doc: &'static str,
    /// Computes the cell from a row.
    pub(crate) get: for<'a> fn(&RowCtx<'a>) -> Cell<'a>,
    /// For a column computed from other columns' stored text (a decoded view
    /// of raw JSON): how. Stores keep such columns from layout 3 on; readers
    /// of an older store compute them from the columns they derive from.
    pub derived: Option<Derived>,
    /// JSON text kept as the source wrote it (OpenAI argument strings),
    /// which may name a member twice in an object.
    pub as_written: bool,
}

/// How a derived column is computed from the raw text of stored columns.
#[derive(Clone, Copy)]
pub struct Derived {
    /// The stored columns it reads, in the order `compute` takes them.
    pub from: &'static [&'static str],
    /// The cell from those columns' text (NULL cells as `None`).
    pub compute: fn(&[Option<&str>]) -> Option<String>,
}

impl Column {
    const fn derived_from(mut self, d: Derived) -> Column {
        self.derived = Some(d);
        self
    }

    const fn kept_as_written(mut self) -> Column {
        self.as_written = true;
        self
    }

    /// True for a JSON column whose every value `serde_json` wrote, from a
    /// value or a record: valid JSON naming each member once in its
    /// object, which a JSON path may read only up to where it ends.
    pub fn holds_written_json(&self) -> bool {
        self.ty == ColType::Json && !self.as_written
    }
}

impl std::fmt::Debug for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.ty.sql_name())
    }
}

/// A table: the logical relations SQL sees, and the per-document table a
/// store keeps (`Documents`, its `runs.lance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// One row per Run of a Source: a main trajectory with its subagents
    /// and retries, grouped by (`source_path`, `origin_path`, `run_id`).
    Runs,
    /// One row per trajectory document, with its own fields and aggregates.
    Trajectories,
    /// One row per step (turn).
    Steps,
    /// One row per tool call.
    ToolCalls,
    /// One row per evaluation result.
    Judgments,
    /// One row per trajectory document as a store keeps it (the public
    /// Storyline Lance `runs` table: several rows may share a `run_id`).
    /// Not an SQL relation: `trajectories` and `runs` are read from it.
    Documents,
}

impl Table {
    /// All document-derived tables.
    pub const ALL: [Table; 5] = [
        Table::Runs,
        Table::Trajectories,
        Table::Steps,
        Table::ToolCalls,
        Table::Judgments,
    ];

    /// The relation name (`documents` for the store's per-document table,
    /// which no query names).
    pub fn name(self) -> &'static str {
        match self {
            Table::Runs => "runs",
            Table::Trajectories => "trajectories",
            Table::Steps => "steps",
            Table::ToolCalls => "tool_calls",
            Table::Judgments => "judgments",
            Table::Documents => "documents",
        }
    }

    /// The table with this relation name.
    pub fn from_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Column definitions, `source_path` first.
    pub fn columns(self) -> &'static [Column] {
        match self {
            Table::Runs => runs::RUNS,
            Table::Trajectories => document::TRAJECTORIES,
            Table::Steps => steps::STEPS,
            Table::ToolCalls => tool_calls::TOOL_CALLS,
            Table::Judgments => judgments::JUDGMENTS,
            Table::Documents => document::DOCUMENTS,
        }
    }

    /// Index of a column by name.
    pub fn index_of(self, name: &str) -> Option<usize> {
        self.columns().iter().position(|c| c.name == name)
    }

    /// Indexes of the columns `names`; the error names the first missing.
    pub fn indexes_of(self, names: &[&str]) -> Result<Vec<usize>, String> {
        names
            .iter()
            .map(|n| {
                self.index_of(n)
                    .ok_or_else(|| format!("no column {n} in {}", self.name()))
            })
            .collect()
    }

    /// The Arrow schema of the relation (with `source_path`).
    pub fn schema(self) -> SchemaRef {
        schema_of(self.columns())
    }
}

/// An Arrow schema for a column list.
pub fn schema_of(cols: &[Column]) -> SchemaRef {
    Arc::new(Schema::new(
        cols.iter()
            .map(|c| Field::new(c.name, c.ty.arrow(), c.nullable))
            .collect::<Vec<_>>(),
    ))
}

macro_rules! col {
    ($name:literal, $ty:ident, $null:literal, $doc:literal, $get:expr) => {
        Column {
            name: $name,
            ty: ColType::$ty,
            nullable: $null,
            doc: $doc,
            get: $get,
            derived: None,
            as_written: false,
        }
    };
}

const SOURCE_PATH: Column = col!(
    "source_path",
    Text,
    false,
    "Dataset-relative path of the Source the row comes from",
    |r| Cell::str(r.source_path)
);

/// Where the row's document was read from: the Source itself for an
/// exchange file, the file recorded at import for a store.
const ORIGIN_PATH: Column = col!(
    "origin_path",
    Text,
    false,
    "Dataset-relative path of the file the document was read from (for a store: as recorded at import)",
    |r| Cell::str(r.doc.origin_path.as_deref().unwrap_or(r.source_path))
);

/// The document's position in its Source: with `source_path`, the key of a
/// document even when Source-local ids repeat.
const STORAGE_ORDINAL: Column = col!(
    "storage_ordinal",
    Int,
    false,
    "Position of the document in its Source (with source_path, identifies the document)",
    |r| Cell::I64(r.doc_ordinal as i64)
);

mod document;
mod judgments;
mod runs;
mod steps;
mod tool_calls;

pub(crate) use runs::RUN_INPUTS;

pub(crate) struct MessageKindName;

impl MessageKindName {
    pub(crate) fn of(v: &serde_json::Value) -> &'static str {
        d::MessageKind::of(v).name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every JSON column of the tables holds JSON `serde_json` wrote but
    /// `tool_calls.arguments`, kept as written; SQL reads a path over the
    /// others only up to where it ends.
    #[test]
    fn only_openai_arguments_are_json_kept_as_written() {
        let mut as_written = Vec::new();
        let mut written = 0;
        for t in Table::ALL {
            for c in t.columns() {
                match (c.ty == ColType::Json, c.holds_written_json()) {
                    (true, false) => as_written.push(format!("{}.{}", t.name(), c.name)),
                    (true, true) => written += 1,
                    (false, held) => assert!(!held, "{}.{}", t.name(), c.name),
                }
            }
        }
        assert_eq!(as_written, ["tool_calls.arguments"]);
        assert!(written > 20, "{written}");
    }
}
