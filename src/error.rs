//! The top-level error: one variant per layer, each carrying a stable code.
//!
//! Codes look like `PC-CAT-003` and are never reused once published; the full
//! table lives in `docs/errors.md` and a test keeps the two in step.

use crate::catalog::CatalogError;
use crate::formats::FormatError;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error type of the command surface (see [`Error::Surface`]).
pub trait SurfaceError: std::error::Error + Send + Sync + 'static {
    /// The stable code.
    fn code(&self) -> &'static str;
    /// The error as `Any`, for the surface that made it to look inside.
    fn as_any(&self) -> &dyn std::any::Any;
}

impl Error {
    /// The surface error of type `T`, when this is one.
    pub fn surface<T: SurfaceError>(&self) -> Option<&T> {
        match self {
            Error::Surface(e) => e.as_any().downcast_ref::<T>(),
            _ => None,
        }
    }
}

/// Any error pChronicle reports to a user.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Catalog: Dataset URIs, discovery, snapshots.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A trajectory file could not be decoded.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// SQL planning or execution.
    #[error(transparent)]
    Sql(#[from] crate::sql::SqlError),
    /// An error of the command surface itself: flags, the environment and
    /// the settings file, the Warehouse's configuration and requests. Their
    /// types live with the surface (`cli`, `web`); this module knows them by
    /// their code only.
    #[error("{0}")]
    Surface(Box<dyn SurfaceError>),
    /// Import or export failed.
    #[error(transparent)]
    Ingest(#[from] crate::ingest::IngestError),
    /// A find expression or search failed.
    #[error(transparent)]
    Find(#[from] crate::find::FindError),
    /// The Gateway.
    #[error(transparent)]
    Gateway(#[from] crate::gateway::GatewayError),
    /// Writing the result failed (other than a closed pipe).
    #[error("cannot write output: {0}")]
    Output(std::io::Error),
    /// A bug: an invariant did not hold.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The stable error code, e.g. `PC-CAT-003`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Catalog(e) => e.code(),
            Error::Format(e) => e.code(),
            Error::Surface(e) => e.code(),
            Error::Sql(e) => e.code(),
            Error::Ingest(e) => e.code(),
            Error::Find(e) => e.code(),
            Error::Gateway(e) => e.code(),
            Error::Output(_) => "PC-IO-001",
            Error::Internal(_) => "PC-INT-001",
        }
    }

    /// The Source this error concerns, when there is one (Dataset-relative).
    pub fn source_path(&self) -> Option<&str> {
        match self {
            Error::Catalog(e) => e.source_path(),
            Error::Format(e) => e.source_path(),
            Error::Ingest(e) => e.source_path(),
            _ => None,
        }
    }

    /// True when the error is a closed stdout, which exits quietly.
    pub fn is_broken_pipe(&self) -> bool {
        match self {
            Error::Output(e) => e.kind() == std::io::ErrorKind::BrokenPipe,
            Error::Ingest(e) => e.is_broken_pipe(),
            _ => false,
        }
    }
}

impl From<crate::ingest::ImportError> for Error {
    fn from(e: crate::ingest::ImportError) -> Self {
        Error::Ingest(e.into())
    }
}

impl From<crate::ingest::ExportError> for Error {
    fn from(e: crate::ingest::ExportError) -> Self {
        Error::Ingest(e.into())
    }
}

impl From<crate::find::SearchError> for Error {
    fn from(e: crate::find::SearchError) -> Self {
        match e {
            crate::find::SearchError::Find(e) => Error::Find(e),
            crate::find::SearchError::Sql(e) => Error::Sql(e),
        }
    }
}
