//! Spilling: operator state that does not fit the memory budget is
//! written to temporary files, as Arrow IPC, in a directory private to the
//! query. The directory goes when the query ends, whether it succeeded or
//! failed; one left by a process that was killed is removed by the next
//! query that starts (its name carries the process id).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow::record_batch::RecordBatch;

use super::SqlError;

/// Start of the names of spill directories.
const PREFIX: &str = "pchronicle-spill-";

/// Where one query spills, made on first use.
pub struct Spill {
    base: PathBuf,
    limit: u64,
    dir: Mutex<Option<PathBuf>>,
    used: AtomicU64,
    files: AtomicU64,
}

impl Spill {
    /// Spill under `base`, at most `limit` bytes (0: never spill). The
    /// first query of a process that may spill removes what killed ones
    /// left there.
    pub fn new(base: PathBuf, limit: u64) -> Self {
        static SWEPT: std::sync::Once = std::sync::Once::new();
        if limit > 0 {
            SWEPT.call_once(|| remove_orphans(&base));
        }
        Spill {
            base,
            limit,
            dir: Mutex::new(None),
            used: AtomicU64::new(0),
            files: AtomicU64::new(0),
        }
    }

    /// True when spilling is allowed at all.
    pub fn enabled(&self) -> bool {
        self.limit > 0
    }

    /// Write `batches` to a new spill file; fails once the query's spill
    /// files would pass the limit.
    pub fn write(
        &self,
        schema: &SchemaRef,
        batches: &[RecordBatch],
    ) -> Result<SpillFile, SqlError> {
        let mut w = self.writer(schema)?;
        for b in batches {
            w.write(b)?;
        }
        w.finish()
    }

    /// A new spill file to write batch by batch.
    pub fn writer(&self, schema: &SchemaRef) -> Result<SpillWriter<'_>, SqlError> {
        let path = self.next_path()?;
        let file = File::create(&path).map_err(io)?;
        let w = FileWriter::try_new(BufWriter::new(file), schema).map_err(io)?;
        Ok(SpillWriter {
            spill: self,
            file: SpillFile { path },
            w,
        })
    }

    /// Count `bytes` more against the limit.
    fn charge(&self, bytes: u64) -> Result<(), SqlError> {
        let used = self.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if used > self.limit {
            return Err(SqlError::SpillLimit { limit: self.limit });
        }
        Ok(())
    }

    fn next_path(&self) -> Result<PathBuf, SqlError> {
        let mut dir = self
            .dir
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if dir.is_none() {
            let d = self.base.join(format!(
                "{PREFIX}{}-{:x}",
                std::process::id(),
                rand_suffix()
            ));
            std::fs::create_dir_all(&d).map_err(|e| SqlError::Spill {
                message: format!("cannot create {}: {e}", d.display()),
            })?;
            *dir = Some(d);
        }
        let n = self.files.fetch_add(1, Ordering::Relaxed);
        Ok(dir.as_ref().expect("set above").join(format!("{n}.arrow")))
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        let dir = self
            .dir
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(d) = dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// The bytes of the rows of `b` (a slice of a larger batch counts its own
/// rows only).
fn slice_bytes(b: &RecordBatch) -> u64 {
    b.columns()
        .iter()
        .map(|c| {
            c.to_data()
                .get_slice_memory_size()
                .unwrap_or_else(|_| c.get_array_memory_size()) as u64
        })
        .sum()
}

fn io(e: impl std::fmt::Display) -> SqlError {
    SqlError::Spill {
        message: format!("spill file: {e}"),
    }
}

/// A spill file being written.
pub struct SpillWriter<'a> {
    spill: &'a Spill,
    /// Removed if the writer is dropped before it finishes.
    file: SpillFile,
    w: FileWriter<BufWriter<File>>,
}

impl SpillWriter<'_> {
    /// Append `b`; its size in memory counts against the limit as it goes.
    pub fn write(&mut self, b: &RecordBatch) -> Result<(), SqlError> {
        self.spill.charge(slice_bytes(b))?;
        self.w.write(b).map_err(io)
    }

    /// The file, complete.
    pub fn finish(mut self) -> Result<SpillFile, SqlError> {
        self.w.finish().map_err(io)?;
        let bytes = std::fs::metadata(&self.file.path).map_err(io)?.len();
        crate::util::stats::add(crate::util::stats::Counter::SpillBytes, bytes);
        crate::util::stats::add(crate::util::stats::Counter::SpillFiles, 1);
        Ok(self.file)
    }
}

/// A run written by [`Spill::write`].
pub struct SpillFile {
    path: PathBuf,
}

impl SpillFile {
    /// Its batches, in the order written.
    pub fn read(&self) -> Result<FileReader<BufReader<File>>, SqlError> {
        let f = File::open(&self.path).map_err(io)?;
        FileReader::try_new(BufReader::new(f), None).map_err(io)
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        // Read once: freed as soon as merged, not at the end of the query.
        let _ = std::fs::remove_file(&self.path);
    }
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// Remove spill directories under `base` whose process is gone (killed
/// while it spilled).
pub fn remove_orphans(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
