//! The thin async bridge to Lance: one private runtime, table writes fed by
//! channels, pinned opens and projected scans.

use std::sync::mpsc::Receiver;
use std::sync::{Arc, OnceLock};

use arrow::array::RecordBatchReader;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use futures::{SinkExt as _, StreamExt as _};
use lance::dataset::builder::DatasetBuilder;
use lance::dataset::{WriteMode, WriteParams};
use lance::session::Session;
use lance::Dataset;
use lance_io::object_store::providers::ObjectStoreRegistry;

use super::StoreError;

pub use crate::util::rt::runtime;

pub fn lance_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Lance(strip_source_locations(&e.to_string()))
}

/// Lance appends the Rust source location of an error (`, /path/x.rs:12:5`)
/// to its message; users get the message only.
pub fn strip_source_locations(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(at) = rest.find(".rs:") {
        // The location token starts after the last separator before `.rs:`.
        let head = &rest[..at];
        let start = head
            .rfind(|c: char| c.is_whitespace() || c == '(' || c == '[')
            .map_or(0, |i| i + 1);
        let tail = &rest[at + 4..];
        let end = tail
            .find(|c: char| !(c.is_ascii_digit() || c == ':'))
            .unwrap_or(tail.len());
        let token = &rest[start..at];
        if end == 0 || !(token.contains('/') || token.contains('\\')) {
            out.push_str(&rest[..at + 4]);
            rest = tail;
            continue;
        }
        let kept = rest[..start].trim_end_matches([' ', ',', '(', '[']);
        out.push_str(kept);
        rest = &tail[end..];
        rest = rest.strip_prefix([')', ']']).unwrap_or(rest);
    }
    out.push_str(rest);
    out.trim().to_string()
}

/// A record batch reader fed by a channel (Lance pulls it on a background
/// thread, so blocking here is fine).
pub struct ChannelReader {
    pub schema: SchemaRef,
    pub rx: Receiver<RecordBatch>,
}

impl Iterator for ChannelReader {
    type Item = Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.rx.recv().ok().map(Ok)
    }
}

impl RecordBatchReader for ChannelReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Column bytes a table writer buffers per column before it writes a page.
/// Lance's default (8 MiB) is held by every column of a file until the page
/// fills, even small integer columns over millions of rows: a wide table
/// would buffer hundreds of MiB whatever the size of the input.
pub const PAGE_BUFFER_BYTES_PER_COLUMN: u64 = 2 << 20;

/// The file writer options of a table with `schema`: `per_column` bytes
/// buffered per column.
fn file_writer_options(
    schema: &SchemaRef,
    per_column: u64,
) -> lance_file::writer::FileWriterOptions {
    lance_file::writer::FileWriterOptions {
        data_cache_bytes: Some(per_column * schema.fields().len().max(1) as u64),
        ..Default::default()
    }
}

/// Rows per data file of a table. A scan holds state for each file it has
/// open in proportion to the file's rows (about 55 MiB per million rows
/// of `steps` and `tool_calls` for a whole-row read), so a table in one
/// big file made export and the index build grow with the store: 317 MiB
/// for the 1M-step benchmark store in one file per table, 474 MiB for
/// 5M steps. In files of 65,536 rows, read one at a time, the same export
/// peaks at 200 MiB, as fast (docs/benchmarks.md).
const ROWS_PER_FILE: usize = 1 << 16;

/// The Lance file format of new tables: 2.2, whose mini-blocks record
/// 32-bit chunk sizes. A chunk holds at least two cells (but the last), and
/// 2.1's 16-bit sizes cap a chunk at 32 KiB after compression, which two
/// incompressible cells of 16 KiB already pass; the store keeps cells of
/// up to the objects' inline limit (64 KiB) in its JSON columns' chunks.
/// 2.2 is also Lance 14's default: naming it keeps new tables in the format
/// the JSON layout was measured and tested in if that default moves.
const FILE_FORMAT: lance_file::version::LanceFileVersion =
    lance_file::version::LanceFileVersion::V2_2;

