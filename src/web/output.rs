//! What the tools printed, shaped for the explorer: each observation result
//! as decoded text (the same text `find` searches), placed under the call it
//! answers, or once under its step when it names no call.
//!
//! A page of steps carries at most a bounded amount of each output: the
//! first and the last characters (a terminal reader looks at the command and
//! at how it ended) with the total line count; the full text is one step
//! request away.

use serde_json::{json, Value};

use crate::formats::text::{call_results_text, media, result_link, result_text};

/// One observation result for the explorer.
fn entry(r: &Value, limit: Option<usize>) -> Value {
    text_entry(result_text(r), result_link(r), media(r), limit)
}

/// The result given on a call itself (an ACTF command's
/// `aggregated_output`, a Storyline call's `result`), shown like the
/// observation results that answer the call, before them.
pub fn own_result(result: &Value, call_id: &str, limit: Option<usize>) -> Option<Value> {
    let text = call_results_text(Some(result), [])?;
    let mut e = text_entry(text, Some(call_id), media(result), limit);
    e["given_on_call"] = json!(true);
    Some(e)
}

fn text_entry(
    text: String,
    call_id: Option<&str>,
    media: Vec<crate::formats::text::Media>,
    limit: Option<usize>,
) -> Value {
    let lines = if text.is_empty() {
        0
    } else {
        text.lines().count().max(1)
    };
    let chars = text.chars().count();
    let mut v = json!({
        "call_id": call_id,
        "lines": lines,
        "chars": chars,
        "media": media,
    });
    match limit {
        Some(n) if chars > n => {
            let half = n / 2;
            let head: String = text.chars().take(half).collect();
            let tail_start = text
                .char_indices()
                .nth(chars - half)
                .map_or(text.len(), |(i, _)| i);
            v["text"] = json!(head);
            v["tail"] = json!(&text[tail_start..]);
            v["cut"] = json!(true);
        }
        _ => {
            v["text"] = json!(text);
            v["cut"] = json!(false);
        }
    }
    v
}

/// The observation results of a step (raw observation JSON text), split into
/// those that answer one of `call_ids` and those that answer none:
/// `(per call id, unlinked)`. Each text is cut to `limit` characters (head
/// and tail) when given.
pub fn split_results(
    observation: Option<&str>,
    call_ids: &[String],
    limit: Option<usize>,
) -> (Vec<(String, Vec<Value>)>, Vec<Value>) {
    let mut by_call: Vec<(String, Vec<Value>)> =
        call_ids.iter().map(|c| (c.clone(), Vec::new())).collect();
    let mut unlinked = Vec::new();
    let Some(obs) = observation.and_then(|o| serde_json::from_str::<Value>(o).ok()) else {
        return (by_call, unlinked);
    };
    let results: Vec<&Value> = match obs.get("results") {
        Some(Value::Array(a)) => a.iter().collect(),
        _ if obs.is_null() => Vec::new(),
        _ => vec![&obs],
    };
    for r in results {
        let e = entry(r, limit);
        match result_link(r).and_then(|id| by_call.iter_mut().find(|(c, _)| c == id)) {
            Some((_, list)) => list.push(e),
            None => unlinked.push(e),
        }
    }
    (by_call, unlinked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_go_under_their_call_or_once_under_the_step() {
        let obs = r#"{"results": [
            {"source_call_id": "c1", "content": "a\nb"},
            {"content": "New Terminal Output:\n\nroot@host:/app# ls\n"},
            {"source_call_id": "gone", "content": "orphan"}
        ]}"#;
        let (by_call, unlinked) = split_results(Some(obs), &["c1".into(), "c2".into()], None);
        assert_eq!(by_call[0].1.len(), 1);
        assert_eq!(by_call[0].1[0]["text"], "a\nb");
        assert_eq!(by_call[0].1[0]["lines"], 2);
        assert!(by_call[1].1.is_empty());
        assert_eq!(unlinked.len(), 2);
        assert_eq!(unlinked[1]["text"], "orphan");
    }

    #[test]
    fn a_result_given_on_the_call_is_decoded_text() {
        let e = own_result(&json!("\u{1b}[32mok\u{1b}[0m\nline 2\n"), "c1", None).unwrap();
        assert_eq!(e["text"], "\u{1b}[32mok\u{1b}[0m\nline 2\n");
        assert_eq!(e["lines"], 2);
        assert_eq!(e["call_id"], "c1");
        assert_eq!(e["given_on_call"], true);
        assert!(own_result(&Value::Null, "c1", None).is_none());
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let body: String = (0..1000).fold(String::new(), |mut s, i| {
            s.push_str(&format!("line {i}\n"));
            s
        });
        let obs = serde_json::to_string(&json!({"results": [{"content": body}]})).unwrap();
        let (_, unlinked) = split_results(Some(&obs), &[], Some(100));
        let e = &unlinked[0];
        assert_eq!(e["cut"], true);
        assert_eq!(e["lines"], 1000);
        assert!(e["text"].as_str().unwrap().starts_with("line 0\n"));
        assert!(e["tail"].as_str().unwrap().ends_with("line 999\n"));
    }
}
