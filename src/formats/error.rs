//! Format errors (fatal for a Source) and diagnostics (the Source is read but
//! marked degraded).

use std::fmt;

/// A Source could not be decoded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FormatError {
    /// Not valid JSON.
    #[error("{source_path}:{line}:{column}: invalid JSON: {message}")]
    InvalidJson {
        /// Dataset-relative path.
        source_path: String,
        /// 1-based line.
        line: u64,
        /// 1-based column.
        column: u64,
        /// What the parser said.
        message: String,
    },
    /// The file ends in the middle of a value.
    #[error("{source_path}:{line}:{column}: truncated JSON (the file ends inside a value)")]
    Truncated {
        /// Dataset-relative path.
        source_path: String,
        /// 1-based line.
        line: u64,
        /// 1-based column.
        column: u64,
    },
    /// `NaN`, `Infinity` or `-Infinity` where JSON requires a number.
    #[error("{source_path}:{line}:{column}: non-finite number (NaN/Infinity) is not valid JSON")]
    NonFinite {
        /// Dataset-relative path.
        source_path: String,
        /// 1-based line.
        line: u64,
        /// 1-based column.
        column: u64,
    },
    /// The document declares a schema version pChronicle does not read.
    #[error("{source_path}: unsupported {field} `{found}` (supported: {supported})")]
    UnsupportedVersion {
        /// Dataset-relative path.
        source_path: String,
        /// The field holding the version.
        field: &'static str,
        /// The value found (escaped).
        found: String,
        /// What is supported.
        supported: &'static str,
    },
    /// The JSON is valid but does not follow the format's schema.
    #[error("{source_path}: {pointer}: {message}")]
    Schema {
        /// Dataset-relative path.
        source_path: String,
        /// JSON Pointer (or record locator) to the offending value.
        pointer: String,
        /// What is wrong.
        message: String,
    },
    /// One document or line is larger than the configured bound.
    #[error("{source_path}: {what} of {size} bytes exceeds the limit of {limit} bytes (--max-document-bytes)")]
    TooLarge {
        /// Dataset-relative path.
        source_path: String,
        /// `document` or `line N`.
        what: String,
        /// Size seen (at least).
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// JSON nested deeper than the parser allows.
    #[error("{source_path}:{line}:{column}: JSON nested too deeply (limit 128 levels)")]
    TooDeep {
        /// Dataset-relative path.
        source_path: String,
        /// 1-based line.
        line: u64,
        /// 1-based column.
        column: u64,
    },
    /// A JSON Lines file mixes formats.
    #[error("{source_path}: record {record} is {found}, but the file started as {expected}; one file holds one format")]
    MixedFormats {
        /// Dataset-relative path.
        source_path: String,
        /// 1-based record number.
        record: u64,
        /// Format of the first record.
        expected: &'static str,
        /// What this record looks like.
        found: &'static str,
    },
    /// A store's `CURRENT` pointer is unreadable or invalid.
    #[error("{source_path}/CURRENT: {message}")]
    InvalidCurrent {
        /// Dataset-relative path of the store.
        source_path: String,
        /// What is wrong.
        message: String,
    },
    /// Reading the bytes failed.
    #[error("{source_path}: read failed: {message}")]
    Io {
        /// Dataset-relative path.
        source_path: String,
        /// Sanitised reason.
        message: String,
    },
    /// The record is not in the expected format at all.
    #[error("{source_path}: record {record} is not in the {expected} format")]
    NotThisFormat {
        /// Dataset-relative path.
        source_path: String,
        /// 1-based record number.
        record: u64,
        /// Expected format.
        expected: &'static str,
    },
    /// The Source's kind is recognised but cannot be read by this command yet.
    #[error("{source_path}: {what} Sources are listed but not read by this command")]
    NotReadable {
        /// Dataset-relative path.
        source_path: String,
        /// What kind of Source.
        what: &'static str,
    },
}

impl FormatError {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            FormatError::InvalidJson { .. } => "PC-FMT-001",
            FormatError::Truncated { .. } => "PC-FMT-002",
            FormatError::NonFinite { .. } => "PC-FMT-003",
            FormatError::UnsupportedVersion { .. } => "PC-FMT-004",
            FormatError::Schema { .. } => "PC-FMT-005",
            FormatError::TooLarge { .. } => "PC-FMT-009",
            FormatError::TooDeep { .. } => "PC-FMT-010",
            FormatError::MixedFormats { .. } => "PC-FMT-012",
            FormatError::InvalidCurrent { .. } => "PC-FMT-013",
            FormatError::Io { .. } => "PC-FMT-014",
            FormatError::NotThisFormat { .. } => "PC-FMT-016",
            FormatError::NotReadable { .. } => "PC-FMT-017",
        }
    }

    /// The message without the leading Source path (for places that show
    /// the path in a column of its own).
    pub fn detail(&self) -> String {
        let full = self.to_string();
        let path = self.source_path().unwrap_or("");
        match full.strip_prefix(path) {
            Some(rest) if !path.is_empty() => rest.trim_start_matches(':').trim_start().to_string(),
            _ => full,
        }
    }

    /// The Source concerned.
    pub fn source_path(&self) -> Option<&str> {
        match self {
            FormatError::InvalidJson { source_path, .. }
            | FormatError::Truncated { source_path, .. }
            | FormatError::NonFinite { source_path, .. }
            | FormatError::UnsupportedVersion { source_path, .. }
            | FormatError::Schema { source_path, .. }
            | FormatError::TooLarge { source_path, .. }
            | FormatError::TooDeep { source_path, .. }
            | FormatError::MixedFormats { source_path, .. }
            | FormatError::InvalidCurrent { source_path, .. }
            | FormatError::Io { source_path, .. }
            | FormatError::NotThisFormat { source_path, .. }
            | FormatError::NotReadable { source_path, .. } => Some(source_path),
        }
    }
}

/// A problem that does not stop a Source from being read; it marks the
/// Source `degraded` (or is purely informational, see [`Diagnostic::degrades`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    /// Stable code, e.g. `PC-FMT-006`.
    pub code: &'static str,
    /// JSON Pointer or record locator.
    pub pointer: String,
    /// What was found and what was done about it.
    pub message: String,
}

impl Diagnostic {
    /// Two calls share a tool-call id within one trajectory.
    pub const DUPLICATE_TOOL_CALL_ID: &'static str = "PC-FMT-006";
    /// Step ids are not strictly increasing in array order.
    pub const STEP_ORDER: &'static str = "PC-FMT-007";
    /// A tool result names no call of its trajectory.
    pub const ORPHAN_RESULT: &'static str = "PC-FMT-008";
    /// A required id was missing and was generated Source-locally.
    pub const GENERATED_ID: &'static str = "PC-FMT-015";
    /// Two trajectories of one Source share a document id.
    pub const DUPLICATE_ID: &'static str = "PC-FMT-019";
    /// A value did not follow the format but was kept as-is.
    pub const LENIENT_VALUE: &'static str = "PC-FMT-018";

    /// A new diagnostic.
    pub fn new(code: &'static str, pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            pointer: pointer.into(),
            message: message.into(),
        }
    }

    /// True when the diagnostic marks the Source degraded (generated ids do not).
    pub fn degrades(&self) -> bool {
        self.code != Self::GENERATED_ID
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}: {}", self.code, self.pointer, self.message)
    }
}
