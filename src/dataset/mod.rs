//! Mounted Datasets: the relations `sources`, `runs`, `trajectories`,
//! `steps`, `tool_calls`, `judgments` and `events` of each mount, served to
//! the SQL engine (this module implements [`crate::sql::DataLayer`]).
//!
//! Each mount is pinned once ([`CatalogSnapshot`]); scans decode its Sources
//! in parallel (Rayon), build only the requested columns, and apply the scan
//! filter in the worker. A Source that fails is skipped with a warning in
//! report mode and fails the query in strict mode; a Source that changes
//! while read always fails it.

use std::sync::Mutex;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

mod decoded;
mod events;
mod packed;
mod relations;
mod scan;
mod skeleton;
mod store_scan;

pub use decoded::{decoded_bytes, DecodedSource, DecodedSources};
pub use packed::{KeptDocument, PackedDocument};
pub use relations::{
    describe_batches, describe_relation, events_schema, explain_batches, sources_batch,
    sources_schema,
};
pub(crate) use relations::{EVENT_JSON_COLUMNS, SOURCE_JSON_COLUMNS};

use crate::catalog::read::ReadFailure;
use crate::catalog::{CatalogError, CatalogSnapshot, DatasetUri, DiscoveryLimits, Source};
use crate::sql::{DataLayer, SqlError};
use crate::table::Table;

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

/// The one refusal of `--errors strict` (`PC-CAT-010`): the Source, its
/// state and the problem's own code, whichever command read it.
pub(crate) fn strict_refusal(
    s: &Source,
    status: &'static str,
    code: &'static str,
    reason: String,
) -> SqlError {
    let e = CatalogError::StrictSource {
        source_path: s.source_path.clone(),
        status,
        reason_code: code,
        reason,
    };
    SqlError::Source {
        code: e.code(),
        message: e.to_string(),
    }
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
    /// Large files kept once decoded, for readers that ask again.
    decoded: Option<std::sync::Arc<DecodedSources>>,
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
            decoded: None,
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
            decoded: None,
        }
    }

    /// Keep large files decoded in `cache` and read them from there (for a
    /// long-lived reader; a command reads each Source once anyway).
    pub fn with_decoded(mut self, cache: std::sync::Arc<DecodedSources>) -> Self {
        self.decoded = Some(cache);
        self
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
    fn skip_or_fail(&self, s: &Source, f: ReadFailure) -> Result<(), SqlError> {
        match f {
            ReadFailure::Fatal(e) => Err(SqlError::Source {
                code: e.code(),
                message: e.to_string(),
            }),
            ReadFailure::Source(e) if self.strict => {
                Err(strict_refusal(s, "error", e.code(), e.detail()))
            }
            ReadFailure::Source(e) => {
                self.problem(s, e.code(), true, e.detail());
                Ok(())
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

impl DataLayer for Mounts {
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

    /// The JSON columns of the tables but those kept as written
    /// (`table::Column::holds_written_json`), in every kind of Source: a
    /// store pChronicle imported was filled by the same columns, and one
    /// written by another program must keep them so (docs/formats.md).
    fn canonical_json(&self, relation: &str, column: &str) -> bool {
        Table::from_name(relation).is_some_and(|t| {
            t.columns()
                .iter()
                .any(|c| c.name == column && c.holds_written_json())
        })
    }

    fn json_mirror(
        &self,
        dataset: &str,
        relation: &str,
        json: &str,
        key: &str,
    ) -> Option<&'static str> {
        let mirror = crate::store::mirrors::find(relation, json, key)?;
        let name = mirror.name();
        let sources = &self.mount(dataset)?.snapshot.sources;
        // Only a store checks its rows; one Source of another kind and the
        // JSON is parsed. A store that cannot be opened now is not promised
        // anything (its scan reports why).
        let every = sources.iter().all(|s| {
            s.kind == crate::catalog::SourceKind::Store
                && s.format == crate::formats::SourceFormat::StorylineLance
                && crate::catalog::read::open_store(s).is_ok_and(|store| {
                    store
                        .current()
                        .committed
                        .as_ref()
                        .is_some_and(|c| c.mirrors.contains(&name))
                })
        });
        (every && !sources.is_empty()).then_some(mirror.typed)
    }

    fn scan(
        &self,
        dataset: &str,
        relation: &str,
        columns: &[usize],
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        emit: &mut dyn FnMut(RecordBatch) -> Result<(), SqlError>,
        check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<(), SqlError> {
        let mount = self
            .mount(dataset)
            .ok_or_else(|| SqlError::UnknownRelation {
                name: dataset.to_string(),
                hint: String::new(),
            })?;
        match relation {
            "sources" => {
                let full = sources_batch(&mount.snapshot.sources)?;
                emit(post(full.project(columns)?)?)
            }
            "events" => self.scan_events(mount, columns, post, emit),
            other => {
                let table = Table::from_name(other).ok_or_else(|| SqlError::UnknownRelation {
                    name: other.to_string(),
                    hint: String::new(),
                })?;
                let scan = scan::DocumentScan {
                    table,
                    columns,
                    only: &|_| true,
                    store_filter: None,
                    call_output: None,
                    stored: true,
                };
                self.scan_documents(mount, &scan, post, emit, check)
            }
        }
    }
}
