//! Plan rewrites before execution: filters directly above a scan move into
//! the scan (evaluated while reading), every scan reads only the columns
//! some ancestor uses, and each hash join builds on its smaller-looking
//! input (`build_side`).

use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};

use super::logical::{Expr, JoinKind, Plan};

/// Apply all rewrites; `layer` says which JSON members typed columns
/// mirror ([`super::mirror`]).
pub fn optimize(plan: Plan, layer: &dyn super::DataLayer) -> Plan {
    let plan = push_filters(super::mirror::rewrite(plan, layer));
    let n = plan.schema().fields().len();
    let all: Vec<usize> = (0..n).collect();
    super::build_side::choose(prune(plan, &all).0)
}

fn push_filters(plan: Plan) -> Plan {
    map_inputs(plan, &push_filters, |p| match p {
        Plan::Filter { input, predicate } => match *input {
            Plan::Scan {
                dataset,
                relation,
                table_schema,
                columns,
                filter,
            } => {
                let filter = match filter {
                    Some(f) => Expr::and_all(vec![f, predicate]),
                    None => Some(predicate),
                };
                Plan::Scan {
                    dataset,
                    relation,
                    table_schema,
                    columns,
                    filter,
                }
            }
            Plan::Join {
                left,
                right,
                kind,
                on,
                filter,
                schema,
            } => {
                // Conjuncts over one side only filter that side's input; for
                // a LEFT join only the preserved (left) side may be filtered
                // early, since NULL-extended rows must still see the rest.
                let nl = left.schema().fields().len();
                let (mut to_left, mut to_right, mut keep) = (Vec::new(), Vec::new(), Vec::new());
                for c in predicate.conjuncts() {
                    let mut cols = Vec::new();
                    c.columns(&mut cols);
                    if !cols.is_empty() && cols.iter().all(|&i| i < nl) {
                        to_left.push(c);
                    } else if !cols.is_empty()
                        && cols.iter().all(|&i| i >= nl)
                        && matches!(kind, JoinKind::Inner)
                    {
                        let mut c = c;
                        c.remap(&|i| i - nl);
                        to_right.push(c);
                    } else {
                        keep.push(c);
                    }
                }
                let wrap = |input: Box<Plan>, terms: Vec<Expr>| -> Box<Plan> {
                    match Expr::and_all(terms) {
                        Some(predicate) => {
                            Box::new(push_filters(Plan::Filter { input, predicate }))
                        }
                        None => input,
                    }
                };
                let join = Plan::Join {
                    left: wrap(left, to_left),
                    right: wrap(right, to_right),
                    kind,
                    on,
                    filter,
                    schema,
                };
                match Expr::and_all(keep) {
                    Some(predicate) => Plan::Filter {
                        input: Box::new(join),
                        predicate,
                    },
                    None => join,
                }
            }
            Plan::Project {
                input,
                exprs,
                schema,
            } => {
                // Conjuncts that only read plain column pass-throughs move
                // below the projection.
                let (mut below, mut keep) = (Vec::new(), Vec::new());
                for c in predicate.conjuncts() {
                    let mut cols = Vec::new();
                    c.columns(&mut cols);
                    let plain = cols
                        .iter()
                        .all(|&i| matches!(exprs.get(i), Some(Expr::Column { .. })));
                    if plain && !cols.is_empty() {
                        let mut c = c;
                        c.remap(&|i| match &exprs[i] {
                            Expr::Column { index, .. } => *index,
                            _ => i,
                        });
                        below.push(c);
                    } else {
                        keep.push(c);
                    }
                }
                let input = match Expr::and_all(below) {
                    Some(predicate) => Box::new(push_filters(Plan::Filter { input, predicate })),
                    None => input,
                };
                let project = Plan::Project {
                    input,
                    exprs,
                    schema,
                };
                match Expr::and_all(keep) {
                    Some(predicate) => Plan::Filter {
                        input: Box::new(project),
                        predicate,
                    },
                    None => project,
                }
            }
            other => Plan::Filter {
                input: Box::new(other),
                predicate,
            },
        },
        other => other,
    })
}

