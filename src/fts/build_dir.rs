//! The directory an index is written in: tantivy's own, except that the
//! files it reads back (to merge segments) are read with positioned reads
//! instead of memory maps.
//!
//! A merge reads every byte of its input segments. Through memory maps,
//! each page read stays resident in the writing process until the merge
//! ends, so an import's peak memory carried the whole input of its largest
//! merge (about 140 MiB at 20,000 steps per segment; more than 1 GiB on
//! a 5M-step import before merges were capped). Read into buffers, a merge
//! holds what it is working on. Searches open indexes with memory maps as
//! before: they read a small part of the index, and the pages are shared
//! with the page cache.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tantivy::directory::error::{
    DeleteError, LockError, OpenDirectoryError, OpenReadError, OpenWriteError,
};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, OwnedBytes, WatchCallback,
    WatchHandle, WritePtr,
};
use tantivy::HasLen;

/// Bytes read at once for small reads: a merge walks postings and
/// positions term by term, in file order, with one read per term; served
/// from a window, those are one system call per window instead.
const WINDOW_BYTES: usize = 256 << 10;

/// tantivy's directory on disk, with files read by positioned reads.
#[derive(Clone, Debug)]
pub(crate) struct BuildDirectory {
    inner: MmapDirectory,
    root: PathBuf,
}

impl BuildDirectory {
    pub(crate) fn open(root: &Path) -> Result<BuildDirectory, OpenDirectoryError> {
        Ok(BuildDirectory {
            inner: MmapDirectory::open(root)?,
            root: root.to_path_buf(),
        })
    }
}

impl Directory for BuildDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let full = self.root.join(path);
        let wrap = |e: io::Error| {
            if e.kind() == io::ErrorKind::NotFound {
                OpenReadError::FileDoesNotExist(path.to_path_buf())
            } else {
                OpenReadError::wrap_io_error(e, full.clone())
            }
        };
        let file = File::open(&full).map_err(wrap)?;
        let len = file.metadata().map_err(wrap)?.len() as usize;
        Ok(Arc::new(Positioned {
            file,
            len,
            window: Mutex::new((0, Vec::new())),
        }))
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        self.inner.open_write(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.inner.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        self.inner.atomic_write(path, data)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.inner.sync_directory()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        self.inner.acquire_lock(lock)
    }

    fn watch(&self, callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(callback)
    }
}

/// A file read with `pread`, small reads served from the last window read.
#[derive(Debug)]
struct Positioned {
    file: File,
    len: usize,
    /// The window's offset in the file and its bytes.
    window: Mutex<(usize, Vec<u8>)>,
}

impl HasLen for Positioned {
    fn len(&self) -> usize {
        self.len
    }
}

impl FileHandle for Positioned {
    fn read_bytes(&self, range: Range<usize>) -> io::Result<OwnedBytes> {
        if range.end > self.len || range.start > range.end {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("read of {range:?} past the end ({})", self.len),
            ));
        }
        if range.is_empty() {
            return Ok(OwnedBytes::empty());
        }
        if range.len() >= WINDOW_BYTES {
            let mut buf = vec![0; range.len()];
            self.file.read_exact_at(&mut buf, range.start as u64)?;
            return Ok(OwnedBytes::new(buf));
        }
        let mut w = self
            .window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (start, bytes) = &mut *w;
        if range.start < *start || range.end > *start + bytes.len() {
            let end = (range.start + WINDOW_BYTES).min(self.len);
            bytes.resize(end - range.start, 0);
            self.file.read_exact_at(bytes, range.start as u64)?;
            *start = range.start;
        }
        let from = range.start - *start;
        Ok(OwnedBytes::new(bytes[from..from + range.len()].to_vec()))
    }
}
