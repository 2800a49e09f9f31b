//! Work a GROUP BY straight over a scan hands to the scan's workers, which
//! run one per core beside the reader where the aggregate runs on one
//! thread: the expressions of its keys and arguments (a JSON path, a
//! cast), and a first aggregation of each batch on its own, whose few
//! partial groups the aggregate then merges.

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::sync::Arc;

use super::logical::{AggCall, AggFunc, Expr, Plan};
use super::ops::scan::{PartialAggregate, ScanWork};

/// A GROUP BY split between a scan's workers and the aggregate.
pub struct Pushed {
    /// What the scan's workers do.
    pub work: ScanWork,
    /// The aggregate's keys and aggregates over what the scan hands on.
    pub group: Vec<Expr>,
    pub aggs: Vec<AggCall>,
}

impl Pushed {
    /// What the workers do, for EXPLAIN; `None` when nothing is pushed.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.work.computed.is_empty() {
            let list: Vec<String> = self.work.computed.iter().map(ToString::to_string).collect();
            parts.push(format!(
                "computed in the scan workers: [{}]",
                list.join(", ")
            ));
        }
        if self.work.partial.is_some() {
            parts.push("each batch grouped first in the scan workers".into());
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Split `GROUP BY group` computing `aggs` (output `schema`) over `scan`.
pub fn aggregate_into_scan(
    scan: &Plan,
    group: &[Expr],
    aggs: &[AggCall],
    schema: &SchemaRef,
) -> Pushed {
    let (group, aggs, computed) = computed_by_scan(scan, group, aggs);
    let partial = partial(&group, &aggs, schema);
    let (group, aggs, partial) = match partial {
        Some((p, g, a)) => (g, a, Some(p)),
        None => (group, aggs, None),
    };
    Pushed {
        work: ScanWork { computed, partial },
        group,
        aggs,
    }
}

/// `group` and `aggs` with every expression that is more than a column or
/// a constant replaced by a column the scan computes, and those
/// expressions (appended after the columns the scan reads).
fn computed_by_scan(
    scan: &Plan,
    group: &[Expr],
    aggs: &[AggCall],
) -> (Vec<Expr>, Vec<AggCall>, Vec<Expr>) {
    let base = scan.schema().fields().len();
    let mut computed: Vec<Expr> = Vec::new();
    let mut take = |e: &Expr| -> Expr {
        if matches!(e, Expr::Column { .. }) || e.is_constant() {
            return e.clone();
        }
        computed.push(e.clone());
        let k = computed.len() - 1;
        Expr::col(base + k, format!("#{k}"), e.data_type())
    };
    let group = group.iter().map(&mut take).collect();
    let aggs = aggs
        .iter()
        .map(|a| AggCall {
            arg: a.arg.as_ref().map(&mut take),
            ..a.clone()
        })
        .collect();
    (group, aggs, computed)
}

/// The first aggregation of each batch, and the aggregate that merges its
/// groups, when the aggregates can be merged: COUNT, SUM, MIN and MAX by
/// one or more keys (counts are summed; without keys an empty input must
/// still give a row, which per-batch groups cannot), or a lone
/// COUNT(DISTINCT x) (each batch keeps its distinct keys and `x`).
fn partial(
    group: &[Expr],
    aggs: &[AggCall],
    schema: &SchemaRef,
) -> Option<(PartialAggregate, Vec<Expr>, Vec<AggCall>)> {
    let k = group.len();
    let keys: Vec<Expr> = (0..k)
        .map(|i| {
            let f = schema.field(i);
            Expr::col(i, f.name().clone(), f.data_type().clone())
        })
        .collect();
    let mergeable = |a: &AggCall| !a.distinct && a.func != AggFunc::Avg;
    if k > 0 && aggs.iter().all(mergeable) {
        let merged = aggs
            .iter()
            .enumerate()
            .map(|(j, a)| AggCall {
                func: match a.func {
                    AggFunc::Count => AggFunc::Sum,
                    f => f,
                },
                arg: Some(Expr::col(
                    k + j,
                    schema.field(k + j).name().clone(),
                    a.ty.clone(),
                )),
                distinct: false,
                ty: a.ty.clone(),
            })
            .collect();
        let p = PartialAggregate {
            group: group.to_vec(),
            aggs: aggs.to_vec(),
            schema: schema.clone(),
        };
        return Some((p, keys, merged));
    }
    if let [a] = aggs {
        let x = a.arg.as_ref()?;
        let counted = a.distinct && a.func == AggFunc::Count && x.data_type() != DataType::Null;
        if !counted {
            return None;
        }
        let mut fields: Vec<Field> = schema.fields()[..k].iter().map(|f| (**f).clone()).collect();
        fields.push(Field::new("#distinct", x.data_type(), true));
        let mut by = group.to_vec();
        by.push(x.clone());
        let p = PartialAggregate {
            group: by,
            aggs: Vec::new(),
            schema: Arc::new(Schema::new(fields)),
        };
        let merged = AggCall {
            arg: Some(Expr::col(k, "#distinct", x.data_type())),
            ..a.clone()
        };
        return Some((p, keys, vec![merged]));
    }
    None
}
