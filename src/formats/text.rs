//! The decoded text of content-bearing JSON: what a person reads in a
//! message, an observation or a tool result.
//!
//! Exchange formats carry tool output as JSON strings (with `\n`, `\t`,
//! `\u001b` escapes) or as lists of content parts. Every consumer that shows
//! or searches that content (the `observation_text` and `results_text`
//! columns, the full-text index, previews, the web explorer) reads it through
//! this module, so they all see the same characters: JSON strings decoded,
//! parts joined with newlines, images, audio and files as labelled
//! placeholders. The raw JSON columns are never touched; exports stay exact.

use serde_json::{Map, Value};

/// Keys that link a result to the call it answers (ATIF/Storyline,
/// OpenAI, ACTF).
pub const RESULT_LINK_KEYS: [&str; 4] = ["source_call_id", "tool_call_id", "tool_use_id", "id"];

/// The call an observation result answers, when it names one:
/// `source_call_id` (ATIF, Storyline), `tool_call_id` (OpenAI), `tool_use_id`
/// or `id` (ACTF).
pub fn result_link(r: &Value) -> Option<&str> {
    RESULT_LINK_KEYS
        .iter()
        .find_map(|k| r.get(*k).and_then(Value::as_str))
}

/// The text of a message or content value: a string as is, a list of
/// content parts joined with newlines, a part by its text (media as
/// placeholders), anything else rendered as `key: value` lines with its
/// strings decoded.
pub fn content_text(v: &Value) -> String {
    let mut out = String::new();
    push_content(&mut out, v, 0);
    out
}

/// The text of an observation: each result's content, in order, joined with
/// newlines. `None` for JSON null and for an observation without any text.
pub fn observation_text(obs: &Value) -> Option<String> {
    let mut out = String::new();
    match obs.get("results") {
        Some(Value::Array(results)) => {
            for r in results {
                join(&mut out, &result_text(r));
            }
        }
        _ => push_content(&mut out, obs, 0),
    }
    (!out.is_empty()).then_some(out)
}

/// The text of one observation result: its `content`, then a placeholder
/// for each subagent trajectory it refers to. A result without `content`
/// is rendered whole, without the keys that only link it to its call.
pub fn result_text(r: &Value) -> String {
    let mut out = String::new();
    let Value::Object(o) = r else {
        push_content(&mut out, r, 0);
        return out;
    };
    // ACTF observation items may carry a command's output as
    // `aggregated_output` instead of `content`.
    let content = o.get("content").or_else(|| o.get("aggregated_output"));
    if let Some(c) = content {
        push_content(&mut out, c, 0);
    }
    if let Some(refs) = o.get("subagent_trajectory_ref") {
        let refs: Vec<&Value> = match refs {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        for x in refs {
            let id = x
                .get("trajectory_id")
                .or_else(|| x.get("session_id"))
                .and_then(Value::as_str)
                .unwrap_or("");
            join(&mut out, &format!("[subagent: {id}]"));
        }
    }
    if content.is_none() && !o.contains_key("subagent_trajectory_ref") {
        let rest: Map<String, Value> = o
            .iter()
            .filter(|(k, _)| !RESULT_LINK_KEYS.contains(&k.as_str()) && *k != "type")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        push_generic(&mut out, &Value::Object(rest), 0);
    }
    out
}

/// The text of the results that answer one call: the call's own `result`
/// first, then each linked observation result. `None` when there is none.
pub fn call_results_text<'a>(
    result: Option<&Value>,
    linked: impl IntoIterator<Item = &'a Value>,
) -> Option<String> {
    let mut out = String::new();
    let mut any = false;
    if let Some(r) = result.filter(|r| !r.is_null()) {
        any = true;
        push_content(&mut out, r, 0);
    }
    for r in linked {
        any = true;
        join(&mut out, &result_text(r));
    }
    any.then_some(out)
}

/// An image, audio clip or file a content part refers to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Media {
    /// `image`, `audio` or `file`.
    pub kind: &'static str,
    /// Where it is: a path or URL as given (`data:` URLs are not repeated).
    pub path: Option<String>,
    /// The placeholder that stands for it in the text.
    pub label: String,
}

