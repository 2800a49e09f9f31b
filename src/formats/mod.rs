//! Exchange formats: detection by content, and one decoder per format into
//! the canonical Storyline model ([`model::Storyline`]).
//!
//! Does not know about Datasets or snapshots (that is `catalog`); may use
//! `util` only.

pub mod actf;
pub mod atif;
pub mod encode;
mod error;
pub mod events;
pub mod json;
pub mod model;
pub mod openai;
pub mod openai_encode;
pub mod residual;
pub mod sniff;
pub mod storyline;
pub mod text;

use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde_json::Value;

pub use error::{Diagnostic, FormatError};
pub use sniff::{Container, Shape};

use model::Storyline;

/// The format of a Source.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum SourceFormat {
    /// ATIF (Harbor Agent Trajectory Interchange Format) v1.x.
    Atif,
    /// ACTF v1.0.
    Actf,
    /// OpenAI chat messages: SFT examples or row-per-LLM-call corpora.
    OpenAiMessages,
    /// Storyline `storyline/v1` JSON.
    Storyline,
    /// A Storyline three-table Lance store.
    StorylineLance,
    /// A canonical events Lance store.
    EventsLance,
    /// A `.json` file that could not be identified (it did not parse).
    Unknown,
}

impl SourceFormat {
    /// The stable name used in output and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SourceFormat::Atif => "atif",
            SourceFormat::Actf => "actf",
            SourceFormat::OpenAiMessages => "openai-messages",
            SourceFormat::Storyline => "storyline",
            SourceFormat::StorylineLance => "storyline-lance",
            SourceFormat::EventsLance => "events-lance",
            SourceFormat::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The shape of an OpenAI messages file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum OpenAiShape {
    /// `{"messages":[…],"tools":[…]}` examples.
    Sft,
    /// One row per LLM call, grouped by `session_id`.
    Rows,
}

/// What sniffing found.
#[derive(Debug, Clone)]
pub struct Sniffed {
    /// The format, when the file is a trajectory.
    pub format: Option<SourceFormat>,
    /// The OpenAI shape, for OpenAI files.
    pub openai_shape: Option<OpenAiShape>,
    /// Outer layout.
    pub container: Container,
    /// Set when the bytes are not valid JSON.
    pub invalid: Option<FormatError>,
}

/// File names that may hold trajectories.
pub fn is_candidate_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".json") || lower.ends_with(".jsonl") || lower.ends_with(".ndjson")
}

fn is_lines_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".jsonl") || lower.ends_with(".ndjson")
}

/// Bytes read at most while sniffing one file.
const SNIFF_LIMIT: usize = 16 << 20;
/// The first read is small: most formats are decided by their first key.
const SNIFF_FIRST: usize = 4 << 10;
const SNIFF_CHUNK: usize = 64 << 10;

/// Sniff a file by content.
pub fn sniff_file(path: &Path) -> std::io::Result<Sniffed> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    sniff_reader(File::open(path)?, &name)
}

/// Sniff the content `f` of a file named `name` (the name only breaks ties
/// between one JSON document and JSON Lines with a single record).
pub fn sniff_reader<R: Read>(mut f: R, name: &str) -> std::io::Result<Sniffed> {
    let mut sniffer = sniff::Sniffer::new();
    let mut first = [0u8; SNIFF_FIRST];
    let mut buf: Vec<u8> = Vec::new();
    let mut total = 0usize;
    let mut eof = false;
    loop {
        let chunk: &mut [u8] = if total == 0 {
            &mut first
        } else {
            if buf.is_empty() {
                buf.resize(SNIFF_CHUNK, 0);
            }
            &mut buf
        };
        let n = f.read(chunk)?;
        if n == 0 {
            eof = true;
            break;
        }
        sniffer.feed(&chunk[..n]);
        total += n;
        if sniffer.finished() || total >= SNIFF_LIMIT {
            break;
        }
        let shape = sniffer.shape();
        if !shape.layout_known && shape.invalid_at.is_none() && early_decision(shape).is_some() {
            break;
        }
    }
    let shape = if eof {
        sniffer.finish()
    } else {
        sniffer.shape().clone()
    };
    let mut container = shape.container;
    if !shape.layout_known && container == Container::Object && is_lines_name(name) {
        container = Container::Lines;
    }
    let detected = detect(&shape);
    let invalid = shape.invalid_at.map(|at| {
        if shape.too_deep {
            FormatError::TooDeep {
                source_path: String::new(),
                line: 0,
                column: 0,
            }
        } else if shape.non_finite {
            FormatError::NonFinite {
                source_path: String::new(),
                line: 0,
                column: 0,
            }
        } else {
            FormatError::InvalidJson {
                source_path: String::new(),
                line: 0,
                column: 0,
                message: format!("not valid JSON (byte {at})"),
            }
        }
    });
    let invalid = match (invalid, eof, shape.record_complete, container) {
        (Some(e), _, _, _) => Some(e),
        (None, true, false, Container::Object | Container::Array) => Some(FormatError::Truncated {
            source_path: String::new(),
            line: 0,
            column: 0,
        }),
        _ => None,
    };
    Ok(Sniffed {
        format: detected.map(|d| d.0),
        openai_shape: detected.and_then(|d| d.1),
        container,
        invalid,
    })
}

