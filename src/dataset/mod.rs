//! Mounted Datasets: the relations `sources`, `runs`, `trajectories`,
//! `steps`, `tool_calls`, `judgments` and `events` of each mount, served to
//! the SQL engine (this module implements [`crate::sql::Provider`]).
//!
//! Each mount is pinned once ([`CatalogSnapshot`]); scans decode its Sources
//! in parallel (Rayon), build only the requested columns, and apply the scan
//! filter in the worker. A Source that fails is skipped with a warning in
//! report mode and fails the query in strict mode; a Source that changes
//! while read always fails it.

use std::sync::Mutex;

use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use rayon::prelude::*;

use crate::catalog::read::{read_source, ReadFailure};
use crate::catalog::{
    CatalogError, CatalogSnapshot, DatasetUri, DiscoveryLimits, Source, SourceStatus,
};
use crate::formats::atif::Projection;
use crate::formats::DecodeOptions;
use crate::sql::{Provider, SqlError};
use crate::table::{Table, TableBuilder};

/// Rows per output batch.
pub const BATCH_ROWS: usize = 8192;

/// One mounted Dataset.
#[derive(Debug, Clone)]
pub struct Mount {
    /// SQL schema name.
    pub name: String,
    /// The pinned Sources.
    pub snapshot: CatalogSnapshot,
}

/// A Source that was read incompletely in report mode.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceProblem {
    /// The Source.
    pub source_path: String,
    /// Stable code of the problem.
    pub code: String,
    /// `error` (skipped) or `degraded` (read, with problems).
    pub status: String,
    /// What was wrong.
    pub detail: String,
    /// The warning printed.
    pub message: String,
}

/// The mounts of one command, with the error policy for bad Sources.
pub struct Mounts {
    mounts: Vec<Mount>,
    strict: bool,
    max_document_bytes: u64,
    warnings: Mutex<Vec<(String, String)>>,
    problems: Mutex<Vec<SourceProblem>>,
}

impl std::fmt::Debug for Mounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounts")
            .field("mounts", &self.mounts)
            .field("strict", &self.strict)
            .finish_non_exhaustive()
    }
}

/// All relation names, in the order `DESCRIBE`-style listings show them.
pub const RELATIONS: [&str; 7] = [
    "sources",
    "runs",
    "trajectories",
    "steps",
    "tool_calls",
    "events",
    "judgments",
];

impl Mounts {
    /// Pin each (name, URI) pair.
    pub fn open(
        specs: &[(String, DatasetUri)],
        limits: DiscoveryLimits,
        strict: bool,
        max_document_bytes: u64,
    ) -> Result<Self, CatalogError> {
        let mut mounts = Vec::with_capacity(specs.len());
        for (name, uri) in specs {
            mounts.push(Mount {
                name: name.clone(),
                snapshot: CatalogSnapshot::open(uri, limits, false)?,
            });
        }
        Ok(Mounts {
            mounts,
            strict,
            max_document_bytes,
            warnings: Mutex::new(Vec::new()),
            problems: Mutex::new(Vec::new()),
        })
    }

    /// Mounts over snapshots already pinned.
    pub fn from_mounts(mounts: Vec<Mount>, strict: bool, max_document_bytes: u64) -> Self {
        Mounts {
            mounts,
            strict,
            max_document_bytes,
            warnings: Mutex::new(Vec::new()),
            problems: Mutex::new(Vec::new()),
        }
    }

    /// The mounts.
    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// Warnings collected while scanning: (code, message).
    pub fn take_warnings(&self) -> Vec<(String, String)> {
        let mut w = self
            .warnings
            .lock()
            .map(|mut g| std::mem::take(&mut *g))
            .unwrap_or_default();
        w.sort();
        w.dedup();
        w
    }

    fn mount(&self, name: &str) -> Option<&Mount> {
        self.mounts.iter().find(|m| m.name == name)
    }

    /// A Source that could not be read: the query fails when the failure is
    /// fatal or reads are strict; otherwise the Source is skipped with a
    /// warning and contributes no rows.
    fn skip_or_fail(&self, s: &Source, f: ReadFailure) -> Result<Vec<RecordBatch>, SqlError> {
        match f {
            ReadFailure::Fatal(e) => Err(SqlError::Source {
                code: e.code(),
                message: e.to_string(),
            }),
            ReadFailure::Source(e) if self.strict => Err(SqlError::Source {
                code: e.code(),
                message: e.to_string(),
            }),
            ReadFailure::Source(e) => {
                self.problem(s, e.code(), true, e.detail());
                Ok(Vec::new())
            }
        }
    }

