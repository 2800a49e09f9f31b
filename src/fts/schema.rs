//! The step index schema: one tantivy document per step, its fields, and
//! the steps-relation columns a [`super::Writer`] takes them from.

use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED, STORED, STRING,
};

use super::tokenize::TOKENIZER_NAME;

/// JSON cells longer than this are not put in the fast column.
pub const JSON_FAST_MAX_BYTES: usize = 16 * 1024;

/// The fast-column value of a JSON cell kept only in the document store.
pub const JSON_IN_STORE: &str = "\u{1}";

/// The text fields of the index, in field order. The `observation` field
/// holds the decoded observation text (the `observation_text` column), not
/// its JSON.
pub const TEXT_COLUMNS: [&str; 5] = [
    "message_value",
    "reasoning_content",
    "observation",
    "prompt",
    "model_name",
];

/// Position of the observation in [`TEXT_COLUMNS`].
pub(crate) const OBSERVATION: usize = 2;

/// The JSON columns kept for predicates: JSON columns of the `steps`
/// relation, at positions 13 and 14 of [`BUILD_COLUMNS`] (`find` checks both
/// against the table definitions).
pub const JSON_COLUMNS: [&str; 2] = ["metrics", "extra"];

/// Fields of the index schema.
#[derive(Debug, Clone)]
pub(crate) struct Fields {
    /// The schema.
    pub schema: Schema,
    /// source_path (raw term, stored, fast).
    pub src: Field,
    /// Order of the step in its Source (fast): document ordinal << 24 | step.
    pub ord: Field,
    /// document_id (raw term, stored).
    pub doc: Field,
    /// run_id (raw term, stored).
    pub run: Field,
    /// session_id (raw term, stored).
    pub session: Field,
    /// origin_path (raw term, stored).
    pub origin: Field,
    /// step_id (indexed, stored).
    pub step: Field,
    /// step_source (raw term, stored).
    pub role: Field,
    /// effective_kind (stored).
    pub kind: Field,
    /// timestamp as RFC 3339 (stored).
    pub ts: Field,
    /// Text fields, one per [`TEXT_COLUMNS`] entry.
    pub text: [Field; 5],
    /// JSON fields, one per [`JSON_COLUMNS`] entry (stored).
    pub json: [Field; 2],
    /// The same JSON cells as dictionary-encoded fast columns (`<name>_fast`;
    /// [`JSON_IN_STORE`] for cells above [`JSON_FAST_MAX_BYTES`]).
    pub json_fast: [Field; 2],
    /// The leaves of the JSON cells by path (raw terms, see
    /// [`super::json_leaves`]).
    pub json_leaf: Field,
}

impl Fields {
    /// Build the schema.
    pub fn new() -> Fields {
        let mut b = Schema::builder();
        let src = b.add_text_field("src", STRING | STORED | FAST);
        let ord = b.add_u64_field("ord", FAST | STORED);
        let doc = b.add_text_field("doc", STRING | STORED);
        let run = b.add_text_field("run", STRING | STORED);
        let session = b.add_text_field("session", STRING | STORED);
        let origin = b.add_text_field("origin", STRING | STORED);
        let step = b.add_i64_field("step", INDEXED | STORED);
        let role = b.add_text_field("role", STRING | STORED);
        let kind = b.add_text_field("kind", STORED);
        let ts = b.add_text_field("ts", STORED);
        let opts = TextOptions::default()
            .set_indexing_options(
                TextFieldIndexing::default()
                    .set_tokenizer(TOKENIZER_NAME)
                    .set_index_option(IndexRecordOption::WithFreqsAndPositions),
            )
            .set_stored();
        let text = TEXT_COLUMNS.map(|c| b.add_text_field(c, opts.clone()));
        // Stored, and a dictionary-encoded fast column: a JSON predicate is
        // evaluated once per distinct value instead of once per step.
        let json = JSON_COLUMNS.map(|c| b.add_text_field(c, STORED));
        let fast = TextOptions::default().set_fast("raw");
        let json_fast = JSON_COLUMNS.map(|c| b.add_text_field(&format!("{c}_fast"), fast.clone()));
        let json_leaf = b.add_text_field("json_leaf", STRING);
        Fields {
            schema: b.build(),
            src,
            ord,
            doc,
            run,
            session,
            origin,
            step,
            role,
            kind,
            ts,
            text,
            json,
            json_fast,
            json_leaf,
        }
    }

    /// Bind to an opened index's schema (field ids by name).
    pub fn of(schema: &Schema) -> Option<Fields> {
        let f = |n: &str| schema.get_field(n).ok();
        Some(Fields {
            schema: schema.clone(),
            src: f("src")?,
            ord: f("ord")?,
            doc: f("doc")?,
            run: f("run")?,
            session: f("session")?,
            origin: f("origin")?,
            step: f("step")?,
            role: f("role")?,
            kind: f("kind")?,
            ts: f("ts")?,
            text: [
                f(TEXT_COLUMNS[0])?,
                f(TEXT_COLUMNS[1])?,
                f(TEXT_COLUMNS[2])?,
                f(TEXT_COLUMNS[3])?,
                f(TEXT_COLUMNS[4])?,
            ],
            json: [f(JSON_COLUMNS[0])?, f(JSON_COLUMNS[1])?],
            json_fast: [
                f(&format!("{}_fast", JSON_COLUMNS[0]))?,
                f(&format!("{}_fast", JSON_COLUMNS[1]))?,
            ],
            json_leaf: f("json_leaf")?,
        })
    }
}

impl Default for Fields {
    fn default() -> Self {
        Fields::new()
    }
}

/// The steps-relation columns an index is built from.
pub const BUILD_COLUMNS: [&str; 18] = [
    "source_path",
    "document_id",
    "run_id",
    "session_id",
    "step_id",
    "step_source",
    "effective_kind",
    "timestamp",
    "message_value",
    "reasoning_content",
    "observation_text",
    "prompt",
    "model_name",
    "metrics",
    "extra",
    "origin_path",
    "storage_ordinal",
    "turn_ordinal",
];

/// The text column a steps batch may carry after [`BUILD_COLUMNS`]: the
/// decoded results given on the step's calls themselves, indexed with the
/// observation (a person reads both as what the tools printed).
pub const CALL_OUTPUT_COLUMN: &str = "call_output_text";

/// A step's place in its Source: the document's position in the high bits,
/// the step's in the low 24.
pub fn step_order(document: i64, turn: i64) -> u64 {
    ((document.max(0) as u64) << 24) | (turn.max(0) as u64).min((1 << 24) - 1)
}

/// The document position of a step's place ([`step_order`]).
pub fn document_of(order: u64) -> u64 {
    order >> 24
}
