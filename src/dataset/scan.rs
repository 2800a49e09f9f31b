//! Scanning the document relations of a mount: every Source decoded in
//! parallel (or read natively when it is a store), `runs` grouped from
//! `trajectories`, the index build's steps with the text of call results.

use super::skeleton::skeleton_safe;
use super::{Mount, Mounts, BATCH_ROWS};
use arrow::datatypes::{Field, Schema};
use arrow::record_batch::RecordBatch;
use rayon::prelude::*;

use crate::catalog::{Source, SourceStatus};
use crate::formats::atif::Projection;
use crate::formats::DecodeOptions;
use crate::sql::SqlError;
use crate::table::{Table, TableBuilder};

/// What one scan of a document relation reads.
pub(super) struct DocumentScan<'a> {
    pub table: Table,
    /// Column indexes into `table`.
    pub columns: &'a [usize],
    /// The Sources read.
    pub only: &'a (dyn Fn(&Source) -> bool + Sync),
    /// A Lance filter stores apply while scanning (file Sources ignore it).
    pub store_filter: Option<&'a str>,
    /// Add the text of call results under this column name (steps only).
    pub call_output: Option<&'static str>,
    /// Hand on the text views and labels a store keeps as bytes and
    /// dictionaries as they are stored (`Binary`, unchecked, and
    /// `Dictionary`) rather than as text; see `DataLayer::scan`.
    pub stored: bool,
}

/// File Sources decoded in parallel per round, per thread of the pool: a
/// round's output is held until its first Source's turn, so this bounds
/// memory to a few files' rows while keeping the workers busy.
const FILES_PER_THREAD: usize = 4;

impl Mounts {
    /// Scan a document relation. `post` runs on every batch in the worker
    /// that produced it (the scan filter); `emit` receives the results on
    /// the calling thread in Source order, and in order within a Source,
    /// while the scan goes on: a consumer that errors stops it.
    pub(super) fn scan_documents(
        &self,
        mount: &Mount,
        scan: &DocumentScan<'_>,
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        emit: &mut dyn FnMut(RecordBatch) -> Result<(), SqlError>,
        check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<(), SqlError> {
        let (table, columns, only) = (scan.table, scan.columns, scan.only);
        if table == Table::Runs {
            return self.scan_runs(mount, columns, only, post, emit, check);
        }
        let cols = table.columns();
        let skeleton = scan.call_output.is_none()
            && columns.iter().all(|&i| skeleton_safe(table, cols[i].name));
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
                let r = s.reason.as_ref();
                return Err(super::strict_refusal(
                    s,
                    s.status.name(),
                    r.map_or("PC-CAT-010", |r| r.code),
                    r.map_or_else(|| "not ready".into(), |r| r.message.clone()),
                ));
            }
        }
        let remote = readable.iter().any(|s| s.object.is_some());
        let round =
            FILES_PER_THREAD * crate::util::rt::on_pool(remote, rayon::current_num_threads).max(1);
        let mut rest = readable.as_slice();
        while let Some(first) = rest.first() {
            check()?;
            if let Some(store) = self.as_store(first, scan)? {
                // A store is read alone: Lance decodes ahead in parallel and
                // its batches go out as they come.
                self.scan_store(&store, scan, post, emit)?;
                rest = &rest[1..];
                continue;
            }
            // Consecutive file Sources, decoded in parallel, emitted in
            // order; the first may be captured traffic projected in memory.
            let files = 1 + rest[1..]
                .iter()
                .take(round - 1)
                .take_while(|s| !self.is_store(s, scan))
                .count();
            let (now, later) = rest.split_at(files);
            rest = later;
            let results: Vec<Result<Vec<RecordBatch>, SqlError>> =
                crate::util::rt::on_pool(remote, || {
                    now.par_iter()
                        .map(|s| {
                            check()?;
                            self.scan_file(s, scan, opts, post)
                        })
                        .collect()
                });
            for r in results {
                for b in r? {
                    emit(b)?;
                }
            }
        }
        Ok(())
    }

    /// True when `s` is read as a store by [`Mounts::scan_store`].
    fn is_store(&self, s: &Source, scan: &DocumentScan<'_>) -> bool {
        let entity = matches!(
            scan.table,
            Table::Trajectories | Table::Steps | Table::ToolCalls
        );
        match s.format {
            crate::formats::SourceFormat::StorylineLance => entity,
            crate::formats::SourceFormat::EventsLance => entity && scan.call_output.is_none(),
            _ => false,
        }
    }

    /// The store `s` is read as: itself, or for captured traffic the
    /// projection of its sessions, kept once per events version. `None`
    /// for a file (or captured traffic projected in memory).
    fn as_store(&self, s: &Source, scan: &DocumentScan<'_>) -> Result<Option<Source>, SqlError> {
        if !self.is_store(s, scan) {
            return Ok(None);
        }
        if s.format == crate::formats::SourceFormat::StorylineLance {
            return Ok(Some(s.clone()));
        }
        match crate::catalog::projection::projection(s) {
            Ok(p) => Ok(p.map(|p| p.store)),
            Err(f) => self.skip_or_fail(s, f).map(|()| None),
        }
    }

    /// One file Source (or captured traffic projected in memory), decoded
    /// into batches of the relation.
    fn scan_file(
        &self,
        s: &Source,
        scan: &DocumentScan<'_>,
        opts: DecodeOptions,
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        if scan.table == Table::Trajectories {
            if let Some(kept) = self.kept_trajectories(s, opts) {
                let (rows, read) = match kept {
                    Ok(k) => k,
                    Err(f) => return self.skip_or_fail(s, f).map(|()| Vec::new()),
                };
                self.report_degraded(s, &read)?;
                let rows = rows
                    .project(scan.columns)
                    .map_err(|e| SqlError::Internal(e.to_string()))?;
                return (0..rows.num_rows())
                    .step_by(BATCH_ROWS)
                    .map(|at| post(rows.slice(at, BATCH_ROWS.min(rows.num_rows() - at))))
                    .collect();
            }
        }
        let mut builder = TableBuilder::new(scan.table, Some(scan.columns));
        if let Some(name) = scan.call_output {
            builder = builder.with_extra(name, crate::table::step_call_output);
        }
        let mut out = Vec::new();
        let mut ordinal = 0usize;
        let mut err: Option<SqlError> = None;
        let read = self.read_documents(s, opts, &mut |doc| {
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
            Ok(r) => self.report_degraded(s, &r)?,
            Err(f) => return self.skip_or_fail(s, f).map(|()| Vec::new()),
        }
        if !builder.is_empty() {
            out.push(post(builder.finish())?);
        }
        Ok(out)
    }
}

