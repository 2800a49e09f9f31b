//! Parsing a stored event record into only the members the projection
//! reads. A record carries much the projection never looks at (client and
//! connection details, headers, the URL); building those as JSON trees
//! would cost most of the parse. Members off the kept ones are checked as
//! JSON and skipped, never allocated, so every lookup the projection makes
//! finds what it would find in the whole record.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

/// What to keep of a value.
enum Keep {
    /// All of it.
    All,
    /// Of an object, these members (each with what to keep of it); a value
    /// that is not an object is kept as `null`, which answers every member
    /// lookup as it would (with nothing).
    Only(&'static [(&'static str, Keep)]),
}

/// `payload.http`: the request's path and body, the response's status and
/// body.
const HTTP: &[(&str, Keep)] = &[
    ("path", Keep::All),
    ("request_body", Keep::All),
    ("response_body", Keep::All),
    ("status", Keep::All),
];

/// `payload`: the protocol, the HTTP part, the flat compatibility members,
/// an assembled stream, the model and the timing.
const PAYLOAD: &[(&str, Keep)] = &[
    ("assembled", Keep::All),
    ("body", Keep::All),
    ("http", Keep::Only(HTTP)),
    ("model", Keep::All),
    ("path", Keep::All),
    ("protocol", Keep::All),
    ("status", Keep::All),
    ("timing", Keep::All),
];

/// The record: who, when, and the payload.
const RECORD: &[(&str, Keep)] = &[
    ("agent_id", Keep::All),
    ("payload", Keep::Only(PAYLOAD)),
    ("run_id", Keep::All),
    ("timestamp_unix_ms", Keep::All),
];

/// The members of the record `text` that the projection reads.
pub fn parse_record(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = (&Keep::Only(RECORD)).deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

impl<'de> DeserializeSeed<'de> for &Keep {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        match self {
            Keep::All => Value::deserialize(d),
            Keep::Only(members) => d.deserialize_any(Members(members)),
        }
    }
}

/// An object's kept members.
struct Members(&'static [(&'static str, Keep)]);

/// The position of a member name in a kept list, without allocating it.
struct MemberName(&'static [(&'static str, Keep)]);

impl<'de> DeserializeSeed<'de> for MemberName {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for MemberName {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, s: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|(name, _)| *name == s))
    }
}

impl<'de> Visitor<'de> for Members {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(found) = map.next_key_seed(MemberName(self.0))? {
            match found {
                // A member given twice keeps its last value, as in a parse
                // of the whole record.
                Some(i) => {
                    let (name, keep) = &self.0[i];
                    let v = map.next_value_seed(keep)?;
                    out.insert((*name).to_string(), v);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(out))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_str<E>(self, _: &str) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_what_the_projection_reads_and_nothing_else() {
        let record = json!({
            "agent_id": "a", "run_id": "r", "seq": 4, "timestamp_unix_ms": 1000,
            "payload": {
                "protocol": "chat.completions", "client": {"peer": "127.0.0.1:1"},
                "http": {"path": "/v1/chat/completions", "headers": {"x": "y"},
                         "request_body": {"messages": [{"role": "user", "content": "hi"}]}},
                "timing": {"duration_ms": 3.5}
            }
        });
        let kept = parse_record(&record.to_string()).unwrap();
        assert_eq!(
            kept,
            json!({
                "agent_id": "a", "run_id": "r", "timestamp_unix_ms": 1000,
                "payload": {
                    "protocol": "chat.completions",
                    "http": {"path": "/v1/chat/completions",
                             "request_body": {"messages": [{"role": "user", "content": "hi"}]}},
                    "timing": {"duration_ms": 3.5}
                }
            })
        );
        // The last of a repeated member wins; escaped names match.
        let kept = parse_record(r#"{"run_id":"x","run\u005fid":"y","payload":[1,{"a":2}]}"#);
        assert_eq!(kept.unwrap(), json!({"run_id": "y", "payload": null}));
        // Invalid JSON anywhere, kept or not, is an error.
        assert!(parse_record(r#"{"payload":{"headers":{"x":}}}"#).is_err());
        assert!(parse_record(r#"{"run_id":"x"} 1"#).is_err());
    }
}
