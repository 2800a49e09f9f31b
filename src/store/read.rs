//! Reading a pinned store: projected scans with large cells resolved, row
//! counts, and reconstruction of the Storyline documents for export.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Int64Type, TimestampNanosecondType};
use arrow::record_batch::RecordBatch;
use serde_json::Value;

use super::current::Committed;
use super::lance_io::{count_rows, runtime, scan, scan_stream};
use super::object_reader::ObjectReader;
use super::objects::{referenced_ids, resolve};
use super::schema::{dir_name, source_columns, table_schema, VIEWS_STORED_FROM};
use super::views::{as_text, labels_for, physical, stored_column, with_views, Views};
use super::StoreError;
use crate::formats::model::{Storyline, ToolCall, Turn};
use crate::table::Table;
use crate::util::time::format_rfc3339;

/// Rows per batch when whole rows are read to rebuild documents.
const WHOLE_ROWS_PER_BATCH: usize = 1024;

/// Reads one committed snapshot.
#[derive(Debug, Clone)]
pub struct StoreReader {
    /// Where the store lives: a local directory or an `s3://` URL.
    base: String,
    committed: Option<Committed>,
    /// The objects table, shared by the clones of this reader.
    objects: Arc<OnceLock<ObjectReader>>,
}

/// Counts of a store's tables ([`StoreReader::tally`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Distinct (`origin_path`, `run_id`) pairs.
    pub runs: u64,
    /// Rows of `runs`: one per trajectory document.
    pub trajectories: u64,
    /// Rows of `steps`.
    pub steps: u64,
    /// Rows of `tool_calls`.
    pub tool_calls: u64,
}

impl StoreReader {
    /// A reader of `committed` (None: an empty store).
    pub fn open(root: &Path, committed: Option<Committed>) -> Result<Self, StoreError> {
        Ok(Self::at(root.display().to_string(), committed))
    }

    /// A reader of `committed` in the store at `base`, a local directory or
    /// an `s3://bucket/prefix` URL.
    pub fn at(base: String, committed: Option<Committed>) -> Self {
        StoreReader {
            base: base.trim_end_matches('/').to_string(),
            committed,
            objects: Arc::default(),
        }
    }

    /// The layout version of the snapshot (an empty store reads as the
    /// current one).
    fn layout(&self) -> u64 {
        self.committed
            .as_ref()
            .map_or(super::current::STORE_SCHEMA_VERSION, |c| c.schema_version)
    }

    /// True when the derived text views are computed on read: the store's
    /// layout predates keeping them.
    fn derives_views(&self) -> bool {
        self.layout() < VIEWS_STORED_FROM
    }

    fn table(&self, t: Table) -> Option<(String, u64)> {
        let c = self.committed.as_ref()?;
        let v = match t {
            Table::Documents => c.runs_version,
            Table::Steps => c.steps_version,
            Table::ToolCalls => c.tool_calls_version,
            _ => return None,
        };
        Some((
            format!(
                "{}/generations/{}/{}",
                self.base,
                c.table_generation,
                dir_name(t)
            ),
            v,
        ))
    }

    /// What the stored tables hold, counted without building documents:
    /// the rows of `runs` (trajectories), of `steps` and of `tool_calls`, and
    /// the distinct (`origin_path`, `run_id`) pairs of `runs` (Runs). The
    /// stored `run_id` is the one a built document derives, so these are the
    /// counts of [`StoreReader::documents_each`]. Every table's data files
    /// are read (one small column each), so a damaged table fails here as
    /// it does there.
    pub fn tally(&self) -> Result<Tally, StoreError> {
        let mut t = Tally::default();
        let mut runs: std::collections::HashSet<(Option<String>, String)> =
            std::collections::HashSet::new();
        self.scan_each(Table::Documents, &["origin_path", "run_id"], |b| {
            let (Some(origin), Some(run)) = (
                b.column(0).as_string_opt::<i32>(),
                b.column(1).as_string_opt::<i32>(),
            ) else {
                return Err(StoreError::Corrupt(
                    "runs: origin_path or run_id is not text".into(),
                ));
            };
            for i in 0..b.num_rows() {
                let o = (!origin.is_null(i)).then(|| origin.value(i).to_string());
                runs.insert((o, run.value(i).to_string()));
            }
            t.trajectories += b.num_rows() as u64;
            Ok(())
        })?;
        for (table, column, n) in [
            (Table::Steps, "turn_ordinal", &mut t.steps),
            (Table::ToolCalls, "call_index", &mut t.tool_calls),
        ] {
            self.scan_each(table, &[column], |b| -> Result<(), StoreError> {
                *n += b.num_rows() as u64;
                Ok(())
            })?;
        }
        t.runs = runs.len() as u64;
        Ok(t)
    }