fn text_of<'a>(shape: &'a Shape, key: &str) -> Option<&'a str> {
    shape.key(key).and_then(|k| k.text.as_deref())
}

/// A decision that cannot change as more keys arrive.
fn early_decision(shape: &Shape) -> Option<(SourceFormat, Option<OpenAiShape>)> {
    let sv = text_of(shape, "schema_version").unwrap_or("");
    if sv.starts_with("storyline/") {
        return Some((SourceFormat::Storyline, None));
    }
    if sv.starts_with("ATIF") {
        return Some((SourceFormat::Atif, None));
    }
    if sv.starts_with("ACTF") {
        return Some((SourceFormat::Actf, None));
    }
    None
}

/// Decide the format from the first record's top-level keys.
pub fn detect(shape: &Shape) -> Option<(SourceFormat, Option<OpenAiShape>)> {
    use sniff::ValueKind;
    if !matches!(
        shape.container,
        Container::Object | Container::Array | Container::Lines
    ) {
        return None;
    }
    let has = |k: &str| shape.key(k).is_some();
    let kind = |k: &str| shape.key(k).map(|x| x.kind);
    if has("task_id") && kind("attempts") == Some(ValueKind::Object) {
        return Some((SourceFormat::Actf, None));
    }
    if has("session_id")
        && has("step_id")
        && ["messages", "messages_json", "response", "response_json"]
            .iter()
            .any(|k| has(k))
    {
        return Some((SourceFormat::OpenAiMessages, Some(OpenAiShape::Rows)));
    }
    if kind("session_steps") == Some(ValueKind::Array) {
        return Some((SourceFormat::OpenAiMessages, Some(OpenAiShape::Rows)));
    }
    if let Some(d) = early_decision(shape) {
        return Some(d);
    }
    if has("schema_version") {
        // A declared version of some other format: not ours.
        return None;
    }
    if kind("turns") == Some(ValueKind::Array)
        && (has("session") || has("session_id") || has("story_id"))
    {
        return Some((SourceFormat::Storyline, None));
    }
    if kind("steps") == Some(ValueKind::Array) && kind("agent") == Some(ValueKind::Object) {
        return Some((SourceFormat::Atif, None));
    }
    if kind("messages") == Some(ValueKind::Array)
        && !has("turns")
        && !has("steps")
        && !has("attempts")
    {
        return Some((SourceFormat::OpenAiMessages, Some(OpenAiShape::Sft)));
    }
    None
}

/// Per-Source decoding state: the path for messages, diagnostics collected,
/// and counters of generated ids.
#[derive(Debug, Clone)]
pub struct DecodeCtx {
    /// Dataset-relative path of the Source.
    pub source_path: String,
    /// Problems that did not stop decoding.
    pub diagnostics: Vec<Diagnostic>,
    /// How many ids were generated Source-locally.
    pub generated_ids: u64,
}

/// At most this many diagnostics are kept per Source; the rest are counted.
pub const MAX_DIAGNOSTICS: usize = 100;

impl DecodeCtx {
    /// A context for one Source.
    pub fn new(source_path: impl Into<String>) -> Self {
        DecodeCtx {
            source_path: source_path.into(),
            diagnostics: Vec::new(),
            generated_ids: 0,
        }
    }

    /// Record a diagnostic (bounded).
    pub fn diag(
        &mut self,
        code: &'static str,
        pointer: impl Into<String>,
        message: impl Into<String>,
    ) {
        if code == Diagnostic::GENERATED_ID {
            self.generated_ids += 1;
        }
        if self.diagnostics.len() < MAX_DIAGNOSTICS {
            self.diagnostics
                .push(Diagnostic::new(code, pointer, message));
        }
    }

