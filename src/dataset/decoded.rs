//! Documents of large file Sources kept once decoded, so that a long-lived
//! reader (the explorer) decodes a big exchange file once for its listings
//! and its trajectory pages instead of once per question.
//!
//! Entries are keyed by the file's pinned identity (path and snapshot
//! reference), so a file that changed is never answered from memory, and
//! bounded by the memory they hold. Documents are kept whole for the
//! request that decoded them, then packed by a thread of their own (their
//! steps as JSON, see [`super::packed`]): about a byte per byte of the file
//! instead of the model's four.

use std::sync::Arc;

use arrow::record_batch::RecordBatch;

use super::packed::KeptDocument;
use crate::catalog::read::{read_file, ReadFailure, SourceRead};
use crate::catalog::{Source, SourceKind};
use crate::formats::atif::Projection;
use crate::formats::model::Storyline;
use crate::formats::{DecodeOptions, SourceFormat};
use crate::table::{Table, TableBuilder};
use crate::util::lru::ByteLru;

/// Memory a file of `size` bytes takes while it is decoded, estimated.
/// Measured on generated terminal-agent trajectories, the model holds about
/// 4 bytes per byte of JSON: each JSON object (a step's metrics, a tool
/// call's arguments, an observation and each of its results) is a map whose
/// smallest node takes about 630 bytes however few keys it has. A file is
/// kept only if this much fits the cache, though once packed it holds less.
pub fn decoded_bytes(size: u64) -> u64 {
    size.saturating_mul(5)
}

/// Every document of one file Source, decoded in full (and packed soon
/// after), with what the read reported.
#[derive(Debug)]
pub struct DecodedSource {
    /// The documents, in reading order (position = storage ordinal).
    pub docs: Vec<KeptDocument>,
    /// The outcome of the read (counts and diagnostics), replayed to every
    /// reader so a cached answer reports what a fresh read would.
    pub read: SourceRead,
    /// Every column of the `trajectories` rows of `docs`, made while they
    /// were whole, with the Source path they name: lists and the runs they
    /// group into are answered without parsing any step again.
    pub trajectories: Option<(String, RecordBatch)>,
}

/// A byte-bounded, least-recently-used cache of decoded file Sources.
#[derive(Debug)]
pub struct DecodedSources {
    min_source_bytes: u64,
    cache: ByteLru<String, Arc<DecodedSource>>,
    /// One lock per file being decoded: a second reader of the same file
    /// waits for the first instead of decoding it (and holding it) again.
    reading: std::sync::Mutex<std::collections::HashMap<String, Arc<std::sync::Mutex<()>>>>,
}

impl DecodedSources {
    /// A cache keeping files of at least `min_source_bytes` (smaller ones are
    /// cheap to decode again) while their decoded documents take at most
    /// `budget` bytes in all (by [`decoded_bytes`]).
    pub fn new(budget: u64, min_source_bytes: u64) -> Self {
        DecodedSources {
            min_source_bytes,
            cache: ByteLru::new(budget),
            reading: std::sync::Mutex::default(),
        }
    }

    /// Whether reads of `src` with `opts` go through this cache: file
    /// Sources read in full that are large enough to be worth keeping.
    pub fn applies(&self, src: &Source, opts: &DecodeOptions) -> bool {
        opts.projection == Projection::Full
            && src.kind != SourceKind::Store
            && src.format != SourceFormat::EventsLance
            && src.size >= self.min_source_bytes
            && decoded_bytes(src.size) <= self.cache.budget()
    }

    /// The documents of `src`, decoded now or earlier. Decoded now, they are
    /// kept whole, and a thread of their own packs them meanwhile. A read
    /// that fails is not kept: the next one tries again.
    pub fn get_or_read(
        self: &Arc<Self>,
        src: &Source,
        opts: DecodeOptions,
    ) -> Result<Arc<DecodedSource>, ReadFailure> {
        let key = key(src);
        if let Some(hit) = self.cache.get(&key) {
            return Ok(hit);
        }
        let lock = {
            let mut g = self
                .reading
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(g.entry(key.clone()).or_default())
        };
        let result = {
            let _one = lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match self.cache.get(&key) {
                // Decoded by the reader this one waited for.
                Some(hit) => Ok(hit),
                None => self.read(src, opts, &key),
            }
        };
        let mut g = self
            .reading
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The last one out removes the lock.
        if Arc::strong_count(&lock) == 2 {
            g.remove(&key);
        }
        result
    }