    /// The storage position of the last document of each `origin_path`
    /// (the file it was imported from; an empty path is `None`, as
    /// [`StoreReader::documents_each`] builds it), from that one column.
    pub fn origin_ends(&self) -> Result<HashMap<Option<String>, u64>, StoreError> {
        let mut ends = HashMap::new();
        let mut at = 0u64;
        self.scan_each(Table::Documents, &["origin_path"], |b| {
            let Some(origin) = b.column(0).as_string_opt::<i32>() else {
                return Err(StoreError::Corrupt("runs: origin_path is not text".into()));
            };
            for i in 0..b.num_rows() {
                let o = (!origin.is_null(i) && !origin.value(i).is_empty())
                    .then(|| origin.value(i).to_string());
                ends.insert(o, at);
                at += 1;
            }
            Ok(())
        })?;
        Ok(ends)
    }

    /// Rows in a stored table.
    pub fn count(&self, t: Table) -> Result<u64, StoreError> {
        match self.table(t) {
            Some((p, v)) => runtime().block_on(count_rows(&p, v)),
            None => Ok(0),
        }
    }

    /// Read `columns` of a stored table, with large cells resolved and the
    /// derived text views computed from the raw columns they decode. Rows
    /// come in storage order.
    pub fn scan(&self, t: Table, columns: &[&str]) -> Result<Vec<RecordBatch>, StoreError> {
        let derive = self.derives_views();
        let read = physical(t, columns, derive);
        let Some((p, v)) = self.table(t) else {
            let schema = table_schema(t, self.layout());
            let empty = RecordBatch::new_empty(Arc::new(
                schema
                    .project(
                        &read
                            .iter()
                            .filter_map(|c| schema.index_of(c).ok())
                            .collect::<Vec<_>>(),
                    )
                    .map_err(|e| StoreError::Internal(e.to_string()))?,
            ));
            let empty = super::schema::labels_as_text(empty)
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            return Ok(vec![as_text(with_views(t, columns, &empty, derive)?)?]);
        };
        let batches = runtime().block_on(scan(&p, v, &read, None))?;
        self.resolve_objects(batches)?
            .iter()
            .map(|b| as_text(with_views(t, columns, b, derive)?))
            .collect()
    }

    /// Like [`StoreReader::scan`], one batch at a time: memory stays at a
    /// batch, not the table.
    pub fn scan_each<E: From<StoreError>>(
        &self,
        t: Table,
        columns: &[&str],
        each: impl FnMut(RecordBatch) -> Result<(), E>,
    ) -> Result<(), E> {
        self.scan_each_where(t, columns, None, each)
    }

    /// Like [`StoreReader::scan_each`], with a Lance filter expression on
    /// stored columns (only matching rows are decoded in full).
    pub fn scan_each_where<E: From<StoreError>>(
        &self,
        t: Table,
        columns: &[&str],
        filter: Option<&str>,
        each: impl FnMut(RecordBatch) -> Result<(), E>,
    ) -> Result<(), E> {
        self.scan_views_where(t, columns, filter, Views::Text, each)
    }

    /// Like [`StoreReader::scan_each_where`], with the text views of a
    /// store that keeps them as bytes handed on as `views` says:
    /// [`Views::Stored`] for a reader that keeps few of the rows it reads
    /// and checks those ([`crate::table::checked_text`]) and turns its
    /// labels into text itself.
    pub fn scan_views_where<E: From<StoreError>>(
        &self,
        t: Table,
        columns: &[&str],
        filter: Option<&str>,
        views: Views,
        each: impl FnMut(RecordBatch) -> Result<(), E>,
    ) -> Result<(), E> {
        self.scan_rows(t, columns, filter, None, views, each)
    }

