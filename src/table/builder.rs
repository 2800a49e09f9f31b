//! Row-at-a-time builders producing Arrow record batches for one table, with
//! a projection so unused columns are never computed.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, StringBuilder,
    TimestampNanosecondBuilder,
};
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use serde_json::Value;

use super::columns::{ColType, Column, Table};
use super::derive::RowCtx;
use crate::formats::model::Storyline;

/// One cell value, borrowed where possible.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell<'a> {
    /// NULL.
    Null,
    /// Text.
    Str(Cow<'a, str>),
    /// Integer.
    I64(i64),
    /// Float.
    F64(f64),
    /// Boolean.
    Bool(bool),
    /// Timestamp in epoch nanoseconds.
    Ts(i64),
}

impl<'a> Cell<'a> {
    /// Borrowed text.
    pub fn str(s: &'a str) -> Self {
        Cell::Str(Cow::Borrowed(s))
    }
    /// Optional text.
    pub fn opt(s: Option<&'a str>) -> Self {
        s.map_or(Cell::Null, Cell::str)
    }
    /// Optional integer.
    pub fn opt_i64(v: Option<i64>) -> Self {
        v.map_or(Cell::Null, Cell::I64)
    }
    /// Optional float.
    pub fn opt_f64(v: Option<f64>) -> Self {
        v.map_or(Cell::Null, Cell::F64)
    }
    /// Optional boolean.
    pub fn opt_bool(v: Option<bool>) -> Self {
        v.map_or(Cell::Null, Cell::Bool)
    }
    /// JSON text of an optional value (absent is NULL, JSON null is `null`).
    pub fn json(v: Option<&Value>) -> Self {
        v.map_or(Cell::Null, |v| Cell::Str(Cow::Owned(v.to_string())))
    }
    /// JSON text of a required value.
    pub fn json_required(v: &Value) -> Self {
        Cell::Str(Cow::Owned(v.to_string()))
    }
    /// A Storyline timestamp (RFC 3339 text or epoch seconds) as UTC nanoseconds.
    pub fn ts(v: Option<&Value>) -> Self {
        v.and_then(crate::util::time::parse_timestamp)
            .map_or(Cell::Null, Cell::Ts)
    }
}

enum ColBuilder {
    Text(StringBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
    Ts(TimestampNanosecondBuilder),
}

impl ColBuilder {
    fn new(ty: ColType) -> Self {
        match ty {
            ColType::Text | ColType::Json => ColBuilder::Text(StringBuilder::new()),
            ColType::Int => ColBuilder::Int(Int64Builder::new()),
            ColType::Float => ColBuilder::Float(Float64Builder::new()),
            ColType::Bool => ColBuilder::Bool(BooleanBuilder::new()),
            ColType::Timestamp => {
                ColBuilder::Ts(TimestampNanosecondBuilder::new().with_timezone("UTC"))
            }
        }
    }

    fn push(&mut self, cell: Cell<'_>, nullable: bool) {
        match (self, cell) {
            (ColBuilder::Text(b), Cell::Str(s)) => b.append_value(s),
            (ColBuilder::Text(b), Cell::I64(v)) => b.append_value(v.to_string()),
            (ColBuilder::Int(b), Cell::I64(v)) => b.append_value(v),
            (ColBuilder::Float(b), Cell::F64(v)) => b.append_value(v),
            (ColBuilder::Float(b), Cell::I64(v)) => b.append_value(v as f64),
            (ColBuilder::Bool(b), Cell::Bool(v)) => b.append_value(v),
            (ColBuilder::Ts(b), Cell::Ts(v)) => b.append_value(v),
            // NULL (or a mismatched cell) in a NOT NULL column gets the zero value.
            (ColBuilder::Text(b), _) if !nullable => b.append_value(""),
            (ColBuilder::Int(b), _) if !nullable => b.append_value(0),
            (ColBuilder::Float(b), _) if !nullable => b.append_value(0.0),
            (ColBuilder::Bool(b), _) if !nullable => b.append_value(false),
            (ColBuilder::Ts(b), _) if !nullable => b.append_value(0),
            (ColBuilder::Text(b), _) => b.append_null(),
            (ColBuilder::Int(b), _) => b.append_null(),
            (ColBuilder::Float(b), _) => b.append_null(),
            (ColBuilder::Bool(b), _) => b.append_null(),
            (ColBuilder::Ts(b), _) => b.append_null(),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            ColBuilder::Text(b) => Arc::new(b.finish()),
            ColBuilder::Int(b) => Arc::new(b.finish()),
            ColBuilder::Float(b) => Arc::new(b.finish()),
            ColBuilder::Bool(b) => Arc::new(b.finish()),
            ColBuilder::Ts(b) => Arc::new(b.finish()),
        }
    }
}

/// A text column computed beside a relation's own columns for an internal
/// reader, not part of the relation (the full-text index takes the text of
/// results given on a step's calls this way).
pub(crate) type ExtraText = for<'a> fn(&RowCtx<'a>) -> Option<String>;