    /// Decode `src`, keep it under `key`, and start packing it.
    fn read(
        self: &Arc<Self>,
        src: &Source,
        opts: DecodeOptions,
        key: &str,
    ) -> Result<Arc<DecodedSource>, ReadFailure> {
        let mut docs = Vec::new();
        let mut rows = TableBuilder::new(Table::Trajectories, None);
        let read = read_file(src, opts, &mut |d| {
            rows.push_document(&src.source_path, &d, docs.len());
            docs.push(d);
        })?;
        let whole = decoded_bytes(src.size);
        let share = usize::try_from(whole / docs.len().max(1) as u64).unwrap_or(usize::MAX);
        let decoded = Arc::new(DecodedSource {
            docs: docs
                .into_iter()
                .map(|d| KeptDocument::whole(d, share))
                .collect(),
            read,
            trajectories: Some((src.source_path.clone(), rows.finish())),
        });
        self.cache.put(key.to_string(), Arc::clone(&decoded), whole);
        let (cache, key, kept) = (Arc::clone(self), key.to_string(), Arc::clone(&decoded));
        // The request that decoded the file answers from the whole documents
        // meanwhile; if no thread can be had, they stay whole.
        let _ = std::thread::Builder::new()
            .name("pchronicle-pack".into())
            .spawn(move || {
                kept.docs.iter().for_each(|d| {
                    d.pack();
                });
                let held = kept
                    .docs
                    .iter()
                    .map(KeptDocument::held_bytes)
                    .sum::<usize>()
                    + kept
                        .trajectories
                        .as_ref()
                        .map_or(0, |(_, r)| r.get_array_memory_size());
                cache
                    .cache
                    .recharge(&key, u64::try_from(held).unwrap_or(u64::MAX), |v| {
                        Arc::ptr_eq(v, &kept)
                    });
            });
        Ok(decoded)
    }

    /// The documents of `src` if they are held now.
    pub fn cached(&self, src: &Source) -> Option<Arc<DecodedSource>> {
        self.cache.get(&key(src))
    }

    /// Keep only the files among `live` (the Sources of a new view): a
    /// changed or removed file is not read again, so holding it is waste.
    pub fn retain<'a>(&self, live: impl Iterator<Item = &'a Source>) {
        let keys: std::collections::HashSet<String> = live.map(key).collect();
        self.cache.retain(|k| keys.contains(k));
    }
}

/// A file's pinned identity: where it is and which version.
fn key(src: &Source) -> String {
    format!(
        "{}\0{}\0{}",
        src.abs_path.display(),
        src.object
            .as_ref()
            .map(|o| format!("{}/{}", o.bucket, o.key))
            .unwrap_or_default(),
        src.snapshot_ref
    )
}

impl super::Mounts {
    /// Every document of the file Source `s` with its position, from the
    /// decoded cache when this reader keeps one and the file is worth it.
    pub fn read_documents(
        &self,
        s: &Source,
        opts: DecodeOptions,
        sink: &mut dyn FnMut(&Storyline),
    ) -> Result<SourceRead, ReadFailure> {
        let held = self.decoded.as_ref().and_then(|c| {
            if c.applies(s, &opts) {
                Some(c.get_or_read(s, opts))
            } else {
                // A lighter projection reads a subset of what a full decode
                // holds: answer it from memory when the file is there.
                c.cached(s).map(Ok)
            }
        });
        match held {
            Some(d) => {
                let d = d?;
                d.docs.iter().for_each(|k| k.with_whole(|d| sink(d)));
                Ok(d.read.clone())
            }
            None => crate::catalog::read::read_source(s, opts, sink),
        }
    }

    /// Every column of the `trajectories` rows of the file Source `s`, with
    /// what its read reported, when this reader keeps it decoded (read now
    /// if `opts` asks for a full read and it is not yet held); `None` when
    /// it does not.
    pub fn kept_trajectories(
        &self,
        s: &Source,
        opts: DecodeOptions,
    ) -> Option<Result<(RecordBatch, SourceRead), ReadFailure>> {
        let c = self.decoded.as_ref()?;
        let held = if c.applies(s, &opts) {
            match c.get_or_read(s, opts) {
                Ok(d) => d,
                Err(f) => return Some(Err(f)),
            }
        } else {
            c.cached(s)?
        };
        // Kept under another Source path (the same file mounted twice), the
        // rows would name the other one.
        let (path, rows) = held.trajectories.as_ref()?;
        (*path == s.source_path).then(|| Ok((rows.clone(), held.read.clone())))
    }

    /// The documents of the file Source `s` when this reader keeps it
    /// decoded (read now if not yet held), so a caller may hold on to them at
    /// no extra cost; `None` when it does not keep that file.
    pub fn kept_file(&self, s: &Source) -> Option<Result<Arc<DecodedSource>, ReadFailure>> {
        let opts = DecodeOptions::full(self.max_document_bytes);
        let c = self.decoded.as_ref().filter(|c| c.applies(s, &opts))?;
        Some(c.get_or_read(s, opts))
    }
}