/// Append the batches the channel yields to the Lance table at `path`
/// (created when `exists` is false); returns the new version.
pub async fn append_table(
    path: &str,
    reader: ChannelReader,
    exists: bool,
) -> Result<u64, StoreError> {
    append_table_paged(path, reader, exists, PAGE_BUFFER_BYTES_PER_COLUMN).await
}

/// [`append_table`] with `per_column` bytes buffered per column before a
/// page is written.
pub async fn append_table_paged(
    path: &str,
    reader: ChannelReader,
    exists: bool,
    per_column: u64,
) -> Result<u64, StoreError> {
    let params = WriteParams {
        mode: if exists {
            WriteMode::Append
        } else {
            WriteMode::Create
        },
        max_rows_per_file: ROWS_PER_FILE,
        // New tables in the format their JSON columns' mini-blocks need
        // (`schema::table_schema`); appends keep the table's own.
        data_storage_version: (!exists).then_some(FILE_FORMAT),
        session: session_for(path)?,
        file_writer_options: Some(file_writer_options(&reader.schema, per_column)),
        ..Default::default()
    };
    let ds = Dataset::write(reader, path, Some(params))
        .await
        .map_err(lance_err)?;
    Ok(ds.version().version)
}

/// The newest version of the table at `path`, or `None` when there is none.
pub async fn latest_version(path: &str) -> Result<Option<u64>, StoreError> {
    let mut builder = DatasetBuilder::from_uri(path);
    if let Some(s) = session_for(path)? {
        builder = builder.with_session(s);
    }
    match builder.load().await {
        Ok(ds) => Ok(Some(ds.version().version)),
        Err(lance::Error::DatasetNotFound { .. }) => Ok(None),
        Err(e) => Err(lance_err(e)),
    }
}

/// The Lance session for `path`: S3 URLs go through pChronicle's S3 client
/// (see `crate::s3::lance`); local paths share [`local_session`].
fn session_for(path: &str) -> Result<Option<Arc<Session>>, StoreError> {
    if path.starts_with("s3://") {
        crate::s3::lance::session()
            .map(Some)
            .map_err(|e| StoreError::Io(format!("[{}] {e}", e.code())))
    } else {
        Ok(Some(local_session()))
    }
}

/// Bytes of Lance's metadata cache for tables on local disk.
const LOCAL_METADATA_CACHE_BYTES: usize = 16 << 20;
/// Bytes of Lance's index cache for tables on local disk (the scalar
/// indexes `maintain --reindex` builds).
const LOCAL_INDEX_CACHE_BYTES: usize = 32 << 20;

/// The session of every table on local disk in this process. Lance's
/// default gives each opened table its own metadata cache of up to 1 GiB,
/// and a scan caches there what it reads to start decoding each page of
/// each data file (chunk tables, dictionaries, repetition indexes) besides
/// the files' metadata. A command reads each file once or twice, so the
/// cache did not save reads; it held them, and memory grew with the data
/// files read: the 5M-step export's anonymous memory rose from about 120
/// to 170–195 MiB over its run, and levels at about 150 MiB with this
/// session (docs/benchmarks.md).
fn local_session() -> Arc<Session> {
    static SESSION: OnceLock<Arc<Session>> = OnceLock::new();
    SESSION
        .get_or_init(|| {
            Arc::new(Session::new(
                LOCAL_INDEX_CACHE_BYTES,
                LOCAL_METADATA_CACHE_BYTES,
                Arc::new(ObjectStoreRegistry::default()),
            ))
        })
        .clone()
}

/// Open `path` at exactly `version`.
pub async fn open_at(path: &str, version: u64) -> Result<Dataset, StoreError> {
    let mut builder = DatasetBuilder::from_uri(path).with_version(version);
    if let Some(s) = session_for(path)? {
        builder = builder.with_session(s);
    }
    builder.load().await.map_err(lance_err)
}