    /// A Source read incompletely (skipped or degraded) in report mode: a
    /// warning now, and a record a cached result can replay later (a search
    /// served by an index built before must say the same).
    fn problem(&self, s: &Source, code: &str, skipped: bool, detail: String) {
        let msg = if skipped {
            format!("skipped {}: {detail}", s.source_path)
        } else {
            format!("{}: {detail}", s.source_path)
        };
        if let Ok(mut g) = self.problems.lock() {
            if g.len() < 10_000 {
                g.push(SourceProblem {
                    source_path: s.source_path.clone(),
                    code: code.to_string(),
                    status: if skipped { "error" } else { "degraded" }.into(),
                    detail,
                    message: msg.clone(),
                });
            }
        }
        self.warn(code, msg);
    }

    /// The Sources read incompletely since the last call (report mode).
    pub fn take_problems(&self) -> Vec<SourceProblem> {
        self.problems
            .lock()
            .map(|mut g| std::mem::take(&mut *g))
            .unwrap_or_default()
    }

    /// Whether reads are strict (`--errors strict`).
    pub fn strict(&self) -> bool {
        self.strict
    }

    fn warn(&self, code: &str, msg: String) {
        if let Ok(mut g) = self.warnings.lock() {
            // Bounded: a long-lived set of mounts (the server's) is scanned
            // many times between refreshes.
            if g.len() < 10_000 {
                g.push((code.to_string(), msg));
            }
        }
    }
}

/// Schema of the `sources` relation.
pub fn sources_schema() -> SchemaRef {
    std::sync::Arc::new(Schema::new(vec![
        Field::new("source_path", DataType::Utf8, false),
        Field::new("format", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("layout", DataType::Utf8, true),
        Field::new("snapshot_ref", DataType::Utf8, false),
        Field::new("read_consistency", DataType::Utf8, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("reason_code", DataType::Utf8, true),
        Field::new("reason", DataType::Utf8, true),
        Field::new("size_bytes", DataType::Int64, false),
        Field::new("capabilities", DataType::Utf8, false),
    ]))
}

/// Columns of `sources` that hold JSON text.
pub(crate) const SOURCE_JSON_COLUMNS: &[&str] = &["capabilities"];

/// Schema of the `events` relation (canonical captured events).
pub fn events_schema() -> SchemaRef {
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    std::sync::Arc::new(Schema::new(vec![
        Field::new("source_path", DataType::Utf8, false),
        Field::new("seq", DataType::Int64, false),
        Field::new("event_id", DataType::Utf8, true),
        Field::new("timestamp", ts, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("agent_id", DataType::Utf8, true),
        Field::new("run_id", DataType::Utf8, true),
        Field::new("session_id", DataType::Utf8, true),
        Field::new("call_id", DataType::Utf8, true),
        Field::new("trace_id", DataType::Utf8, true),
        Field::new("parent_call_id", DataType::Utf8, true),
        Field::new("model", DataType::Utf8, true),
        Field::new("payload_json", DataType::Utf8, false),
        Field::new("duplicate_count", DataType::Int64, false),
    ]))
}

/// Columns of `events` that hold JSON text (the captured record).
pub(crate) const EVENT_JSON_COLUMNS: &[&str] = &["payload_json"];

/// (name, type, nullable, description) of every column of a relation.
pub fn describe_relation(relation: &str) -> Vec<(String, String, bool, String)> {
    if let Some(t) = Table::from_name(relation) {
        return t
            .columns()
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.ty.sql_name().to_string(),
                    c.nullable,
                    c.doc.to_string(),
                )
            })
            .collect();
    }
    let no_json: &[&str] = &[];
    let (schema, docs, json): (SchemaRef, &[&str], &[&str]) = match relation {
        "sources" => (sources_schema(), SOURCE_DOCS, SOURCE_JSON_COLUMNS),
        _ => (events_schema(), EVENT_DOCS, no_json),
    };
    schema
        .fields()
        .iter()
        .zip(docs)
        .map(|(f, d)| {
            // JSON text is TEXT to Arrow; DESCRIBE names it as the entity
            // tables do.
            let ty = if json.contains(&f.name().as_str()) {
                "JSON"
            } else {
                crate::sql::value::type_name(f.data_type())
            };
            (
                f.name().clone(),
                ty.to_string(),
                f.is_nullable(),
                (*d).to_string(),
            )
        })
        .collect()
}

