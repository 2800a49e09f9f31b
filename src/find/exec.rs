//! Executing a find request: the request and answer types shared by both
//! scopes, and the entry points.
//!
//! - [`super::compile`]: AST → plan of text and JSON leaves;
//! - [`super::sets`]: the plan over one index segment's document sets;
//! - [`super::steps`]: the steps scope, over full-text indexes;
//! - [`super::runs`]: the runs scope, row by row;
//! - [`super::preview`]: the excerpt each hit shows.

use std::cmp::Ordering;
use std::time::Instant;

use serde::Serialize;

use super::FindError;

pub use super::compile::{query_terms, selector_columns};
pub use super::preview::{excerpt, PREVIEW_CHARS};
pub use super::runs::{run_json_columns, search_runs, RunRow};
pub use super::steps::{search_steps, Searchable};

/// Identity conditions (`--source`, `--run-id`, …), ANDed with the expression.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    /// `--source`: a Dataset-relative path.
    pub source: Option<String>,
    /// `--run-id`.
    pub run_id: Option<String>,
    /// `--document-id`.
    pub document_id: Option<String>,
    /// `--session-id`.
    pub session_id: Option<String>,
    /// `--step-id` (needs `--session-id`).
    pub step_id: Option<i64>,
}

impl Identity {
    /// True when no identity condition is given.
    pub fn is_empty(&self) -> bool {
        self.source.is_none()
            && self.run_id.is_none()
            && self.document_id.is_none()
            && self.session_id.is_none()
            && self.step_id.is_none()
    }

    /// True when an id (not only `--source`) is given.
    pub fn has_id(&self) -> bool {
        self.run_id.is_some() || self.document_id.is_some() || self.session_id.is_some()
    }
}

/// One match.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Hit {
    /// Dataset-relative Source path.
    pub source_path: String,
    /// Dataset-relative path of the file the document was read from (the
    /// Source itself, unless it is a store).
    pub origin_path: String,
    /// Document id.
    pub document_id: String,
    /// Run id.
    pub run_id: Option<String>,
    /// Session id.
    pub session_id: Option<String>,
    /// Step id (steps scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_id: Option<i64>,
    /// Step source (steps scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_source: Option<String>,
    /// Effective kind (steps scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_kind: Option<String>,
    /// Timestamp, RFC 3339 (steps scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Bounded human-readable excerpt.
    pub preview: String,
    /// Sort key within the Source (not printed).
    #[serde(skip)]
    pub ord: u64,
    /// The document's position in its Source, when known (not printed:
    /// readers use it to tell documents with the same id apart).
    #[serde(skip)]
    pub storage_ordinal: Option<u64>,
    /// Whether this is a steps-scope hit (not printed).
    #[serde(skip)]
    pub step_scope: bool,
}

/// Hits in stable order, the total count, and whether the list was cut.
#[derive(Debug, Default)]
pub struct HitList {
    /// At most `max_results` hits.
    pub hits: Vec<Hit>,
    /// Number of matches before the cut.
    pub total: u64,
}

/// Deadline checks.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// When to give up.
    pub at: Option<Instant>,
    /// The configured timeout in seconds, for the message.
    pub seconds: f64,
}

impl Deadline {
    /// Fail when past the deadline.
    pub fn check(&self) -> Result<(), FindError> {
        match self.at {
            Some(t) if Instant::now() > t => Err(FindError::Resource {
                message: format!("the search took longer than --timeout {}s", self.seconds),
            }),
            _ => Ok(()),
        }
    }
}

/// Stable order of hits: by Source path, then position in the Source.
pub fn hit_order(a: &Hit, b: &Hit) -> Ordering {
    a.source_path.cmp(&b.source_path).then(a.ord.cmp(&b.ord))
}
