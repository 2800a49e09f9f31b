//! Content sniffing: an incremental, allocation-light scan of a JSON prefix.
//!
//! The scanner learns the outer shape (one object, an array, or one value per
//! line) and the top-level keys of the first record, with short string values
//! for the keys that identify formats. It never builds a tree, so sniffing a
//! 10 GB file costs the bytes up to the end of its first record's keys.

/// The outer layout of a JSON file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Container {
    /// Nothing but whitespace so far.
    Empty,
    /// One top-level object.
    Object,
    /// One top-level array; records are its elements.
    Array,
    /// Several top-level values separated by newlines (JSON Lines).
    Lines,
    /// A top-level scalar: not a trajectory.
    Scalar,
}

/// What kind of JSON value a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// `{…}`
    Object,
    /// `[…]`
    Array,
    /// `"…"`
    String,
    /// A number, `true`, `false` or `null`.
    Other,
}

/// One top-level key of the first record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    /// The key, unescaped only for plain ASCII keys.
    pub key: String,
    /// The kind of its value (as far as seen).
    pub kind: ValueKind,
    /// The first bytes of a string value (at most 128), when it is a string.
    pub text: Option<String>,
}

/// The result of sniffing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Outer layout.
    pub container: Container,
    /// Keys of the first record, in file order.
    pub keys: Vec<KeyInfo>,
    /// True once the first record has been seen to its end.
    pub record_complete: bool,
    /// True once the scan knows whether more top-level values follow.
    pub layout_known: bool,
    /// Set when the bytes are not JSON (position of the first bad byte).
    pub invalid_at: Option<u64>,
    /// True when the bad byte starts `NaN` or `Infinity`.
    pub non_finite: bool,
    /// True when nesting went past the decoder's limit.
    pub too_deep: bool,
}

impl Shape {
    /// The shape of one parsed record (an object's top-level keys).
    pub fn of_value(v: &serde_json::Value) -> Shape {
        use serde_json::Value;
        let mut shape = Shape {
            container: Container::Scalar,
            keys: Vec::new(),
            record_complete: true,
            layout_known: true,
            invalid_at: None,
            non_finite: false,
            too_deep: false,
        };
        if let Value::Object(o) = v {
            shape.container = Container::Object;
            for (k, val) in o {
                let kind = match val {
                    Value::Object(_) => ValueKind::Object,
                    Value::Array(_) => ValueKind::Array,
                    Value::String(_) => ValueKind::String,
                    _ => ValueKind::Other,
                };
                let text = val.as_str().map(|s| s.chars().take(MAX_TEXT).collect());
                shape.keys.push(KeyInfo {
                    key: k.clone(),
                    kind,
                    text,
                });
            }
        }
        shape
    }

    /// The key named `k`, if the first record has it.
    pub fn key(&self, k: &str) -> Option<&KeyInfo> {
        self.keys.iter().find(|x| x.key == k)
    }
}

/// The same nesting bound the decoder enforces.
const MAX_DEPTH: usize = 128;
const MAX_KEYS: usize = 256;
const MAX_TEXT: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    Object,
    Array,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// Between tokens.
    Ws,
    /// Inside a string; `capture` says whether its bytes are recorded.
    Str { escape: bool },
    /// Inside a bare literal (number, true, false, null).
    Bare,
}

/// Incremental scanner; feed it chunks, then read [`Sniffer::shape`].
#[derive(Debug)]
pub struct Sniffer {
    stack: Vec<Frame>,
    lex: Lex,
    pos: u64,
    top_values: u32,
    record_depth: usize,
    expect_key: bool,
    string_is_key: bool,
    capture: Option<Vec<u8>>,
    capture_overflow: bool,
    shape: Shape,
    done: bool,
}

impl Default for Sniffer {
    fn default() -> Self {
        Self::new()
    }
}

impl Sniffer {
    /// A fresh scanner.
    pub fn new() -> Self {
        Sniffer {
            stack: Vec::new(),
            lex: Lex::Ws,
            pos: 0,
            top_values: 0,
            record_depth: usize::MAX,
            expect_key: false,
            string_is_key: false,
            capture: None,
            capture_overflow: false,
            shape: Shape {
                container: Container::Empty,
                keys: Vec::new(),
                record_complete: false,
                layout_known: false,
                invalid_at: None,
                non_finite: false,
                too_deep: false,
            },
            done: false,
        }
    }

