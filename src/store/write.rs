//! Writing stores: [`StoreWriter`] creates a new store from documents
//! (tables written concurrently while documents arrive), and `maintain`
//! compacts, indexes and garbage-collects an existing one.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

use arrow::datatypes::DataType;
use lance::dataset::optimize::{compact_files, CompactionOptions};
use lance::index::DatasetIndexExt as _;
use lance_index::scalar::ScalarIndexParams;
use lance_index::IndexType;

use super::current::{new_generation, sync_dir, Committed, Current, STORE_SCHEMA_VERSION};
use super::lance_io::{
    append_table_paged, lance_err, open_at, runtime, ChannelReader, PAGE_BUFFER_BYTES_PER_COLUMN,
};
use super::mirrors::MirrorCheck;
use super::objects::{referenced_ids, ObjectSink};
use super::schema::{dir_name, objects_schema, stored_columns, table_schema, STORE_TABLES};
use super::{MaintainOptions, MaintainReport, StoreError};
use crate::formats::model::Storyline;
use crate::table::{Table, TableBuilder};

/// Rows per written batch. A batch is built, then waits in its table's
/// channel and is copied by Lance, so its size counts several times at the
/// peak: 4,096 rows instead of 8,192 lowered the store-writing phase of the
/// 1M-step import by about 25 MiB, in the same time (docs/benchmarks.md).
const BATCH_ROWS: usize = 4096;
/// Object bytes buffered before they are sent to the writer (up to two
/// such batches wait in the objects table's channel).
const OBJECT_FLUSH_BYTES: usize = 4 << 20;
/// Bytes the documents table's writer buffers per column before it writes
/// a page. A column's buffer is held until it fills or its file closes,
/// and a file closes after 65,536 rows: the step tables close several
/// files per million steps, but the documents of most imports fit in one
/// file, so at the other tables' 2 MiB its 46 columns held up to 92 MiB
/// until the end, growing with the number of documents (anonymous memory
/// rose from 140 to 225 MiB over the 50,000 files of the 5M-step
/// benchmark). A page of 256 KiB still holds 32,768 integers.
const DOCUMENT_PAGE_BUFFER_BYTES: u64 = 256 << 10;

/// Bytes buffered per column by the writer of table `t`.
fn page_buffer(t: Table) -> u64 {
    if t == Table::Documents {
        DOCUMENT_PAGE_BUFFER_BYTES
    } else {
        PAGE_BUFFER_BYTES_PER_COLUMN
    }
}

/// What a write produced.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct WriteSummary {
    /// Documents written.
    pub trajectories: u64,
    /// Steps written.
    pub steps: u64,
    /// Tool calls written.
    pub tool_calls: u64,
    /// Large cells stored as objects.
    pub objects: u64,
    /// The generation committed.
    pub generation: String,
    /// The pointer committed.
    #[serde(skip)]
    pub current: Option<Current>,
}

/// Table versions, and the objects table's error (it matters only when
/// objects were written: an empty objects table is not created).
type Versions = ([Option<u64>; 4], Option<StoreError>);

/// Writes a new store into a directory that must not exist yet.
pub struct StoreWriter {
    root: PathBuf,
    generation: String,
    /// The directory of the tables under `generations/`.
    table_generation: String,
    /// The revision and snapshot a resumed writer goes on from.
    parent: Option<(u64, Committed)>,
    builders: Vec<TableBuilder>,
    senders: Vec<SyncSender<arrow::record_batch::RecordBatch>>,
    worker: Option<JoinHandle<Result<Versions, StoreError>>>,
    objects: ObjectSink,
    /// Store layout version written.
    layout: u64,
    sent: [bool; 4],
    /// The stored schema of each table.
    schemas: [arrow::datatypes::SchemaRef; 3],
    /// Which typed columns mirror their JSON member on every row so far.
    mirrors: MirrorCheck,
    ordinal: usize,
    summary: WriteSummary,
}

impl std::fmt::Debug for StoreWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWriter")
            .field("root", &self.root)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

fn table_path(root: &Path, generation: &str, t: Table) -> String {
    root.join("generations")
        .join(generation)
        .join(dir_name(t))
        .display()
        .to_string()
}

impl StoreWriter {
    /// Start a store at `root` (created; it must not exist).
    pub fn create(root: &Path) -> Result<Self, StoreError> {
        Self::create_layout(root, STORE_SCHEMA_VERSION)
    }

