//! Source residuals: values of a source document that have no Storyline
//! field, kept by JSON Pointer in `unknown_fields` so export can put them back.

use serde_json::{json, Map, Value};

use super::model::Storyline;

/// Escape one JSON Pointer reference token (RFC 6901).
pub fn escape_token(s: &str) -> String {
    if !s.contains(['~', '/']) {
        return s.to_string();
    }
    s.replace('~', "~0").replace('/', "~1")
}

/// Join a pointer prefix and a key.
pub fn join(prefix: &str, key: &str) -> String {
    format!("{prefix}/{}", escape_token(key))
}

/// Collected residual of one Storyline document.
#[derive(Debug, Default, Clone)]
pub struct Residual {
    fields: Map<String, Value>,
    /// Pointers of keys the source lacked that Storyline requires (a
    /// session id the decoder derived): export leaves them out again.
    absent: Vec<String>,
    /// Facts about the source document as a whole (its shape, how its
    /// parts map to turns), written beside `fields` in the slice.
    notes: Map<String, Value>,
}

impl Residual {
    /// Record `value` found at `pointer` of the source document.
    pub fn put(&mut self, pointer: String, value: Value) {
        self.fields.insert(pointer, value);
    }

    /// Record every key left in `obj` under `prefix`.
    pub fn rest(&mut self, prefix: &str, obj: Map<String, Value>) {
        for (k, v) in obj {
            self.fields.insert(join(prefix, &k), v);
        }
    }

    /// Record that the source had no key at `pointer`, where the Storyline
    /// document has a value (derived or inherited, not given).
    pub fn absent(&mut self, pointer: String) {
        self.absent.push(pointer);
    }

    /// Record a fact about the source document as a whole, kept in the
    /// slice under `key` (not a pointer: it is not put back anywhere).
    pub fn note(&mut self, key: &str, value: Value) {
        self.notes.insert(key.to_string(), value);
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.absent.is_empty() && self.notes.is_empty()
    }

    /// Write `unknown_fields` / `unknown_key_counts` into `doc` for `source`.
    /// `array_keys` names the schema arrays whose indexes count as `*`.
    pub fn apply(
        self,
        doc: &mut Storyline,
        source: &str,
        source_document_id: &str,
        array_keys: &[&str],
    ) {
        if self.is_empty() {
            return;
        }
        let mut counts = Map::new();
        for k in self.fields.keys() {
            let norm = normalize_pointer(k, array_keys);
            let c = counts.entry(norm).or_insert(json!(0));
            *c = json!(c.as_u64().unwrap_or(0) + 1);
        }
        let mut slice = json!({ "source_document_id": source_document_id, "fields": Value::Object(self.fields) });
        if !self.absent.is_empty() {
            slice["absent"] = json!(self.absent);
        }
        for (k, v) in self.notes {
            slice[k.as_str()] = v;
        }
        doc.unknown_fields = Some(json!({ "sources": { source: slice } }));
        doc.unknown_key_counts = Some(json!({ source: Value::Object(counts) }));
    }
}

/// Record in `res` what turns `built` (what an encoder writes from the
/// Storyline document) into `actual` (the source value) below pointer `at`:
/// values that differ or that `built` lacks are kept, keys that only `built`
/// has are marked absent. Objects are compared key by key and arrays of the
/// same length element by element; anything else that differs is kept
/// whole. Putting the entries back over `built` gives `actual` exactly, so a
/// decoder that records this residual makes its format round-trip without
/// knowing every quirk of its sources.
pub fn diff_into(res: &mut Residual, at: &str, actual: &Value, built: &Value) {
    if actual == built {
        return;
    }
    match (actual, built) {
        (Value::Object(a), Value::Object(b)) => diff_object(res, at, a, b, &[]),
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (av, bv)) in a.iter().zip(b).enumerate() {
                diff_into(res, &format!("{at}/{i}"), av, bv);
            }
        }
        _ => res.put(at.to_string(), actual.clone()),
    }
}

/// [`diff_into`] of two objects, leaving out the keys in `skip` (which the
/// caller compares itself).
pub fn diff_object(
    res: &mut Residual,
    at: &str,
    actual: &Map<String, Value>,
    built: &Map<String, Value>,
    skip: &[&str],
) {
    for (k, av) in actual {
        if skip.contains(&k.as_str()) {
            continue;
        }
        let p = join(at, k);
        match built.get(k) {
            Some(bv) => diff_into(res, &p, av, bv),
            None => res.put(p, av.clone()),
        }
    }
    for k in built.keys() {
        if !actual.contains_key(k) && !skip.contains(&k.as_str()) {
            res.absent(join(at, k));
        }
    }
}

/// Replace array positions that follow one of `array_keys` with `*`.
pub fn normalize_pointer(p: &str, array_keys: &[&str]) -> String {
    let mut out = String::with_capacity(p.len());
    let mut prev = "";
    for seg in p.split('/').skip(1) {
        out.push('/');
        if array_keys.contains(&prev) && !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit())
        {
            out.push('*');
        } else {
            out.push_str(seg);
        }
        prev = seg;
    }
    out
}

/// BLAKE3 of the canonical form of `v` (object keys sorted, compact), as hex.
pub fn canonical_digest(v: &Value) -> String {
    let mut h = blake3::Hasher::new();
    write_canonical(v, &mut h);
    h.finalize().to_hex().to_string()
}

fn write_canonical(v: &Value, h: &mut blake3::Hasher) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            h.update(b"{");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                h.update(Value::String(k.clone()).to_string().as_bytes());
                h.update(b":");
                write_canonical(&m[k], h);
            }
            h.update(b"}");
        }
        Value::Array(a) => {
            h.update(b"[");
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    h.update(b",");
                }
                write_canonical(x, h);
            }
            h.update(b"]");
        }
        other => {
            h.update(other.to_string().as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_escape_and_normalize() {
        assert_eq!(join("/steps/0", "a/b~c"), "/steps/0/a~1b~0c");
        assert_eq!(
            normalize_pointer("/steps/12/tool_calls/3/x", &["steps", "tool_calls"]),
            "/steps/*/tool_calls/*/x"
        );
        assert_eq!(
            normalize_pointer("/attempts/1/x", &["steps"]),
            "/attempts/1/x"
        );
    }

    #[test]
    fn diff_puts_back_exactly() {
        use crate::formats::encode::{restore_all, ResidualEntry};
        let actual = json!({"a": 1, "m": [{"x": 1, "k": null}, {"y": [1, 2]}], "s": "t"});
        let built = json!({"a": 2, "m": [{"x": 1}, {"y": [1], "z": 0}], "gone": true});
        let mut res = Residual::default();
        diff_into(&mut res, "", &actual, &built);
        let mut entries: Vec<ResidualEntry> =
            res.fields.into_iter().map(|(p, v)| (p, Some(v))).collect();
        entries.extend(res.absent.into_iter().map(|p| (p, None)));
        let mut v = built;
        restore_all(&mut v, entries);
        assert_eq!(v, actual);
    }

    #[test]
    fn digest_ignores_key_order() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":[1,{"y":2,"x":1}]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":[1,{"x":1,"y":2}],"b":1}"#).unwrap();
        assert_eq!(canonical_digest(&a), canonical_digest(&b));
    }
}
