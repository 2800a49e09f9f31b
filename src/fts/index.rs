//! An index directory (or an index in memory): open, create, and the
//! `pchronicle-index.json` file that records what it covers.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tantivy::ReloadPolicy;

use super::build_dir::BuildDirectory;
use super::schema::Fields;
use super::search::Searcher;
use super::tokenize::{analyzer, TOKENIZER_NAME};
use super::writer::Writer;
use super::FtsError;

/// Version of the index layout; an index with another version is rebuilt.
pub const INDEX_VERSION: u32 = 6;

/// File that records what an index covers.
pub const META_FILE: &str = "pchronicle-index.json";

/// What an index covers. `P` is a record the caller keeps per Source with
/// the index (`find`: the problem of a Source it read incompletely); this
/// module only stores it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IndexMeta<P> {
    /// [`INDEX_VERSION`].
    pub version: u32,
    /// Always `jieba`.
    pub tokenizer: String,
    /// source_path → the snapshot_ref it was indexed at.
    pub sources: BTreeMap<String, String>,
    /// Steps indexed.
    pub steps: u64,
    /// Bytes of step text analysed.
    pub text_bytes: u64,
    /// Sources indexed but read incompletely (skipped or degraded), with the
    /// problem: a search served by this index reports it again, and fails
    /// on it under `--errors strict`, as a fresh read would.
    // A default function, not `default`: that would ask `P: Default`.
    #[serde(default = "BTreeMap::new", skip_serializing_if = "BTreeMap::is_empty")]
    pub problems: BTreeMap<String, P>,
}

impl<P> Default for IndexMeta<P> {
    fn default() -> Self {
        IndexMeta {
            version: 0,
            tokenizer: String::new(),
            sources: BTreeMap::new(),
            steps: 0,
            text_bytes: 0,
            problems: BTreeMap::new(),
        }
    }
}

impl<P: Serialize + serde::de::DeserializeOwned> IndexMeta<P> {
    /// An empty record of the current layout and tokenizer.
    pub fn current() -> Self {
        IndexMeta {
            version: INDEX_VERSION,
            tokenizer: TOKENIZER_NAME.into(),
            ..IndexMeta::default()
        }
    }

    /// Read `dir/pchronicle-index.json`; `None` when absent, unreadable or of
    /// another version.
    pub fn read(dir: &Path) -> Option<Self> {
        let bytes = std::fs::read(dir.join(META_FILE)).ok()?;
        let m: Self = serde_json::from_slice(&bytes).ok()?;
        (m.version == INDEX_VERSION && m.tokenizer == TOKENIZER_NAME).then_some(m)
    }

    /// Write it atomically (temporary file, then rename).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let tmp = dir.join(format!(".{META_FILE}.tmp-{}", std::process::id()));
        let body = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, body)?;
        std::fs::rename(&tmp, dir.join(META_FILE))
    }
}

/// A step index, with the analyzer registered.
pub struct Index {
    index: tantivy::Index,
    fields: Fields,
}

impl Index {
    /// Open the index in `dir`.
    pub fn open(dir: &Path) -> Result<Index, FtsError> {
        Index::opened(tantivy::Index::open_in_dir(dir)?)
    }

    /// `index`, opened, with the analyzer registered and its fields checked.
    fn opened(index: tantivy::Index) -> Result<Index, FtsError> {
        index.tokenizers().register(TOKENIZER_NAME, analyzer());
        let fields = Fields::of(&index.schema()).ok_or_else(|| {
            tantivy::TantivyError::SchemaError("not a pChronicle find index".into())
        })?;
        Ok(Index { index, fields })
    }

    /// Open the index in `dir` to add to it (its merges read files into
    /// buffers, see [`BuildDirectory`]).
    pub fn open_to_write(dir: &Path) -> Result<Index, FtsError> {
        Index::opened(tantivy::Index::open(
            BuildDirectory::open(dir).map_err(dir_error)?,
        )?)
    }

    /// Create an empty index in `dir` (which must exist and be empty), to
    /// be written (its merges read files into buffers, see
    /// [`BuildDirectory`]); search it through [`Index::open`].
    pub fn create(dir: &Path) -> Result<Index, FtsError> {
        let fields = Fields::new();
        let index = tantivy::Index::create(
            BuildDirectory::open(dir).map_err(dir_error)?,
            fields.schema.clone(),
            tantivy::IndexSettings::default(),
        )?;
        index.tokenizers().register(TOKENIZER_NAME, analyzer());
        Ok(Index { index, fields })
    }

    /// Create an empty index in memory (gone when the last searcher is).
    pub fn create_in_memory() -> Index {
        let fields = Fields::new();
        let index = tantivy::Index::create_in_ram(fields.schema.clone());
        index.tokenizers().register(TOKENIZER_NAME, analyzer());
        Index { index, fields }
    }

    /// A writer with `threads` indexing threads (clamped to 1..=8).
    pub fn writer(&self, threads: usize) -> Result<Writer, FtsError> {
        Writer::new(&self.index, self.fields.clone(), threads)
    }

    /// A point-in-time searcher over what is committed now.
    pub fn searcher(&self) -> Result<Searcher, FtsError> {
        let reader: tantivy::IndexReader = self
            .index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Searcher::new(reader.searcher(), self.fields.clone()))
    }
}

fn dir_error(e: tantivy::directory::error::OpenDirectoryError) -> FtsError {
    FtsError(e.into())
}