    /// [`StoreWriter::create`] for a given layout version: older layouts
    /// are written only to test that they stay readable.
    fn create_layout(root: &Path, layout: u64) -> Result<Self, StoreError> {
        let io =
            |e: std::io::Error| StoreError::Io(format!("cannot create {}: {e}", root.display()));
        std::fs::create_dir(root).map_err(io)?;
        let generation = new_generation(0);
        std::fs::create_dir_all(root.join("generations").join(&generation)).map_err(io)?;
        let tables = generation.clone();
        Self::start(root, generation, &tables, layout, [false; 4], None)
    }

    /// Go on writing the store at `root` from the snapshot `current`
    /// pins, less its documents from position `keep` on: the documents
    /// pushed then follow its first `keep`, and `finish` returns the
    /// result as a new snapshot of the same tables in
    /// [`WriteSummary::current`], without publishing it in `root`'s
    /// `CURRENT`: earlier snapshots stay readable at their versions, and
    /// the caller says where the new one is published. Fails with [`StoreError::Locked`] when
    /// a table has versions after the pinned one (a write that stopped
    /// half-way, or another writer): the caller writes a new store instead.
    pub fn resume(root: &Path, current: &Current, keep: u64) -> Result<Self, StoreError> {
        let Some(c) = current.committed.clone() else {
            return Err(StoreError::Internal("no snapshot to go on from".into()));
        };
        if c.schema_version != STORE_SCHEMA_VERSION {
            return Err(StoreError::Internal(format!(
                "store layout {} is not this build's",
                c.schema_version
            )));
        }
        let tables = STORE_TABLES.map(|t| table_path(root, &c.table_generation, t));
        let versions = [c.runs_version, c.steps_version, c.tool_calls_version];
        let objects = root.join("objects.lance").display().to_string();
        let pinned = c.objects_version;
        let paths = tables.clone();
        runtime().block_on(async move {
            for (path, v) in paths.iter().zip(versions) {
                let mut ds = open_at(path, v).await?;
                if ds.latest_version_id().await.map_err(lance_err)? != v {
                    return Err(StoreError::Locked);
                }
                ds.delete(&format!("storage_ordinal >= {keep}"))
                    .await
                    .map_err(lance_err)?;
            }
            if let Some(v) = pinned {
                let ds = open_at(&objects, v).await?;
                if ds.latest_version_id().await.map_err(lance_err)? != v {
                    return Err(StoreError::Locked);
                }
            }
            Ok(())
        })?;
        if pinned.is_none() {
            // Objects a write that stopped half-way left, which no snapshot
            // names.
            let _ = std::fs::remove_dir_all(root.join("objects.lance"));
        }
        let mut w = Self::start(
            root,
            new_generation(current.revision),
            &c.table_generation,
            c.schema_version,
            [true, true, true, pinned.is_some()],
            Some((current.revision, c.clone())),
        )?;
        w.ordinal = usize::try_from(keep).map_err(|e| StoreError::Internal(e.to_string()))?;
        Ok(w)
    }

    /// Start the table writers: each table of `table_generation` (and the
    /// objects table) is created, or appended to where `exists` says so.
    fn start(
        root: &Path,
        generation: String,
        table_generation: &str,
        layout: u64,
        exists: [bool; 4],
        parent: Option<(u64, Committed)>,
    ) -> Result<Self, StoreError> {
        let mut senders = Vec::new();
        let mut readers = Vec::new();
        for t in STORE_TABLES {
            let (tx, rx) = sync_channel(4);
            senders.push(tx);
            readers.push((
                table_path(root, table_generation, t),
                ChannelReader {
                    schema: table_schema(t, layout),
                    rx,
                },
                page_buffer(t),
            ));
        }
        let (otx, orx) = sync_channel(2);
        senders.push(otx);
        readers.push((
            root.join("objects.lance").display().to_string(),
            ChannelReader {
                schema: objects_schema(),
                rx: orx,
            },
            PAGE_BUFFER_BYTES_PER_COLUMN,
        ));
        let worker = std::thread::Builder::new()
            .name("pchronicle-store-writer".into())
            .spawn(move || {
                runtime().block_on(async move {
                    let mut it = readers.into_iter().zip(exists);
                    let ((p0, r0, b0), e0) = it.next().expect("four tables");
                    let ((p1, r1, b1), e1) = it.next().expect("four tables");
                    let ((p2, r2, b2), e2) = it.next().expect("four tables");
                    let ((p3, r3, b3), e3) = it.next().expect("four tables");
                    let (a, b, c, d) = futures::join!(
                        append_table_paged(&p0, r0, e0, b0),
                        append_table_paged(&p1, r1, e1, b1),
                        append_table_paged(&p2, r2, e2, b2),
                        append_table_paged(&p3, r3, e3, b3)
                    );
                    let (d, d_err) = match d {
                        Ok(v) => (Some(v), None),
                        Err(e) => (None, Some(e)),
                    };
                    Ok(([Some(a?), Some(b?), Some(c?), d], d_err))
                })
            })
            .map_err(|e| StoreError::Io(e.to_string()))?;
        let builders = STORE_TABLES
            .iter()
            .map(|&t| TableBuilder::new(t, Some(&stored_columns(t, layout))))
            .collect();
        Ok(StoreWriter {
            root: root.to_path_buf(),
            generation,
            table_generation: table_generation.to_string(),
            parent,
            builders,
            senders,
            worker: Some(worker),
            objects: ObjectSink::default(),
            layout,
            sent: [false; 4],
            schemas: STORE_TABLES.map(|t| table_schema(t, layout)),
            mirrors: MirrorCheck::default(),
            ordinal: 0,
            summary: WriteSummary::default(),
        })
    }

