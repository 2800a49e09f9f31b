//! Binding FROM: tables, aliases and joins, and the hints for joins that
//! miss a Source's identity columns.

use super::{
    bool_type_check, coerce, common_type, ident_name, make_schema, object_name, sql, suggest,
    BinOp, Binder, Expr, JoinKind, Plan, Replacements, Scope, ScopeCol, SqlError,
};

impl Binder<'_> {
    pub(super) fn apply_alias(
        &mut self,
        plan: Plan,
        scope: &mut Scope,
        alias: &sql::TableAlias,
    ) -> Result<(Plan, Scope), SqlError> {
        let q = ident_name(&alias.name);
        if !alias.columns.is_empty() && alias.columns.len() != scope.cols.len() {
            return Err(SqlError::plan(format!(
                "alias {q} names {} columns, the query has {}",
                alias.columns.len(),
                scope.cols.len()
            )));
        }
        let mut s = scope.clone();
        for (i, c) in s.cols.iter_mut().enumerate() {
            c.qualifier = Some(q.clone());
            if let Some(cd) = alias.columns.get(i) {
                c.name = ident_name(&cd.name);
            }
        }
        if alias.columns.is_empty() {
            return Ok((plan, s));
        }
        let schema = s.schema();
        let exprs = (0..s.cols.len()).map(|i| scope.column(i)).collect();
        Ok((
            Plan::Project {
                input: Box::new(plan),
                exprs,
                schema,
            },
            s,
        ))
    }

    pub(super) fn table_factor(&mut self, t: &sql::TableFactor) -> Result<(Plan, Scope), SqlError> {
        match t {
            sql::TableFactor::Table {
                name,
                alias,
                args,
                with_hints,
                version,
                sample,
                ..
            } => {
                if args.is_some() {
                    return Err(SqlError::NotReadOnly {
                        what: format!("table function {name}"),
                    });
                }
                if !with_hints.is_empty() || version.is_some() || sample.is_some() {
                    return Err(SqlError::unsupported("table hints, versions and samples"));
                }
                let parts: Vec<String> = name
                    .0
                    .iter()
                    .map(|p| match p {
                        sql::ObjectNamePart::Identifier(i) => ident_name(i),
                        sql::ObjectNamePart::Function(f) => f.name.value.clone(),
                    })
                    .collect();
                let (plan, mut scope) = match parts.as_slice() {
                    [single] => {
                        if let Some((p, s)) =
                            self.ctes.iter().rev().find_map(|m| m.get(single)).cloned()
                        {
                            (p, s)
                        } else {
                            let datasets = self.provider.datasets();
                            let ds = if datasets.len() == 1 {
                                datasets[0].clone()
                            } else {
                                "dataset".to_string()
                            };
                            self.scan(&ds, single, &name.to_string())?
                        }
                    }
                    [ds, rel] => self.scan(ds, rel, &name.to_string())?,
                    _ => {
                        return Err(SqlError::UnknownRelation {
                            name: name.to_string(),
                            hint: String::new(),
                        })
                    }
                };
                let default_q = parts.last().cloned().unwrap_or_default();
                match alias {
                    Some(a) => self.apply_alias(plan, &mut scope, a),
                    None => {
                        for c in &mut scope.cols {
                            c.qualifier = Some(default_q.clone());
                        }
                        Ok((plan, scope))
                    }
                }
            }
            sql::TableFactor::Derived {
                lateral,
                subquery,
                alias,
                ..
            } => {
                if *lateral {
                    return Err(SqlError::unsupported("LATERAL"));
                }
                let (plan, mut scope) = self.query(subquery)?;
                match alias {
                    Some(a) => self.apply_alias(plan, &mut scope, a),
                    None => Ok((plan, scope)),
                }
            }
            sql::TableFactor::NestedJoin {
                table_with_joins,
                alias,
            } => {
                let (plan, mut scope) = self.from_item(table_with_joins)?;
                match alias {
                    Some(a) => self.apply_alias(plan, &mut scope, a),
                    None => Ok((plan, scope)),
                }
            }
            sql::TableFactor::Function { .. }
            | sql::TableFactor::TableFunction { .. }
            | sql::TableFactor::UNNEST { .. } => Err(SqlError::NotReadOnly {
                what: format!("table function `{t}`"),
            }),
            other => Err(SqlError::unsupported(format!("FROM item `{other}`"))),
        }
    }

    pub(super) fn scan(
        &mut self,
        dataset: &str,
        relation: &str,
        written: &str,
    ) -> Result<(Plan, Scope), SqlError> {
        let datasets = self.provider.datasets();
        if !datasets.iter().any(|d| d == dataset) {
            let hint = suggest(dataset, datasets.iter().map(String::as_str));
            return Err(SqlError::UnknownRelation {
                name: written.to_string(),
                hint: if hint.is_empty() {
                    format!("; mounted Datasets: {}", datasets.join(", "))
                } else {
                    hint
                },
            });
        }
        let Some(schema) = self.provider.relation(dataset, relation) else {
            let names = self.provider.relation_names();
            let hint = suggest(relation, names.iter().copied());
            let hint = if hint.is_empty() {
                format!("; relations: {}", names.join(", "))
            } else {
                hint
            };
            return Err(SqlError::UnknownRelation {
                name: written.to_string(),
                hint,
            });
        };
        let instance = self.next_instance;
        self.next_instance += 1;
        let origin = self
            .provider
            .is_entity(relation)
            .then(|| (instance, dataset.to_string(), relation.to_string()));
        let scope = Scope {
            cols: schema
                .fields()
                .iter()
                .map(|f| ScopeCol {
                    qualifier: None,
                    name: f.name().clone(),
                    ty: f.data_type().clone(),
                    nullable: f.is_nullable(),
                    origin: origin.clone(),
                    hidden: false,
                })
                .collect(),
        };
        let columns = (0..schema.fields().len()).collect();
        Ok((
            Plan::Scan {
                dataset: dataset.to_string(),
                relation: relation.to_string(),
                table_schema: schema,
                columns,
                filter: None,
            },
            scope,
        ))
    }

    pub(super) fn from_item(&mut self, t: &sql::TableWithJoins) -> Result<(Plan, Scope), SqlError> {
        let (mut plan, mut scope) = self.table_factor(&t.relation)?;
        for j in &t.joins {
            let (rplan, rscope) = self.table_factor(&j.relation)?;
            let (kind, constraint) = match &j.join_operator {
                sql::JoinOperator::Join(c) | sql::JoinOperator::Inner(c) => (JoinKind::Inner, c),
                sql::JoinOperator::Left(c) | sql::JoinOperator::LeftOuter(c) => (JoinKind::Left, c),
                sql::JoinOperator::CrossJoin(c) => (JoinKind::Inner, c),
                other => {
                    return Err(SqlError::unsupported(
                        format!("join `{other:?}`")
                            .split('(')
                            .next()
                            .unwrap_or("join")
                            .to_string(),
                    ))
                }
            };
            let left_n = scope.cols.len();
            let mut joined = scope.clone();
            joined.cols.extend(rscope.cols.iter().cloned().map(|mut c| {
                if kind == JoinKind::Left {
                    c.nullable = true;
                }
                c
            }));
            let on_ast = match constraint {
                sql::JoinConstraint::On(e) => Some(e.clone()),
                sql::JoinConstraint::None => None,
                sql::JoinConstraint::Using(cols) => {
                    let mut terms = Vec::new();
                    for c in cols {
                        let name = object_name(c);
                        let lq = scope.cols[scope.resolve(None, &name)?]
                            .qualifier
                            .clone()
                            .unwrap_or_default();
                        let rq = rscope.cols[rscope.resolve(None, &name)?]
                            .qualifier
                            .clone()
                            .unwrap_or_default();
                        terms.push(sql::Expr::BinaryOp {
                            left: Box::new(sql::Expr::CompoundIdentifier(vec![
                                sql::Ident::new(lq),
                                sql::Ident::new(name.clone()),
                            ])),
                            op: sql::BinaryOperator::Eq,
                            right: Box::new(sql::Expr::CompoundIdentifier(vec![
                                sql::Ident::new(rq),
                                sql::Ident::new(name),
                            ])),
                        });
                    }
                    terms.into_iter().reduce(|a, b| sql::Expr::BinaryOp {
                        left: Box::new(a),
                        op: sql::BinaryOperator::And,
                        right: Box::new(b),
                    })
                }
                sql::JoinConstraint::Natural => return Err(SqlError::unsupported("NATURAL JOIN")),
            };
            let (on, filter) = match &on_ast {
                Some(e) => {
                    let bound = self.expr(e, &joined, &Replacements::default())?;
                    bool_type_check(&bound, "the join condition")?;
                    split_equi(bound, left_n)
                }
                None => (vec![], None),
            };
            check_source_local(
                &joined,
                left_n,
                &on,
                self.statement,
                on_ast.as_ref(),
                JoinFix::On,
            )?;
            let (on, filter) = coerce_keys(on, filter)?;
            let schema = joined.schema();
            plan = Plan::Join {
                left: Box::new(plan),
                right: Box::new(rplan),
                kind,
                on,
                filter,
                schema,
            };
            scope = joined;
        }
        Ok((plan, scope))
    }

    pub(super) fn from(&mut self, from: &[sql::TableWithJoins]) -> Result<(Plan, Scope), SqlError> {
        if from.is_empty() {
            let schema = make_schema(vec![]);
            return Ok((
                Plan::Values {
                    schema,
                    rows: vec![vec![]],
                },
                Scope::default(),
            ));
        }
        let (mut plan, mut scope) = self.from_item(&from[0])?;
        for item in &from[1..] {
            let (rplan, rscope) = self.from_item(item)?;
            let mut joined = scope.clone();
            joined.cols.extend(rscope.cols);
            let schema = joined.schema();
            plan = Plan::Join {
                left: Box::new(plan),
                right: Box::new(rplan),
                kind: JoinKind::Inner,
                on: vec![],
                filter: None,
                schema,
            };
            scope = joined;
        }
        Ok((plan, scope))
    }
}

