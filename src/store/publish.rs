//! Publishing a finished store to S3, create-only.
//!
//! The store is built and validated on local disk first (exactly as a local
//! import), then:
//! 1. a hidden lock object beside the target (`.NAME.pchronicle-import.lock`)
//!    is created with `If-None-Match: *`, so one import at a time writes a
//!    target, and the target must have no `CURRENT`;
//! 2. every file of the store is uploaded under a hidden staging prefix
//!    (`.NAME.pchronicle-staging-…/`), which discovery never looks into;
//! 3. the staged objects are copied server-side under the target, all but
//!    `CURRENT`: without `CURRENT` they are not a Source;
//! 4. `CURRENT` is put last with `If-None-Match: *` — the one step that makes
//!    the store visible, and it cannot replace another writer's;
//! 5. the staging objects and the lock are deleted.
//!
//! A failure or interruption before step 4 leaves no Source behind: copied
//! tables without a `CURRENT` are ignored by discovery (they stay as
//! unreferenced objects until deleted). A stale lock left by a killed import
//! names itself in the `Busy` error.
//!
//! Conditional writes are retried like any request, so a create-only PUT
//! whose answer was lost can come back as a conflict with itself. Both the
//! lock and `CURRENT` are therefore read back on a conflict: when the object
//! holds exactly what this import wrote, the write succeeded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use crate::s3::{Client, PutMode, S3Error, S3Uri};

/// A claimed S3 target.
pub struct S3Target {
    client: Arc<Client>,
    bucket: String,
    /// The target prefix, ending in `/`.
    prefix: String,
    lock_key: String,
    staging: String,
    released: bool,
}

/// Why publishing failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The target already has a store.
    #[error("`{0}` already holds a store (it has a CURRENT)")]
    Exists(String),
    /// Another import holds the lock.
    #[error("another import is creating `{target}` (lock object `{lock}`; delete it if that import was killed)")]
    Busy {
        /// The target.
        target: String,
        /// The lock key.
        lock: String,
    },
    /// S3 refused a request.
    #[error(transparent)]
    S3(#[from] S3Error),
    /// The local store could not be read.
    #[error("cannot read the staged store: {0}")]
    Local(String),
}