/// The media parts of a content value or observation result, in order.
pub fn media(v: &Value) -> Vec<Media> {
    let mut out = Vec::new();
    collect_media(v, &mut out, 0);
    out
}

fn collect_media(v: &Value, out: &mut Vec<Media>, depth: usize) {
    if depth > 8 {
        return;
    }
    match v {
        Value::Array(a) => {
            for x in a {
                collect_media(x, out, depth + 1);
            }
        }
        Value::Object(o) => {
            if let Some(m) = part_media(o) {
                out.push(m);
            } else if let Some(c) = o.get("content") {
                collect_media(c, out, depth + 1);
            }
        }
        _ => {}
    }
}

/// Append `piece` on a new line (nothing for an empty piece).
fn join(out: &mut String, piece: &str) {
    if piece.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(piece);
}

/// Values nested deeper than this contribute no text (parsed documents are
/// shallower; the bound keeps values built in memory from exhausting the
/// stack).
const MAX_DEPTH: usize = 128;

fn push_content(out: &mut String, v: &Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Null => {}
        Value::String(s) => join(out, s),
        Value::Array(parts) => {
            for p in parts {
                push_part(out, p, depth + 1);
            }
        }
        Value::Object(_) => push_part(out, v, depth + 1),
        other => join(out, &other.to_string()),
    }
}

fn push_part(out: &mut String, p: &Value, depth: usize) {
    let Value::Object(o) = p else {
        push_content(out, p, depth);
        return;
    };
    if let Some(Value::String(t)) = o.get("text") {
        join(out, t);
    } else if let Some(m) = part_media(o) {
        join(out, &m.label);
    } else if let Some(c) = o.get("content") {
        // A tool result part (`{"type": "tool_result", "content": …}`).
        let mut inner = String::new();
        push_content(&mut inner, c, depth + 1);
        join(out, &inner);
    } else if let Some(Value::String(t)) = o.get("thinking").or_else(|| o.get("refusal")) {
        join(out, t);
    } else {
        let mut inner = String::new();
        push_generic(&mut inner, p, depth + 1);
        join(out, &inner);
    }
}

/// Media a content part stands for, by its `type` (`image`, `image_url`,
/// `input_image`, `input_audio`, `audio`, `file`, `input_file`, `document`).
fn part_media(o: &Map<String, Value>) -> Option<Media> {
    let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
    let kind = if ty.contains("image") {
        "image"
    } else if ty.contains("audio") {
        "audio"
    } else if ty == "file" || ty == "input_file" || ty == "document" {
        "file"
    } else {
        return None;
    };
    let nested = |k: &str| {
        o.get(k)
            .and_then(|s| s.get("path").or_else(|| s.get("url")))
    };
    let raw = nested("source")
        .or_else(|| o.get("image_url").and_then(|u| u.get("url").or(Some(u))))
        .or_else(|| nested("file"))
        .or_else(|| o.get("path"))
        .or_else(|| o.get("url"))
        .or_else(|| o.get("file").and_then(|f| f.get("filename")))
        .or_else(|| o.get("filename"))
        .and_then(Value::as_str);
    let path = raw.filter(|p| !p.starts_with("data:")).map(str::to_string);
    let shown = match raw {
        Some(p) if p.starts_with("data:") => "data:…".to_string(),
        Some(p) => p.to_string(),
        // Inline data (an Anthropic base64 source, OpenAI input audio):
        // its media type or format.
        None => o
            .get("input_audio")
            .and_then(|a| a.get("format"))
            .or_else(|| o.get("source").and_then(|s| s.get("media_type")))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    };
    Some(Media {
        kind,
        path,
        label: format!("[{kind}: {shown}]"),
    })
}

