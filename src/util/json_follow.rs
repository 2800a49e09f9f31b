//! Following a JSONPath through JSON text without building the document:
//! the members and elements off the path are checked and skipped, and only
//! the value the path ends at is built. SQL's `->`, `->>` and
//! `json_extract` run this once per row, where parsing the whole document
//! into a tree would allocate every member of it.
//!
//! The answer is the one [`super::jsonpath::lookup`] gives on the parsed
//! document: invalid JSON anywhere is an error, a missing member or an
//! index out of range is `None`, and a member given twice counts with its
//! last value.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::jsonpath::{lookup, PathStep};

/// The value at `path` in the JSON `text`.
pub fn follow(text: &str, path: &[PathStep]) -> Result<Option<Value>, serde_json::Error> {
    if path.iter().any(|s| matches!(s, PathStep::FromEnd(_))) {
        // Counting from the end needs the array's length first.
        let doc: Value = serde_json::from_str(text)?;
        return Ok(lookup(&doc, path).cloned());
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let found = Follow(path).deserialize(&mut de)?;
    de.end()?;
    Ok(found)
}

/// The value at `path` as text, as SQL's `->>` and `json_extract_string`
/// give it: a string without its quotes, any other value as JSON, and
/// nothing for JSON null, a missing member or invalid JSON.
pub fn text_at(text: &str, path: &[PathStep]) -> Option<String> {
    match follow(text, path).ok()?? {
        Value::Null => None,
        Value::String(s) => Some(s),
        other => Some(other.to_string()),
    }
}

/// The rest of the path, as a seed for the value it starts at.
struct Follow<'p>(&'p [PathStep]);

impl<'de> DeserializeSeed<'de> for Follow<'_> {
    type Value = Option<Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        if self.0.is_empty() {
            return Value::deserialize(d).map(Some);
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Follow<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    // A scalar where the path goes on: nothing there.
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        match &self.0[0] {
            PathStep::Key(k) => {
                while let Some(hit) = m.next_key_seed(KeyIs(k))? {
                    if hit {
                        found = m.next_value_seed(Follow(&self.0[1..]))?;
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
            }
            _ => while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {},
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
        let want = match &self.0[0] {
            PathStep::Index(i) => Some(*i),
            _ => None,
        };
        let mut found = None;
        let mut at = 0usize;
        loop {
            if want == Some(at) {
                match s.next_element_seed(Follow(&self.0[1..]))? {
                    Some(v) => found = v,
                    None => break,
                }
            } else if s.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            at += 1;
        }
        Ok(found)
    }
}

/// A member name, compared with the wanted one without copying it.
struct KeyIs<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::jsonpath::{parse, Indexes};
    use super::*;

    /// The same answer as parsing the document and looking the path up.
    fn same(text: &str, path: &str) {
        let steps = parse(path, Indexes::Signed).unwrap();
        let whole: Result<Value, _> = serde_json::from_str(text);
        let want = whole.ok().map(|d| lookup(&d, &steps).cloned());
        let got = follow(text, &steps).ok();
        assert_eq!(got, want, "{text} {path}");
    }

    #[test]
    fn follows_like_a_parsed_document() {
        let doc = r#"{"a": {"b": [1, {"c d": true}, "x"]}, "n": 1.50, "s": "caf\u00e9",
                      "dup": 1, "dup": {"k": 2}, "e\"sc": [], "big": 12345678901234567890}"#;
        for p in [
            "$",
            "$.a",
            "$.a.b",
            "$.a.b[0]",
            "$.a.b[1].\"c d\"",
            "$.a.b[2]",
            "$.a.b[3]",
            "$.a.b[-1]",
            "$.a.b[#-3]",
            "$.n",
            "$.s",
            "$.dup",
            "$.dup.k",
            "$[\"e\\\"sc\"]",
            "$.big",
            "$.missing",
            "$.n.x",
            "$.a[0]",
            "$.a.b.x",
            "$.s[0]",
        ] {
            same(doc, p);
        }
        for bad in [
            r#"{"a": 1,}"#,
            r#"{"a": 1} x"#,
            r#"{"a": [1, 2}"#,
            "",
            r#"{"b": tru}"#,
            r#"{"a": 1, "b": }"#,
        ] {
            same(bad, "$.a");
        }
        same("[1, [2, 3], {\"a\": null}]", "$[1][1]");
        same("[1, [2, 3], {\"a\": null}]", "$[2].a");
        same("\"text\"", "$");
        same("null", "$.a");
    }
}