    /// [`StoreReader::scan_each_where`] in batches of `rows` whole rows
    /// when given (see [`scan_stream`]).
    fn scan_rows<E: From<StoreError>>(
        &self,
        t: Table,
        columns: &[&str],
        filter: Option<&str>,
        rows: Option<usize>,
        views: Views,
        mut each: impl FnMut(RecordBatch) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some((p, v)) = self.table(t) else {
            return Ok(());
        };
        let derive = self.derives_views();
        let read = physical(t, columns, derive);
        let mut stream = runtime().block_on(scan_stream(&p, v, &read, filter, rows))?;
        let mut emit = |b: RecordBatch| -> Result<(), E> {
            let b = labels_for(b, views)?;
            for r in self.resolve_objects(vec![b])? {
                let b = with_views(t, columns, &r, derive)?;
                each(match views {
                    Views::Text => as_text(b)?,
                    Views::Stored => b,
                })?;
            }
            Ok(())
        };
        if rows.is_some() {
            // Whole rows (export, the index build): one batch at a time.
            while let Some(b) = runtime().block_on(futures::StreamExt::next(&mut stream)) {
                emit(b?)?;
            }
            return Ok(());
        }
        // A column scan is pulled on a thread of its own, up to
        // `BATCHES_AHEAD` batches ahead of the one being resolved: resolving
        // a batch's large cells reads the objects table, and the file scans
        // stopped meanwhile. On tool output with 26 such cells in 1M steps,
        // that wait was a quarter of a LIKE's time (docs/benchmarks.md).
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel(BATCHES_AHEAD);
            scope.spawn(move || {
                while let Some(b) = runtime().block_on(futures::StreamExt::next(&mut stream)) {
                    // The consumer stopped (an error, or enough rows).
                    if tx.send(b).is_err() {
                        return;
                    }
                }
            });
            for b in rx {
                emit(b?)?;
            }
            Ok(())
        })
    }

    fn resolve_objects(&self, batches: Vec<RecordBatch>) -> Result<Vec<RecordBatch>, StoreError> {
        let ids = referenced_ids(&batches);
        if ids.is_empty() {
            return Ok(batches);
        }
        let objects = runtime().block_on(self.object_reader()?.fetch(&ids))?;
        resolve(batches, &objects)
    }

    /// The objects table, opened at the first batch that needs it.
    fn object_reader(&self) -> Result<&ObjectReader, StoreError> {
        if let Some(r) = self.objects.get() {
            return Ok(r);
        }
        let Some(ov) = self.committed.as_ref().and_then(|c| c.objects_version) else {
            return Err(StoreError::Corrupt(
                "rows reference objects but the store has none".into(),
            ));
        };
        let path = format!("{}/objects.lance", self.base);
        let opened = runtime().block_on(ObjectReader::open(&path, ov))?;
        // Two threads may open it at once; either copy serves.
        let _ = self.objects.set(opened);
        Ok(self.objects.get().expect("set above"))
    }

    /// Steps in storage order, projected to `columns`, with one more text
    /// column, `call_output_text`: the decoded text of the results given on
    /// each step's calls themselves (the `tool_calls.result` cells). The
    /// calls are read beside the steps in the same document and step order,
    /// so memory holds one batch of each.
    pub fn scan_steps_with_call_output<E: From<StoreError>>(
        &self,
        columns: &[&str],
        mut each: impl FnMut(RecordBatch) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut read: Vec<&str> = columns.to_vec();
        for k in ["storage_ordinal", "turn_ordinal"] {
            if !read.contains(&k) {
                read.push(k);
            }
        }
        let mut calls = CallOutputs {
            batches: self.batches_where(
                Table::ToolCalls,
                &["storage_ordinal", "turn_ordinal", "result"],
                Some("result IS NOT NULL"),
                Some(WHOLE_ROWS_PER_BATCH),
            )?,
            current: None,
            row: 0,
        };
        // Nearly whole rows of both tables: read as export reads them.
        let rows = Some(WHOLE_ROWS_PER_BATCH);
        self.scan_rows(
            Table::Steps,
            &read,
            None,
            rows,
            Views::Text,
            |b| -> Result<(), E> {
                let (Some(docs), Some(turns)) = (
                    b.column_by_name("storage_ordinal")
                        .and_then(|a| a.as_primitive_opt::<Int64Type>()),
                    b.column_by_name("turn_ordinal")
                        .and_then(|a| a.as_primitive_opt::<Int64Type>()),
                ) else {
                    return Err(StoreError::Corrupt(
                        "steps without storage_ordinal/turn_ordinal".into(),
                    )
                    .into());
                };
                let mut text = arrow::array::StringBuilder::new();
                for r in 0..b.num_rows() {
                    text.append_option(calls.take(docs.value(r), turns.value(r))?);
                }
                let mut fields = Vec::with_capacity(columns.len() + 1);
                let mut arrays: Vec<arrow::array::ArrayRef> = Vec::with_capacity(columns.len() + 1);
                for c in columns {
                    let (f, a) = stored_column(&b, c)?;
                    fields.push(f);
                    arrays.push(a);
                }
                fields.push(arrow::datatypes::Field::new(
                    "call_output_text",
                    DataType::Utf8,
                    true,
                ));
                arrays.push(Arc::new(text.finish()));
                let out =
                    RecordBatch::try_new(Arc::new(arrow::datatypes::Schema::new(fields)), arrays)
                        .map_err(|e| StoreError::Internal(e.to_string()))?;
                each(out)
            },
        )
    }

    /// Whole rows of table `t`, pulled one at a time through a bounded
    /// window: rows of steps and calls are wide (tool output, residuals),
    /// and Lance's default batches and read-ahead would hold hundreds of
    /// MiB of them (an export of the 1M-step benchmark store peaked at
    /// 1 GiB with them, 0.6 GiB with the window, and ran faster).
    fn batches(&self, t: Table, columns: &[&str]) -> Result<Batches<'_>, StoreError> {
        self.batches_where(t, columns, None, Some(WHOLE_ROWS_PER_BATCH))
    }

    /// Batches of `columns` of the rows a Lance filter keeps, of `rows`
    /// rows each (Lance's default when `None`).
    fn batches_where(
        &self,
        t: Table,
        columns: &[&str],
        filter: Option<&str>,
        rows: Option<usize>,
    ) -> Result<Batches<'_>, StoreError> {
        let stream = match self.table(t) {
            Some((p, v)) => Some(runtime().block_on(scan_stream(&p, v, columns, filter, rows))?),
            None => None,
        };
        Ok(Batches {
            reader: self,
            stream,
            ready: std::collections::VecDeque::new(),
        })
    }

    /// Rebuild every document in storage order, handing each to `each` as
    /// soon as its rows have been read: memory holds the documents not yet
    /// complete and a window of rows, not the whole store.
    pub fn documents_each<E: From<StoreError>>(
        &self,
        mut each: impl FnMut(Storyline) -> Result<(), E>,
    ) -> Result<(), E> {
        self.documents_selected(|_| true, |d, _| each(d))
    }

    /// Like [`StoreReader::documents_each`], building only the documents
    /// `keep` accepts. `keep` sees each document once, in storage order,
    /// as its `runs` row gives it (no steps yet); the rows of the others
    /// are read but not decoded, and they reach `each` as that row alone,
    /// with `false`.
    pub fn documents_selected<E: From<StoreError>>(
        &self,
        mut keep: impl FnMut(&Storyline) -> bool,
        mut each: impl FnMut(Storyline, bool) -> Result<(), E>,
    ) -> Result<(), E> {
        // The decoded text views are copies: documents are rebuilt without them.
        let all = |t: Table| -> Vec<String> {
            let cols = t.columns();
            source_columns(t)
                .into_iter()
                .map(|i| cols[i].name.to_string())
                .collect()
        };
        let (runs_cols, steps_cols, calls_cols) = (
            all(Table::Documents),
            all(Table::Steps),
            all(Table::ToolCalls),
        );
        fn refs(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        // `runs` is read as the steps and calls reach its rows: what is held
        // is the documents not yet complete, never the store.
        let mut a = Assembly {
            runs: self.batches(Table::Documents, &refs(&runs_cols))?,
            keep: &mut keep,
            docs: HashMap::new(),
            index: HashMap::new(),
            turns: HashMap::new(),
            skip: Vec::new(),
        };
        let mut steps = self.batches(Table::Steps, &refs(&steps_cols))?;
        let mut calls = self.batches(Table::ToolCalls, &refs(&calls_cols))?;
        // A call row read but not yet attached (its document is still open).
        let mut pending: Option<(usize, i64, Option<ToolCall>)> = None;
        let mut done = 0usize;
        loop {
            let batch = steps.next_batch()?;
            // Documents before `open` have all their steps.
            let open = match &batch {
                Some(b) => {
                    let mut last = done;
                    for r in rows(std::slice::from_ref(b)) {
                        last = last.max(a.add_step(&r)?);
                    }
                    last
                }
                None => a.load_all()?,
            };
            loop {
                let next = match pending.take() {
                    Some(c) => Some(c),
                    None => calls.next_call(&mut a)?,
                };
                let Some((di, ordinal, call)) = next else {
                    break;
                };
                if di >= open {
                    pending = Some((di, ordinal, call));
                    break;
                }
                if let Some(call) = call {
                    a.add_call(di, ordinal, call)?;
                }
            }
            for di in done..open {
                if let Some(d) = a.take(di) {
                    each(d, !a.skip[di])?;
                }
            }
            done = done.max(open);
            if batch.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// Rebuild every document, in storage order.
    pub fn documents(&self) -> Result<Vec<Storyline>, StoreError> {
        let mut docs = Vec::new();
        self.documents_each(|d| -> Result<(), StoreError> {
            docs.push(d);
            Ok(())
        })?;
        Ok(docs)
    }
}

/// Batches a column scan reads ahead of the one whose large cells are
/// being resolved (see `StoreReader::scan_rows`).
const BATCHES_AHEAD: usize = 8;

/// A table read batch by batch (objects resolved per batch).
struct Batches<'a> {
    reader: &'a StoreReader,
    stream: Option<super::lance_io::BatchStream>,
    /// Call rows of the current batch not handed out yet (`None` for a
    /// call of a document not built).
    ready: std::collections::VecDeque<(usize, i64, Option<ToolCall>)>,
}

impl Batches<'_> {
    fn next_batch(&mut self) -> Result<Option<RecordBatch>, StoreError> {
        loop {
            let Some(stream) = &mut self.stream else {
                return Ok(None);
            };
            let Some(b) = runtime().block_on(futures::StreamExt::next(stream)) else {
                self.stream = None;
                return Ok(None);
            };
            let b = labels_for(b?, Views::Text)?;
            if b.num_rows() == 0 {
                continue;
            }
            let mut out = self.reader.resolve_objects(vec![b])?;
            return out.pop().map(as_text).transpose();
        }
    }

    /// The next tool-call row, with its document position.
    fn next_call(
        &mut self,
        a: &mut Assembly<'_, '_>,
    ) -> Result<Option<(usize, i64, Option<ToolCall>)>, StoreError> {
        while self.ready.is_empty() {
            let Some(b) = self.next_batch()? else {
                return Ok(None);
            };
            for r in rows(std::slice::from_ref(&b)) {
                let doc = req(r.int("storage_ordinal"), "storage_ordinal")?;
                let di = a.position(doc, "tool call")?;
                // A call of a document not built is still handed out (not
                // decoded): the caller reads no further ahead of the steps
                // than for any other call, so the `runs` rows read for
                // positions stay as few.
                if a.skip[di] {
                    self.ready.push_back((di, 0, None));
                    continue;
                }
                let (_, ordinal, call) = call_of(&r)?;
                self.ready.push_back((di, ordinal, Some(call)));
            }
        }
        Ok(self.ready.pop_front())
    }
}