    /// True when more input cannot change the answer.
    pub fn finished(&self) -> bool {
        self.done || (self.shape.container == Container::Array && self.shape.record_complete)
    }

    /// The shape seen so far.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// Call at end of input.
    pub fn finish(mut self) -> Shape {
        if self.finished() || self.shape.record_complete {
            self.shape.layout_known = true;
        }
        self.shape
    }

    fn fail(&mut self) {
        self.shape.invalid_at = Some(self.pos);
        self.done = true;
    }

    /// Feed the next chunk of the file.
    pub fn feed(&mut self, chunk: &[u8]) {
        for &b in chunk {
            if self.done {
                return;
            }
            self.step(b);
            self.pos += 1;
        }
    }

    fn at_record_object(&self) -> bool {
        self.stack.len() == self.record_depth && self.stack.last() == Some(&Frame::Object)
    }

    fn step(&mut self, b: u8) {
        match self.lex {
            Lex::Str { escape } => {
                if escape {
                    self.lex = Lex::Str { escape: false };
                    self.push_capture(b);
                } else if b == b'\\' {
                    self.lex = Lex::Str { escape: true };
                    self.push_capture(b);
                } else if b == b'"' {
                    self.lex = Lex::Ws;
                    self.end_string();
                } else {
                    self.push_capture(b);
                }
                return;
            }
            Lex::Bare => {
                if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-') {
                    return;
                }
                self.lex = Lex::Ws;
                self.after_value();
            }
            Lex::Ws => {}
        }
        if self.done {
            return;
        }
        match b {
            b' ' | b'\t' | b'\r' | b'\n' => {}
            0xEF | 0xBB | 0xBF if self.pos < 3 => {}
            b'{' | b'[' => self.open(if b == b'{' {
                Frame::Object
            } else {
                Frame::Array
            }),
            b'}' | b']' => {
                let want = if b == b'}' {
                    Frame::Object
                } else {
                    Frame::Array
                };
                if self.stack.pop() != Some(want) {
                    self.fail();
                    return;
                }
                if self.stack.len() + 1 == self.record_depth {
                    self.shape.record_complete = true;
                }
                self.after_value();
            }
            b'"' => {
                self.begin_value_or_key(ValueKind::String);
                self.lex = Lex::Str { escape: false };
            }
            b':' => {}
            b',' => {
                if self.at_record_object() {
                    self.expect_key = true;
                }
            }
            b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                self.begin_value_or_key(ValueKind::Other);
                self.lex = Lex::Bare;
            }
            b'N' | b'I' => {
                self.shape.non_finite = true;
                self.fail();
            }
            _ => self.fail(),
        }
    }

    fn open(&mut self, frame: Frame) {
        self.begin_value_or_key(if frame == Frame::Object {
            ValueKind::Object
        } else {
            ValueKind::Array
        });
        if self.done {
            return;
        }
        if self.stack.len() >= MAX_DEPTH {
            self.shape.too_deep = true;
            self.fail();
            return;
        }
        self.stack.push(frame);
        if self.stack.len() == self.record_depth && frame == Frame::Object {
            self.expect_key = true;
        }
    }

    /// A value (or key) starts at the current position.
    fn begin_value_or_key(&mut self, kind: ValueKind) {
        if self.stack.is_empty() {
            // A new top-level value.
            self.top_values += 1;
            if self.top_values == 1 {
                match kind {
                    ValueKind::Object => {
                        self.shape.container = Container::Object;
                        self.record_depth = 1;
                    }
                    ValueKind::Array => {
                        self.shape.container = Container::Array;
                        self.record_depth = 2;
                    }
                    _ => {
                        self.shape.container = Container::Scalar;
                        self.shape.layout_known = true;
                        self.done = true;
                    }
                }
            } else {
                if self.shape.container == Container::Object
                    || self.shape.container == Container::Array
                {
                    self.shape.container = Container::Lines;
                }
                self.shape.layout_known = true;
                self.done = true;
            }
            return;
        }
        if self.stack.len() == 1
            && self.shape.container == Container::Array
            && self.record_depth == 2
            && self.top_values == 1
        {
            // First array element decides the record kind.
            if self.shape.keys.is_empty()
                && !self.shape.record_complete
                && kind != ValueKind::Object
            {
                self.shape.record_complete = true;
            }
        }
        if self.at_record_object() && !self.shape.record_complete {
            if self.expect_key {
                if kind != ValueKind::String {
                    self.fail();
                    return;
                }
                self.expect_key = false;
                self.string_is_key = true;
                self.capture = Some(Vec::new());
                self.capture_overflow = false;
                return;
            }
            if let Some(last) = self.shape.keys.last_mut() {
                last.kind = kind;
                if kind == ValueKind::String {
                    self.string_is_key = false;
                    self.capture = Some(Vec::new());
                    self.capture_overflow = false;
                }
            }
        }
    }

    fn push_capture(&mut self, b: u8) {
        if let Some(c) = self.capture.as_mut() {
            if c.len() < MAX_TEXT {
                c.push(b);
            } else {
                self.capture_overflow = true;
            }
        }
    }

    fn end_string(&mut self) {
        if let Some(bytes) = self.capture.take() {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if self.string_is_key {
                if self.shape.keys.len() < MAX_KEYS {
                    self.shape.keys.push(KeyInfo {
                        key: text,
                        kind: ValueKind::Other,
                        text: None,
                    });
                }
            } else if let Some(last) = self.shape.keys.last_mut() {
                last.text = Some(text);
            }
        }
        self.string_is_key = false;
        self.after_value();
    }

    fn after_value(&mut self) {
        if self.stack.is_empty() && self.shape.container == Container::Object {
            self.shape.record_complete = true;
        }
    }
}

