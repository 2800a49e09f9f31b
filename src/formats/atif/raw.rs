//! Typed, projecting parse of ATIF records.
//!
//! The trajectory, step, tool-call and observation objects are read field by
//! field into small structs, without building generic JSON maps; unknown keys
//! are kept (in full mode) for the residual. In skeleton mode the heavy
//! payloads (messages, reasoning, arguments, metrics, extras, observation
//! content) are skipped without being materialised, which is what counting
//! and structural checks need.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// How much of each record to materialise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Projection {
    /// Everything, including unknown keys.
    Full,
    /// Ids, structure, sources, timestamps and links only.
    Skeleton,
}

/// One trajectory node as read (fields mirror the ATIF keys).
#[allow(missing_docs)]
#[derive(Debug, Default)]
pub struct RawNode {
    pub schema_version: Option<Value>,
    pub session_id: Option<Value>,
    pub trajectory_id: Option<Value>,
    pub agent: Option<Value>,
    pub steps: Option<Vec<RawStep>>,
    pub notes: Option<Value>,
    pub final_metrics: Option<Value>,
    pub continued_trajectory_ref: Option<Value>,
    pub extra: Option<Value>,
    pub subagents: Option<Vec<RawNode>>,
    pub rest: Vec<(String, Value)>,
}

/// One step as read (fields mirror the ATIF keys).
#[allow(missing_docs)]
#[derive(Debug, Default)]
pub struct RawStep {
    pub step_id: Option<Value>,
    pub timestamp: Option<Value>,
    pub source: Option<Value>,
    pub message: Option<Value>,
    pub model_name: Option<Value>,
    pub reasoning_effort: Option<Value>,
    pub reasoning_content: Option<Value>,
    pub tool_calls: Option<Vec<RawCall>>,
    pub observation: Option<Value>,
    pub metrics: Option<Value>,
    pub extra: Option<Value>,
    pub llm_call_count: Option<Value>,
    pub is_copied_context: Option<Value>,
    pub rest: Vec<(String, Value)>,
}

/// One tool call as read (fields mirror the ATIF keys).
#[allow(missing_docs)]
#[derive(Debug, Default)]
pub struct RawCall {
    pub tool_call_id: Option<Value>,
    pub function_name: Option<Value>,
    pub arguments: Option<Value>,
    pub extra: Option<Value>,
    pub result: Option<Value>,
    pub rest: Vec<(String, Value)>,
}

impl RawNode {
    /// The record's top-level keys, for format checks.
    pub fn shape(&self) -> crate::formats::Shape {
        use crate::formats::sniff::{Container, KeyInfo, ValueKind};
        let mut keys = Vec::new();
        let mut add = |k: &str, kind: ValueKind, text: Option<String>| {
            keys.push(KeyInfo {
                key: k.to_string(),
                kind,
                text,
            });
        };
        if let Some(v) = &self.schema_version {
            add(
                "schema_version",
                ValueKind::String,
                v.as_str().map(str::to_string),
            );
        }
        if self.steps.is_some() {
            add("steps", ValueKind::Array, None);
        }
        if let Some(Value::Object(_)) = &self.agent {
            add("agent", ValueKind::Object, None);
        }
        if self.session_id.is_some() {
            add("session_id", ValueKind::String, None);
        }
        for (k, v) in &self.rest {
            let kind = match v {
                Value::Object(_) => ValueKind::Object,
                Value::Array(_) => ValueKind::Array,
                _ => ValueKind::Other,
            };
            add(k, kind, None);
        }
        crate::formats::Shape {
            container: Container::Object,
            keys,
            record_complete: true,
            layout_known: true,
            invalid_at: None,
            non_finite: false,
            too_deep: false,
        }
    }
}

/// Reads one root [`RawNode`].
#[derive(Debug, Clone, Copy)]
pub struct NodeSeed(pub Projection);

fn value<'de, A: MapAccess<'de>>(map: &mut A) -> Result<Option<Value>, A::Error> {
    map.next_value::<Value>().map(Some)
}

fn skip<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value_seed(Skip)
}

/// Skips a value like [`Skip`] but returns an empty value of the same JSON
/// type (so format checks can see what kind of value a key held).
#[derive(Debug, Clone, Copy)]
struct Placeholder;

