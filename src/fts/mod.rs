//! `fts`: the step full-text index. The only place that knows tantivy and
//! jieba.
//!
//! What it does:
//!
//! - **Schema and analyzer.** One tantivy document per step: identity keys,
//!   the five text columns ([`TEXT_COLUMNS`]) analysed by the `jieba`
//!   tokenizer ([`tokens`], [`TOKENIZER_NAME`]), and the JSON columns
//!   ([`JSON_COLUMNS`]) stored, kept as dictionary-encoded fast columns,
//!   and indexed leaf by leaf under their paths (`json_leaves`), so a
//!   comparison on a JSON value is a term or range lookup.
//! - **Directories.** [`Index::open`], [`Index::create`],
//!   [`Index::create_in_memory`], and the [`IndexMeta`] file that records
//!   what an index covers ([`INDEX_VERSION`], [`META_FILE`]).
//! - **Writing.** [`Index::writer`] gives a [`Writer`]: `delete_source`,
//!   `add_batch` (Arrow batches of the steps relation projected to
//!   [`BUILD_COLUMNS`]) and `finish`.
//! - **Reading.** [`Index::searcher`] gives a [`Searcher`]: it builds a
//!   [`Query`] for a text leaf (columns, optional role, terms: one term or a
//!   phrase) or for identity [`Keys`]; per [`Segment`] it answers the
//!   [`DocSet`] a query matches, the alive documents, the [`JsonCells`]
//!   (dictionary ordinals, their values, the stored documents), and the
//!   first documents of a result in (Source, place) order ([`Ranking`]); a
//!   [`StoredStep`] gives the stored fields of a hit.
//!
//! What it does not: parse expressions, evaluate AND/OR/NOT or JSON
//! predicates, make previews, or decide which index serves which Source and
//! when to rebuild (all `find`). It reads no Source itself: callers hand it
//! record batches.
//!
//! May call: `util`, `formats` (only `storyline::format_rfc3339` for the
//! stored timestamp text), and Arrow record batches. Never `find`,
//! `catalog`, `dataset`, `store`, `sql`, `cli` or `web`.

mod build_dir;
mod docset;
mod fold;
mod index;
mod json_leaves;
mod pairs;
mod queued;
mod schema;
mod search;
mod tokenize;
mod words;
mod writer;

pub use docset::{DocId, DocSet};
pub use index::{Index, IndexMeta, INDEX_VERSION, META_FILE};
pub use json_leaves::{number_is_exact, LeafTest};
pub use schema::{
    document_of, step_order, BUILD_COLUMNS, CALL_OUTPUT_COLUMN, JSON_COLUMNS, JSON_FAST_MAX_BYTES,
    TEXT_COLUMNS,
};
pub use search::{
    JsonCells, Keys, Query, Ranked, Ranking, Searcher, Segment, StepAddress, StoredStep,
};
pub use tokenize::{dictionary_loaded, find_terms, tokens, MAX_TOKEN_BYTES, TOKENIZER_NAME};
pub use writer::Writer;

/// An index that cannot be opened, written or read. Its message is the
/// underlying index error's.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct FtsError(#[from] tantivy::TantivyError);

impl FtsError {
    fn io(e: std::io::Error) -> FtsError {
        FtsError(e.into())
    }
}
