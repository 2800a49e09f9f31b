//! The `CURRENT` pointer of a Storyline Lance store: the committed snapshot
//! (store schema version, logical generation, exact table versions),
//! published by an atomic rename after the tables it names are durable.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::StoreError;

/// The store layout version this build writes. Version 2 added
/// `origin_path` to every table, `storage_ordinal` to `steps` and
/// `tool_calls` (documents are told apart by position, never by a renamed
/// id), and the step times, role counts, model and first user message to
/// `runs`. Version 3 keeps the decoded text views `observation_text` and
/// `results_text`, which readers of a version 2 store compute. Version 4
/// keeps those views as bytes, checked as text when read
/// (`schema::VIEWS_AS_BYTES_FROM`). Version 5 keeps label columns (a
/// step's source and model, a tool's name) as dictionaries, read back as
/// text (`schema::LABELS_AS_DICTIONARY_FROM`).
pub const STORE_SCHEMA_VERSION: u64 = 5;

/// The oldest store layout version this build reads.
pub const OLDEST_READ_SCHEMA_VERSION: u64 = 2;

/// What one commit pins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committed {
    /// Store layout version.
    pub schema_version: u64,
    /// Logical snapshot id (changes on every commit).
    pub generation: String,
    /// The previous generation, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_generation: Option<String>,
    /// Directory under `generations/` holding the three tables.
    pub table_generation: String,
    /// Lance version of `runs`.
    pub runs_version: u64,
    /// Lance version of `steps`.
    pub steps_version: u64,
    /// Lance version of `tool_calls`.
    pub tool_calls_version: u64,
    /// Lance version of `objects`, when the store has large cells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects_version: Option<u64>,
    /// The typed columns that mirror a JSON member on every row
    /// (`table.json.key`, see [`super::mirrors`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<String>,
}

/// The `CURRENT` file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Current {
    /// Envelope version (1).
    pub control_version: u64,
    /// Incremented on every change.
    pub revision: u64,
    /// The committed snapshot (absent for an empty store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed: Option<Committed>,
}

/// Largest `CURRENT` accepted.
const MAX_BYTES: u64 = 1 << 20;

impl Current {
    /// Read and validate `root/CURRENT`.
    pub fn read(root: &Path) -> Result<Current, StoreError> {
        use std::io::Read as _;
        let path = root.join("CURRENT");
        let mut bytes = Vec::new();
        std::fs::File::open(&path)
            .and_then(|f| f.take(MAX_BYTES).read_to_end(&mut bytes))
            .map_err(|e| StoreError::Current(format!("cannot read CURRENT: {e}")))?;
        Self::parse(&bytes)
    }

    /// Read and validate the `CURRENT` object of the store under
    /// `s3://bucket/prefix`; also returns its ETag.
    pub fn read_s3(bucket: &str, prefix: &str) -> Result<(Current, String), StoreError> {
        let unreadable = |e: String| StoreError::Current(format!("cannot read CURRENT: {e}"));
        let client = crate::s3::client().map_err(|e| unreadable(format!("[{}] {e}", e.code())))?;
        let key = format!("{prefix}CURRENT");
        match client.get_object(bucket, &key, MAX_BYTES + 1) {
            Ok(Some((bytes, etag))) if bytes.len() as u64 <= MAX_BYTES => {
                Ok((Self::parse(&bytes)?, etag))
            }
            Ok(Some(_)) => Err(unreadable("the object is too large".into())),
            Ok(None) => Err(unreadable("no such object".into())),
            Err(e) => Err(unreadable(format!("[{}] {e}", e.code()))),
        }
    }

    /// Parse and validate the bytes of a `CURRENT` pointer.
    pub fn parse(bytes: &[u8]) -> Result<Current, StoreError> {
        let cur: Current = serde_json::from_slice(bytes)
            .map_err(|e| StoreError::Current(format!("CURRENT is not valid: {e}")))?;
        if cur.control_version != 1 {
            return Err(StoreError::Current(format!(
                "unsupported control_version {}",
                cur.control_version
            )));
        }
        if let Some(c) = &cur.committed {
            if c.schema_version == 1 {
                return Err(StoreError::Current(
                    "store schema_version 1 predates this build (it has no origin paths or document positions); import the exchange files again".into(),
                ));
            }
            if !(OLDEST_READ_SCHEMA_VERSION..=STORE_SCHEMA_VERSION).contains(&c.schema_version) {
                return Err(StoreError::Current(format!(
                    "unsupported store schema_version {}",
                    c.schema_version
                )));
            }
            for g in [&c.generation, &c.table_generation] {
                if !valid_generation(g) {
                    return Err(StoreError::Current(format!(
                        "invalid generation name `{}`",
                        crate::util::text::escape_control(g)
                    )));
                }
            }
        }
        Ok(cur)
    }

    /// Write `root/CURRENT` atomically: a temporary file, fsync, rename, fsync
    /// of the directory.
    pub fn write(&self, root: &Path) -> Result<(), StoreError> {
        use std::io::Write as _;
        let tmp = root.join(format!(".CURRENT.tmp-{}", std::process::id()));
        let bytes = serde_json::to_vec(self).map_err(|e| StoreError::Internal(e.to_string()))?;
        let io = |e: std::io::Error| StoreError::Io(format!("cannot write CURRENT: {e}"));
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&bytes).map_err(io)?;
        f.sync_all().map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, root.join("CURRENT")).map_err(io)?;
        sync_dir(root);
        Ok(())
    }
}

/// Generation names: `gen-<nanos>-<pid>-<seq>`, nothing that could escape a path.
pub fn valid_generation(g: &str) -> bool {
    g.starts_with("gen-")
        && g.len() < 100
        && g.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// A new generation name.
pub fn new_generation(seq: u64) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("gen-{nanos}-{}-{seq}", std::process::id())
}

/// fsync a directory so a rename inside it is durable (best effort).
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}