/// Split a join predicate into equality keys (left side column expr = right
/// side expr) and a residual.
pub(super) fn split_equi(pred: Expr, left_n: usize) -> (Vec<(Expr, Expr)>, Option<Expr>) {
    let mut keys = Vec::new();
    let mut rest = Vec::new();
    for t in pred.conjuncts() {
        if let Expr::Binary {
            op: BinOp::Eq,
            left,
            right,
            ..
        } = &t
        {
            let side = |e: &Expr| {
                let mut cols = Vec::new();
                e.columns(&mut cols);
                if cols.is_empty() {
                    None
                } else if cols.iter().all(|&c| c < left_n) {
                    Some(true)
                } else if cols.iter().all(|&c| c >= left_n) {
                    Some(false)
                } else {
                    None
                }
            };
            match (side(left), side(right)) {
                (Some(true), Some(false)) => {
                    let mut r = (**right).clone();
                    r.remap(&|i| i - left_n);
                    keys.push(((**left).clone(), r));
                    continue;
                }
                (Some(false), Some(true)) => {
                    let mut l = (**left).clone();
                    l.remap(&|i| i - left_n);
                    keys.push(((**right).clone(), l));
                    continue;
                }
                _ => {}
            }
        }
        rest.push(t);
    }
    (keys, Expr::and_all(rest))
}

