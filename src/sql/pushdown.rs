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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::logical::make_schema;

    fn scan() -> Plan {
        let table = make_schema(vec![
            ("model".into(), DataType::Utf8, true),
            ("tokens".into(), DataType::Int64, true),
            ("metrics".into(), DataType::Utf8, true),
        ]);
        Plan::Scan {
            dataset: "dataset".into(),
            relation: "steps".into(),
            table_schema: table,
            columns: vec![0, 1, 2],
            filter: None,
        }
    }

    fn call(func: AggFunc, arg: Option<Expr>, distinct: bool) -> AggCall {
        AggCall {
            func,
            arg,
            distinct,
            ty: DataType::Int64,
        }
    }

    fn out(n: usize) -> SchemaRef {
        make_schema(
            (0..n)
                .map(|i| (format!("c{i}"), DataType::Int64, true))
                .collect(),
        )
    }

    #[test]
    fn mergeable_aggregates_are_grouped_per_batch_and_merged() {
        let model = Expr::col(0, "model", DataType::Utf8);
        let tokens = Expr::col(1, "tokens", DataType::Int64);
        let aggs = vec![
            call(AggFunc::Count, None, false),
            call(AggFunc::Sum, Some(tokens.clone()), false),
            call(AggFunc::Max, Some(tokens.clone()), false),
        ];
        let p = aggregate_into_scan(&scan(), std::slice::from_ref(&model), &aggs, &out(4));
        assert!(p.work.computed.is_empty());
        assert!(p.work.partial.is_some());
        // Counts are summed; the others merge as themselves, over the
        // partial columns after the key.
        let funcs: Vec<AggFunc> = p.aggs.iter().map(|a| a.func).collect();
        assert_eq!(funcs, [AggFunc::Sum, AggFunc::Sum, AggFunc::Max]);
        let args: Vec<String> = p
            .aggs
            .iter()
            .map(|a| a.arg.as_ref().unwrap().to_string())
            .collect();
        assert_eq!(args, ["c1", "c2", "c3"]);

        // AVG does not merge, and without keys an empty input must still
        // give a row: both aggregate every row.
        let avg = [call(AggFunc::Avg, Some(tokens.clone()), false)];
        assert!(aggregate_into_scan(&scan(), &[model], &avg, &out(2))
            .work
            .is_empty());
        assert!(aggregate_into_scan(&scan(), &[], &aggs, &out(3))
            .work
            .is_empty());

        // A lone COUNT(DISTINCT x) keeps each batch's distinct x.
        let distinct = [call(AggFunc::Count, Some(tokens.clone()), true)];
        let p = aggregate_into_scan(&scan(), &[], &distinct, &out(1));
        let partial = p.work.partial.expect("grouped per batch");
        assert_eq!(partial.group.len(), 1);
        assert!(partial.aggs.is_empty());
        assert!(p.aggs[0].distinct);
        // Beside another aggregate, it does not.
        let mixed = [
            call(AggFunc::Count, Some(tokens.clone()), true),
            call(AggFunc::Count, None, false),
        ];
        assert!(aggregate_into_scan(&scan(), &[], &mixed, &out(2))
            .work
            .is_empty());
    }

    #[test]
    fn expressions_over_columns_are_computed_by_the_scan() {
        let metrics = Expr::col(2, "metrics", DataType::Utf8);
        let path = Expr::Cast {
            expr: Box::new(metrics),
            to: DataType::Int64,
        };
        let aggs = [call(AggFunc::Avg, Some(path), false)];
        let p = aggregate_into_scan(&scan(), &[], &aggs, &out(1));
        assert_eq!(p.work.computed.len(), 1);
        // The aggregate reads it as the column after the three read.
        assert_eq!(p.aggs[0].arg.as_ref().unwrap().to_string(), "#0");
        assert!(matches!(p.aggs[0].arg, Some(Expr::Column { index: 3, .. })));
    }
}
