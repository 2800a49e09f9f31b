//! The Source: the smallest independently discoverable, pinnable unit.

use std::path::PathBuf;

use serde::Serialize;

use super::snapshot::{ReadConsistency, SnapshotRef};
use crate::formats::{Container, OpenAiShape, SourceFormat};

/// Whether a Source is a single file or a multi-file store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// One exchange file.
    File,
    /// A directory-based store (Lance).
    Store,
}

impl SourceKind {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::File => "file",
            SourceKind::Store => "store",
        }
    }
}

/// Health of a Source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceStatus {
    /// Read without problems.
    Ready,
    /// Read, with problems reported.
    Degraded,
    /// Could not be read.
    Error,
}

impl SourceStatus {
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            SourceStatus::Ready => "ready",
            SourceStatus::Degraded => "degraded",
            SourceStatus::Error => "error",
        }
    }
}

/// Why a Source is degraded or in error: a stable code and a sanitised message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusReason {
    /// Stable code of the underlying problem.
    pub code: &'static str,
    /// Human-readable, sanitised.
    pub message: String,
}

impl StatusReason {
    /// A reason with `code` and `message`.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        StatusReason {
            code,
            message: message.into(),
        }
    }
}

/// One Source of a Dataset.
#[derive(Debug, Clone)]
pub struct Source {
    /// Dataset-relative path with `/` separators.
    pub source_path: String,
    /// Absolute local path.
    pub abs_path: PathBuf,
    /// Format.
    pub format: SourceFormat,
    /// File or store.
    pub kind: SourceKind,
    /// Outer JSON layout, for files.
    pub container: Option<Container>,
    /// The OpenAI shape, for OpenAI messages files.
    pub openai_shape: Option<OpenAiShape>,
    /// Pinned version.
    pub snapshot_ref: SnapshotRef,
    /// How the pin is enforced.
    pub read_consistency: ReadConsistency,
    /// Health as known at discovery.
    pub status: SourceStatus,
    /// Why it is not ready.
    pub reason: Option<StatusReason>,
    /// Size in bytes (files: the file; stores: the sum of member files).
    pub size: u64,
    /// Where an S3 Source lives (`abs_path` is empty then).
    pub object: Option<RemoteObject>,
}

/// The S3 location of a Source and what its reads are pinned to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteObject {
    /// The bucket.
    pub bucket: String,
    /// The full key.
    pub key: String,
    /// ETag and version every read is conditional on.
    pub pin: crate::s3::ObjectPin,
}

/// What a Source can serve.
#[derive(Debug, Clone, Serialize)]
pub struct Capabilities {
    /// Logical relations the Source contributes rows to.
    pub relations: &'static [&'static str],
    /// Whether pChronicle may write to it (never for reads).
    pub writable: bool,
    /// Whether earlier versions can be read.
    pub history: bool,
}

impl Source {
    /// The capabilities of this Source's format.
    pub fn capabilities(&self) -> Capabilities {
        const TRAJ: &[&str] = &["runs", "trajectories", "steps", "tool_calls"];
        const ACTF: &[&str] = &["runs", "trajectories", "steps", "tool_calls", "judgments"];
        match self.format {
            SourceFormat::Actf => Capabilities {
                relations: ACTF,
                writable: false,
                history: false,
            },
            SourceFormat::StorylineLance => Capabilities {
                relations: TRAJ,
                writable: false,
                history: true,
            },
            SourceFormat::EventsLance => Capabilities {
                relations: &["events", "runs", "trajectories", "steps", "tool_calls"],
                writable: false,
                history: true,
            },
            SourceFormat::Unknown => Capabilities {
                relations: &[],
                writable: false,
                history: false,
            },
            _ => Capabilities {
                relations: TRAJ,
                writable: false,
                history: false,
            },
        }
    }

    /// A short description of the layout (`document`, `array`, `lines`).
    pub fn layout(&self) -> Option<&'static str> {
        self.container.map(|c| match c {
            Container::Object | Container::Empty | Container::Scalar => "document",
            Container::Array => "array",
            Container::Lines => "lines",
        })
    }
}
