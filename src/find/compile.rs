//! Compiling an expression for one scope: the AST becomes a plan ([`Node`])
//! whose text leaves are numbered in a leaf table ([`TextLeaf`]: selector
//! and query terms) and whose JSON leaves carry their columns and compiled
//! [`Predicate`]. And/Or children are ordered so that set operations come
//! before JSON leaves, which are evaluated per row.

use super::ast::{FindExpr, TextField};
use super::predicate::Predicate;
use super::FindError;

/// Text columns (indices into [`crate::fts::TEXT_COLUMNS`]) and role a
/// selector searches.
pub fn selector_columns(field: TextField) -> (&'static [usize], Option<&'static str>) {
    // 0 message, 1 reasoning, 2 observation, 3 prompt, 4 model
    match field {
        TextField::Plain | TextField::Content => (&[0, 2, 3], None),
        TextField::Message => (&[0], None),
        TextField::User => (&[0], Some("user")),
        TextField::Assistant => (&[0], Some("agent")),
        TextField::System => (&[3, 0], Some("system")),
        TextField::Reasoning => (&[1], None),
        TextField::Observation => (&[2], None),
        TextField::Prompt => (&[3, 0], None),
        TextField::Model => (&[4], None),
        TextField::All => (&[0, 1, 2, 3, 4], None),
    }
}

/// The query terms of a text argument: the whole word at each position,
/// with its offset from the first.
pub fn query_terms(text: &str) -> Result<Vec<(usize, String)>, FindError> {
    let mut by_pos: Vec<(usize, String)> = Vec::new();
    for (t, p) in crate::fts::tokens(text) {
        match by_pos.last_mut() {
            Some((lp, lt)) if *lp == p => *lt = t,
            _ => by_pos.push((p, t)),
        }
    }
    let Some(first) = by_pos.first().map(|x| x.0) else {
        return Err(FindError::InvalidArgument {
            message: format!("`{text}` has no searchable words (only punctuation or spaces)"),
        });
    };
    Ok(by_pos.into_iter().map(|(p, t)| (p - first, t)).collect())
}

/// The JSON columns a JSON leaf reads, as indices into `columns`.
pub fn json_leaf_columns(column: Option<&str>, columns: &[&str]) -> Result<Vec<usize>, FindError> {
    match column {
        None => Ok((0..columns.len()).collect()),
        Some(c) => columns
            .iter()
            .position(|x| *x == c)
            .map(|i| vec![i])
            .ok_or_else(|| FindError::InvalidArgument {
                message: format!(
                    "`#json.{c}` is not a JSON column of this scope (allowed: {})",
                    columns.join(", ")
                ),
            }),
    }
}

/// A compiled expression.
pub enum Node {
    /// A text leaf: (index into the leaf table).
    Text(usize),
    /// A JSON leaf: columns and predicate.
    Json(Vec<usize>, Predicate),
    /// NOT.
    Not(Box<Node>),
    /// AND, text children first.
    And(Vec<Node>),
    /// OR, text children first.
    Or(Vec<Node>),
}

/// A text leaf: selector and query terms.
#[derive(Debug, Clone)]
pub struct TextLeaf {
    /// Selector.
    pub field: TextField,
    /// Terms with offsets.
    pub terms: Vec<(usize, String)>,
}

/// Compile `e` for a scope whose JSON columns are `json_columns`.
pub fn compile(
    e: &FindExpr,
    json_columns: &[&str],
    leaves: &mut Vec<TextLeaf>,
) -> Result<Node, FindError> {
    Ok(match e {
        FindExpr::Text { field, text, .. } => {
            leaves.push(TextLeaf {
                field: *field,
                terms: query_terms(text)?,
            });
            Node::Text(leaves.len() - 1)
        }
        FindExpr::Json {
            column,
            path,
            op,
            value,
            ..
        } => Node::Json(
            json_leaf_columns(column.as_deref(), json_columns)?,
            Predicate::new(path, *op, value)?,
        ),
        FindExpr::Not(x) => Node::Not(Box::new(compile(x, json_columns, leaves)?)),
        FindExpr::And(v) | FindExpr::Or(v) => {
            let mut kids = v
                .iter()
                .map(|x| compile(x, json_columns, leaves))
                .collect::<Result<Vec<_>, _>>()?;
            // Cheap set operations first, JSON (per-row) last.
            kids.sort_by_key(|k| u8::from(has_json(k)));
            if matches!(e, FindExpr::And(_)) {
                Node::And(kids)
            } else {
                Node::Or(kids)
            }
        }
    })
}

fn has_json(n: &Node) -> bool {
    match n {
        Node::Text(_) => false,
        Node::Json(..) => true,
        Node::Not(x) => has_json(x),
        Node::And(v) | Node::Or(v) => v.iter().any(has_json),
    }
}

/// Evaluate a compiled expression on one row, given leaf outcomes.
pub fn eval_row(
    n: &Node,
    text: &mut dyn FnMut(usize) -> bool,
    json: &mut dyn FnMut(&[usize], &Predicate) -> bool,
) -> bool {
    match n {
        Node::Text(i) => text(*i),
        Node::Json(c, p) => json(c, p),
        Node::Not(x) => !eval_row(x, text, json),
        Node::And(v) => v.iter().all(|x| eval_row(x, text, json)),
        Node::Or(v) => v.iter().any(|x| eval_row(x, text, json)),
    }
}

/// Indices (in compile order) of text leaves not under a NOT.
pub fn positive_text_leaves(e: &FindExpr) -> Vec<usize> {
    fn walk(e: &FindExpr, negated: bool, next: &mut usize, out: &mut Vec<usize>) {
        match e {
            FindExpr::Text { .. } => {
                if !negated {
                    out.push(*next);
                }
                *next += 1;
            }
            FindExpr::Json { .. } => {}
            FindExpr::Not(x) => walk(x, !negated, next, out),
            FindExpr::And(v) | FindExpr::Or(v) => {
                for x in v {
                    walk(x, negated, next, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(e, false, &mut 0, &mut out);
    out
}

/// JSON leaves of a plan not under a NOT, in plan order.
pub fn positive_json_leaves<'a>(
    n: &'a Node,
    negated: bool,
    out: &mut Vec<(&'a [usize], &'a Predicate)>,
) {
    match n {
        Node::Text(_) => {}
        Node::Json(c, p) => {
            if !negated {
                out.push((c, p));
            }
        }
        Node::Not(x) => positive_json_leaves(x, !negated, out),
        Node::And(v) | Node::Or(v) => {
            for x in v {
                positive_json_leaves(x, negated, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_are_found_by_position() {
        let t = query_terms("connection timeout").unwrap();
        assert_eq!(
            t,
            vec![(0, "connection".to_string()), (1, "timeout".to_string())]
        );
        let text = "timeout first; later a connection timeout happened";
        assert_eq!(crate::fts::find_terms(text, &t), text.find("connection"));
        assert!(query_terms(" ,; ").is_err());
    }
}