/// Builds record batches of one table from Storyline documents.
pub struct TableBuilder {
    table: Table,
    projection: Vec<usize>,
    schema: SchemaRef,
    cols: Vec<ColBuilder>,
    extra: Option<(ExtraText, StringBuilder)>,
    rows: usize,
}

impl TableBuilder {
    /// A builder for `table` producing the given column indices (all when `None`).
    pub fn new(table: Table, projection: Option<&[usize]>) -> Self {
        let all = table.columns();
        let projection: Vec<usize> =
            projection.map_or_else(|| (0..all.len()).collect(), <[usize]>::to_vec);
        let fields: Vec<Field> = projection
            .iter()
            .map(|&i| {
                let c: &Column = &all[i];
                Field::new(c.name, c.ty.arrow(), c.nullable)
            })
            .collect();
        let cols = projection
            .iter()
            .map(|&i| ColBuilder::new(all[i].ty))
            .collect();
        TableBuilder {
            table,
            projection,
            schema: Arc::new(Schema::new(fields)),
            cols,
            extra: None,
            rows: 0,
        }
    }

    /// Add a nullable text column `name` after the projected ones, computed
    /// by `get` for every row.
    pub(crate) fn with_extra(mut self, name: &str, get: ExtraText) -> Self {
        let mut fields: Vec<Field> = self.schema.fields().iter().map(|f| (**f).clone()).collect();
        fields.push(Field::new(name, arrow::datatypes::DataType::Utf8, true));
        self.schema = Arc::new(Schema::new(fields));
        self.extra = Some((get, StringBuilder::new()));
        self
    }

    /// The output schema.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Rows buffered since the last [`TableBuilder::finish`].
    pub fn len(&self) -> usize {
        self.rows
    }