/// Sniff a byte slice that holds the whole file (or as much as is known).
pub fn sniff_bytes(bytes: &[u8]) -> Shape {
    let mut s = Sniffer::new();
    s.feed(bytes);
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(s: &Shape) -> Vec<&str> {
        s.keys.iter().map(|k| k.key.as_str()).collect()
    }

    #[test]
    fn object_keys_and_values() {
        let s = sniff_bytes(br#"{"schema_version":"ATIF-v1.7","agent":{"name":"x","steps":[]},"steps":[{"a":1}],"n":1.5e3}"#);
        assert_eq!(s.container, Container::Object);
        assert_eq!(keys(&s), ["schema_version", "agent", "steps", "n"]);
        assert_eq!(
            s.key("schema_version").unwrap().text.as_deref(),
            Some("ATIF-v1.7")
        );
        assert_eq!(s.key("agent").unwrap().kind, ValueKind::Object);
        assert_eq!(s.key("steps").unwrap().kind, ValueKind::Array);
        assert!(s.record_complete && s.layout_known);
    }

    #[test]
    fn array_records_use_first_element() {
        let s = sniff_bytes(br#"[ {"messages":[{"role":"user"}],"response":{}}, {"x":1} ]"#);
        assert_eq!(s.container, Container::Array);
        assert_eq!(keys(&s), ["messages", "response"]);
    }

    #[test]
    fn json_lines() {
        let s = sniff_bytes(b"{\"messages\":[]}\n{\"messages\":[]}\n");
        assert_eq!(s.container, Container::Lines);
        assert_eq!(keys(&s), ["messages"]);
    }

    #[test]
    fn escapes_in_strings_do_not_confuse() {
        let s = sniff_bytes(br#"{"a":"x\"}{[","b":"\\"}"#);
        assert_eq!(keys(&s), ["a", "b"]);
        assert!(s.invalid_at.is_none());
    }

    #[test]
    fn garbage_is_invalid() {
        assert!(sniff_bytes(b"hello").invalid_at.is_some());
        assert!(sniff_bytes(b"{\"a\":1]").invalid_at.is_some());
        assert_eq!(sniff_bytes(b"42").container, Container::Scalar);
        assert_eq!(sniff_bytes(b"  ").container, Container::Empty);
    }

    #[test]
    fn partial_prefix_reports_keys_seen() {
        let s = sniff_bytes(br#"{"schema_version":"ATIF-v1.2","steps":[{"message":"very long"#);
        assert!(!s.record_complete);
        assert_eq!(keys(&s), ["schema_version", "steps"]);
    }
}