/// Rebuild `plan` with `f` applied to its inputs first, then `g` to itself.
pub(super) fn map_inputs(plan: Plan, f: &dyn Fn(Plan) -> Plan, g: impl Fn(Plan) -> Plan) -> Plan {
    let plan = match plan {
        Plan::Filter { input, predicate } => Plan::Filter {
            input: Box::new(f(*input)),
            predicate,
        },
        Plan::Project {
            input,
            exprs,
            schema,
        } => Plan::Project {
            input: Box::new(f(*input)),
            exprs,
            schema,
        },
        Plan::Aggregate {
            input,
            group,
            aggs,
            schema,
        } => Plan::Aggregate {
            input: Box::new(f(*input)),
            group,
            aggs,
            schema,
        },
        Plan::Window {
            input,
            calls,
            schema,
        } => Plan::Window {
            input: Box::new(f(*input)),
            calls,
            schema,
        },
        Plan::Sort { input, keys, fetch } => Plan::Sort {
            input: Box::new(f(*input)),
            keys,
            fetch,
        },
        Plan::Limit {
            input,
            limit,
            offset,
        } => Plan::Limit {
            input: Box::new(f(*input)),
            limit,
            offset,
        },
        Plan::Distinct { input } => Plan::Distinct {
            input: Box::new(f(*input)),
        },
        Plan::Join {
            left,
            right,
            kind,
            on,
            filter,
            schema,
        } => Plan::Join {
            left: Box::new(f(*left)),
            right: Box::new(f(*right)),
            kind,
            on,
            filter,
            schema,
        },
        Plan::Union { inputs, schema } => Plan::Union {
            inputs: inputs.into_iter().map(f).collect(),
            schema,
        },
        leaf @ (Plan::Scan { .. } | Plan::Values { .. }) => leaf,
    };
    g(plan)
}

fn cols_of(e: &Expr, out: &mut Vec<usize>) {
    e.columns(out);
}

fn sorted_unique(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v.dedup();
    v
}

/// Mapping from old output positions to new ones (`usize::MAX` = dropped).
type Mapping = Vec<usize>;

fn mapping_for(old_len: usize, kept: &[usize]) -> Mapping {
    let mut m = vec![usize::MAX; old_len];
    for (new, &old) in kept.iter().enumerate() {
        m[old] = new;
    }
    m
}

fn remap(e: &mut Expr, m: &Mapping) {
    e.remap(&|i| m[i]);
}

fn project_schema(schema: &SchemaRef, kept: &[usize]) -> SchemaRef {
    Arc::new(schema.project(kept).unwrap_or_else(|_| Schema::empty()))
}