const SOURCE_DOCS: &[&str] = &[
    "Dataset-relative path of the Source",
    "Format: atif, actf, openai-messages, storyline, storyline-lance, events-lance, unknown",
    "file or store",
    "JSON layout of a file: document, array or lines",
    "The pinned version (file fingerprint, store table versions)",
    "How the pin is enforced: fingerprint, native or conditional",
    "ready, degraded or error (as found by discovery)",
    "Stable code of the problem, when not ready",
    "Sanitised description of the problem",
    "Size in bytes",
    "What the Source serves, as JSON: relations (the relations it contributes rows to), writable, history (earlier versions readable)",
];

const EVENT_DOCS: &[&str] = &[
    "Dataset-relative path of the events store",
    "Producer sequence number",
    "Event id",
    "Event time (UTC)",
    "Event kind (http.request, http.response, …)",
    "Producing component",
    "Agent id",
    "Run id",
    "Session id",
    "Call id pairing a request with its response",
    "Trace id",
    "Parent call id",
    "Model",
    "The complete event record as JSON",
    "Further stored copies of this event_id (capture is at-least-once; rows are deduplicated)",
];

/// Columns computable from a skeleton read (no message bodies, metrics or
/// extras): reading only these lets typed readers skip the heavy payloads.
fn skeleton_safe(table: Table, column: &str) -> bool {
    const COMMON: &[&str] = &[
        "source_path",
        "origin_path",
        "document_id",
        "storage_ordinal",
        "run_id",
        "session_id",
    ];
    if COMMON.contains(&column) {
        return true;
    }
    let safe: &[&str] = match table {
        Table::Trajectories | Table::Documents => &[
            "run_id_explicit",
            "trajectory_id",
            "attempt_id",
            "format",
            "agent_id",
            "agent_name",
            "agent_version",
            "agent_model_name",
            "model_name",
            "parent_document_id",
            "parent_tool_call_id",
            "parent_step_id",
            "started_at",
            "finished_at",
            "first_step_at",
            "last_step_at",
            "step_count",
            "user_step_count",
            "agent_step_count",
            "tool_call_count",
            "continued_trajectory_ref",
            "agent_tool_definitions",
            "agent_extra",
            "children",
            "origin",
            "parent",
            "schema_version",
            "started_at_raw",
            "finished_at_raw",
        ],
        // Grouped from `trajectories` rows: see `scan_runs`.
        Table::Runs => return false,
        Table::Steps => &[
            "step_id",
            "turn_ordinal",
            "timestamp",
            "step_source",
            "kind",
            "effective_kind",
            "model_name",
            "tool_call_count",
            "llm_call_count",
            "is_copied_context",
            "had_tool_calls",
            "timestamp_raw",
            "finished_at",
            "finished_at_raw",
        ],
        Table::ToolCalls => &[
            "step_id",
            "turn_ordinal",
            "call_index",
            "tool_call_id",
            "function_name",
            "timestamp",
            "status",
            "exit_code",
            "kind",
            "response",
        ],
        Table::Judgments => return true,
    };
    safe.contains(&column)
}

impl Provider for Mounts {
    fn datasets(&self) -> Vec<String> {
        self.mounts.iter().map(|m| m.name.clone()).collect()
    }

    fn relation_names(&self) -> Vec<&'static str> {
        RELATIONS.to_vec()
    }

    fn relation(&self, dataset: &str, relation: &str) -> Option<SchemaRef> {
        self.mount(dataset)?;
        match relation {
            "sources" => Some(sources_schema()),
            "events" => Some(events_schema()),
            other => Table::from_name(other).map(Table::schema),
        }
    }

    fn is_entity(&self, relation: &str) -> bool {
        relation != "sources"
    }

    fn scan(
        &self,
        dataset: &str,
        relation: &str,
        columns: &[usize],
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        _limit: Option<usize>,
        check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        let mount = self
            .mount(dataset)
            .ok_or_else(|| SqlError::UnknownRelation {
                name: dataset.to_string(),
                hint: String::new(),
            })?;
        match relation {
            "sources" => {
                let full = sources_batch(&mount.snapshot.sources)?;
                let b = full.project(columns)?;
                Ok(vec![post(b)?])
            }
            "events" => self.scan_events(mount, columns, post),
            other => {
                let table = Table::from_name(other).ok_or_else(|| SqlError::UnknownRelation {
                    name: other.to_string(),
                    hint: String::new(),
                })?;
                self.scan_documents(mount, table, columns, &|_| true, None, None, post, check)
            }
        }
    }
}

