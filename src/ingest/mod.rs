//! Import and export: the create-only import of exchange files into a new
//! Storyline Lance store (lock, staging, decode, validate, publish), and the
//! export of complete trajectories to an exchange format (select, convert,
//! write). The `import`/`export` commands and the explorer's export route
//! call these; they only turn flags into options and print.
//!
//! May call `catalog`, `dataset`, `sql`, `find` (the index a new store
//! carries), `store`, `formats`, `s3` and `util`; never `cli` or `web`.

use std::path::PathBuf;

use crate::catalog::{DatasetUri, DiscoveryLimits};

pub mod export;
pub mod import;
pub mod maintain;

pub use export::ExportError;
pub use import::ImportError;

/// Where `import` reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportInput {
    /// A file or directory.
    Path(PathBuf),
    /// Standard input.
    Stdin,
}

/// What to import and where (the `import` command's settings).
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Input.
    pub input: ImportInput,
    /// The Dataset to create (for an S3 target: where it is built locally
    /// first, under the temporary directory).
    pub target: PathBuf,
    /// The S3 Dataset to create, when `--output` is `s3://…`.
    pub s3_target: Option<crate::s3::S3Uri>,
    /// Declared format (None: detect).
    pub format: Option<crate::formats::SourceFormat>,
    /// Total input bound.
    pub max_input_bytes: u64,
    /// Largest document.
    pub max_document_bytes: u64,
    /// Most input files.
    pub max_files: u64,
}

/// What to export and where (the `export` command's settings).
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The Dataset.
    pub dataset: DatasetUri,
    /// Output file (None: stdout).
    pub output: Option<PathBuf>,
    /// Target format.
    pub format: crate::formats::ExportFormat,
    /// Source filter (validated Dataset-relative path).
    pub source: Option<String>,
    /// Run filter.
    pub run_id: Option<String>,
    /// Session filter.
    pub session_id: Option<String>,
    /// SQL condition on runs.
    pub where_: Option<String>,
    /// Refuse lossy conversions.
    pub strict: bool,
    /// JSON Lines as produced.
    pub stream: bool,
    /// Replace an existing file.
    pub overwrite: bool,
    /// `--errors strict`: a Source that cannot be read completely fails the
    /// export instead of being skipped with a warning.
    pub errors_strict: bool,
    /// Largest document.
    pub max_document_bytes: u64,
    /// Discovery bounds.
    pub limits: DiscoveryLimits,
}

/// Why an import or export failed.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// Import-specific (boxed: the import and export errors are large and
    /// every `Result` of the crate's `Error` would carry their size).
    #[error(transparent)]
    Import(Box<ImportError>),
    /// Export-specific.
    #[error(transparent)]
    Export(Box<ExportError>),
    /// Discovery, snapshots, Sources.
    #[error(transparent)]
    Catalog(#[from] crate::catalog::CatalogError),
    /// A file could not be decoded.
    #[error(transparent)]
    Format(#[from] crate::formats::FormatError),
    /// The `--where` selection.
    #[error(transparent)]
    Sql(#[from] crate::sql::SqlError),
    /// Writing the output failed.
    #[error("cannot write output: {0}")]
    Output(std::io::Error),
    /// A bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<ImportError> for IngestError {
    fn from(e: ImportError) -> Self {
        IngestError::Import(Box::new(e))
    }
}

impl From<ExportError> for IngestError {
    fn from(e: ExportError) -> Self {
        IngestError::Export(Box::new(e))
    }
}

impl IngestError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            IngestError::Import(e) => e.code(),
            IngestError::Export(e) => e.code(),
            IngestError::Catalog(e) => e.code(),
            IngestError::Format(e) => e.code(),
            IngestError::Sql(e) => e.code(),
            IngestError::Output(_) => "PC-IO-001",
            IngestError::Internal(_) => "PC-INT-001",
        }
    }

    /// The Source the error concerns, when there is one.
    pub fn source_path(&self) -> Option<&str> {
        match self {
            IngestError::Import(e) => e.source_path(),
            IngestError::Catalog(e) => e.source_path(),
            IngestError::Format(e) => e.source_path(),
            _ => None,
        }
    }

    /// True when the error is a closed output pipe.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, IngestError::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}