/// Read `columns` of `path@version` (all rows, in storage order), optionally
/// with a Lance filter; labels as text.
pub async fn scan(
    path: &str,
    version: u64,
    columns: &[&str],
    filter: Option<&str>,
) -> Result<Vec<RecordBatch>, StoreError> {
    let ds = open_at(path, version).await?;
    crate::util::stats::add(
        crate::util::stats::Counter::FilesOpened,
        ds.fragments().len() as u64,
    );
    let mut scanner = ds.scan();
    scanner.scan_in_order(true);
    scanner.with_file_reader_options(sequential_reads());
    project(&mut scanner, &ds, columns)?;
    if let Some(f) = filter {
        scanner.filter(f).map_err(lance_err)?;
    }
    let mut stream = scanner.try_into_stream().await.map_err(lance_err)?;
    let mut out = Vec::new();
    while let Some(b) = stream.next().await {
        out.push(as_read(b)?);
    }
    Ok(out)
}

/// Read only `columns` of `ds`, in that order. Named by schema rather than
/// by expression: Lance plans expressions with DataFusion, whose session
/// (every SQL function registered) a plain column list does not need.
pub(super) fn project(
    scanner: &mut lance::dataset::scanner::Scanner,
    ds: &Dataset,
    columns: &[&str],
) -> Result<(), StoreError> {
    let schema = ds.schema().project(columns).map_err(lance_err)?;
    scanner.project_with_schema(&schema).map_err(lance_err)?;
    Ok(())
}

/// Reader options for scans that read every row of a table in order.
/// Lance keeps each page's repetition index (a few bytes per row of every
/// long-text column) for the whole scan and in its cache afterwards: it
/// speeds up reads of single rows, which scans never do. Without it a
/// whole-store export peaks about 30 MiB lower (docs/benchmarks.md).
pub(super) fn sequential_reads() -> lance_file::reader::FileReaderOptions {
    let mut options = lance_file::reader::FileReaderOptions::default();
    options.decoder_config.cache_repetition_index = false;
    options
}

/// Bytes of reads a streamed scan may have in flight.
const WINDOW_IO_BYTES: u64 = 32 << 20;

/// Batches of a table, in storage order.
pub type BatchStream = futures::stream::BoxStream<'static, Result<RecordBatch, StoreError>>;

/// Data files a column scan reads at once, each on a task of its own.
const FILES_AT_ONCE: usize = 2;