impl Mounts {
    #[allow(clippy::too_many_arguments)]
    fn scan_documents(
        &self,
        mount: &Mount,
        table: Table,
        columns: &[usize],
        only: &(dyn Fn(&Source) -> bool + Sync),
        store_filter: Option<&str>,
        call_output: Option<&'static str>,
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        if table == Table::Runs {
            return self.scan_runs(mount, columns, only, post, check);
        }
        let cols = table.columns();
        let skeleton =
            call_output.is_none() && columns.iter().all(|&i| skeleton_safe(table, cols[i].name));
        let opts = DecodeOptions {
            max_document_bytes: self.max_document_bytes,
            projection: if skeleton {
                Projection::Skeleton
            } else {
                Projection::Full
            },
        };
        let readable: Vec<&Source> = mount
            .snapshot
            .sources
            .iter()
            .filter(|s| {
                if !only(s) {
                    return false;
                }
                if s.status == SourceStatus::Error
                    && s.format == crate::formats::SourceFormat::Unknown
                {
                    // Not readable at all: said once, never silently left out.
                    if !self.strict {
                        let r = s.reason.as_ref();
                        self.problem(
                            s,
                            r.map_or("PC-CAT-009", |r| r.code),
                            true,
                            r.map_or_else(|| "not readable".into(), |r| r.message.clone()),
                        );
                    }
                    return false;
                }
                true
            })
            .collect();
        if self.strict {
            if let Some(s) = mount
                .snapshot
                .sources
                .iter()
                .filter(|s| only(s))
                .find(|s| s.status != SourceStatus::Ready)
            {
                let r = s.reason.clone();
                return Err(SqlError::Source {
                    code: "PC-CAT-010",
                    message: format!(
                        "Source `{}` is not ready: [{}] {} (--errors strict)",
                        s.source_path,
                        r.as_ref().map_or("", |r| r.code),
                        r.as_ref().map_or(String::new(), |r| r.message.clone())
                    ),
                });
            }
        }
        let remote = readable.iter().any(|s| s.object.is_some());
        let results: Vec<Result<Vec<RecordBatch>, SqlError>> =
            crate::util::rt::on_pool(remote, || {
                readable
                    .par_iter()
                    .map(|s| {
                        check()?;
                        if s.format == crate::formats::SourceFormat::StorylineLance
                            && matches!(
                                table,
                                Table::Trajectories | Table::Steps | Table::ToolCalls
                            )
                        {
                            if let Some(name) = call_output {
                                return self.scan_store_call_output(s, columns, name, post);
                            }
                            return self.scan_store(s, table, columns, store_filter, post);
                        }
                        let mut builder = TableBuilder::new(table, Some(columns));
                        if let Some(name) = call_output {
                            builder = builder.with_extra(name, crate::table::step_call_output);
                        }
                        let mut out = Vec::new();
                        let mut ordinal = 0usize;
                        let mut err: Option<SqlError> = None;
                        let read = read_source(s, opts, &mut |doc| {
                            if err.is_some() {
                                return;
                            }
                            builder.push_document(&s.source_path, doc, ordinal);
                            ordinal += 1;
                            if builder.len() >= BATCH_ROWS {
                                match post(builder.finish()) {
                                    Ok(b) => out.push(b),
                                    Err(e) => err = Some(e),
                                }
                            }
                        });
                        if let Some(e) = err {
                            return Err(e);
                        }
                        match read {
                            Ok(r) => {
                                if let Some(d) = r.diagnostics.iter().find(|d| d.degrades()) {
                                    // Read, but not as given: strict refuses it.
                                    if self.strict {
                                        return Err(SqlError::Source {
                                            code: d.code,
                                            message: format!(
                                                "Source `{}` is degraded: {}: {} (--errors strict)",
                                                s.source_path, d.pointer, d.message
                                            ),
                                        });
                                    }
                                    self.problem(
                                        s,
                                        d.code,
                                        false,
                                        format!("{}: {}", d.pointer, d.message),
                                    );
                                }
                            }
                            Err(f) => return self.skip_or_fail(s, f),
                        }
                        if !builder.is_empty() {
                            out.push(post(builder.finish())?);
                        }
                        Ok(out)
                    })
                    .collect()
            });
        let mut all = Vec::new();
        for r in results {
            all.extend(r?);
        }
        if all.is_empty() {
            let b = TableBuilder::new(table, Some(columns));
            all.push(RecordBatch::new_empty(b.schema()));
        }
        Ok(all)
    }
}

