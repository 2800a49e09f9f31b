//! `json ->> 'key'` read from a typed column: where every Source promises
//! that a BIGINT column holds the member's text as its digits on every row
//! ([`DataLayer::json_mirror`], checked when a store is written), the JSON
//! call becomes `CAST(column AS VARCHAR)`, and a `CAST(… AS BIGINT)` around
//! it goes away. The answer is the same; no JSON is read or parsed.
//!
//! Only expressions evaluated over a scan's own columns are rewritten (a
//! filter, projection or aggregate above it, with at most filters, sorts
//! and limits between), where a column reference is a column of the
//! relation. This runs on the bound plan, before filters move
//! into scans and scans are pruned to the columns they need, so the typed
//! column is there to name.

use arrow::datatypes::{DataType, SchemaRef};

use super::functions::text_path;
use super::logical::{AggCall, Expr, Func, Plan};
use super::value::Scalar;
use super::DataLayer;
use crate::util::jsonpath::PathStep;

/// Rewrite every expression over a scan of `plan`.
pub fn rewrite(plan: Plan, layer: &dyn DataLayer) -> Plan {
    super::optimize::map_inputs(plan, &|p| rewrite(p, layer), |p| over_scan(p, layer))
}

/// The scan whose columns a node reads, as (dataset, relation, schema):
/// its input, or the input of filters, sorts and limits between them, which
/// pass the scan's columns through as they are.
fn scan_of(input: &Plan) -> Option<(&str, &str, &SchemaRef)> {
    match input {
        Plan::Filter { input, .. }
        | Plan::Sort { input, .. }
        | Plan::Limit { input, .. }
        | Plan::Distinct { input } => scan_of(input),
        Plan::Scan {
            dataset,
            relation,
            table_schema,
            columns,
            ..
        } if columns.len() == table_schema.fields().len() => {
            Some((dataset, relation, table_schema))
        }
        _ => None,
    }
}

fn over_scan(mut plan: Plan, layer: &dyn DataLayer) -> Plan {
    match &mut plan {
        Plan::Filter { input, predicate } => {
            if let Some(s) = scan_of(input) {
                in_expr(predicate, s, layer);
            }
        }
        Plan::Project { input, exprs, .. } => {
            if let Some(s) = scan_of(input) {
                for e in exprs {
                    in_expr(e, s, layer);
                }
            }
        }
        Plan::Aggregate {
            input, group, aggs, ..
        } => {
            if let Some(s) = scan_of(input) {
                let args = aggs.iter_mut().filter_map(|a: &mut AggCall| a.arg.as_mut());
                for e in group.iter_mut().chain(args) {
                    in_expr(e, s, layer);
                }
            }
        }
        _ => {}
    }
    plan
}

/// Rewrite `e` and what it holds, innermost first.
fn in_expr(e: &mut Expr, scan: (&str, &str, &SchemaRef), layer: &dyn DataLayer) {
    for c in e.children_mut() {
        in_expr(c, scan, layer);
    }
    if let Some(m) = mirrored(e, scan, layer) {
        *e = m;
    }
    // CAST(CAST(n AS VARCHAR) AS BIGINT) is n: the digits parse back.
    if let Expr::Cast {
        expr,
        to: DataType::Int64,
    } = e
    {
        if let Expr::Cast {
            expr: inner,
            to: DataType::Utf8,
        } = expr.as_mut()
        {
            if inner.data_type() == DataType::Int64 {
                *e = std::mem::replace(inner.as_mut(), Expr::Literal(Scalar::Null));
            }
        }
    }
}

/// `CAST(typed AS VARCHAR)` for a `->>`/`json_extract_string` of one
/// member of a relation column that the layer says is mirrored.
fn mirrored(
    e: &Expr,
    (dataset, relation, schema): (&str, &str, &SchemaRef),
    layer: &dyn DataLayer,
) -> Option<Expr> {
    let Expr::Call { func, args, .. } = e else {
        return None;
    };
    let arrow_op = match func {
        Func::JsonLongArrow => true,
        Func::JsonExtractString => false,
        _ => return None,
    };
    let [Expr::Column { index, .. }, Expr::Literal(Scalar::Str(path))] = args.as_slice() else {
        return None;
    };
    let steps = text_path(path, arrow_op)?;
    let [PathStep::Key(key)] = steps.as_slice() else {
        return None;
    };
    let json = schema.fields().get(*index)?.name();
    let typed = layer.json_mirror(dataset, relation, json, key)?;
    let (at, field) = schema.column_with_name(typed)?;
    if field.data_type() != &DataType::Int64 {
        return None;
    }
    Some(Expr::Cast {
        expr: Box::new(Expr::col(at, typed, DataType::Int64)),
        to: DataType::Utf8,
    })
}