impl Mounts {
    /// A Source read, but not as given (a degraded diagnostic): refused in
    /// strict mode, else reported.
    fn report_degraded(
        &self,
        s: &Source,
        read: &crate::catalog::read::SourceRead,
    ) -> Result<(), SqlError> {
        if let Some(d) = read.diagnostics.iter().find(|d| d.degrades()) {
            if self.strict {
                return Err(super::strict_refusal(
                    s,
                    "degraded",
                    d.code,
                    format!("{}: {}", d.pointer, d.message),
                ));
            }
            self.problem(s, d.code, false, format!("{}: {}", d.pointer, d.message));
        }
        Ok(())
    }

    /// The `runs` relation: `trajectories` rows of the Sources `only`
    /// accepts, grouped into Runs. Columns no requested run column needs
    /// and that would make the scan decode step payloads (tokens, cost,
    /// JSON parts) are left NULL before grouping.
    pub(super) fn scan_runs(
        &self,
        mount: &Mount,
        columns: &[usize],
        only: &(dyn Fn(&Source) -> bool + Sync),
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        emit: &mut dyn FnMut(RecordBatch) -> Result<(), SqlError>,
        check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<(), SqlError> {
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
        let inputs = std::sync::Arc::new(Schema::new(
            crate::table::RUN_INPUTS
                .iter()
                .map(|c| {
                    let d = &traj[Table::Trajectories.index_of(c).expect("checked above")];
                    Field::new(d.name, d.ty.arrow(), true)
                })
                .collect::<Vec<_>>(),
        ));
        // A Run may span Sources: grouping needs every trajectory first.
        let mut full: Vec<RecordBatch> = Vec::new();
        let scan = DocumentScan {
            table: Table::Trajectories,
            columns: &read,
            only,
            store_filter: None,
            call_output: None,
            stored: false,
        };
        self.scan_documents(
            mount,
            &scan,
            &|b| Ok(b),
            &mut |b| {
                let arrays = inputs
                    .fields()
                    .iter()
                    .map(|f| match b.column_by_name(f.name()) {
                        Some(a) => a.clone(),
                        None => arrow::array::new_null_array(f.data_type(), b.num_rows()),
                    })
                    .collect();
                full.push(RecordBatch::try_new(inputs.clone(), arrays)?);
                Ok(())
            },
            check,
        )?;
        let grouped = crate::table::group_runs(&full)?;
        emit(post(grouped.project(columns)?)?)
    }

    /// Scan `columns` (by name) of an entity table over the Sources of mount
    /// `dataset` that `only` accepts. `post` sees every batch in the worker
    /// that produced it; the batches come back in Source order, and in order
    /// within a Source.
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
        let idx = table.indexes_of(columns).map_err(SqlError::Internal)?;
        let scan = DocumentScan {
            table,
            columns: &idx,
            only,
            store_filter,
            call_output: None,
            stored: false,
        };
        self.collect_scan(dataset, &scan, post, check)
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
        let idx = Table::Steps
            .indexes_of(columns)
            .map_err(SqlError::Internal)?;
        let scan = DocumentScan {
            table: Table::Steps,
            columns: &idx,
            only,
            store_filter: None,
            call_output: Some(name),
            stored: false,
        };
        self.collect_scan(dataset, &scan, post, &|| Ok(()))
    }

    /// Every batch of `scan` over mount `dataset`, at least one (empty).
    fn collect_scan(
        &self,
        dataset: &str,
        scan: &DocumentScan<'_>,
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        let mount = self
            .mount(dataset)
            .ok_or_else(|| SqlError::UnknownRelation {
                name: dataset.to_string(),
                hint: String::new(),
            })?;
        let mut all = Vec::new();
        self.scan_documents(
            mount,
            scan,
            post,
            &mut |b| {
                all.push(b);
                Ok(())
            },
            check,
        )?;
        if all.is_empty() {
            let mut b = TableBuilder::new(scan.table, Some(scan.columns));
            if let Some(name) = scan.call_output {
                b = b.with_extra(name, crate::table::step_call_output);
            }
            all.push(RecordBatch::new_empty(b.schema()));
        }
        Ok(all)
    }
}