pub(super) fn coerce_keys(
    on: Vec<(Expr, Expr)>,
    filter: Option<Expr>,
) -> Result<(Vec<(Expr, Expr)>, Option<Expr>), SqlError> {
    let mut out = Vec::new();
    for (l, r) in on {
        let t = common_type(&l.data_type(), &r.data_type())
            .ok_or_else(|| SqlError::type_error("join keys have different types"))?;
        out.push((coerce(l, &t), coerce(r, &t)));
    }
    Ok((out, filter))
}

#[derive(Clone, Copy)]
pub(super) enum JoinFix {
    On,
    Where,
}

pub(super) const ID_COLUMNS: &[&str] = &[
    "document_id",
    "root_document_id",
    "storage_ordinal",
    "run_id",
    "session_id",
    "step_id",
    "tool_call_id",
    "trajectory_id",
    "attempt_id",
    "parent_document_id",
    "call_id",
    "event_id",
];

/// Reject joins of two entity relations of one Dataset on Source-local ids
/// that do not also match `source_path`.
pub(super) fn check_source_local(
    joined: &Scope,
    left_n: usize,
    keys: &[(Expr, Expr)],
    statement: &sql::Statement,
    cond: Option<&sql::Expr>,
    fix: JoinFix,
) -> Result<(), SqlError> {
    let origin_of = |e: &Expr, offset: usize| match e {
        Expr::Column { index, .. } => joined.cols.get(index + offset).and_then(|c| {
            c.origin
                .clone()
                .map(|o| (o, c.name.clone(), c.qualifier.clone()))
        }),
        _ => None,
    };
    let mut pairs: Vec<(
        (usize, String, String),
        (usize, String, String),
        Option<String>,
        Option<String>,
    )> = Vec::new();
    let mut has_source = Vec::new();
    for (l, r) in keys {
        let (Some((lo, lname, lq)), Some((ro, rname, rq))) =
            (origin_of(l, 0), origin_of(r, left_n))
        else {
            continue;
        };
        if lo.1 != ro.1 {
            continue;
        }
        if lname == "source_path" && rname == "source_path" {
            has_source.push((lo.0, ro.0));
        } else if ID_COLUMNS.contains(&lname.as_str()) && ID_COLUMNS.contains(&rname.as_str()) {
            pairs.push((lo, ro, lq, rq));
        }
    }
    for (lo, ro, lq, rq) in pairs {
        if has_source.contains(&(lo.0, ro.0)) {
            continue;
        }
        let l = lq.unwrap_or_else(|| lo.2.clone());
        let r = rq.unwrap_or_else(|| ro.2.clone());
        let corrected = corrected_sql(statement, cond, &l, &r, fix);
        return Err(SqlError::SourceLocalJoin {
            left: lo.2,
            right: ro.2,
            corrected,
        });
    }
    Ok(())
}