/// The batches of `columns` of `path@version` in storage order, as a stream
/// (pull it with `runtime().block_on(stream.next())`, one batch at a time).
///
/// With `rows`, a read of whole rows: batches of `rows` rows, one data file
/// open at a time (each open file holds state in proportion to its rows,
/// see [`ROWS_PER_FILE`]).
///
/// Otherwise a column read for SQL, in batches of [`WIDE_BATCH_ROWS`]
/// when a column holds long values (text views, and JSON in the mini-blocks
/// new tables lay it out in: `schema::is_wide`) and of Lance's
/// 8,192 rows otherwise. Lance opens four files ahead, which
/// narrow reads keep (two benchmark aggregates took 52 and 56 ms with it,
/// 59 and 66 ms with one file at a time). When it reads a long-text view (the
/// tool output a `LIKE` searches), [`FILES_AT_ONCE`] data files are read
/// at once, each by its own scan on the runtime's workers, and their
/// batches are handed on file by file. One scan of the whole table would
/// lay out the pages of every file on the thread that pulls the stream
/// (Lance copies each long-text page into place there), and on the tool
/// output of the 1M-step benchmark store that thread was the limit.
///
/// Batches come as stored: labels as dictionaries, which the caller turns
/// into text or not (`schema::labels_as_text`).
///
/// Either way the reads ahead of the consumer are bounded (Lance buffers
/// up to 2 GiB of them by default): a consumer slower than the disk, such
/// as the full-text index build, would otherwise hold much of the table's
/// text in memory, and even a fast one holds more than it needs (a `LIKE`
/// over the tool output of the 1M-step benchmark store peaked at 535 MiB
/// with Lance's default, 350 MiB with this window, and ran no slower).
pub async fn scan_stream(
    path: &str,
    version: u64,
    columns: &[&str],
    filter: Option<&str>,
    rows: Option<usize>,
) -> Result<BatchStream, StoreError> {
    let ds = Arc::new(open_at(path, version).await?);
    let n_files = ds.fragments().len();
    crate::util::stats::add(crate::util::stats::Counter::FilesOpened, n_files as u64);
    // A column that is not there fails here, before any file is read.
    ds.schema().project(columns).map_err(lance_err)?;
    let columns: Vec<String> = columns.iter().map(ToString::to_string).collect();
    let filter = filter.map(str::to_string);
    // Only long text gains: narrow columns decode in a fraction of the
    // time, and the scans' setup per file then costs more than it saves
    // (a GROUP BY over session ids took 38 ms this way, 31 ms in one scan).
    let field = |test: fn(&std::collections::HashMap<String, String>) -> bool| {
        columns
            .iter()
            .any(|c| ds.schema().field(c).is_some_and(|f| test(&f.metadata)))
    };
    let long_text = field(super::schema::is_text_view);
    // A column read of long values comes in batches of fewer rows: each is
    // handed on whole, and one of Lance's 8,192 rows of JSON or tool output
    // is megabytes, held while the batches after it are decoded.
    let batch = rows.or_else(|| field(super::schema::is_wide).then_some(WIDE_BATCH_ROWS));
    let read = Read {
        batch,
        one_file: rows.is_some(),
    };
    if rows.is_some() || n_files < 2 || !long_text {
        return Ok(scanner(&ds, &columns, filter.as_deref(), read, None)?
            .try_into_stream()
            .await
            .map_err(lance_err)?
            .map(|b| b.map_err(lance_err))
            .boxed());
    }
    // Each file's scan runs ahead into a channel of one batch; the next
    // file's scan starts while this one's batches are handed on.
    let files = ds.fragments().as_ref().clone();
    let each_file = futures::stream::iter(files).map(move |file| {
        let (ds, columns, filter) = (ds.clone(), columns.clone(), filter.clone());
        async move {
            let (mut tx, rx) = futures::channel::mpsc::channel(1);
            runtime().spawn(async move {
                let scan = scanner(&ds, &columns, filter.as_deref(), read, Some(file));
                let mut batches = match scan {
                    Ok(s) => match s.try_into_stream().await {
                        Ok(b) => b,
                        Err(e) => return drop(tx.send(Err(lance_err(e))).await),
                    },
                    Err(e) => return drop(tx.send(Err(e)).await),
                };
                while let Some(b) = batches.next().await {
                    let b = b.map_err(lance_err);
                    // The consumer went away: stop reading.
                    if tx.send(b).await.is_err() {
                        return;
                    }
                }
            });
            rx
        }
    });
    Ok(each_file.buffered(FILES_AT_ONCE).flatten().boxed())
}

/// A batch as Lance read it, with the labels a store keeps as
/// dictionaries turned into text (`schema::labels_as_text`).
fn as_read(b: Result<RecordBatch, lance::Error>) -> Result<RecordBatch, StoreError> {
    super::schema::labels_as_text(b.map_err(lance_err)?).map_err(lance_err)
}

/// How a scan reads: rows per batch (Lance's default when `None`), and
/// whether one data file is open at a time.
#[derive(Clone, Copy)]
struct Read {
    batch: Option<usize>,
    one_file: bool,
}

/// Rows per batch of a column read of long values (see [`scan_stream`]):
/// a JSON filter over the 1M-step benchmark store held 30–31 MiB of
/// memory with it against 43–45 with Lance's 8,192, in about the same time
/// (the batches cost it a tenth more CPU; docs/benchmarks.md).
const WIDE_BATCH_ROWS: usize = 2048;

