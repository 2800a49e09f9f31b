//! Choosing a hash join's build side. The join holds its second (right)
//! input in memory and streams the first, so the smaller input should be
//! second. Without statistics, sizes are guessed from the relations read:
//! per trajectory there is one `trajectories` row but about a hundred
//! `steps`. An inner join whose right input looks larger is turned around,
//! under a projection that restores the column order.

use std::sync::Arc;

use arrow::datatypes::Schema;

use super::logical::{Expr, JoinKind, Plan};

/// Relative rows of a relation (per trajectory).
fn relation_rows(relation: &str) -> u64 {
    match relation {
        "sources" | "runs" | "trajectories" | "judgments" => 1,
        "tool_calls" => 50,
        "steps" => 100,
        // Several events per captured step.
        "events" => 300,
        _ => 10,
    }
}

/// A guess of the rows `plan` produces, relative to the trajectories.
fn guess(plan: &Plan) -> u64 {
    match plan {
        Plan::Scan { relation, .. } => relation_rows(relation),
        Plan::Values { .. } => 0,
        // Far fewer groups than rows, as a rule.
        Plan::Aggregate { .. } => 1,
        Plan::Limit { limit: Some(_), .. } => 0,
        Plan::Join { left, right, .. } => guess(left).max(guess(right)),
        Plan::Union { inputs, .. } => inputs.iter().map(guess).sum(),
        other => other.inputs().into_iter().map(guess).max().unwrap_or(0),
    }
}

/// Turn around every inner join whose right input looks larger.
pub fn choose(plan: Plan) -> Plan {
    super::optimize::map_inputs(plan, &choose, |p| match p {
        Plan::Join {
            left,
            right,
            kind: JoinKind::Inner,
            on,
            filter,
            schema,
        } if guess(&right) > guess(&left) => swap(*left, *right, on, filter, &schema),
        other => other,
    })
}

fn swap(
    left: Plan,
    right: Plan,
    on: Vec<(Expr, Expr)>,
    filter: Option<Expr>,
    schema: &arrow::datatypes::SchemaRef,
) -> Plan {
    let (nl, nr) = (left.schema().fields().len(), right.schema().fields().len());
    // Joined columns are now right then left.
    let moved = |i: usize| if i < nl { i + nr } else { i - nl };
    let filter = filter.map(|mut f| {
        f.remap(&moved);
        f
    });
    let fields: Vec<_> = right
        .schema()
        .fields()
        .iter()
        .chain(left.schema().fields().iter())
        .cloned()
        .collect();
    let swapped = Plan::Join {
        on: on.into_iter().map(|(l, r)| (r, l)).collect(),
        left: Box::new(right),
        right: Box::new(left),
        kind: JoinKind::Inner,
        filter,
        schema: Arc::new(Schema::new(fields)),
    };
    let exprs = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| Expr::col(moved(i), f.name().clone(), f.data_type().clone()))
        .collect();
    Plan::Project {
        input: Box::new(swapped),
        exprs,
        schema: schema.clone(),
    }
}