    /// A schema error at `pointer`.
    pub fn schema(&self, pointer: impl Into<String>, message: impl Into<String>) -> FormatError {
        FormatError::Schema {
            source_path: self.source_path.clone(),
            pointer: pointer.into(),
            message: message.into(),
        }
    }
}

/// The default bound on one JSON document or line (`--max-document-bytes`).
pub const DEFAULT_MAX_DOCUMENT_BYTES: u64 = 256 * 1024 * 1024;

/// Options for decoding a file.
#[derive(Debug, Clone, Copy)]
pub struct DecodeOptions {
    /// Largest single document or line, in bytes.
    pub max_document_bytes: u64,
    /// How much of each record to materialise (formats with a typed reader
    /// honour it; others always read everything).
    pub projection: atif::Projection,
}

impl DecodeOptions {
    /// Read everything, with the given document bound.
    pub fn full(max_document_bytes: u64) -> Self {
        DecodeOptions {
            max_document_bytes,
            projection: atif::Projection::Full,
        }
    }
}

/// Decode one file Source, streaming each Storyline document to `sink`.
pub fn decode_file(
    file: File,
    format: SourceFormat,
    openai_shape: Option<OpenAiShape>,
    container: Container,
    opts: DecodeOptions,
    ctx: &mut DecodeCtx,
    sink: &mut dyn FnMut(Storyline),
) -> Result<(), FormatError> {
    let len = file.metadata().ok().map(|m| m.len());
    decode_reader(file, len, format, openai_shape, container, opts, ctx, sink)
}

/// Sniff and decode an in-memory file (used by fuzz targets and tests).
pub fn decode_bytes(
    bytes: &[u8],
    opts: DecodeOptions,
    ctx: &mut DecodeCtx,
    sink: &mut dyn FnMut(Storyline),
) -> Result<Option<SourceFormat>, FormatError> {
    let shape = sniff::sniff_bytes(bytes);
    let Some((format, openai_shape)) = detect(&shape) else {
        return Ok(None);
    };
    decode_reader(
        bytes,
        Some(bytes.len() as u64),
        format,
        openai_shape,
        shape.container,
        opts,
        ctx,
        sink,
    )?;
    Ok(Some(format))
}

/// Decode from any reader laid out as `container`.
#[allow(clippy::too_many_arguments)]
pub fn decode_reader<R: std::io::Read>(
    file: R,
    size_hint: Option<u64>,
    format: SourceFormat,
    openai_shape: Option<OpenAiShape>,
    container: Container,
    opts: DecodeOptions,
    ctx: &mut DecodeCtx,
    sink: &mut dyn FnMut(Storyline),
) -> Result<(), FormatError> {
    let source_path = ctx.source_path.clone();
    match format {
        SourceFormat::OpenAiMessages if openai_shape == Some(OpenAiShape::Rows) => {
            let mut rows = openai::RowCollector::default();
            json::for_each_record(
                file,
                size_hint,
                container,
                &source_path,
                opts.max_document_bytes,
                &mut |v, pos| {
                    check_record_format(format, &Shape::of_value(&v), pos, ctx)?;
                    rows.push(v, pos, ctx)
                },
            )?;
            rows.finish(ctx, sink)
        }
        SourceFormat::Atif => json::for_each_record_seed(
            file,
            size_hint,
            container,
            &source_path,
            opts.max_document_bytes,
            atif::NodeSeed(opts.projection),
            &mut |v, pos| {
                check_record_format(SourceFormat::Atif, &v.shape(), pos, ctx)?;
                atif::decode(v, pos, ctx, sink)
            },
        ),
        SourceFormat::Actf | SourceFormat::Storyline | SourceFormat::OpenAiMessages => {
            json::for_each_record(
                file,
                size_hint,
                container,
                &source_path,
                opts.max_document_bytes,
                &mut |v, pos| {
                    check_record_format(format, &Shape::of_value(&v), pos, ctx)?;
                    decode_record(format, v, pos, ctx, sink)
                },
            )
        }
        SourceFormat::StorylineLance => Err(FormatError::NotReadable {
            source_path,
            what: "Storyline Lance store",
        }),
        SourceFormat::EventsLance => Err(FormatError::NotReadable {
            source_path,
            what: "events Lance store",
        }),
        SourceFormat::Unknown => Err(FormatError::NotReadable {
            source_path,
            what: "unidentified",
        }),
    }
}