impl Mounts {
    /// The `runs` relation: `trajectories` rows of the Sources `only`
    /// accepts, grouped into Runs. Columns no requested run column needs
    /// and that would make the scan decode step payloads (tokens, cost,
    /// JSON parts) are left NULL before grouping.
    fn scan_runs(
        &self,
        mount: &Mount,
        columns: &[usize],
        only: &(dyn Fn(&Source) -> bool + Sync),
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        let runs = Table::Runs.columns();
        let wanted: Vec<&str> = columns.iter().map(|&i| runs[i].name).collect();
        let needed =
            |input: &str| skeleton_safe(Table::Trajectories, input) || wanted.contains(&input);
        let traj = Table::Trajectories.columns();
        let read: Vec<usize> = crate::table::RUN_INPUTS
            .iter()
            .filter(|c| needed(c))
            .map(|c| {
                Table::Trajectories
                    .index_of(c)
                    .ok_or_else(|| SqlError::Internal(format!("no trajectories column {c}")))
            })
            .collect::<Result<_, _>>()?;
        let docs = self.scan_documents(
            mount,
            Table::Trajectories,
            &read,
            only,
            None,
            None,
            &|b| Ok(b),
            check,
        )?;
        let inputs = std::sync::Arc::new(Schema::new(
            crate::table::RUN_INPUTS
                .iter()
                .map(|c| {
                    let d = &traj[Table::Trajectories.index_of(c).expect("checked above")];
                    Field::new(d.name, d.ty.arrow(), true)
                })
                .collect::<Vec<_>>(),
        ));
        let full: Vec<RecordBatch> = docs
            .iter()
            .map(|b| {
                let arrays = inputs
                    .fields()
                    .iter()
                    .map(|f| match b.column_by_name(f.name()) {
                        Some(a) => a.clone(),
                        None => arrow::array::new_null_array(f.data_type(), b.num_rows()),
                    })
                    .collect();
                RecordBatch::try_new(inputs.clone(), arrays)
            })
            .collect::<Result<_, _>>()?;
        let grouped = crate::table::group_runs(&full)?;
        Ok(vec![post(grouped.project(columns)?)?])
    }

    /// Scan `columns` (by name) of an entity table over the Sources of mount
    /// `dataset` that `only` accepts. `post` sees every batch in the worker
    /// that produced it, one Source at a time and in order within a Source.
    pub fn scan_sources(
        &self,
        dataset: &str,
        table: Table,
        columns: &[&str],
        only: &(dyn Fn(&Source) -> bool + Sync),
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        self.scan_sources_where(dataset, table, columns, only, None, post, check)
    }

