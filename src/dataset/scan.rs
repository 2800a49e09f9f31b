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

impl Mounts {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scan_documents(
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
                        if s.format == crate::formats::SourceFormat::EventsLance
                            && call_output.is_none()
                            && matches!(
                                table,
                                Table::Trajectories | Table::Steps | Table::ToolCalls
                            )
                        {
                            // Captured sessions projected once per events
                            // version: read as the store they were kept in.
                            match crate::catalog::projection::projection(s) {
                                Ok(Some(p)) => {
                                    return self.scan_store(
                                        &p.store,
                                        table,
                                        columns,
                                        store_filter,
                                        post,
                                    )
                                }
                                Ok(None) => {}
                                Err(f) => return self.skip_or_fail(s, f),
                            }
                        }
                        let mut builder = TableBuilder::new(table, Some(columns));
                        if let Some(name) = call_output {
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
                            Ok(r) => {
                                if let Some(d) = r.diagnostics.iter().find(|d| d.degrades()) {
                                    // Read, but not as given: strict refuses it.
                                    if self.strict {
                                        return Err(super::strict_refusal(
                                            s,
                                            "degraded",
                                            d.code,
                                            format!("{}: {}", d.pointer, d.message),
                                        ));
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
    pub(super) fn scan_runs(
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
}