/// One file holds one format: a record that looks like another format is an
/// error naming both (records that look like nothing known are left to the
/// decoder's own checks).
fn check_record_format(
    format: SourceFormat,
    shape: &Shape,
    pos: json::RecordPos,
    ctx: &DecodeCtx,
) -> Result<(), FormatError> {
    match detect(shape) {
        Some((found, _)) if found != format => Err(FormatError::MixedFormats {
            source_path: ctx.source_path.clone(),
            record: pos.index + 1,
            expected: format.name(),
            found: found.name(),
        }),
        _ => Ok(()),
    }
}

fn decode_record(
    format: SourceFormat,
    v: Value,
    pos: json::RecordPos,
    ctx: &mut DecodeCtx,
    sink: &mut dyn FnMut(Storyline),
) -> Result<(), FormatError> {
    match format {
        SourceFormat::Actf => actf::decode(v, pos, ctx, sink),
        SourceFormat::Storyline => storyline::decode(v, pos, ctx, sink),
        SourceFormat::OpenAiMessages => openai::decode_sft(v, pos, ctx, sink),
        _ => Ok(()),
    }
}

/// A record locator for messages: `record 3` or `line 7`.
pub fn locator(pos: json::RecordPos) -> String {
    if pos.line > 0 {
        format!("line {}", pos.line)
    } else {
        format!("record {}", pos.index + 1)
    }
}

/// Exchange formats `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// ATIF v1.7.
    Atif,
    /// ACTF v1.0.
    Actf,
    /// OpenAI messages: SFT examples, and rows for documents read from
    /// row-per-call rows.
    OpenAiMessages,
    /// Storyline v1.
    Storyline,
}

impl ExportFormat {
    /// Every export format, in the order messages list them.
    pub const ALL: [ExportFormat; 4] = [
        ExportFormat::Atif,
        ExportFormat::OpenAiMessages,
        ExportFormat::Storyline,
        ExportFormat::Actf,
    ];

    /// The Source format of what it writes.
    pub fn source_format(self) -> SourceFormat {
        match self {
            ExportFormat::Atif => SourceFormat::Atif,
            ExportFormat::Actf => SourceFormat::Actf,
            ExportFormat::OpenAiMessages => SourceFormat::OpenAiMessages,
            ExportFormat::Storyline => SourceFormat::Storyline,
        }
    }

    /// The stable name: that of its Source format.
    pub fn name(self) -> &'static str {
        self.source_format().name()
    }
}

impl std::fmt::Display for ExportFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ExportFormat {
    type Err = UnknownExportFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExportFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownExportFormat(s.to_string()))
    }
}

/// A name that is no export format. Its message lists the names
/// ("must be atif, openai-messages, storyline or actf, not …") for the
/// caller to prefix with what it parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownExportFormat(pub String);

impl std::fmt::Display for UnknownExportFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [rest @ .., last] = ExportFormat::ALL.map(ExportFormat::name);
        write!(
            f,
            "must be {} or {last}, not `{}`",
            rest.join(", "),
            crate::util::text::escape_control(&self.0)
        )
    }
}

impl std::error::Error for UnknownExportFormat {}

/// Encode documents in `format`: the output records (one JSON value each)
/// and what the conversion could not keep: every Storyline field that
/// reading the records back with the format's decoder would not give back
/// as it is, by JSON pointer into its document (see [`encode::Loss`]).
pub fn encode_documents(format: ExportFormat, docs: &[Storyline]) -> (Vec<Value>, encode::Losses) {
    let mut losses = Vec::new();
    let records = match format {
        ExportFormat::Atif => atif::encode::encode(docs, &mut losses),
        ExportFormat::Actf => actf::encode::encode(docs, &mut losses),
        ExportFormat::OpenAiMessages => openai_encode::encode(docs, &mut losses),
        ExportFormat::Storyline => docs
            .iter()
            .map(|d| storyline::encode(d, &mut losses))
            .collect(),
    };
    (records, losses)
}

#[cfg(test)]
mod tests {
    use super::ExportFormat;

    #[test]
    fn export_format_names_round_trip() {
        for f in ExportFormat::ALL {
            assert_eq!(f.to_string().parse::<ExportFormat>(), Ok(f));
        }
        let e = "pdf".parse::<ExportFormat>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "must be atif, openai-messages, storyline or actf, not `pdf`"
        );
    }
}
