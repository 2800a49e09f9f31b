//! Catalog errors: Dataset URIs, discovery bounds, snapshot consistency.

/// What went wrong while resolving a Dataset or pinning its Sources.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The Dataset URI could not be understood.
    #[error("invalid Dataset URI `{uri}`: {reason}")]
    InvalidUri {
        /// The URI as given, with credentials redacted.
        uri: String,
        /// Why it was refused.
        reason: String,
    },
    /// The scheme is not one pChronicle reads.
    #[error(
        "unsupported Dataset URI scheme `{scheme}`: use a local directory path, `file:///…` or `s3://bucket/prefix`"
    )]
    UnsupportedScheme {
        /// The scheme found.
        scheme: String,
    },
    /// The URI embeds credentials or a signed query string.
    #[error("Dataset URIs must not carry credentials or signed query strings; configure credentials through the environment instead ({what})")]
    CredentialsInUri {
        /// Which part looked like a credential (never the value itself).
        what: &'static str,
    },
    /// The local Dataset directory does not exist.
    #[error("Dataset `{uri}` does not exist")]
    NotFound {
        /// The normalised URI.
        uri: String,
    },
    /// The path exists but is not a directory.
    #[error("Dataset `{uri}` is not a directory; a Dataset is a directory of trajectory files (point at the folder that holds it)")]
    NotADirectory {
        /// The normalised URI.
        uri: String,
    },
    /// More candidate files than `--max-files`.
    #[error("discovery found more than {limit} candidate files; raise --max-files or point at a narrower directory")]
    TooManyFiles {
        /// The bound that was hit.
        limit: u64,
    },
    /// More directory entries than `--max-entries`.
    #[error("discovery visited more than {limit} directory entries; raise --max-entries or point at a narrower directory")]
    TooManyEntries {
        /// The bound that was hit.
        limit: u64,
    },
    /// A Source changed between pinning and the end of the read.
    #[error("Source `{source_path}` changed while it was read (was {before}, now {after}); nothing from it was used — run the command again")]
    ChangedDuringRead {
        /// Dataset-relative path.
        source_path: String,
        /// snapshot_ref before reading.
        before: String,
        /// What was observed afterwards.
        after: String,
    },
    /// Reading a directory or file failed.
    #[error("cannot read `{source_path}`: {reason}")]
    Io {
        /// Dataset-relative path (or the Dataset itself as `.`).
        source_path: String,
        /// Sanitised reason.
        reason: String,
    },
    /// `--errors strict` and a Source is not ready.
    #[error("Source `{source_path}` is not ready ({status}): [{reason_code}] {reason} (--errors strict)")]
    StrictSource {
        /// Dataset-relative path.
        source_path: String,
        /// `degraded` or `error`.
        status: &'static str,
        /// The code of the underlying problem.
        reason_code: &'static str,
        /// Sanitised reason.
        reason: String,
    },
    /// An S3 request or the S3 policy failed.
    #[error(transparent)]
    S3(#[from] crate::s3::S3Error),
    /// A capability not available for S3 Datasets.
    #[error("{what} is not supported by this build (`{uri}`)")]
    S3NotSupported {
        /// The Dataset.
        uri: String,
        /// What was asked.
        what: &'static str,
    },
    /// The default Warehouse directory could not be created.
    #[error("cannot create directory `{path}`: {reason}")]
    CreateDir {
        /// Absolute path.
        path: String,
        /// Sanitised reason.
        reason: String,
    },
    /// A `--source` value is not a clean Dataset-relative path.
    #[error("invalid --source `{given}`: {reason}")]
    InvalidSourcePath {
        /// The value given (control characters escaped).
        given: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// `ls` or `status` ran past `--timeout`.
    #[error("resource limit: the command ran longer than --timeout {seconds}s; nothing was printed (raise --timeout, or point at a narrower directory)")]
    Timeout {
        /// The limit in seconds.
        seconds: f64,
    },
    /// A `--source` value names no Source of the Dataset.
    #[error("no Source `{given}` in this Dataset; `pchronicle ls` lists them")]
    UnknownSource {
        /// The value given.
        given: String,
    },
}

impl CatalogError {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            CatalogError::InvalidUri { .. } => "PC-CAT-001",
            CatalogError::UnsupportedScheme { .. } => "PC-CAT-002",
            CatalogError::CredentialsInUri { .. } => "PC-CAT-003",
            CatalogError::NotFound { .. } => "PC-CAT-004",
            CatalogError::NotADirectory { .. } => "PC-CAT-005",
            CatalogError::TooManyFiles { .. } => "PC-CAT-006",
            CatalogError::TooManyEntries { .. } => "PC-CAT-007",
            CatalogError::ChangedDuringRead { .. } => "PC-CAT-008",
            CatalogError::Io { .. } => "PC-CAT-009",
            CatalogError::StrictSource { .. } => "PC-CAT-010",
            CatalogError::S3(e) => e.code(),
            CatalogError::S3NotSupported { .. } => "PC-S3-019",
            CatalogError::CreateDir { .. } => "PC-CAT-012",
            CatalogError::InvalidSourcePath { .. } => "PC-CAT-013",
            CatalogError::UnknownSource { .. } => "PC-CAT-014",
            CatalogError::Timeout { .. } => "PC-CAT-015",
        }
    }

    /// The Source concerned, when there is one.
    pub fn source_path(&self) -> Option<&str> {
        match self {
            CatalogError::ChangedDuringRead { source_path, .. }
            | CatalogError::Io { source_path, .. }
            | CatalogError::StrictSource { source_path, .. } => Some(source_path),
            _ => None,
        }
    }
}
