//! Shared pieces of the exchange encoders: what a conversion could not keep,
//! and putting residual values back at their JSON pointers.

use serde_json::{Map, Value};

/// One thing a conversion could not express in the target format.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Loss {
    /// Where (a JSON pointer into the Storyline document).
    pub field: String,
    /// Why.
    pub reason: String,
}

impl Loss {
    /// A new loss.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Loss {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Losses of one conversion.
pub type Losses = Vec<Loss>;

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Set `value` at `pointer` in `root`, creating objects on the way. The
/// residual is the exact source value, so it replaces what the encoder
/// wrote. Array positions must exist (or be the next position).
pub fn restore_residual(root: &mut Value, pointer: &str, value: Value) {
    let tokens: Vec<String> = pointer.split('/').skip(1).map(unescape).collect();
    let Some((last, path)) = tokens.split_last() else {
        return;
    };
    let mut cur = root;
    for t in path {
        cur = match cur {
            Value::Object(m) => m
                .entry(t.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            Value::Array(a) => match t.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(x) => x,
                None => return,
            },
            _ => return,
        };
    }
    match cur {
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        Value::Array(a) => {
            if let Ok(i) = last.parse::<usize>() {
                if i == a.len() {
                    a.push(value);
                } else if let Some(slot) = a.get_mut(i) {
                    *slot = value;
                }
            }
        }
        _ => {}
    }
}

/// Remove the key at `pointer` from `root` (the source had none there).
pub fn remove_at(root: &mut Value, pointer: &str) {
    let tokens: Vec<String> = pointer.split('/').skip(1).map(unescape).collect();
    let Some((last, path)) = tokens.split_last() else {
        return;
    };
    let mut cur = root;
    for t in path {
        cur = match cur {
            Value::Object(m) => match m.get_mut(t) {
                Some(x) => x,
                None => return,
            },
            Value::Array(a) => match t.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(x) => x,
                None => return,
            },
            _ => return,
        };
    }
    if let Value::Object(m) = cur {
        m.remove(last);
    }
}

/// A residual value to put back (`Some`), or a key the source lacked to
/// leave out (`None`), by pointer from the record root.
pub type ResidualEntry = (String, Option<Value>);

/// Apply residual entries to an encoded record.
pub fn restore_all(root: &mut Value, entries: Vec<ResidualEntry>) {
    for (p, v) in entries {
        match v {
            Some(v) => restore_residual(root, &p, v),
            None => remove_at(root, &p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn residual_goes_back_in_place() {
        let mut v = json!({"steps": [{"a": 1}, {"b": 2}]});
        restore_residual(&mut v, "/steps/1/x~1y", json!(true));
        restore_residual(&mut v, "/extra/deep/k", json!(3));
        restore_residual(&mut v, "/steps/0/a", json!(99));
        assert_eq!(
            v,
            json!({"steps": [{"a": 99}, {"b": 2, "x/y": true}], "extra": {"deep": {"k": 3}}})
        );
        remove_at(&mut v, "/steps/1/x~1y");
        remove_at(&mut v, "/nothing/here");
        assert_eq!(v["steps"][1], json!({"b": 2}));
    }
}