    fn send(
        &mut self,
        i: usize,
        batch: arrow::record_batch::RecordBatch,
    ) -> Result<(), StoreError> {
        let batch = if i < 3 {
            // Checked on the cells as written, before large ones move to
            // `objects`: a query reads them back resolved.
            self.mirrors.check(STORE_TABLES[i].name(), &batch);
            let batch = self.objects.offload(batch)?;
            // The table's own schema, whose field metadata tells Lance how
            // to encode each column, whose text views are bytes (the same
            // buffers, uncopied) and whose labels are dictionaries.
            let schema = &self.schemas[i];
            let columns = batch
                .columns()
                .iter()
                .zip(schema.fields())
                .map(|(c, f)| super::schema::as_stored(c, f))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::Internal(e.to_string()))?;
            arrow::record_batch::RecordBatch::try_new(schema.clone(), columns)
                .map_err(|e| StoreError::Internal(e.to_string()))?
        } else {
            batch
        };
        self.sent[i] = true;
        if self.senders[i].send(batch).is_err() {
            return Err(self.worker_error());
        }
        if i < 3 && self.objects.pending_bytes() >= OBJECT_FLUSH_BYTES {
            if let Some(o) = self.objects.drain() {
                self.send(3, o)?;
            }
        }
        Ok(())
    }

    /// The writer thread stopped: report its error.
    fn worker_error(&mut self) -> StoreError {
        self.senders.clear();
        match self.worker.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            Some(Err(_)) => StoreError::Internal("the store writer panicked".into()),
            _ => StoreError::Internal("the store writer stopped".into()),
        }
    }

    /// Add one document. Its ids are kept as given: documents are told
    /// apart by their position (`storage_ordinal`), so ids may repeat (two
    /// files of one import may hold the same session).
    pub fn push(&mut self, doc: Storyline) -> Result<(), StoreError> {
        self.summary.trajectories += 1;
        self.summary.steps += doc.turns.len() as u64;
        self.summary.tool_calls += doc.tool_call_count() as u64;
        for i in 0..3 {
            self.builders[i].push_document("", &doc, self.ordinal);
            if self.builders[i].len() >= BATCH_ROWS {
                let b = self.builders[i].finish();
                self.send(i, b)?;
            }
        }
        self.ordinal += 1;
        Ok(())
    }

    /// Flush everything, wait for the tables, then publish `CURRENT` (a
    /// resumed writer returns it instead, see [`StoreWriter::resume`]).
    pub fn finish(mut self) -> Result<WriteSummary, StoreError> {
        for i in 0..3 {
            // Every table gets at least one (possibly empty) batch so it exists.
            let b = self.builders[i].finish();
            if b.num_rows() > 0 || !self.sent[i] {
                self.send(i, b)?;
            }
        }
        if let Some(o) = self.objects.drain() {
            self.send(3, o)?;
        }
        self.senders.clear();
        let (versions, objects_error) = match self.worker.take().map(JoinHandle::join) {
            Some(Ok(r)) => r?,
            Some(Err(_)) => return Err(StoreError::Internal("the store writer panicked".into())),
            None => return Err(StoreError::Internal("the store writer is gone".into())),
        };
        let had_objects = self
            .parent
            .as_ref()
            .and_then(|(_, c)| c.objects_version)
            .is_some();
        let objects_version = if self.objects.count > 0 || had_objects {
            match (versions[3], objects_error) {
                (Some(v), _) => Some(v),
                // Nothing appended to the objects a resumed store had.
                (None, Some(_)) if self.objects.count == 0 => {
                    self.parent.as_ref().and_then(|(_, c)| c.objects_version)
                }
                (None, Some(e)) => return Err(e),
                (None, None) => {
                    return Err(StoreError::Internal(
                        "the objects table was not written".into(),
                    ))
                }
            }
        } else {
            let _ = std::fs::remove_dir_all(self.root.join("objects.lance"));
            None
        };
        let mut mirrors = self.mirrors.holding();
        if let Some((_, c)) = &self.parent {
            // A mirror holds on the new rows and held on every earlier one.
            mirrors.retain(|m| c.mirrors.contains(m));
        }
        let committed = Committed {
            schema_version: self.layout,
            generation: self.generation.clone(),
            parent_generation: self.parent.as_ref().map(|(_, c)| c.generation.clone()),
            table_generation: self.table_generation.clone(),
            runs_version: versions[0].unwrap_or(0),
            steps_version: versions[1].unwrap_or(0),
            tool_calls_version: versions[2].unwrap_or(0),
            objects_version,
            mirrors,
        };
        sync_dir(&self.root.join("generations").join(&self.table_generation));
        let current = Current {
            control_version: 1,
            revision: self.parent.as_ref().map_or(1, |(r, _)| r + 1),
            committed: Some(committed),
        };
        if self.parent.is_none() {
            current.write(&self.root)?;
        }
        self.summary.current = Some(current);
        self.summary.objects = self.objects.count;
        self.summary.generation.clone_from(&self.generation);
        Ok(std::mem::take(&mut self.summary))
    }
}

