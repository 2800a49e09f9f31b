//! The thin async bridge to Lance: one private runtime, table writes fed by
//! channels, pinned opens and projected scans.

use std::sync::mpsc::Receiver;
use std::sync::OnceLock;

use arrow::array::RecordBatchReader;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use futures::StreamExt as _;
use lance::dataset::builder::DatasetBuilder;
use lance::dataset::{WriteMode, WriteParams};
use lance::Dataset;

use super::StoreError;

/// The runtime all Lance calls run on.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("pchronicle-lance")
            .enable_all()
            .build()
            .expect("the Tokio runtime starts")
    })
}

pub fn lance_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Lance(e.to_string())
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

/// Create a new Lance dataset at `path` from the batches the channel yields;
/// returns its version.
pub async fn create_table(path: &str, reader: ChannelReader) -> Result<u64, StoreError> {
    let params = WriteParams {
        mode: WriteMode::Create,
        max_rows_per_file: 1 << 22,
        ..Default::default()
    };
    let ds = Dataset::write(reader, path, Some(params))
        .await
        .map_err(lance_err)?;
    Ok(ds.version().version)
}

/// Open `path` at exactly `version`.
pub async fn open_at(path: &str, version: u64) -> Result<Dataset, StoreError> {
    DatasetBuilder::from_uri(path)
        .with_version(version)
        .load()
        .await
        .map_err(lance_err)
}

/// Read `columns` of `path@version` (all rows, in storage order), optionally
/// with a Lance filter.
pub async fn scan(
    path: &str,
    version: u64,
    columns: &[&str],
    filter: Option<&str>,
) -> Result<Vec<RecordBatch>, StoreError> {
    let ds = open_at(path, version).await?;
    let mut scanner = ds.scan();
    scanner.scan_in_order(true);
    scanner.project(columns).map_err(lance_err)?;
    if let Some(f) = filter {
        scanner.filter(f).map_err(lance_err)?;
    }
    let mut stream = scanner.try_into_stream().await.map_err(lance_err)?;
    let mut out = Vec::new();
    while let Some(b) = stream.next().await {
        out.push(b.map_err(lance_err)?);
    }
    Ok(out)
}

/// Rows of `path@version`.
pub async fn count_rows(path: &str, version: u64) -> Result<u64, StoreError> {
    let ds = open_at(path, version).await?;
    ds.count_rows(None)
        .await
        .map(|n| n as u64)
        .map_err(lance_err)
}