/// A scan of `columns` (of one data file when `file` is given) in storage
/// order; see [`scan_stream`].
fn scanner(
    ds: &Arc<Dataset>,
    columns: &[String],
    filter: Option<&str>,
    read: Read,
    file: Option<lance::table::format::Fragment>,
) -> Result<lance::dataset::scanner::Scanner, StoreError> {
    let mut scanner = ds.scan();
    scanner.scan_in_order(true);
    if let Some(n) = read.batch {
        scanner.batch_size(n);
    }
    if read.one_file {
        scanner.fragment_readahead(1);
    }
    if let Some(f) = file {
        scanner.with_fragments(vec![f]);
    }
    scanner.io_buffer_size(WINDOW_IO_BYTES);
    scanner.with_file_reader_options(sequential_reads());
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    project(&mut scanner, ds, &columns)?;
    if let Some(f) = filter {
        scanner.filter(f).map_err(lance_err)?;
    }
    Ok(scanner)
}

/// Rows of `path@version`.
pub async fn count_rows(path: &str, version: u64) -> Result<u64, StoreError> {
    let ds = open_at(path, version).await?;
    ds.count_rows(None)
        .await
        .map(|n| n as u64)
        .map_err(lance_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    /// A table of `n` rows (`i`, and text that grows with `i`) in files
    /// of `per_file` rows.
    fn table(path: &str, n: i64, per_file: usize) -> u64 {
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int64, false),
            // A text view, which column scans read several files at once.
            Field::new("text", DataType::Utf8, true)
                .with_metadata([("lance-encoding:compression".into(), "none".into())].into()),
        ]));
        let text: StringArray = (0..n)
            .map(|i| (i % 5 != 0).then(|| "x".repeat((i % 300) as usize)))
            .collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from_iter_values(0..n)), Arc::new(text)],
        )
        .unwrap();
        let reader = arrow::record_batch::RecordBatchIterator::new([Ok(batch)], schema);
        let params = WriteParams {
            max_rows_per_file: per_file,
            max_rows_per_group: per_file,
            ..Default::default()
        };
        runtime().block_on(async {
            let ds = Dataset::write(reader, path, Some(params)).await.unwrap();
            assert!(ds.fragments().len() >= 3, "the table spans several files");
            ds.version().version
        })
    }

    fn read(path: &str, v: u64, filter: Option<&str>, rows: Option<usize>) -> Vec<i64> {
        let mut s = runtime()
            .block_on(scan_stream(path, v, &["i", "text"], filter, rows))
            .unwrap();
        let mut out = Vec::new();
        while let Some(b) = runtime().block_on(s.next()) {
            let b = b.unwrap();
            let i = b.column(0).as_primitive::<arrow::datatypes::Int64Type>();
            let text = b.column(1).as_string::<i32>();
            for r in 0..b.num_rows() {
                // Each row's cells stay together across the files.
                let want = (i.value(r) % 5 != 0).then(|| (i.value(r) % 300) as usize);
                assert_eq!(text.is_valid(r).then(|| text.value(r).len()), want);
                out.push(i.value(r));
            }
        }
        out
    }

    /// Every table on local disk is read through one session whose caches
    /// are bounded. With Lance's default session per table, what a scan
    /// read to start decoding each page of each file stayed in a cache of
    /// up to 1 GiB, so memory grew with the files a command read.
    #[test]
    fn local_tables_share_one_bounded_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lance");
        let path = path.to_str().unwrap();
        let v = table(path, 5_000, 700);
        assert_eq!(read(path, v, None, Some(256)).len(), 5_000);
        let session = runtime().block_on(open_at(path, v)).unwrap().session();
        assert!(Arc::ptr_eq(&session, &local_session()));
        let held = session.size_bytes();
        assert!(held > 0, "the scan went through the shared session");
        assert!(
            held <= (LOCAL_METADATA_CACHE_BYTES + LOCAL_INDEX_CACHE_BYTES) as u64,
            "{held} bytes cached"
        );
    }

    #[test]
    fn a_column_scan_reads_files_at_once_in_storage_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lance");
        let path = path.to_str().unwrap();
        let v = table(path, 5_000, 700);
        let all: Vec<i64> = (0..5_000).collect();
        // Files read at once (no `rows`, a text view read) and one at a
        // time give the same rows in the same order.
        assert!(super::super::schema::is_text_view(
            &runtime()
                .block_on(open_at(path, v))
                .unwrap()
                .schema()
                .field("text")
                .unwrap()
                .metadata
        ));
        assert_eq!(read(path, v, None, None), all);
        assert_eq!(read(path, v, None, Some(256)), all);
        let kept: Vec<i64> = all.iter().copied().filter(|i| i % 7 == 3).collect();
        assert_eq!(read(path, v, Some("i % 7 = 3"), None), kept);
        // A consumer that stops after the first batch does not wait for the
        // scans still reading ahead.
        let mut s = runtime()
            .block_on(scan_stream(path, v, &["i", "text"], None, None))
            .unwrap();
        assert!(runtime().block_on(s.next()).unwrap().is_ok());
        drop(s);
        // A column that is not there fails the scan, not the process.
        assert!(runtime()
            .block_on(scan_stream(path, v, &["nope"], None, None))
            .is_err());
    }

    /// A column read of JSON comes in batches of [`WIDE_BATCH_ROWS`] rows;
    /// one of short values in Lance's larger batches, and whole rows in
    /// the batches asked for.
    #[test]
    fn long_values_are_read_in_smaller_batches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lance");
        let path = path.to_str().unwrap();
        let json = store_json_schema();
        let schema = Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int64, false),
            json.field(0).clone(),
        ]));
        let n = 20_000_i64;
        let j: StringArray = (0..n)
            .map(|i| Some(format!(r#"{{"priority":{}}}"#, i % 4)))
            .collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from_iter_values(0..n)), Arc::new(j)],
        )
        .unwrap();
        let reader = arrow::record_batch::RecordBatchIterator::new([Ok(batch)], schema);
        let v = runtime().block_on(async {
            let ds = Dataset::write(reader, path, None).await.unwrap();
            ds.version().version
        });
        let sizes = |columns: &[&str], rows: Option<usize>| {
            let mut s = runtime()
                .block_on(scan_stream(path, v, columns, None, rows))
                .unwrap();
            let mut out = Vec::new();
            while let Some(b) = runtime().block_on(s.next()) {
                out.push(b.unwrap().num_rows());
            }
            assert_eq!(out.iter().sum::<usize>(), n as usize);
            out
        };
        let wide = sizes(&["i", "j"], None);
        assert!(wide.iter().all(|&r| r <= WIDE_BATCH_ROWS), "{wide:?}");
        let narrow = sizes(&["i"], None);
        assert!(narrow.iter().any(|&r| r > WIDE_BATCH_ROWS), "{narrow:?}");
        let whole = sizes(&["i", "j"], Some(5_000));
        assert!(whole.iter().any(|&r| r > WIDE_BATCH_ROWS), "{whole:?}");
    }

    #[test]
    fn source_locations_are_removed() {
        assert_eq!(
            strip_source_locations(
                "Dataset already exists: /tmp/x/runs.lance, /root/.cargo/registry/src/idx/lance-14.0.2/src/dataset.rs:812:31"
            ),
            "Dataset already exists: /tmp/x/runs.lance"
        );
        assert_eq!(
            strip_source_locations("Not found: a (/home/u/lance-io/src/object_store.rs:9:1), more"),
            "Not found: a, more"
        );
        assert_eq!(
            strip_source_locations("plain main.rs: text"),
            "plain main.rs: text"
        );
    }

    /// One text column `j`, asked for `compression` when given.
    fn json_schema(compression: Option<&str>) -> SchemaRef {
        let f = Field::new("j", DataType::Utf8, true);
        Arc::new(Schema::new(vec![match compression {
            Some(c) => f.with_metadata([("lance-encoding:compression".into(), c.into())].into()),
            None => f,
        }]))
    }

    fn json_rows(schema: &SchemaRef, from: usize) -> ChannelReader {
        rows(
            schema,
            (from..from + 3_000)
                .map(|i| Some(format!(r#"{{"priority":{},"tags":["a","b"]}}"#, i % 4)))
                .collect(),
        )
    }

    fn rows(schema: &SchemaRef, values: Vec<Option<String>>) -> ChannelReader {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let text: StringArray = values.into_iter().collect();
        tx.send(RecordBatch::try_new(schema.clone(), vec![Arc::new(text)]).unwrap())
            .unwrap();
        ChannelReader {
            schema: schema.clone(),
            rx,
        }
    }

    fn read_text(path: &str, v: u64) -> Vec<Option<String>> {
        let batches = runtime().block_on(scan(path, v, &["j"], None)).unwrap();
        batches
            .iter()
            .flat_map(|b| {
                let a = b.column(0).as_string::<i32>();
                a.iter().map(|s| s.map(str::to_string)).collect::<Vec<_>>()
            })
            .collect()
    }

    /// Append `json_cells(1)` with `schema` to the table at `path`, which
    /// holds `json_cells(0)`; checks that both read back in order and
    /// returns the new version.
    fn append_and_read_both(path: &str, schema: &SchemaRef) -> u64 {
        let v = runtime()
            .block_on(append_table(path, rows(schema, json_cells(1)), true))
            .unwrap();
        let mut want = json_cells(0);
        want.extend(json_cells(1));
        assert_eq!(read_text(path, v), want);
        v
    }

    /// JSON cells from empty to one byte under the objects' inline limit,
    /// multi-byte text among them, with NULLs: 40 rows.
    fn json_cells(seed: usize) -> Vec<Option<String>> {
        let limit = crate::store::objects::OBJECT_INLINE_LIMIT;
        (0..40)
            .map(|i| match (i + seed) % 5 {
                0 => None,
                1 => Some(format!(r#"{{"n":{i}}}"#)),
                // Long multi-byte text, which LZ4 shortens a great deal.
                2 => {
                    let body = "终端输出\\u001b[0m ".repeat(limit / 30);
                    let s = format!(r#"{{"out":"{body}"}}"#);
                    assert!(s.len() > 32 * 1024 && s.len() < limit, "{}", s.len());
                    Some(s)
                }
                // Over 2.1's 32 KiB chunk limit even after LZ4.
                3 => Some(format!(r#"{{"out":"{}"}}"#, noise(i, limit - 11))),
                _ => Some(String::new()),
            })
            .collect()
    }

    /// `n` pseudo-random hexadecimal digits, which LZ4 barely shortens.
    fn noise(seed: usize, n: usize) -> String {
        let mut x = seed as u64 | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from_digit((x >> 60) as u32, 16).unwrap()
            })
            .collect()
    }

    /// A JSON column of the store's schema: how `table_schema` asks Lance
    /// to lay it out.
    fn store_json_schema() -> SchemaRef {
        store_schema_of("observation")
    }

    /// A text column `j` with the field metadata a store gives `column` of
    /// its steps.
    fn store_schema_of(column: &str) -> SchemaRef {
        let steps = crate::store::schema::table_schema(
            crate::table::Table::Steps,
            crate::store::current::STORE_SCHEMA_VERSION,
        );
        let f = steps.field_with_name(column).unwrap();
        Arc::new(Schema::new(vec![
            Field::new("j", DataType::Utf8, true).with_metadata(f.metadata().clone())
        ]))
    }

    /// Cells of every length a store keeps inline fit the mini-blocks the
    /// store lays `column` out in (compressed as `compression`), in a new
    /// table and appended to it.
    fn cells_fit_mini_blocks(column: &str, compression: &str) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lance");
        let path = path.to_str().unwrap();
        let schema = store_schema_of(column);
        let meta = |k: &str| schema.field(0).metadata().get(k).cloned();
        assert_eq!(
            (
                meta("lance-encoding:structural-encoding").as_deref(),
                meta("lance-encoding:compression").as_deref()
            ),
            (Some("miniblock"), Some(compression))
        );
        runtime().block_on(async {
            append_table(path, rows(&schema, json_cells(0)), false)
                .await
                .unwrap();
        });
        append_and_read_both(path, &schema);
    }

    /// JSON cells of every length a store keeps inline fit the LZ4
    /// mini-blocks its JSON columns are laid out in.
    #[test]
    fn json_cells_up_to_the_inline_limit_fit_mini_blocks() {
        cells_fit_mini_blocks("observation", "lz4");
    }

    /// So do the cells of a text view, kept uncompressed: a chunk then
    /// holds every byte of a cell of up to 64 KiB.
    #[test]
    fn text_view_cells_up_to_the_inline_limit_fit_mini_blocks() {
        cells_fit_mini_blocks("observation_text", "none");
    }

    /// A table without the mini-block setting takes rows of the current
    /// schema, long cells included, and keeps its own field metadata and
    /// file format. Its format is 2.1, whose chunks could not hold those
    /// cells: a stronger case than the tables of earlier builds (2.2, the
    /// setting missing), which only the metadata tells apart.
    #[test]
    fn an_older_table_takes_long_json_cells() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lance");
        let path = path.to_str().unwrap();
        let old = json_schema(Some("lz4"));
        let params = WriteParams {
            data_storage_version: Some(lance_file::version::LanceFileVersion::V2_1),
            ..Default::default()
        };
        runtime().block_on(async {
            Dataset::write(rows(&old, json_cells(0)), path, Some(params))
                .await
                .unwrap();
        });
        let v = append_and_read_both(path, &store_json_schema());
        let ds = runtime().block_on(open_at(path, v)).unwrap();
        let field = &ds.schema().fields[0];
        assert_eq!(
            field.metadata.get("lance-encoding:structural-encoding"),
            None
        );
        // The appended rows went into files of the table's format.
        let versions: Vec<(u32, u32)> = ds
            .fragments()
            .iter()
            .flat_map(|f| f.files.iter())
            .map(|d| (d.file_major_version, d.file_minor_version))
            .collect();
        assert!(versions.len() >= 2, "{versions:?}");
        assert!(versions.iter().all(|&v| v == (2, 1)), "{versions:?}");
    }

    /// A table written before JSON columns asked for LZ4 takes rows from a
    /// writer that asks for it: Lance keeps the table's own field metadata
    /// (and so its encoding), and every row reads back (docs/formats.md).
    #[test]
    fn a_table_keeps_its_own_compression_when_rows_come_with_another() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.lance");
        let path = path.to_str().unwrap();
        let v = runtime().block_on(async {
            append_table(path, json_rows(&json_schema(None), 0), false)
                .await
                .unwrap();
            let v = append_table(path, json_rows(&json_schema(Some("lz4")), 3_000), true)
                .await
                .unwrap();
            let ds = open_at(path, v).await.unwrap();
            let field = &ds.schema().fields[0];
            assert_eq!(field.metadata.get("lance-encoding:compression"), None);
            v
        });
        let read = read_text(path, v);
        assert_eq!(read.len(), 6_000);
        for (i, j) in read.iter().enumerate() {
            let want = format!(r#"{{"priority":{},"tags":["a","b"]}}"#, i % 4);
            assert_eq!(j.as_deref(), Some(want.as_str()));
        }
    }
}