impl Drop for StoreWriter {
    /// An abandoned writer (an import that failed half-way) stops its
    /// table writers before its staging directory is removed.
    fn drop(&mut self) {
        self.senders.clear();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// The store's writer lock (released on drop).
fn lock(root: &Path) -> Result<crate::util::fs::FileLock, StoreError> {
    crate::util::fs::FileLock::try_new(&root.join(".write.lock"))
        .map_err(|e| StoreError::Io(e.to_string()))?
        .ok_or(StoreError::Locked)
}

/// Columns that get a scalar index, per table.
fn indexed(t: Table) -> &'static [&'static str] {
    match t {
        Table::Documents => &["document_id", "session_id", "run_id"],
        Table::Steps => &["document_id", "session_id", "storage_ordinal"],
        Table::ToolCalls => &["document_id", "tool_call_id", "function_name"],
        _ => &[],
    }
}

/// See [`super::StorylineLanceStore::maintain`].
pub fn maintain(root: &Path, options: &MaintainOptions) -> Result<MaintainReport, StoreError> {
    let _lock = lock(root)?;
    let cur = Current::read(root)?;
    let Some(c) = cur.committed.clone() else {
        return Ok(MaintainReport::default());
    };
    let mut report = MaintainReport::default();
    let gen_dir = root.join("generations").join(&c.table_generation);
    let versions = [c.runs_version, c.steps_version, c.tool_calls_version];
    let mut new_versions = versions;
    let mut referenced = HashSet::new();
    for (k, &t) in STORE_TABLES.iter().enumerate() {
        let path = gen_dir.join(dir_name(t)).display().to_string();
        let (v, removed, added, indexes, refs) = runtime().block_on(async {
            let mut ds = open_at(&path, versions[k]).await?;
            let (mut removed, mut added, mut indexes) = (0u64, 0u64, 0u64);
            if options.compact {
                let m = compact_files(&mut ds, CompactionOptions::default(), None)
                    .await
                    .map_err(lance_err)?;
                removed += m.fragments_removed as u64;
                added += m.fragments_added as u64;
            }
            if options.reindex && ds.count_rows(None).await.map_err(lance_err)? > 0 {
                for col in indexed(t) {
                    let params = ScalarIndexParams::default();
                    ds.create_index(
                        &[col],
                        IndexType::BTree,
                        Some(format!("pchronicle_{col}_idx")),
                        &params,
                        true,
                    )
                    .await
                    .map_err(lance_err)?;
                    indexes += 1;
                }
            }
            let mut refs = HashSet::new();
            if options.gc_objects && c.objects_version.is_some() {
                let cols: Vec<String> = table_schema(t, c.schema_version)
                    .fields()
                    .iter()
                    .filter(|f| {
                        matches!(
                            f.data_type(),
                            DataType::Utf8 | DataType::Binary | DataType::Dictionary(..)
                        )
                    })
                    .map(|f| f.name().clone())
                    .collect();
                let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
                let batches =
                    super::lance_io::scan(&path, ds.version().version, &cols, None).await?;
                refs = referenced_ids(&batches);
            }
            Ok::<_, StoreError>((ds.version().version, removed, added, indexes, refs))
        })?;
        new_versions[k] = v;
        report.fragments_removed += removed;
        report.fragments_added += added;
        report.indexes += indexes;
        referenced.extend(refs);
    }
    let mut objects_version = c.objects_version;
    if let (Some(ov), true) = (c.objects_version, options.gc_objects) {
        let path = root.join("objects.lance").display().to_string();
        let (v, removed) = runtime().block_on(async {
            let ids = super::lance_io::scan(&path, ov, &["content_id"], None).await?;
            let mut unreferenced = Vec::new();
            for b in &ids {
                let col = arrow::array::AsArray::as_string::<i32>(b.column(0));
                for id in col.iter().flatten() {
                    if !referenced.contains(id) {
                        unreferenced.push(id.to_string());
                    }
                }
            }
            let mut ds = open_at(&path, ov).await?;
            // Ids are 64 hex digits (checked on read), so they can be quoted safely.
            for chunk in unreferenced.chunks(512) {
                let list: Vec<String> = chunk
                    .iter()
                    .filter(|id| id.bytes().all(|b| b.is_ascii_hexdigit()))
                    .map(|id| format!("'{id}'"))
                    .collect();
                if !list.is_empty() {
                    ds.delete(&format!("content_id IN ({})", list.join(",")))
                        .await
                        .map_err(lance_err)?;
                }
            }
            Ok::<_, StoreError>((ds.version().version, unreferenced.len() as u64))
        })?;
        objects_version = Some(v);
        report.objects_removed = removed;
    }
    let generation = new_generation(cur.revision + 1);
    // Maintenance rewrites fragments, not columns: the layout stays.
    let committed = Committed {
        schema_version: c.schema_version,
        generation: generation.clone(),
        parent_generation: Some(c.generation.clone()),
        table_generation: c.table_generation.clone(),
        runs_version: new_versions[0],
        steps_version: new_versions[1],
        tool_calls_version: new_versions[2],
        objects_version,
        // Maintenance keeps every row: what held still holds.
        mirrors: c.mirrors.clone(),
    };
    Current {
        control_version: 1,
        revision: cur.revision + 1,
        committed: Some(committed),
    }
    .write(root)?;
    report.generation = generation;
    // Only after the new snapshot is published: drop old versions.
    let mut paths: Vec<String> = STORE_TABLES
        .iter()
        .map(|&t| gen_dir.join(dir_name(t)).display().to_string())
        .collect();
    if objects_version.is_some() {
        paths.push(root.join("objects.lance").display().to_string());
    }
    for p in paths {
        let removed = runtime().block_on(async {
            let ds = lance::Dataset::open(&p).await.map_err(lance_err)?;
            let older =
                chrono::TimeDelta::from_std(options.retention).unwrap_or(chrono::TimeDelta::MAX);
            let stats = ds
                .cleanup_old_versions(older, None, None)
                .await
                .map_err(lance_err)?;
            Ok::<_, StoreError>(stats.old_versions)
        })?;
        report.versions_removed += removed;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::{decode_bytes, DecodeCtx, DecodeOptions};
    use crate::store::{StoreReader, StorylineLanceStore};
    use arrow::array::AsArray;

    /// Real terminal-agent output: tool results with ANSI colours and
    /// escaped newlines.
    fn harbor_docs() -> Vec<Storyline> {
        let mut docs = Vec::new();
        for f in [
            "openhands_hello-world.trajectory.json",
            "terminus_2_hello-world-timeout.trajectory.json",
        ] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/harbor")
                .join(f);
            let bytes = std::fs::read(path).unwrap();
            let mut ctx = DecodeCtx::new(f);
            decode_bytes(&bytes, DecodeOptions::full(1 << 30), &mut ctx, &mut |d| {
                docs.push(d);
            })
            .unwrap();
        }
        docs
    }

    fn write(root: &Path, layout: u64) -> StoreReader {
        let mut w = StoreWriter::create_layout(root, layout).unwrap();
        for d in harbor_docs() {
            w.push(d).unwrap();
        }
        w.finish().unwrap();
        StorylineLanceStore::open(root).unwrap().reader().unwrap()
    }

    /// The pages of each column of the data files of the table at `dir`.
    fn pages_per_column(dir: &Path) -> Vec<usize> {
        use lance_io::scheduler::{ScanScheduler, SchedulerConfig};
        let mut pages = Vec::new();
        for f in std::fs::read_dir(dir.join("data")).unwrap() {
            let path = object_store::path::Path::from_filesystem_path(f.unwrap().path()).unwrap();
            let meta = runtime()
                .block_on(async {
                    let store = std::sync::Arc::new(lance_io::object_store::ObjectStore::local());
                    let scheduler =
                        ScanScheduler::new(store, SchedulerConfig::default_for_testing());
                    let file = scheduler
                        .open_file(&path, &lance_io::utils::CachedFileSize::unknown())
                        .await?;
                    lance_file::reader::FileReader::read_all_metadata(&file).await
                })
                .unwrap();
            if pages.is_empty() {
                pages = vec![0; meta.column_infos.len()];
            }
            for (n, c) in pages.iter_mut().zip(&meta.column_infos) {
                *n += c.page_infos.len();
            }
        }
        pages
    }

    /// The documents table's writer writes each batch's pages as it comes
    /// instead of holding narrow columns until the end of the import: the
    /// documents of most imports fit in one data file, which closes only
    /// at the end, so every column buffered up to the step tables' 2 MiB
    /// and import's memory grew with the number of documents.
    #[test]
    fn documents_are_written_as_they_come() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let mut w = StoreWriter::create(&root).unwrap();
        let mut one = harbor_docs().remove(0);
        one.turns.truncate(1);
        // Five batches of documents, one data file: 16,484 rows.
        let n = 4 * BATCH_ROWS + 100;
        for i in 0..n {
            let mut d = one.clone();
            d.session = format!("session-{i:08}");
            w.push(d).unwrap();
        }
        let summary = w.finish().unwrap();
        assert_eq!(summary.trajectories, n as u64);
        let generation = std::fs::read_dir(root.join("generations"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let documents = pages_per_column(&generation.join(dir_name(Table::Documents)));
        // `session_id` is about 20 bytes a row with its offset: 330 KB in
        // all, under one 2 MiB buffer, over 256 KiB.
        let at = table_schema(Table::Documents, STORE_SCHEMA_VERSION)
            .index_of("session_id")
            .unwrap();
        assert!(
            documents[at] >= 2,
            "session_id in {} page(s): {documents:?}",
            documents[at]
        );
        // The steps table keeps its larger pages.
        let steps = pages_per_column(&generation.join(dir_name(Table::Steps)));
        let at = table_schema(Table::Steps, STORE_SCHEMA_VERSION)
            .index_of("session_id")
            .unwrap();
        assert_eq!(steps[at], 1, "{steps:?}");
    }

    /// Reading a store for a few of its documents holds the `runs` rows of
    /// a batch or two, not of every document before the ones kept: calls of
    /// documents not built used to be read to the next built one (the end
    /// of the table when it is last) before the steps went on.
    #[test]
    fn documents_left_out_are_not_held() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let mut w = StoreWriter::create(&root).unwrap();
        // A step with a tool call each, 3,000 documents.
        let mut one = harbor_docs()
            .into_iter()
            .find(|d| d.turns.iter().any(|t| t.tool_calls.is_some()))
            .unwrap();
        let t = one
            .turns
            .iter()
            .position(|t| t.tool_calls.is_some())
            .unwrap();
        one.turns = vec![one.turns[t].clone()];
        let n = 3000;
        for i in 0..n {
            let mut d = one.clone();
            d.session = format!("s{i}");
            w.push(d).unwrap();
        }
        w.finish().unwrap();
        let r = StorylineLanceStore::open(&root).unwrap().reader().unwrap();
        crate::store::read::MOST_HELD.with(|m| m.set(0));
        let mut built = Vec::new();
        r.documents_selected(
            |d| d.session == format!("s{}", n - 1),
            |d, keep| -> Result<(), StoreError> {
                if keep {
                    built.push(d);
                }
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(built.len(), 1);
        assert_eq!(built[0].turns.len(), 1);
        assert!(built[0].turns[0].tool_calls.is_some());
        let held = crate::store::read::MOST_HELD.with(std::cell::Cell::get);
        assert!(held <= 2 * 1024, "{held} documents held at once of {n}");
    }

    fn texts(r: &StoreReader, t: Table, col: &str) -> Vec<Option<String>> {
        let mut out = Vec::new();
        for b in r.scan(t, &[col]).unwrap() {
            let a = b.column(0).as_string::<i32>();
            out.extend(a.iter().map(|v| v.map(str::to_string)));
        }
        out
    }

    fn stored_names(root: &Path, t: Table) -> Vec<String> {
        stored_fields(root, t)
            .into_iter()
            .map(|(n, _, _)| n)
            .collect()
    }

    /// Each stored field's name, how Lance was asked to compress it and
    /// how to lay out its pages.
    fn stored_fields(root: &Path, t: Table) -> Vec<(String, Option<String>, Option<String>)> {
        committed_table(root, t)
            .schema()
            .fields
            .iter()
            .map(|f| {
                let c = f.metadata.get("lance-encoding:compression").cloned();
                let layout = f.metadata.get("lance-encoding:structural-encoding");
                (f.name.clone(), c, layout.cloned())
            })
            .collect()
    }

    #[test]
    fn text_views_are_stored_uncompressed_in_mini_blocks_and_the_raw_json_with_lz4() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("s"), STORE_SCHEMA_VERSION);
        for (t, view, raw) in [
            (Table::Steps, "observation_text", "observation"),
            (Table::ToolCalls, "results_text", "results"),
        ] {
            let fields = stored_fields(&dir.path().join("s"), t);
            let how = |col: &str| {
                let (_, c, layout) = fields.iter().find(|(n, _, _)| n == col).unwrap();
                (c.as_deref(), layout.as_deref())
            };
            assert_eq!(how(view), (Some("none"), Some("miniblock")), "{view}");
            assert_eq!(how(raw), (Some("lz4"), Some("miniblock")), "{raw}");
        }
        // Every JSON column in LZ4 mini-blocks; other text keeps Lance's
        // default.
        let steps = stored_fields(&dir.path().join("s"), Table::Steps);
        for (name, how, layout) in steps {
            let json = Table::Steps.columns()[Table::Steps.index_of(&name).unwrap()].ty
                == crate::table::ColType::Json;
            if json {
                assert_eq!(
                    (how.as_deref(), layout.as_deref()),
                    (Some("lz4"), Some("miniblock")),
                    "{name}"
                );
            } else if name != "observation_text" {
                assert_eq!((how, layout), (None, None), "{name}");
            }
        }
    }

    #[test]
    fn text_views_are_stored_and_an_older_layout_computes_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let (new, text, old) = (
            dir.path().join("v4"),
            dir.path().join("v3"),
            dir.path().join("v2"),
        );
        let r4 = write(&new, STORE_SCHEMA_VERSION);
        let r3 = write(&text, 3);
        let r2 = write(&old, 2);
        // Terminal output, decoded: escaped newlines are newlines again.
        let obs = texts(&r4, Table::Steps, "observation_text");
        assert!(obs.iter().flatten().any(|s| s.contains('\n')));
        for (t, col) in [
            (Table::Steps, "observation_text"),
            (Table::ToolCalls, "results_text"),
        ] {
            assert!(!stored_names(&old, t).iter().any(|n| n == col), "{col}");
            // Kept as bytes from layout 4, as text in layout 3; read as
            // text from either.
            assert_eq!(stored_type(&new, t, col), DataType::Binary, "{col}");
            assert_eq!(stored_type(&text, t, col), DataType::Utf8, "{col}");
            let a = texts(&r4, t, col);
            assert_eq!(a, texts(&r3, t, col), "{col}");
            assert_eq!(a, texts(&r2, t, col), "{col}");
            assert!(a.iter().flatten().any(|s| !s.is_empty()), "{col}: text");
            // As stored, for a reader that checks what it keeps.
            let mut bytes = Vec::new();
            r4.scan_views_where(
                t,
                &[col],
                None,
                crate::store::Views::Stored,
                |b| -> Result<(), StoreError> {
                    let c = b.column(0).as_binary::<i32>();
                    bytes.extend(c.iter().map(|v| v.map(<[u8]>::to_vec)));
                    Ok(())
                },
            )
            .unwrap();
            let want: Vec<_> = a
                .iter()
                .map(|v| v.clone().map(String::into_bytes))
                .collect();
            assert_eq!(bytes, want, "{col}");
        }
    }