/// The `tool_calls.result` cells of a store, read in storage order and
/// handed to the steps they belong to.
struct CallOutputs<'a> {
    batches: Batches<'a>,
    current: Option<RecordBatch>,
    row: usize,
}

impl CallOutputs<'_> {
    /// The text of the results given on the calls of step (`document`
    /// position, `turn`), consuming them. Calls come in the steps' order, so
    /// a call that does not belong to this step belongs to a later one.
    fn take(&mut self, document: i64, turn: i64) -> Result<Option<String>, StoreError> {
        let mut out: Option<String> = None;
        loop {
            if self
                .current
                .as_ref()
                .is_none_or(|b| self.row >= b.num_rows())
            {
                match self.batches.next_batch()? {
                    Some(b) => {
                        self.current = Some(b);
                        self.row = 0;
                    }
                    None => return Ok(out),
                }
                continue;
            }
            let b = self.current.as_ref().expect("checked above");
            let r = Row { b, i: self.row };
            if r.int("storage_ordinal") != Some(document) || r.int("turn_ordinal") != Some(turn) {
                return Ok(out);
            }
            if let Some(t) = r
                .text("result")
                .as_deref()
                .and_then(crate::table::call_output_of)
            {
                let o = out.get_or_insert_with(String::new);
                if !o.is_empty() {
                    o.push('\n');
                }
                o.push_str(&t);
            }
            self.row += 1;
        }
    }
}