impl<'de> DeserializeSeed<'de> for Placeholder {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Placeholder {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
        Skip.visit_map(map)
            .map(|()| Value::Object(serde_json::Map::new()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        Skip.visit_seq(seq).map(|()| Value::Array(Vec::new()))
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Value, E> {
        Ok(Value::String(String::new()))
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// Skips a value without materialising it, but still validates it the way a
/// full read would: UTF-8 in strings and the nesting limit. (serde's
/// `IgnoredAny` checks neither, so a Source could pass a skeleton read and
/// then fail a full one.)
#[derive(Debug, Clone, Copy)]
pub struct Skip;

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Skip)?.is_some() {
            map.next_value_seed(Skip)?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(())
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A key read without allocating for the known names.
enum Key {
    Known(&'static str),
    Other(String),
}

struct KeySeed(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(match self.0.iter().find(|k| **k == v) {
            Some(k) => Key::Known(k),
            None => Key::Other(v.to_string()),
        })
    }
}

const NODE_KEYS: &[&str] = &[
    "schema_version",
    "session_id",
    "trajectory_id",
    "agent",
    "steps",
    "notes",
    "final_metrics",
    "continued_trajectory_ref",
    "extra",
    "subagent_trajectories",
];

impl<'de> DeserializeSeed<'de> for NodeSeed {
    type Value = RawNode;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RawNode, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed {
    type Value = RawNode;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an ATIF trajectory object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawNode, A::Error> {
        let full = self.0 == Projection::Full;
        let mut n = RawNode::default();
        while let Some(k) = map.next_key_seed(KeySeed(NODE_KEYS))? {
            match k {
                Key::Known("schema_version") => n.schema_version = value(&mut map)?,
                Key::Known("session_id") => n.session_id = value(&mut map)?,
                Key::Known("trajectory_id") => n.trajectory_id = value(&mut map)?,
                Key::Known("agent") => n.agent = value(&mut map)?,
                Key::Known("steps") => {
                    n.steps = Some(map.next_value_seed(ListSeed(StepSeed(self.0)))?);
                }
                Key::Known("subagent_trajectories") => {
                    n.subagents = map.next_value_seed(OptionalList(ListSeed(self)))?;
                }
                Key::Known("notes") if full => n.notes = value(&mut map)?,
                Key::Known("final_metrics") if full => n.final_metrics = value(&mut map)?,
                Key::Known("continued_trajectory_ref") => {
                    n.continued_trajectory_ref = value(&mut map)?;
                }
                Key::Known("extra") if full => n.extra = value(&mut map)?,
                Key::Other(k) if full => n.rest.push((k, map.next_value()?)),
                // Skeleton reads keep unknown key names for format checks.
                Key::Other(k) => {
                    let placeholder = map.next_value_seed(Placeholder)?;
                    n.rest.push((k, placeholder));
                }
                _ => skip(&mut map)?,
            }
        }
        Ok(n)
    }
}

const STEP_KEYS: &[&str] = &[
    "step_id",
    "timestamp",
    "source",
    "message",
    "model_name",
    "reasoning_effort",
    "reasoning_content",
    "tool_calls",
    "observation",
    "metrics",
    "extra",
    "llm_call_count",
    "is_copied_context",
];

/// Reads one [`RawStep`].
#[derive(Debug, Clone, Copy)]
pub struct StepSeed(pub Projection);

impl<'de> DeserializeSeed<'de> for StepSeed {
    type Value = RawStep;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RawStep, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for StepSeed {
    type Value = RawStep;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an ATIF step object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawStep, A::Error> {
        let full = self.0 == Projection::Full;
        let mut s = RawStep::default();
        while let Some(k) = map.next_key_seed(KeySeed(STEP_KEYS))? {
            match k {
                Key::Known("step_id") => s.step_id = value(&mut map)?,
                Key::Known("timestamp") => s.timestamp = value(&mut map)?,
                Key::Known("source") => s.source = value(&mut map)?,
                Key::Known("model_name") => s.model_name = value(&mut map)?,
                Key::Known("tool_calls") => {
                    s.tool_calls = map.next_value_seed(OptionalList(ListSeed(CallSeed(self.0))))?;
                }
                Key::Known("observation") if full => s.observation = value(&mut map)?,
                Key::Known("observation") => {
                    s.observation = map.next_value_seed(ObservationLinks)?;
                }
                Key::Known("llm_call_count") => s.llm_call_count = value(&mut map)?,
                Key::Known("is_copied_context") => s.is_copied_context = value(&mut map)?,
                Key::Known("message") if full => s.message = value(&mut map)?,
                Key::Known("reasoning_effort") if full => s.reasoning_effort = value(&mut map)?,
                Key::Known("reasoning_content") if full => s.reasoning_content = value(&mut map)?,
                Key::Known("metrics") if full => s.metrics = value(&mut map)?,
                Key::Known("extra") if full => s.extra = value(&mut map)?,
                Key::Other(k) if full => s.rest.push((k, map.next_value()?)),
                _ => skip(&mut map)?,
            }
        }
        Ok(s)
    }
}

const CALL_KEYS: &[&str] = &[
    "tool_call_id",
    "function_name",
    "arguments",
    "extra",
    "result",
];

/// Reads one [`RawCall`].
#[derive(Debug, Clone, Copy)]
pub struct CallSeed(pub Projection);

impl<'de> DeserializeSeed<'de> for CallSeed {
    type Value = RawCall;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RawCall, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for CallSeed {
    type Value = RawCall;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an ATIF tool call object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawCall, A::Error> {
        let full = self.0 == Projection::Full;
        let mut c = RawCall::default();
        while let Some(k) = map.next_key_seed(KeySeed(CALL_KEYS))? {
            match k {
                Key::Known("tool_call_id") => c.tool_call_id = value(&mut map)?,
                Key::Known("function_name") => c.function_name = value(&mut map)?,
                Key::Known("arguments") if full => c.arguments = value(&mut map)?,
                Key::Known("extra") if full => c.extra = value(&mut map)?,
                Key::Known("result") if full => c.result = value(&mut map)?,
                Key::Other(k) if full => c.rest.push((k, map.next_value()?)),
                _ => skip(&mut map)?,
            }
        }
        Ok(c)
    }
}

/// A JSON array read element by element with an inner seed.
#[derive(Debug, Clone, Copy)]
pub struct ListSeed<S>(pub S);

impl<'de, S: DeserializeSeed<'de> + Copy> DeserializeSeed<'de> for ListSeed<S> {
    type Value = Vec<S::Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, S: DeserializeSeed<'de> + Copy> Visitor<'de> for ListSeed<S> {
    type Value = Vec<S::Value>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(x) = seq.next_element_seed(self.0)? {
            out.push(x);
        }
        Ok(out)
    }
}

/// `null` or an array.
#[derive(Debug, Clone, Copy)]
pub struct OptionalList<S>(pub ListSeed<S>);

impl<'de, S: DeserializeSeed<'de> + Copy> DeserializeSeed<'de> for OptionalList<S> {
    type Value = Option<Vec<S::Value>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de> + Copy> Visitor<'de> for OptionalList<S> {
    type Value = Option<Vec<S::Value>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("null or an array")
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(d).map(Some)
    }
}

/// Skeleton observation: keeps only `results[].source_call_id` and the
/// `trajectory_id`s of `subagent_trajectory_ref`s.
#[derive(Debug, Clone, Copy)]
struct ObservationLinks;

impl<'de> DeserializeSeed<'de> for ObservationLinks {
    type Value = Option<Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let v: Value = Value::deserialize_skeleton(d)?;
        Ok(Some(v))
    }
}

trait SkeletonValue {
    fn deserialize_skeleton<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error>;
}

impl SkeletonValue for Value {
    fn deserialize_skeleton<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(LinkVisitor { depth: 0 })
    }
}

/// Walks an observation keeping `source_call_id` and `trajectory_id` strings
/// (and the objects/arrays that lead to them); everything else is skipped.
struct LinkVisitor {
    depth: u8,
}

impl<'de> DeserializeSeed<'de> for LinkVisitor {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for LinkVisitor {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an observation")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(k) = map.next_key_seed(KeySeed(&[
            "results",
            "source_call_id",
            "subagent_trajectory_ref",
            "trajectory_id",
        ]))? {
            match k {
                Key::Known("source_call_id" | "trajectory_id") => {
                    out.insert(key_name(&k).into(), map.next_value::<Value>()?);
                }
                Key::Known(name) if self.depth < 4 => {
                    out.insert(
                        name.into(),
                        map.next_value_seed(LinkVisitor {
                            depth: self.depth + 1,
                        })?,
                    );
                }
                _ => skip(&mut map)?,
            }
        }
        Ok(Value::Object(out))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(LinkVisitor {
            depth: self.depth + 1,
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

fn key_name(k: &Key) -> &str {
    match k {
        Key::Known(s) => s,
        Key::Other(s) => s,
    }
}
