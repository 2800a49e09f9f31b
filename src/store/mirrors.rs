//! Typed columns that mirror a JSON member exactly. A step's
//! `prompt_tokens` is derived from its `metrics`, and on almost every step
//! `metrics ->> 'prompt_tokens'` is the same number as text. A store checks
//! this on every row while it is written and names in `CURRENT` the
//! mirrors that held on all of them; a query over such stores may then read
//! the member from the typed column instead of parsing the JSON of each
//! row, with the same answer by construction. One row where they differ
//! (a float, a member under another name, invalid JSON) and the store does
//! not name that mirror: queries parse the JSON, as over exchange files.

use arrow::array::{Array, Int64Array, RecordBatch, StringArray};

use crate::util::json_follow::text_at;
use crate::util::jsonpath::PathStep;

/// A JSON member of a table's JSON column and the typed column that may
/// mirror it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mirror {
    /// Table (relation) name.
    pub table: &'static str,
    /// The JSON text column.
    pub json: &'static str,
    /// The top-level member.
    pub key: &'static str,
    /// The BIGINT column derived from it.
    pub typed: &'static str,
}

impl Mirror {
    /// How `CURRENT` names it: `table.json.key`.
    pub fn name(&self) -> String {
        format!("{}.{}.{}", self.table, self.json, self.key)
    }
}

/// Every mirror a store checks.
pub const MIRRORS: [Mirror; 3] = [
    Mirror {
        table: "steps",
        json: "metrics",
        key: "prompt_tokens",
        typed: "prompt_tokens",
    },
    Mirror {
        table: "steps",
        json: "metrics",
        key: "completion_tokens",
        typed: "completion_tokens",
    },
    Mirror {
        table: "steps",
        json: "metrics",
        key: "cached_tokens",
        typed: "cached_tokens",
    },
];

/// The mirror of member `key` of column `json` of `table`, if one is
/// checked.
pub fn find(table: &str, json: &str, key: &str) -> Option<Mirror> {
    MIRRORS
        .into_iter()
        .find(|m| m.table == table && m.json == json && m.key == key)
}

/// Which mirrors have held on every row written so far.
#[derive(Debug, Clone)]
pub struct MirrorCheck {
    holds: [bool; MIRRORS.len()],
}

impl Default for MirrorCheck {
    fn default() -> Self {
        MirrorCheck {
            holds: [true; MIRRORS.len()],
        }
    }
}

impl MirrorCheck {
    /// Check the rows of `batch`, a batch of `table`. A batch without
    /// either column ends the mirror: nothing says it holds.
    pub fn check(&mut self, table: &str, batch: &RecordBatch) {
        for (m, holds) in MIRRORS.iter().zip(self.holds.iter_mut()) {
            if m.table != table || !*holds {
                continue;
            }
            let json = batch
                .column_by_name(m.json)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>());
            let typed = batch
                .column_by_name(m.typed)
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>());
            *holds = match (json, typed) {
                (Some(json), Some(typed)) => mirrors(json, typed, m.key),
                _ => false,
            };
        }
    }

    /// The names of the mirrors that held on every row.
    pub fn holding(&self) -> Vec<String> {
        MIRRORS
            .iter()
            .zip(self.holds)
            .filter(|(_, h)| *h)
            .map(|(m, _)| m.name())
            .collect()
    }
}

/// True when, on every row, `json ->> key` (as SQL computes it) is the
/// text of the typed value, and both are NULL together.
fn mirrors(json: &StringArray, typed: &Int64Array, key: &str) -> bool {
    let path = [PathStep::Key(key.to_string())];
    (0..json.len()).all(|i| {
        let text = if json.is_null(i) {
            None
        } else {
            text_at(json.value(i), &path)
        };
        match (text, typed.is_valid(i)) {
            (None, false) => true,
            (Some(t), true) => t == typed.value(i).to_string(),
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn batch(metrics: &[Option<&str>], prompt: &[Option<i64>]) -> RecordBatch {
        RecordBatch::try_from_iter([
            (
                "metrics",
                Arc::new(StringArray::from(metrics.to_vec())) as _,
            ),
            (
                "prompt_tokens",
                Arc::new(Int64Array::from(prompt.to_vec())) as _,
            ),
            (
                "completion_tokens",
                Arc::new(Int64Array::from(vec![None; prompt.len()])) as _,
            ),
            (
                "cached_tokens",
                Arc::new(Int64Array::from(vec![None; prompt.len()])) as _,
            ),
        ])
        .unwrap()
    }

    #[test]
    fn a_mirror_holds_only_while_every_row_agrees() {
        let mut c = MirrorCheck::default();
        c.check(
            "steps",
            &batch(
                &[Some(r#"{"prompt_tokens":12,"x":[1,2]}"#), None, Some("{}")],
                &[Some(12), None, None],
            ),
        );
        assert_eq!(
            c.holding(),
            [
                "steps.metrics.prompt_tokens",
                "steps.metrics.completion_tokens",
                "steps.metrics.cached_tokens"
            ]
        );
        // Batches of another table do not count.
        c.check("runs", &batch(&[Some("{}")], &[Some(1)]));
        assert_eq!(c.holding().len(), 3);
        // Each of these rows breaks the prompt_tokens mirror.
        for (metrics, typed) in [
            (r#"{"prompt_tokens":12.0}"#, Some(12)),
            (r#"{"input_tokens":12}"#, Some(12)),
            (r#"{"prompt_tokens":"12 "}"#, Some(12)),
            (r#"{"prompt_tokens":12"#, Some(12)),
            (r#"{"prompt_tokens":12}"#, None),
        ] {
            let mut c = MirrorCheck::default();
            c.check("steps", &batch(&[Some(metrics)], &[typed]));
            assert_eq!(
                c.holding(),
                [
                    "steps.metrics.completion_tokens",
                    "steps.metrics.cached_tokens"
                ],
                "{metrics}"
            );
        }
        // A member given twice counts with its last value, as in SQL.
        let mut c = MirrorCheck::default();
        c.check(
            "steps",
            &batch(
                &[Some(r#"{"prompt_tokens":1,"prompt_tokens":7}"#)],
                &[Some(7)],
            ),
        );
        assert_eq!(c.holding().len(), 3);
    }
}