    /// True with no buffered rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    fn push_row(&mut self, ctx: &RowCtx<'_>) {
        let all = self.table.columns();
        for (b, &i) in self.cols.iter_mut().zip(&self.projection) {
            let c = &all[i];
            b.push((c.get)(ctx), c.nullable);
        }
        if let Some((get, b)) = &mut self.extra {
            b.append_option(get(ctx));
        }
        self.rows += 1;
    }

    /// Add the rows one document contributes to this table (none to
    /// `runs`, which [`crate::table::group_runs`] builds).
    pub fn push_document(&mut self, source_path: &str, doc: &Storyline, doc_ordinal: usize) {
        let ctx = RowCtx {
            source_path,
            doc,
            doc_ordinal,
            turn_ordinal: 0,
            first_turn: 0,
            call_index: 0,
        };
        match self.table {
            Table::Trajectories | Table::Documents => self.push_row(&ctx),
            // Runs are grouped from `trajectories` rows (`group_runs`).
            Table::Runs => {}
            Table::Judgments => {
                if doc.task.as_ref().is_some_and(|t| t.result.is_some()) {
                    self.push_row(&ctx);
                }
            }
            Table::Steps | Table::ToolCalls => {
                self.push_turns(source_path, doc, doc_ordinal, 0..doc.turns.len());
            }
        }
    }

    /// Rows of the steps `turns` of `doc` (a page of them): one per step
    /// for `steps`, one per tool call for `tool_calls`; other tables get
    /// none. The rows equal those [`TableBuilder::push_document`] gives
    /// these steps.
    pub fn push_turns(
        &mut self,
        source_path: &str,
        doc: &Storyline,
        doc_ordinal: usize,
        turns: std::ops::Range<usize>,
    ) {
        let turns = turns.start.min(doc.turns.len())..turns.end.min(doc.turns.len());
        self.push_turns_from(source_path, doc, doc_ordinal, 0, turns);
    }

    /// Rows of the steps `turns` of a document of which `doc` holds the
    /// steps from position `first_turn` on (a page of it, see
    /// [`crate::dataset::KeptDocument::with_steps`]): the rows
    /// [`TableBuilder::push_turns`] gives those steps of the whole
    /// document. `turns` must lie within what `doc` holds.
    pub fn push_turns_from(
        &mut self,
        source_path: &str,
        doc: &Storyline,
        doc_ordinal: usize,
        first_turn: usize,
        turns: std::ops::Range<usize>,
    ) {
        let mut ctx = RowCtx {
            source_path,
            doc,
            doc_ordinal,
            turn_ordinal: 0,
            first_turn,
            call_index: 0,
        };
        for i in turns {
            ctx.turn_ordinal = i;
            match self.table {
                Table::Steps => self.push_row(&ctx),
                Table::ToolCalls => {
                    let calls = ctx.turn().tool_calls.as_ref().map_or(0, Vec::len);
                    for c in 0..calls {
                        ctx.call_index = c;
                        self.push_row(&ctx);
                    }
                }
                _ => return,
            }
        }
    }

    /// Take the buffered rows as a batch.
    pub fn finish(&mut self) -> RecordBatch {
        let mut arrays: Vec<ArrayRef> = self.cols.iter_mut().map(ColBuilder::finish).collect();
        if let Some((_, b)) = &mut self.extra {
            arrays.push(Arc::new(b.finish()));
        }
        let options = RecordBatchOptions::new().with_row_count(Some(self.rows));
        self.rows = 0;
        RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)
            .expect("builders produce arrays matching their schema")
    }
}

#[cfg(test)]
mod tests {
    use super::TableBuilder;
    use crate::formats::{decode_bytes, DecodeCtx, DecodeOptions};
    use crate::table::Table;

    /// Pages of steps, put end to end, are the rows of the whole document:
    /// the explorer builds the rows of a page alone.
    #[test]
    fn pages_of_steps_give_the_rows_of_the_whole_document() {
        let atif = br#"{"schema_version":"ATIF-v1.7","session_id":"p","agent":{"name":"a","version":"1"},"steps":[
            {"step_id":1,"source":"user","message":"go"},
            {"step_id":2,"source":"agent","message":"two calls","tool_calls":[
                {"tool_call_id":"a","function_name":"bash","arguments":{"cmd":"ls"}},
                {"tool_call_id":"b","function_name":"bash","arguments":{"cmd":"pwd"}}],
             "observation":{"results":[{"source_call_id":"a","content":"x"},{"source_call_id":"b","content":"/app"}]},
             "metrics":{"prompt_tokens":5}},
            {"step_id":3,"source":"agent","message":"none"},
            {"step_id":4,"source":"agent","message":"one","tool_calls":[
                {"tool_call_id":"c","function_name":"read","arguments":{}}]}]}"#;
        let mut docs = Vec::new();
        decode_bytes(
            atif,
            DecodeOptions::full(1 << 20),
            &mut DecodeCtx::new("p.json"),
            &mut |d| docs.push(d),
        )
        .unwrap();
        let doc = &docs[0];
        for table in [Table::Steps, Table::ToolCalls] {
            let mut whole = TableBuilder::new(table, None);
            whole.push_document("p.json", doc, 0);
            let whole = whole.finish();
            let parts: Vec<_> = [0..1, 1..2, 2..3, 3..9]
                .into_iter()
                .map(|r| {
                    let mut b = TableBuilder::new(table, None);
                    b.push_turns("p.json", doc, 0, r);
                    b.finish()
                })
                .collect();
            let joined = arrow::compute::concat_batches(&whole.schema(), &parts).unwrap();
            assert_eq!(joined, whole, "{}", table.name());
        }
    }
}