/// A column accessor by name.
struct Row<'a> {
    b: &'a RecordBatch,
    i: usize,
}

impl Row<'_> {
    fn col(&self, name: &str) -> Option<&dyn Array> {
        let c = self.b.column_by_name(name)?;
        (!c.is_null(self.i)).then_some(c.as_ref())
    }
    fn text(&self, name: &str) -> Option<String> {
        self.col(name)
            .map(|c| c.as_string::<i32>().value(self.i).to_string())
    }
    fn int(&self, name: &str) -> Option<i64> {
        self.col(name)
            .map(|c| c.as_primitive::<Int64Type>().value(self.i))
    }
    fn boolean(&self, name: &str) -> Option<bool> {
        self.col(name).map(|c| c.as_boolean().value(self.i))
    }
    fn json(&self, name: &str) -> Result<Option<Value>, StoreError> {
        match self.text(name) {
            None => Ok(None),
            Some(t) => serde_json::from_str(&t)
                .map(Some)
                .map_err(|e| StoreError::Corrupt(format!("column {name}: {e}"))),
        }
    }
    fn typed<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<Option<T>, StoreError> {
        match self.json(name)? {
            None => Ok(None),
            Some(v) => serde_json::from_value(v)
                .map(Some)
                .map_err(|e| StoreError::Corrupt(format!("column {name}: {e}"))),
        }
    }
    /// A timestamp as given: the raw column when present, else RFC 3339.
    fn ts(&self, name: &str, raw: &str) -> Result<Option<Value>, StoreError> {
        if let Some(v) = self.json(raw)? {
            return Ok(Some(v));
        }
        Ok(self.col(name).map(|c| {
            let ns = match c.data_type() {
                DataType::Timestamp(..) => {
                    c.as_primitive::<TimestampNanosecondType>().value(self.i)
                }
                _ => 0,
            };
            Value::String(format_rfc3339(ns))
        }))
    }
}

