//! Reading a pinned Source: open it, check its fingerprint before and after,
//! decode it, and count what it holds.

use std::collections::HashSet;
use std::fs::File;

use super::discover::file_ref;
use super::snapshot::SnapshotRef;
use super::source::{Source, SourceKind};
use super::CatalogError;
use crate::formats::model::Storyline;
use crate::formats::{self, DecodeCtx, DecodeOptions, Diagnostic, FormatError};

/// Counts and problems of one Source read.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SourceCounts {
    /// Distinct run ids.
    pub runs: u64,
    /// Trajectories (Storyline documents).
    pub trajectories: u64,
    /// Steps (turns).
    pub steps: u64,
    /// Tool calls.
    pub tool_calls: u64,
}

impl SourceCounts {
    /// Add another Source's counts.
    pub fn add(&mut self, o: &SourceCounts) {
        self.runs += o.runs;
        self.trajectories += o.trajectories;
        self.steps += o.steps;
        self.tool_calls += o.tool_calls;
    }
}

/// The outcome of reading one Source.
#[derive(Debug, Clone, Default)]
pub struct SourceRead {
    /// Counts.
    pub counts: SourceCounts,
    /// Problems that did not stop the read.
    pub diagnostics: Vec<Diagnostic>,
    /// Ids generated Source-locally.
    pub generated_ids: u64,
}

/// Why a read did not complete.
#[derive(Debug)]
pub enum ReadFailure {
    /// The Source itself is bad: mark it `error` (or fail under strict).
    Source(FormatError),
    /// The command must fail (e.g. the Source changed while read).
    Fatal(CatalogError),
}

/// Read `src`, passing every document to `sink`.
pub fn read_source(
    src: &Source,
    opts: DecodeOptions,
    sink: &mut dyn FnMut(&Storyline),
) -> Result<SourceRead, ReadFailure> {
    if src.kind == SourceKind::Store {
        return read_store(src, sink);
    }
    let changed = |after: &SnapshotRef| {
        ReadFailure::Fatal(CatalogError::ChangedDuringRead {
            source_path: src.source_path.clone(),
            before: src.snapshot_ref.to_string(),
            after: after.to_string(),
        })
    };
    let io = |e: std::io::Error| {
        ReadFailure::Source(FormatError::Io {
            source_path: src.source_path.clone(),
            message: e.to_string(),
        })
    };
    let file = File::open(&src.abs_path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ReadFailure::Fatal(CatalogError::ChangedDuringRead {
                source_path: src.source_path.clone(),
                before: src.snapshot_ref.to_string(),
                after: "deleted".into(),
            })
        } else {
            io(e)
        }
    })?;
    let before = file_ref(&file.metadata().map_err(io)?);
    if before != src.snapshot_ref {
        return Err(changed(&before));
    }
    let check = file.try_clone().map_err(io)?;
    let mut ctx = DecodeCtx::new(src.source_path.clone());
    let mut counts = SourceCounts::default();
    let mut runs: HashSet<String> = HashSet::new();
    let mut doc_ids: HashSet<String> = HashSet::new();
    let mut dup_docs = Vec::new();
    let result = formats::decode_file(
        file,
        src.format,
        src.openai_shape,
        src.container.unwrap_or(formats::Container::Object),
        opts,
        &mut ctx,
        &mut |doc: Storyline| {
            counts.trajectories += 1;
            counts.steps += doc.turns.len() as u64;
            counts.tool_calls += doc.tool_call_count() as u64;
            if !runs.contains(doc.run_id()) {
                runs.insert(doc.run_id().to_string());
            }
            if !doc_ids.insert(doc.document_id().to_string()) {
                dup_docs.push(doc.document_id().to_string());
            }
            sink(&doc);
        },
    );
    // Whatever the outcome, a changed file means nothing read from it counts.
    let after_fd = file_ref(&check.metadata().map_err(io)?);
    let after_path = std::fs::metadata(&src.abs_path).map(|m| file_ref(&m));
    if after_fd != src.snapshot_ref {
        return Err(changed(&after_fd));
    }
    match after_path {
        Ok(p) if p != src.snapshot_ref => return Err(changed(&p)),
        Err(_) => {
            return Err(ReadFailure::Fatal(CatalogError::ChangedDuringRead {
                source_path: src.source_path.clone(),
                before: src.snapshot_ref.to_string(),
                after: "deleted".into(),
            }))
        }
        _ => {}
    }
    result.map_err(|e| ReadFailure::Source(with_path(e, &src.source_path)))?;
    for d in dup_docs.iter().take(10) {
        ctx.diag(
            Diagnostic::DUPLICATE_ID,
            d.clone(),
            format!("document id `{d}` appears more than once in this Source"),
        );
    }
    counts.runs = runs.len() as u64;
    Ok(SourceRead {
        counts,
        diagnostics: ctx.diagnostics,
        generated_ids: ctx.generated_ids,
    })
}

/// Fill in the Source path of errors raised before it was known.
fn with_path(e: FormatError, path: &str) -> FormatError {
    match e {
        FormatError::InvalidJson {
            source_path,
            line,
            column,
            message,
        } if source_path.is_empty() => FormatError::InvalidJson {
            source_path: path.into(),
            line,
            column,
            message,
        },
        other => other,
    }
}

/// Open a store Source at the snapshot discovery pinned.
pub fn open_store(src: &Source) -> Result<crate::store::StorylineLanceStore, ReadFailure> {
    if src.format != formats::SourceFormat::StorylineLance {
        return Err(ReadFailure::Source(FormatError::NotReadable {
            source_path: src.source_path.clone(),
            what: "events Lance store",
        }));
    }
    let store = crate::store::StorylineLanceStore::open(&src.abs_path).map_err(|e| {
        ReadFailure::Source(FormatError::InvalidCurrent {
            source_path: src.source_path.clone(),
            message: e.to_string(),
        })
    })?;
    let now = super::stores::store_ref(store.current());
    if now != src.snapshot_ref {
        return Err(ReadFailure::Fatal(CatalogError::ChangedDuringRead {
            source_path: src.source_path.clone(),
            before: src.snapshot_ref.to_string(),
            after: now.to_string(),
        }));
    }
    Ok(store)
}

fn store_failure(src: &Source, e: &crate::store::StoreError) -> ReadFailure {
    ReadFailure::Source(FormatError::Io {
        source_path: src.source_path.clone(),
        message: format!("[{}] {e}", e.code()),
    })
}

fn read_store(src: &Source, sink: &mut dyn FnMut(&Storyline)) -> Result<SourceRead, ReadFailure> {
    let store = open_store(src)?;
    let reader = store.reader().map_err(|e| store_failure(src, &e))?;
    let mut counts = SourceCounts::default();
    let mut runs: HashSet<String> = HashSet::new();
    reader
        .documents_each(|d| -> Result<(), crate::store::StoreError> {
            counts.trajectories += 1;
            counts.steps += d.turns.len() as u64;
            counts.tool_calls += d.tool_call_count() as u64;
            runs.insert(d.run_id().to_string());
            sink(&d);
            Ok(())
        })
        .map_err(|e| store_failure(src, &e))?;
    counts.runs = runs.len() as u64;
    Ok(SourceRead {
        counts,
        diagnostics: Vec::new(),
        generated_ids: 0,
    })
}