impl S3Target {
    /// Claim `uri` (a Dataset prefix, not the bucket root) for one import.
    pub fn claim(uri: &S3Uri) -> Result<Self, PublishError> {
        let client = crate::s3::client()?;
        let prefix = uri.prefix().to_string();
        let trimmed = prefix.trim_end_matches('/');
        let (parent, name) = match trimmed.rsplit_once('/') {
            Some((p, n)) => (format!("{p}/"), n.to_string()),
            None => (String::new(), trimmed.to_string()),
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let lock_key = format!("{parent}.{name}.pchronicle-import.lock");
        let staging = format!(
            "{parent}.{name}.pchronicle-staging-{}-{nanos}/",
            std::process::id()
        );
        let body = format!("{{\"pid\":{},\"started_ns\":{nanos}}}", std::process::id());
        match create(&client, uri.bucket(), &lock_key, body.as_bytes()) {
            Ok(true) => {}
            Ok(false) => {
                return Err(PublishError::Busy {
                    target: uri.to_string(),
                    lock: format!("s3://{}/{lock_key}", uri.bucket()),
                })
            }
            Err(e) => {
                // The PUT may have landed although no answer came back:
                // remove the lock if it is this import's.
                if let Ok(Some((bytes, _))) =
                    client.get_object(uri.bucket(), &lock_key, body.len() as u64 + 1)
                {
                    if bytes.as_ref() == body.as_bytes() {
                        let _ = client.delete(uri.bucket(), &lock_key);
                    }
                }
                return Err(e.into());
            }
        }
        let target = S3Target {
            client,
            bucket: uri.bucket().to_string(),
            prefix,
            lock_key,
            staging,
            released: false,
        };
        if target
            .client
            .get_object(&target.bucket, &format!("{}CURRENT", target.prefix), 1)?
            .is_some()
        {
            return Err(PublishError::Exists(uri.to_string()));
        }
        Ok(target)
    }

    /// Publish the store in `dir` (see the module documentation).
    pub fn publish(mut self, dir: &Path) -> Result<(), PublishError> {
        let files = store_files(dir)?;
        let result = self.publish_files(dir, &files);
        // The staging objects go whatever happened.
        self.delete_all(files.iter().map(|f| format!("{}{f}", self.staging)));
        self.release();
        result
    }

    fn publish_files(&self, dir: &Path, files: &[String]) -> Result<(), PublishError> {
        let upload = |rel: &String| -> Result<(), PublishError> {
            let bytes = std::fs::read(dir.join(rel))
                .map_err(|e| PublishError::Local(format!("{rel}: {e}")))?;
            self.client.put(
                &self.bucket,
                &format!("{}{rel}", self.staging),
                bytes.into(),
                &PutMode::Overwrite,
            )?;
            Ok(())
        };
        crate::util::rt::on_pool(true, || files.par_iter().try_for_each(upload))?;
        let copy = |rel: &String| -> Result<(), PublishError> {
            self.client.copy(
                &self.bucket,
                &format!("{}{rel}", self.staging),
                &format!("{}{rel}", self.prefix),
            )?;
            Ok(())
        };
        crate::util::rt::on_pool(true, || {
            files
                .par_iter()
                .filter(|f| f.as_str() != "CURRENT")
                .try_for_each(copy)
        })?;
        let current = std::fs::read(dir.join("CURRENT"))
            .map_err(|e| PublishError::Local(format!("CURRENT: {e}")))?;
        let key = format!("{}CURRENT", self.prefix);
        crate::util::failpoint::hit("s3-publish-before-current");
        if create(&self.client, &self.bucket, &key, &current)? {
            crate::util::failpoint::hit("s3-publish-after-current");
            Ok(())
        } else {
            Err(PublishError::Exists(format!(
                "s3://{}/{}",
                self.bucket, self.prefix
            )))
        }
    }

    fn delete_all(&self, keys: impl Iterator<Item = String>) {
        let keys: Vec<String> = keys.collect();
        crate::util::rt::on_pool(true, || {
            keys.par_iter().for_each(|k| {
                let _ = self.client.delete(&self.bucket, k);
            });
        });
    }

    fn release(&mut self) {
        if !self.released {
            self.released = true;
            let _ = self.client.delete(&self.bucket, &self.lock_key);
        }
    }
}

impl Drop for S3Target {
    fn drop(&mut self) {
        self.release();
    }
}

/// Create `key` with `body` unless it exists; `Ok(false)` when another
/// writer's object is there. A conflict is read back: an object holding
/// exactly `body` is this write, answered late (see the module docs).
fn create(client: &Client, bucket: &str, key: &str, body: &[u8]) -> Result<bool, S3Error> {
    match client.put(bucket, key, body.to_vec().into(), &PutMode::Create) {
        Ok(_) => Ok(true),
        Err(S3Error::Conflict { .. }) => Ok(client
            .get_object(bucket, key, body.len() as u64 + 1)?
            .is_some_and(|(bytes, _)| bytes.as_ref() == body)),
        Err(e) => Err(e),
    }
}

/// Every file of the store at `dir`, relative, `/`-separated, except a
/// local full-text index (readers of S3 stores index in their own cache).
fn store_files(dir: &Path) -> Result<Vec<String>, PublishError> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let entries = std::fs::read_dir(dir.join(&rel))
            .map_err(|e| PublishError::Local(format!("{}: {e}", rel.display())))?;
        for e in entries {
            let e = e.map_err(|e| PublishError::Local(e.to_string()))?;
            let r = rel.join(e.file_name());
            let ty = e
                .file_type()
                .map_err(|e| PublishError::Local(e.to_string()))?;
            if ty.is_dir() {
                if r.as_os_str() != "_pchronicle" {
                    stack.push(r);
                }
            } else if ty.is_file() {
                out.push(crate::util::path::to_slash(&r));
            }
        }
    }
    out.sort();
    Ok(out)
}