fn rows(batches: &[RecordBatch]) -> impl Iterator<Item = Row<'_>> {
    batches
        .iter()
        .flat_map(|b| (0..b.num_rows()).map(move |i| Row { b, i }))
}

fn req<T>(v: Option<T>, what: &str) -> Result<T, StoreError> {
    v.ok_or_else(|| StoreError::Corrupt(format!("missing {what}")))
}

/// A document (without steps) from its `runs` row, with its position.
fn run_doc(r: &Row<'_>) -> Result<(i64, Storyline), StoreError> {
    let mut d = Storyline::new(
        req(r.text("session_id"), "session_id")?,
        req(r.text("agent_id"), "agent_id")?,
    );
    d.schema_version = req(r.text("schema_version"), "schema_version")?;
    d.origin = r.typed("origin")?;
    if r.boolean("run_id_explicit") == Some(true) {
        d.run = r.text("run_id");
    }
    d.trajectory = r.text("trajectory_id");
    d.attempt_id = r.text("attempt_id");
    d.agent.name = r.text("agent_name");
    d.agent.ver = r.text("agent_version");
    d.agent.model = r.text("agent_model_name");
    d.agent.tools = r.json("agent_tool_definitions")?;
    d.agent.extra = r.json("agent_extra")?;
    d.parent = r.typed("parent")?;
    d.children = r.typed("children")?;
    d.notes = r.text("notes");
    d.task = r.typed("task")?;
    d.prompt = r.typed("prompt")?;
    d.started_at = r.ts("started_at", "started_at_raw")?;
    d.finished_at = r.ts("finished_at", "finished_at_raw")?;
    d.final_metrics = r.json("final_metrics")?;
    d.continued_trajectory_ref = r.text("continued_trajectory_ref");
    d.extra = r.json("extra")?;
    d.meta = r.json("meta")?;
    d.unknown_fields = r.json("unknown_fields")?;
    d.unknown_key_counts = r.json("unknown_key_counts")?;
    d.origin_path = r.text("origin_path").filter(|p| !p.is_empty());
    Ok((req(r.int("storage_ordinal"), "storage_ordinal")?, d))
}