    /// Labels are dictionaries in the files and text to every reader, the
    /// same text an older layout gives; one too long to keep inline is an
    /// object like any other cell, and collection keeps it.
    #[test]
    fn labels_are_stored_as_dictionaries_and_read_as_text() {
        let dir = tempfile::tempdir().unwrap();
        let (new, old) = (dir.path().join("v5"), dir.path().join("v4"));
        let r5 = write(&new, STORE_SCHEMA_VERSION);
        let r4 = write(&old, 4);
        let labels = [
            (Table::Steps, "step_source"),
            (Table::Steps, "model_name"),
            (Table::ToolCalls, "function_name"),
            (Table::Documents, "agent_name"),
        ];
        for (t, col) in labels {
            assert!(super::super::schema::is_label(t, col), "{col}");
            assert!(
                matches!(stored_type(&new, t, col), DataType::Dictionary(..)),
                "{col}"
            );
            assert_eq!(stored_type(&old, t, col), DataType::Utf8, "{col}");
            let a = texts(&r5, t, col);
            assert_eq!(a, texts(&r4, t, col), "{col}");
            assert!(a.iter().flatten().any(|s| !s.is_empty()), "{col}: text");
            // Streamed: as text, and as stored for SQL, which turns the
            // labels into text itself.
            for views in [crate::store::Views::Text, crate::store::Views::Stored] {
                let mut streamed = Vec::new();
                r5.scan_views_where(t, &[col], None, views, |b| -> Result<(), StoreError> {
                    let c = b.column(0);
                    assert_eq!(
                        matches!(c.data_type(), DataType::Dictionary(..)),
                        views == crate::store::Views::Stored,
                        "{col}"
                    );
                    let c = arrow::compute::cast(c, &DataType::Utf8).unwrap();
                    let c = c.as_string::<i32>();
                    streamed.extend(c.iter().map(|v| v.map(str::to_string)));
                    Ok(())
                })
                .unwrap();
                assert_eq!(streamed, a, "{col}");
            }
        }
        // Documents come back as they went in.
        let docs = |r: &StoreReader| {
            let mut out = Vec::new();
            r.documents_each(|d| -> Result<(), StoreError> {
                out.push(d);
                Ok(())
            })
            .unwrap();
            out
        };
        assert_eq!(docs(&r5), docs(&r4));

        let root = dir.path().join("long");
        let mut w = StoreWriter::create(&root).unwrap();
        let mut doc = harbor_docs().remove(0);
        let long = "model-".repeat(crate::store::OBJECT_INLINE_LIMIT / 4);
        let t = doc.turns.len() - 1;
        doc.turns[t].model = Some(long.clone());
        w.push(doc).unwrap();
        assert!(w.finish().unwrap().objects >= 1);
        StorylineLanceStore::open(&root)
            .unwrap()
            .maintain(&crate::store::MaintainOptions::default())
            .unwrap();
        let r = StorylineLanceStore::open(&root).unwrap().reader().unwrap();
        let names = texts(&r, Table::Steps, "model_name");
        assert_eq!(names.iter().flatten().filter(|n| **n == long).count(), 1);
        // As stored, the column holding the descriptor comes as text,
        // resolved.
        let mut stored = Vec::new();
        r.scan_views_where(
            Table::Steps,
            &["model_name"],
            None,
            crate::store::Views::Stored,
            |b| -> Result<(), StoreError> {
                let c = b.column(0).as_string::<i32>();
                stored.extend(c.iter().map(|v| v.map(str::to_string)));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(stored, names);
    }

    /// Collecting unused objects keeps those that only a text view kept
    /// as bytes names: tool output past the inline limit is an object as
    /// raw JSON and another as text.
    #[test]
    fn collection_keeps_the_objects_of_text_kept_as_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("s");
        let mut w = StoreWriter::create(&root).unwrap();
        let mut doc = harbor_docs().remove(0);
        let big = "FAILED tests/test_api.py::test_timeout - 请求超时\n".repeat(2_000);
        assert!(big.len() > crate::store::OBJECT_INLINE_LIMIT);
        let t = doc.turns.len() - 1;
        doc.turns[t].observation = Some(serde_json::json!({"results": [{"content": big}]}));
        w.push(doc).unwrap();
        let written = w.finish().unwrap();
        assert!(written.objects >= 2, "{written:?}");
        let mut store = StorylineLanceStore::open(&root).unwrap();
        store
            .maintain(&crate::store::MaintainOptions::default())
            .unwrap();
        let r = StorylineLanceStore::open(&root).unwrap().reader().unwrap();
        let obs = texts(&r, Table::Steps, "observation_text");
        assert!(obs.iter().flatten().any(|o| o.contains(&big)));
    }

    fn stored_type(root: &Path, t: Table, col: &str) -> DataType {
        committed_table(root, t)
            .schema()
            .field(col)
            .unwrap()
            .data_type()
    }

    /// A table of the store at `root`, at the version its snapshot pins.
    fn committed_table(root: &Path, t: Table) -> lance::Dataset {
        let c = StorylineLanceStore::open(root)
            .unwrap()
            .current()
            .committed
            .clone()
            .unwrap();
        let v = match t {
            Table::Steps => c.steps_version,
            Table::Documents => c.runs_version,
            _ => c.tool_calls_version,
        };
        let path = table_path(root, &c.table_generation, t);
        runtime()
            .block_on(super::super::lance_io::open_at(&path, v))
            .unwrap()
    }
}
