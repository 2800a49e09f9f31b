//! Publishing a file whole: readers see the old contents or the new, never
//! a part.

use std::io::Write as _;
use std::path::Path;

/// Write `bytes` to `path` through a hidden temporary file beside it,
/// flushed to disk, then renamed over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    super::interrupt::remove_on_interrupt(&tmp);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    super::interrupt::settle(&tmp, || {
        let result = written.and_then(|()| std::fs::rename(&tmp, path));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    })
}

/// Create `path` with `bytes`, never replacing anything: written to a hidden
/// temporary file beside it, flushed, then hard-linked into place, which
/// fails with `AlreadyExists` when something is there. The file appears
/// complete or not at all.
pub fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
    }
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    super::interrupt::remove_on_interrupt(&tmp);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    super::interrupt::settle(&tmp, || {
        let result = written.and_then(|()| std::fs::hard_link(&tmp, path));
        let _ = std::fs::remove_file(&tmp);
        result
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.json");
        super::write_atomic(&p, b"one").unwrap();
        super::write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        let n = d.path().join("b.json");
        super::write_new(&n, b"x").unwrap();
        let again = super::write_new(&n, b"y").unwrap_err();
        assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&n).unwrap(), b"x");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2);
    }
}

/// An exclusive advisory lock on a file (created when missing), released
/// when dropped.
#[derive(Debug)]
pub struct FileLock(std::fs::File);

impl FileLock {
    /// Take the lock without waiting: `Ok(None)` when another process
    /// holds it.
    pub fn try_new(path: &Path) -> std::io::Result<Option<FileLock>> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        match f.try_lock() {
            Ok(()) => Ok(Some(FileLock(f))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}