/// A step from its `steps` row: (document position, turn ordinal, turn).
fn step_turn(r: &Row<'_>) -> Result<(i64, i64, Turn), StoreError> {
    let doc = req(r.int("storage_ordinal"), "storage_ordinal")?;
    let msg = match r.text("message_kind").as_deref() {
        Some("text") => Value::String(r.text("message_value").unwrap_or_default()),
        _ => r.json("message_json")?.unwrap_or(Value::Null),
    };
    let mut t = Turn::new(
        req(r.int("step_id"), "step_id")?,
        req(r.text("step_source"), "step_source")?,
        msg,
    );
    t.kind = r.text("kind");
    t.ts = r.ts("timestamp", "timestamp_raw")?;
    t.model = r.text("model_name");
    t.effort = r.json("reasoning_effort")?;
    t.reason = r.text("reasoning_content");
    t.tool_calls = (r.boolean("had_tool_calls") == Some(true)).then(Vec::new);
    t.observation = r.json("observation")?;
    t.metrics = r.json("metrics")?;
    t.nllm = r.int("llm_call_count");
    t.copied = r.boolean("is_copied_context");
    t.latency_ms = r.int("latency_ms");
    t.ttft_ms = r.int("ttft_ms");
    t.extra = r.json("extra")?;
    t.env = r.typed("env")?;
    t.prompt = r.typed("prompt_json")?;
    t.finished_at = r.ts("finished_at", "finished_at_raw")?;
    let ordinal = req(r.int("turn_ordinal"), "turn_ordinal")?;
    Ok((doc, ordinal, t))
}

/// A tool call from its `tool_calls` row: (document position, turn
/// ordinal, call).
fn call_of(r: &Row<'_>) -> Result<(i64, i64, ToolCall), StoreError> {
    let doc = req(r.int("storage_ordinal"), "storage_ordinal")?;
    let ordinal = req(r.int("turn_ordinal"), "turn_ordinal")?;
    let text = req(r.text("arguments"), "arguments")?;
    let args: Value = serde_json::from_str(&text)
        .map_err(|e| StoreError::Corrupt(format!("column arguments: {e}")))?;
    // The column keeps OpenAI argument strings as they were written: text
    // that is not the canonical JSON of its value is that original text.
    let args_raw = serde_json::to_string(&args)
        .map_or(true, |t| t != text)
        .then_some(text);
    let call = ToolCall {
        tcid: req(r.text("tool_call_id"), "tool_call_id")?,
        func: req(r.text("function_name"), "function_name")?,
        args,
        result: r.json("result")?,
        duration_ms: r.int("duration_ms"),
        extra: r.json("extra")?,
        kind: r.text("kind"),
        response: r.typed("response")?,
        args_raw,
    };
    Ok((doc, ordinal, call))
}