/// For comma joins (`FROM a, b WHERE …`), check the WHERE keys.
pub(super) fn check_comma_joins(
    plan: &Plan,
    scope: &Scope,
    pred: &Expr,
    statement: &sql::Statement,
) -> Result<(), SqlError> {
    let Plan::Join {
        left,
        on,
        filter: None,
        ..
    } = plan
    else {
        return Ok(());
    };
    if !on.is_empty() {
        return Ok(());
    }
    let left_n = left.schema().fields().len();
    let (keys, _) = split_equi(pred.clone(), left_n);
    let where_ast = match statement {
        sql::Statement::Query(q) => match &*q.body {
            sql::SetExpr::Select(s) => s.selection.clone(),
            _ => None,
        },
        _ => None,
    };
    check_source_local(
        scope,
        left_n,
        &keys,
        statement,
        where_ast.as_ref(),
        JoinFix::Where,
    )
}

/// The statement with `l.source_path = r.source_path` added to the join
/// condition (or WHERE).
pub(super) fn corrected_sql(
    statement: &sql::Statement,
    cond: Option<&sql::Expr>,
    l: &str,
    r: &str,
    fix: JoinFix,
) -> String {
    let extra = sql::Expr::BinaryOp {
        left: Box::new(sql::Expr::CompoundIdentifier(vec![
            sql::Ident::new(l),
            sql::Ident::new("source_path"),
        ])),
        op: sql::BinaryOperator::Eq,
        right: Box::new(sql::Expr::CompoundIdentifier(vec![
            sql::Ident::new(r),
            sql::Ident::new("source_path"),
        ])),
    };
    let mut fixed = statement.clone();
    let target = cond.cloned();
    let mut done = false;
    let combine = |c: &sql::Expr| sql::Expr::BinaryOp {
        left: Box::new(c.clone()),
        op: sql::BinaryOperator::And,
        right: Box::new(extra.clone()),
    };
    if let sql::Statement::Query(q) = &mut fixed {
        fix_set_expr(&mut q.body, &target, &combine, fix, &mut done);
    }
    if done {
        fixed.to_string()
    } else {
        format!("… ON … AND {extra}")
    }
}

pub(super) fn fix_set_expr(
    body: &mut sql::SetExpr,
    target: &Option<sql::Expr>,
    combine: &dyn Fn(&sql::Expr) -> sql::Expr,
    fix: JoinFix,
    done: &mut bool,
) {
    match body {
        sql::SetExpr::Select(s) => {
            if let JoinFix::Where = fix {
                if let (Some(w), Some(t)) = (&s.selection, target) {
                    if w == t && !*done {
                        s.selection = Some(combine(w));
                        *done = true;
                    }
                }
                return;
            }
            for twj in &mut s.from {
                for j in &mut twj.joins {
                    let c = match &mut j.join_operator {
                        sql::JoinOperator::Join(c)
                        | sql::JoinOperator::Inner(c)
                        | sql::JoinOperator::Left(c)
                        | sql::JoinOperator::LeftOuter(c) => c,
                        _ => continue,
                    };
                    if let sql::JoinConstraint::On(e) = c {
                        if Some(&*e) == target.as_ref() && !*done {
                            *e = combine(e);
                            *done = true;
                        }
                    }
                }
            }
        }
        sql::SetExpr::Query(q) => fix_set_expr(&mut q.body, target, combine, fix, done),
        sql::SetExpr::SetOperation { left, right, .. } => {
            fix_set_expr(left, target, combine, fix, done);
            fix_set_expr(right, target, combine, fix, done);
        }
        _ => {}
    }
}
