//! Maintaining a local store: the store's own work (compaction, scalar
//! indexes, old versions, unreferenced objects), then its full-text index
//! rebuilt for the snapshot that work published.

use std::path::Path;

use super::IngestError;
use crate::store::{MaintainOptions, MaintainReport, StorylineLanceStore};

/// What [`maintain`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Maintained {
    /// The store's part.
    pub store: MaintainReport,
    /// Whether the full-text index was rebuilt for the new snapshot.
    pub fts_indexed: bool,
}

/// Maintain the store at `root` (`options.reindex` also rebuilds its
/// full-text index).
pub fn maintain(root: &Path, options: &MaintainOptions) -> Result<Maintained, IngestError> {
    let mut store = StorylineLanceStore::open(root).map_err(store_error)?;
    let report = store.maintain(options).map_err(store_error)?;
    let mut fts_indexed = false;
    if options.reindex {
        // The index is keyed to the snapshot just published.
        let source = crate::catalog::stores::probe_store(root, ".")
            .ok_or_else(|| IngestError::Internal("CURRENT vanished during maintenance".into()))?;
        crate::find::prepare::build_store_index(root, &source)
            .map_err(|e| IngestError::Internal(format!("full-text index: {e}")))?;
        fts_indexed = true;
    }
    Ok(Maintained {
        store: report,
        fts_indexed,
    })
}

fn store_error(e: crate::store::StoreError) -> IngestError {
    super::ImportError::from(e).into()
}