#[cfg(test)]
thread_local! {
    /// The most documents an assembly on this thread held at once.
    pub(crate) static MOST_HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Documents being reassembled: runs rows as they are reached, then steps and calls
/// attached by document position (ids may repeat) and turn ordinal.
struct Assembly<'r, 'k> {
    /// The `runs` rows not read yet.
    runs: Batches<'r>,
    /// Which documents to build (see [`StoreReader::documents_selected`]).
    keep: &'k mut dyn FnMut(&Storyline) -> bool,
    /// Documents read and not handed out yet, by position.
    docs: HashMap<usize, Storyline>,
    /// Position by storage ordinal, of every document read.
    index: HashMap<i64, usize>,
    /// Turn positions by ordinal, per document not yet handed out.
    turns: HashMap<usize, HashMap<i64, usize>>,
    /// Documents whose steps and calls are not decoded, by position.
    skip: Vec<bool>,
}

impl Assembly<'_, '_> {
    /// Read the next batch of `runs`; false at its end.
    fn load_batch(&mut self) -> Result<bool, StoreError> {
        let Some(b) = self.runs.next_batch()? else {
            return Ok(false);
        };
        for r in rows(std::slice::from_ref(&b)) {
            let (ordinal, d) = run_doc(&r)?;
            let at = self.skip.len();
            if self.index.insert(ordinal, at).is_some() {
                return Err(StoreError::Corrupt(format!(
                    "two documents at position {ordinal}"
                )));
            }
            self.skip.push(!(self.keep)(&d));
            self.docs.insert(at, d);
        }
        #[cfg(test)]
        MOST_HELD.with(|m| m.set(m.get().max(self.docs.len())));
        Ok(true)
    }

    /// Read the rest of `runs`; returns the number of documents.
    fn load_all(&mut self) -> Result<usize, StoreError> {
        while self.load_batch()? {}
        Ok(self.skip.len())
    }

    /// The position of the document at storage ordinal `doc`, reading
    /// `runs` up to it.
    fn position(&mut self, doc: i64, what: &str) -> Result<usize, StoreError> {
        loop {
            if let Some(&at) = self.index.get(&doc) {
                return Ok(at);
            }
            if !self.load_batch()? {
                return Err(StoreError::Corrupt(format!(
                    "{what} of no document (position {doc})"
                )));
            }
        }
    }

    fn doc(&mut self, di: usize) -> Result<&mut Storyline, StoreError> {
        self.docs.get_mut(&di).ok_or_else(|| {
            StoreError::Corrupt("rows of one document are not contiguous in storage order".into())
        })
    }

    /// Attach a step (unless its document is skipped); returns its
    /// document's position.
    fn add_step(&mut self, r: &Row<'_>) -> Result<usize, StoreError> {
        let doc = req(r.int("storage_ordinal"), "storage_ordinal")?;
        let di = self.position(doc, "step")?;
        if self.skip[di] {
            return Ok(di);
        }
        let (_, ordinal, t) = step_turn(r)?;
        let d = self.doc(di)?;
        let at = d.turns.len();
        d.turns.push(t);
        self.turns.entry(di).or_default().insert(ordinal, at);
        Ok(di)
    }

    /// Attach a tool call.
    fn add_call(&mut self, di: usize, ordinal: i64, call: ToolCall) -> Result<(), StoreError> {
        let ti = self
            .turns
            .get(&di)
            .and_then(|m| m.get(&ordinal))
            .copied()
            .ok_or_else(|| StoreError::Corrupt("tool call of an unknown step".into()))?;
        self.doc(di)?.turns[ti]
            .tool_calls
            .get_or_insert_with(Vec::new)
            .push(call);
        Ok(())
    }

    /// Hand out document `di` (it gets no more rows).
    fn take(&mut self, di: usize) -> Option<Storyline> {
        self.turns.remove(&di);
        self.docs.remove(&di)
    }
}