/// Keep only the `required` output columns where a node allows it.
#[allow(clippy::too_many_lines)]
fn prune(plan: Plan, required: &[usize]) -> (Plan, Mapping) {
    let out_len = plan.schema().fields().len();
    match plan {
        Plan::Scan {
            dataset,
            relation,
            table_schema,
            columns,
            mut filter,
        } => {
            let mut need = required.to_vec();
            if let Some(f) = &filter {
                cols_of(f, &mut need);
            }
            let kept = sorted_unique(need);
            let m = mapping_for(out_len, &kept);
            if let Some(f) = &mut filter {
                remap(f, &m);
            }
            let columns = kept.iter().map(|&i| columns[i]).collect();
            (
                Plan::Scan {
                    dataset,
                    relation,
                    table_schema,
                    columns,
                    filter,
                },
                m,
            )
        }
        Plan::Filter {
            input,
            mut predicate,
        } => {
            let mut need = required.to_vec();
            cols_of(&predicate, &mut need);
            let (input, m) = prune(*input, &sorted_unique(need));
            remap(&mut predicate, &m);
            (
                Plan::Filter {
                    input: Box::new(input),
                    predicate,
                },
                m,
            )
        }
        Plan::Project {
            input,
            exprs,
            schema,
        } => {
            let kept = sorted_unique(required.to_vec());
            let mut exprs: Vec<Expr> = kept.iter().map(|&i| exprs[i].clone()).collect();
            let mut need = Vec::new();
            for e in &exprs {
                cols_of(e, &mut need);
            }
            let (input, m) = prune(*input, &sorted_unique(need));
            for e in &mut exprs {
                remap(e, &m);
            }
            let schema = project_schema(&schema, &kept);
            (
                Plan::Project {
                    input: Box::new(input),
                    exprs,
                    schema,
                },
                mapping_for(out_len, &kept),
            )
        }
        Plan::Aggregate {
            input,
            mut group,
            mut aggs,
            schema,
        } => {
            let mut need = Vec::new();
            for g in &group {
                cols_of(g, &mut need);
            }
            for a in &aggs {
                if let Some(e) = &a.arg {
                    cols_of(e, &mut need);
                }
            }
            let (input, m) = prune(*input, &sorted_unique(need));
            for g in &mut group {
                remap(g, &m);
            }
            for a in &mut aggs {
                if let Some(e) = &mut a.arg {
                    remap(e, &m);
                }
            }
            (
                (Plan::Aggregate {
                    input: Box::new(input),
                    group,
                    aggs,
                    schema,
                }),
                (0..out_len).collect(),
            )
        }
        Plan::Window {
            input,
            mut calls,
            schema,
        } => {
            let in_len = input.schema().fields().len();
            let mut need: Vec<usize> = required.iter().copied().filter(|&i| i < in_len).collect();
            for c in &calls {
                for e in c.args.iter().chain(&c.partition) {
                    cols_of(e, &mut need);
                }
                for k in &c.order {
                    cols_of(&k.expr, &mut need);
                }
            }
            let kept_in = sorted_unique(need);
            let (input, m) = prune(*input, &kept_in);
            for c in &mut calls {
                for e in c.args.iter_mut().chain(c.partition.iter_mut()) {
                    remap(e, &m);
                }
                for k in &mut c.order {
                    remap(&mut k.expr, &m);
                }
            }
            let new_in = input.schema();
            let mut fields: Vec<_> = new_in.fields().iter().cloned().collect();
            fields.extend(schema.fields()[in_len..].iter().cloned());
            let mut mapping = vec![usize::MAX; out_len];
            for (old, slot) in mapping.iter_mut().enumerate().take(in_len) {
                *slot = m[old];
            }
            for j in 0..calls.len() {
                mapping[in_len + j] = new_in.fields().len() + j;
            }
            (
                Plan::Window {
                    input: Box::new(input),
                    calls,
                    schema: Arc::new(Schema::new(fields)),
                },
                mapping,
            )
        }
        Plan::Sort {
            input,
            mut keys,
            fetch,
        } => {
            let mut need = required.to_vec();
            for k in &keys {
                cols_of(&k.expr, &mut need);
            }
            let (input, m) = prune(*input, &sorted_unique(need));
            for k in &mut keys {
                remap(&mut k.expr, &m);
            }
            (
                Plan::Sort {
                    input: Box::new(input),
                    keys,
                    fetch,
                },
                m,
            )
        }
        Plan::Limit {
            input,
            limit,
            offset,
        } => {
            let (input, m) = prune(*input, required);
            (
                Plan::Limit {
                    input: Box::new(input),
                    limit,
                    offset,
                },
                m,
            )
        }
        Plan::Distinct { input } => {
            let all: Vec<usize> = (0..out_len).collect();
            let (input, m) = prune(*input, &all);
            (
                Plan::Distinct {
                    input: Box::new(input),
                },
                m,
            )
        }
        Plan::Join {
            left,
            right,
            kind,
            mut on,
            mut filter,
            ..
        } => {
            let nl = left.schema().fields().len();
            let mut need_l: Vec<usize> = required.iter().copied().filter(|&i| i < nl).collect();
            let mut need_r: Vec<usize> = required
                .iter()
                .copied()
                .filter(|&i| i >= nl)
                .map(|i| i - nl)
                .collect();
            for (l, r) in &on {
                cols_of(l, &mut need_l);
                cols_of(r, &mut need_r);
            }
            if let Some(f) = &filter {
                let mut c = Vec::new();
                cols_of(f, &mut c);
                for i in c {
                    if i < nl {
                        need_l.push(i);
                    } else {
                        need_r.push(i - nl);
                    }
                }
            }
            let (left, ml) = prune(*left, &sorted_unique(need_l));
            let (right, mr) = prune(*right, &sorted_unique(need_r));
            let new_nl = left.schema().fields().len();
            for (l, r) in &mut on {
                remap(l, &ml);
                remap(r, &mr);
            }
            let joined: Mapping = (0..out_len)
                .map(|i| {
                    if i < nl {
                        ml[i]
                    } else {
                        let r = mr[i - nl];
                        if r == usize::MAX {
                            usize::MAX
                        } else {
                            new_nl + r
                        }
                    }
                })
                .collect();
            if let Some(f) = &mut filter {
                remap(f, &joined);
            }
            let mut fields: Vec<_> = left.schema().fields().iter().cloned().collect();
            // Unmatched LEFT JOIN rows fill the right side with NULLs.
            let outer = matches!(kind, JoinKind::Left);
            fields.extend(right.schema().fields().iter().map(|f| {
                if outer && !f.is_nullable() {
                    Arc::new(f.as_ref().clone().with_nullable(true))
                } else {
                    f.clone()
                }
            }));
            let schema = Arc::new(Schema::new(fields));
            (
                Plan::Join {
                    left: Box::new(left),
                    right: Box::new(right),
                    kind,
                    on,
                    filter,
                    schema,
                },
                joined,
            )
        }
        Plan::Union { inputs, schema } => {
            let inputs = inputs
                .into_iter()
                .map(|p| {
                    let n = p.schema().fields().len();
                    let all: Vec<usize> = (0..n).collect();
                    prune(p, &all).0
                })
                .collect();
            (Plan::Union { inputs, schema }, (0..out_len).collect())
        }
        v @ Plan::Values { .. } => (v, (0..out_len).collect()),
    }
}