/// Any JSON as `key: value` lines with strings decoded, nested values after
/// their key, list items one per line.
fn push_generic(out: &mut String, v: &Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Null => {}
        Value::String(s) => join(out, s),
        Value::Array(a) => {
            for x in a {
                push_generic(out, x, depth + 1);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                let mut inner = String::new();
                push_generic(&mut inner, x, depth + 1);
                if inner.is_empty() {
                    continue;
                }
                join(out, &format!("{k}: {inner}"));
            }
        }
        other => join(out, &other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decoded(json_text: &str) -> String {
        content_text(&serde_json::from_str(json_text).unwrap())
    }

    #[test]
    fn escapes_become_the_characters_they_stand_for() {
        assert_eq!(decoded(r#""a\nb\tc\"d\\e""#), "a\nb\tc\"d\\e");
        assert_eq!(
            decoded(r#""\u001b[31mred\u001b[0m""#),
            "\u{1b}[31mred\u{1b}[0m"
        );
        // A surrogate pair is one character.
        assert_eq!(decoded(r#""\ud83d\ude00 ok""#), "😀 ok");
        assert_eq!(decoded(r#""\u4e2d\u6587""#), "中文");
    }

    #[test]
    fn invalid_escapes_are_refused_by_the_json_reader_not_guessed() {
        // Lone surrogates and unknown escapes never reach this module as
        // text: the JSON reader rejects them, and documents holding them are
        // reported by the decoder with their position.
        for bad in [r#""\ud800""#, r#""\q""#, r#""\u12""#] {
            assert!(serde_json::from_str::<Value>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn content_parts_join_with_newlines_and_media_become_placeholders() {
        let v = json!([
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"media_type": "image/png", "path": "images/s1.png"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            "tail"
        ]);
        assert_eq!(
            content_text(&v),
            "look\n[image: images/s1.png]\n[image: data:…]\n[audio: wav]\ntail"
        );
        let m = media(&v);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].path.as_deref(), Some("images/s1.png"));
        assert_eq!(m[1].path, None);
    }

    #[test]
    fn observation_results_are_decoded_in_order() {
        let obs = json!({"results": [
            {"source_call_id": "c1", "content": "root@host:/app# ls\nREADME.md\n"},
            {"content": [{"type": "text", "text": "second"}]},
            {"source_call_id": "c3", "subagent_trajectory_ref": [{"trajectory_id": "sub-1"}]}
        ]});
        assert_eq!(
            observation_text(&obs).unwrap(),
            "root@host:/app# ls\nREADME.md\n\nsecond\n[subagent: sub-1]"
        );
        assert_eq!(observation_text(&json!({"results": []})), None);
        assert_eq!(observation_text(&Value::Null), None);
    }

    #[test]
    fn json_printed_by_a_tool_stays_readable() {
        // A tool that printed JSON: the string is decoded once, so the JSON
        // it printed reads as JSON, and its words are words.
        let obs = json!({"results": [{"content": "{\"status\": \"ModuleNotFoundError\"}\n"}]});
        assert_eq!(
            observation_text(&obs).unwrap(),
            "{\"status\": \"ModuleNotFoundError\"}\n"
        );
        // Structured content without text parts is shown as key: value.
        let r = json!({"tool_use_id": "t1", "content": {"stdout": "a\nb", "exit_code": 1}});
        // Keys in their JSON-object order (sorted).
        assert_eq!(result_text(&r), "exit_code: 1\nstdout: a\nb");
        let bare = json!({"tool_use_id": "t1", "type": "tool_result", "output": "done"});
        assert_eq!(result_text(&bare), "output: done");
    }

    #[test]
    fn tool_result_parts_read_as_their_content() {
        let msg = json!([
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "out"}]},
            {"type": "thinking", "thinking": "hmm"}
        ]);
        assert_eq!(content_text(&msg), "out\nhmm");
    }

    #[test]
    fn call_results_join_the_call_result_and_linked_results() {
        let r1 = json!({"source_call_id": "c", "content": "one"});
        let r2 = json!({"source_call_id": "c", "content": "two"});
        assert_eq!(
            call_results_text(Some(&json!("own")), [&r1, &r2]).as_deref(),
            Some("own\none\ntwo")
        );
        assert_eq!(call_results_text(None, []), None);
        assert_eq!(result_link(&r1), Some("c"));
        assert_eq!(result_link(&json!({"content": "x"})), None);
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let mut v = json!("leaf");
        for _ in 0..1_000 {
            v = json!([v]);
        }
        // serde_json's own limit keeps documents shallower than this when
        // parsed; a value built in memory must still not crash the reader.
        let _ = media(&v);
        assert_eq!(content_text(&v), "");
        let mut shallow = json!("leaf");
        for _ in 0..100 {
            shallow = json!([shallow]);
        }
        assert_eq!(content_text(&shallow), "leaf");
    }
}