    /// [`Mounts::scan_sources`] with a Lance filter expression that stores
    /// apply while scanning (file Sources ignore it: `post` must still keep
    /// only the rows wanted).
    #[allow(clippy::too_many_arguments)]
    pub fn scan_sources_where(
        &self,
        dataset: &str,
        table: Table,
        columns: &[&str],
        only: &(dyn Fn(&Source) -> bool + Sync),
        store_filter: Option<&str>,
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        let mount = self
            .mount(dataset)
            .ok_or_else(|| SqlError::UnknownRelation {
                name: dataset.to_string(),
                hint: String::new(),
            })?;
        let cols = table.columns();
        let idx = columns
            .iter()
            .map(|n| {
                cols.iter()
                    .position(|c| c.name == *n)
                    .ok_or_else(|| SqlError::Internal(format!("no column {n} in {}", table.name())))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.scan_documents(mount, table, &idx, only, store_filter, None, post, check)
    }

    /// Steps (`columns` by name) of the Sources `only` accepts, each batch
    /// with one more text column `name`: the decoded text of results given
    /// on the step's calls themselves, which the full-text index searches
    /// with the observation.
    pub fn scan_steps_with_call_output(
        &self,
        dataset: &str,
        columns: &[&str],
        name: &'static str,
        only: &(dyn Fn(&Source) -> bool + Sync),
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        let mount = self
            .mount(dataset)
            .ok_or_else(|| SqlError::UnknownRelation {
                name: dataset.to_string(),
                hint: String::new(),
            })?;
        let cols = Table::Steps.columns();
        let idx = columns
            .iter()
            .map(|n| {
                cols.iter()
                    .position(|c| c.name == *n)
                    .ok_or_else(|| SqlError::Internal(format!("no column {n} in steps")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.scan_documents(
            mount,
            Table::Steps,
            &idx,
            only,
            None,
            Some(name),
            post,
            &|| Ok(()),
        )
    }

    /// [`Mounts::scan_steps_with_call_output`] for one store.
    fn scan_store_call_output(
        &self,
        s: &Source,
        columns: &[usize],
        name: &'static str,
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        let store = match crate::catalog::read::open_store(s) {
            Ok(st) => st,
            Err(f) => return self.skip_or_fail(s, f),
        };
        let reader = match store.reader() {
            Ok(r) => r,
            Err(e) => return self.skip_or_fail(s, crate::catalog::read::store_failure(s, &e)),
        };
        let cols = Table::Steps.columns();
        let stored: Vec<&str> = columns
            .iter()
            .filter(|&&i| i != 0)
            .map(|&i| cols[i].name)
            .collect();
        let mut schema_fields: Vec<Field> = TableBuilder::new(Table::Steps, Some(columns))
            .schema()
            .fields()
            .iter()
            .map(|f| (**f).clone())
            .collect();
        schema_fields.push(Field::new(name, DataType::Utf8, true));
        let schema: SchemaRef = std::sync::Arc::new(Schema::new(schema_fields));
        let mut out = Vec::new();
        let scanned = reader.scan_steps_with_call_output(&stored, |b| -> Result<(), ScanError> {
            let n = b.num_rows();
            let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len() + 1);
            let mut from_store = 0usize;
            for &i in columns {
                if i == 0 {
                    arrays.push(std::sync::Arc::new(StringArray::from_iter_values(
                        std::iter::repeat_n(s.source_path.as_str(), n),
                    )));
                } else {
                    arrays.push(b.column(from_store).clone());
                    from_store += 1;
                }
            }
            arrays.push(b.column(b.num_columns() - 1).clone());
            let batch = RecordBatch::try_new(schema.clone(), arrays)?;
            out.push(post(batch)?);
            Ok(())
        });
        match scanned {
            Ok(()) => Ok(out),
            Err(ScanError::Store(e)) => {
                self.skip_or_fail(s, crate::catalog::read::store_failure(s, &e))
            }
            Err(ScanError::Sql(e)) => Err(e),
        }
    }

    /// Read stored columns of a store table natively, adding `source_path`.
    fn scan_store(
        &self,
        s: &Source,
        table: Table,
        columns: &[usize],
        store_filter: Option<&str>,
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        let store = match crate::catalog::read::open_store(s) {
            Ok(st) => st,
            Err(f) => return self.skip_or_fail(s, f),
        };
        let cols = table.columns();
        let stored: Vec<&str> = columns
            .iter()
            .filter(|&&i| i != 0)
            .map(|&i| cols[i].name)
            .collect();
        let reader = match store.reader() {
            Ok(r) => r,
            Err(e) => return self.skip_or_fail(s, crate::catalog::read::store_failure(s, &e)),
        };
        // A store's `trajectories` rows are its documents table: the same
        // columns, with each time falling back to the steps' one.
        let phys = if table == Table::Trajectories {
            Table::Documents
        } else {
            table
        };
        let fallback = |c: &str| match (phys, c) {
            (Table::Documents, "started_at") => Some("first_step_at"),
            (Table::Documents, "finished_at") => Some("last_step_at"),
            _ => None,
        };
        let mut stored = stored;
        for c in stored.clone() {
            if let Some(f) = fallback(c) {
                if !stored.contains(&f) {
                    stored.push(f);
                }
            }
        }
        // Lance needs at least one column; read one when only source_path is asked for.
        let read_cols: Vec<&str> = if stored.is_empty() {
            // The first non-null integer column is the cheapest to decode.
            let first_int = cols
                .iter()
                .skip(1)
                .find(|c| !c.nullable && c.ty.arrow() == arrow::datatypes::DataType::Int64);
            vec![first_int.map_or("document_id", |c| c.name)]
        } else {
            stored.clone()
        };
        let schema = TableBuilder::new(table, Some(columns)).schema();
        let mut out = Vec::new();
        // Batches are filtered as they arrive (Lance decodes the next ones
        // meanwhile), so only rows that pass are kept.
        let scanned = reader.scan_each_where(
            phys,
            &read_cols,
            store_filter,
            |b| -> Result<(), ScanError> {
                let n = b.num_rows();
                let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
                let column = |name: &str| {
                    b.column_by_name(name)
                        .cloned()
                        .ok_or_else(|| SqlError::Internal(format!("store column {name} missing")))
                };
                for &i in columns {
                    if i == 0 {
                        arrays.push(std::sync::Arc::new(StringArray::from_iter_values(
                            std::iter::repeat_n(s.source_path.as_str(), n),
                        )));
                    } else if let Some(f) = fallback(cols[i].name) {
                        arrays.push(coalesce_times(&column(cols[i].name)?, &column(f)?));
                    } else {
                        arrays.push(column(cols[i].name)?);
                    }
                }
                let opts = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(n));
                let batch = RecordBatch::try_new_with_options(schema.clone(), arrays, &opts)?;
                out.push(post(batch)?);
                Ok(())
            },
        );
        match scanned {
            Ok(()) => Ok(out),
            Err(ScanError::Store(e)) => {
                self.skip_or_fail(s, crate::catalog::read::store_failure(s, &e))
            }
            Err(ScanError::Sql(e)) => Err(e),
        }
    }
}

/// Why a store scan stopped: a store that fails while read (a damaged
/// fragment) is a bad Source like any other; an error of the query itself
/// fails the query.
enum ScanError {
    Store(crate::store::StoreError),
    Sql(SqlError),
}

impl From<crate::store::StoreError> for ScanError {
    fn from(e: crate::store::StoreError) -> Self {
        ScanError::Store(e)
    }
}

impl From<SqlError> for ScanError {
    fn from(e: SqlError) -> Self {
        ScanError::Sql(e)
    }
}

impl From<arrow::error::ArrowError> for ScanError {
    fn from(e: arrow::error::ArrowError) -> Self {
        ScanError::Sql(e.into())
    }
}

/// `a`, with its NULL times taken from `b` (both timestamp arrays).
fn coalesce_times(a: &ArrayRef, b: &ArrayRef) -> ArrayRef {
    use arrow::array::{Array, AsArray, TimestampNanosecondArray};
    use arrow::datatypes::TimestampNanosecondType;
    let (x, y) = (
        a.as_primitive::<TimestampNanosecondType>(),
        b.as_primitive::<TimestampNanosecondType>(),
    );
    let out: TimestampNanosecondArray = (0..x.len())
        .map(|i| {
            if x.is_valid(i) {
                Some(x.value(i))
            } else {
                y.is_valid(i).then(|| y.value(i))
            }
        })
        .collect();
    std::sync::Arc::new(out.with_timezone("UTC"))
}

/// The `sources` relation of a snapshot as one batch.
pub fn sources_batch(sources: &[Source]) -> Result<RecordBatch, SqlError> {
    let text = |f: &dyn Fn(&Source) -> Option<String>| -> ArrayRef {
        std::sync::Arc::new(sources.iter().map(f).collect::<StringArray>())
    };
    let cols: Vec<ArrayRef> = vec![
        text(&|s| Some(s.source_path.clone())),
        text(&|s| Some(s.format.name().to_string())),
        text(&|s| Some(s.kind.name().to_string())),
        text(&|s| s.layout().map(str::to_string)),
        text(&|s| Some(s.snapshot_ref.to_string())),
        text(&|s| Some(s.read_consistency.to_string())),
        text(&|s| Some(s.status.name().to_string())),
        text(&|s| s.reason.as_ref().map(|r| r.code.to_string())),
        text(&|s| s.reason.as_ref().map(|r| r.message.clone())),
        std::sync::Arc::new(
            sources
                .iter()
                .map(|s| s.size as i64)
                .collect::<Int64Array>(),
        ),
        text(&|s| serde_json::to_string(&s.capabilities()).ok()),
    ];
    Ok(RecordBatch::try_new(sources_schema(), cols)?)
}

impl From<crate::store::StoreError> for SqlError {
    fn from(e: crate::store::StoreError) -> Self {
        SqlError::Source {
            code: e.code(),
            message: e.to_string(),
        }
    }
}

/// The answer to `DESCRIBE relation`: one row per column (name, type,
/// nullability, description).
pub fn describe_batches(relation: &str) -> (SchemaRef, Vec<RecordBatch>) {
    let cols = describe_relation(relation);
    let schema = std::sync::Arc::new(Schema::new(vec![
        Field::new("column_name", DataType::Utf8, false),
        Field::new("column_type", DataType::Utf8, false),
        Field::new("null", DataType::Utf8, false),
        Field::new("description", DataType::Utf8, false),
    ]));
    let col = |f: &dyn Fn(&(String, String, bool, String)) -> String| -> ArrayRef {
        std::sync::Arc::new(cols.iter().map(|c| Some(f(c))).collect::<StringArray>())
    };
    let arrays = vec![
        col(&|c| c.0.clone()),
        col(&|c| c.1.clone()),
        col(&|c| if c.2 { "YES".into() } else { "NO".into() }),
        col(&|c| c.3.clone()),
    ];
    let batch = RecordBatch::try_new(schema.clone(), arrays).expect("describe columns match");
    (schema, vec![batch])
}

/// The answer to `EXPLAIN`: the plan, one line per row.
pub fn explain_batches(plan: &impl std::fmt::Display) -> (SchemaRef, Vec<RecordBatch>) {
    let text = plan.to_string();
    let schema = std::sync::Arc::new(Schema::new(vec![Field::new("plan", DataType::Utf8, false)]));
    let lines: ArrayRef = std::sync::Arc::new(text.lines().map(Some).collect::<StringArray>());
    let batch = RecordBatch::try_new(schema.clone(), vec![lines]).expect("plan column matches");
    (schema, vec![batch])
}

impl Mounts {
    /// The `events` relation: every events store's rows at its pinned
    /// version, one row per distinct `event_id` with its duplicate count.
    fn scan_events(
        &self,
        mount: &Mount,
        columns: &[usize],
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        use arrow::array::{Int64Array, StringArray, TimestampNanosecondArray};
        let full = events_schema();
        let schema = std::sync::Arc::new(full.project(columns)?);
        let mut out = Vec::new();
        for s in &mount.snapshot.sources {
            if s.format != crate::formats::SourceFormat::EventsLance {
                continue;
            }
            let rows = match crate::catalog::read::events_rows(s) {
                Ok(r) => r,
                Err(f) => {
                    out.extend(self.skip_or_fail(s, f)?);
                    continue;
                }
            };
            let text = |key: &str| -> StringArray {
                rows.iter()
                    .map(|(r, _)| match r.record.get(key) {
                        Some(serde_json::Value::String(v)) => Some(v.as_str()),
                        _ => None,
                    })
                    .collect()
            };
            let mut cols: Vec<arrow::array::ArrayRef> = Vec::with_capacity(columns.len());
            for &i in columns {
                let name = full.field(i).name().as_str();
                let a: arrow::array::ArrayRef = match name {
                    "source_path" => std::sync::Arc::new(StringArray::from(vec![
                        s.source_path
                            .as_str();
                        rows.len()
                    ])),
                    "seq" => std::sync::Arc::new(Int64Array::from_iter_values(
                        rows.iter().map(|(r, _)| r.seq),
                    )),
                    "timestamp" => std::sync::Arc::new(
                        TimestampNanosecondArray::from_iter_values(
                            rows.iter()
                                .map(|(r, _)| r.timestamp_unix_ms.saturating_mul(1_000_000)),
                        )
                        .with_timezone("UTC"),
                    ),
                    "model" => std::sync::Arc::new(
                        rows.iter()
                            .map(|(r, _)| {
                                r.record
                                    .get("payload")
                                    .and_then(|p| p.get("model"))
                                    .and_then(serde_json::Value::as_str)
                            })
                            .collect::<StringArray>(),
                    ),
                    "kind" | "source" => std::sync::Arc::new(
                        rows.iter()
                            .map(|(r, _)| {
                                Some(
                                    r.record
                                        .get(name)
                                        .and_then(serde_json::Value::as_str)
                                        .unwrap_or(""),
                                )
                            })
                            .collect::<StringArray>(),
                    ),
                    "payload_json" => std::sync::Arc::new(
                        rows.iter()
                            .map(|(r, _)| Some(r.record.to_string()))
                            .collect::<StringArray>(),
                    ),
                    "duplicate_count" => std::sync::Arc::new(Int64Array::from_iter_values(
                        rows.iter().map(|(_, d)| *d),
                    )),
                    other => std::sync::Arc::new(text(other)),
                };
                cols.push(a);
            }
            let b = RecordBatch::try_new_with_options(
                schema.clone(),
                cols,
                &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows.len())),
            )?;
            out.push(post(b)?);
        }
        if out.is_empty() {
            out.push(RecordBatch::new_empty(schema));
        }
        Ok(out)
    }
}
