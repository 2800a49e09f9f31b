//! Binding: sqlparser AST → logical [`Plan`], resolving names against the
//! mounted Datasets through the [`DataLayer`] and checking types.

use std::collections::HashMap;

use arrow::datatypes::DataType;
use sqlparser::ast as sql;

use super::error::suggest;
use super::logical::{
    make_schema, AggCall, AggFunc, BinOp, Expr, Func, JoinKind, Plan, SortKey, WinFunc, WindowCall,
};
use super::value::{common_type, is_numeric, ts_type, type_name, Scalar};
use super::{DataLayer, SqlError};

/// Nesting bound for expressions and queries.
pub const MAX_DEPTH: usize = 64;

/// One visible column.
#[derive(Debug, Clone)]
struct ScopeCol {
    qualifier: Option<String>,
    name: String,
    ty: DataType,
    nullable: bool,
    /// Scan instance and relation the column comes from (for the join check).
    origin: Option<(usize, String, String)>,
    /// Not visible to `*` (ORDER BY helpers).
    hidden: bool,
}

#[derive(Debug, Clone, Default)]
struct Scope {
    cols: Vec<ScopeCol>,
}

impl Scope {
    fn schema(&self) -> arrow::datatypes::SchemaRef {
        make_schema(
            self.cols
                .iter()
                .map(|c| (c.name.clone(), c.ty.clone(), c.nullable))
                .collect(),
        )
    }

    fn resolve(&self, qualifier: Option<&str>, name: &str) -> Result<usize, SqlError> {
        let matches: Vec<usize> = self
            .cols
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.name.eq_ignore_ascii_case(name)
                    && match qualifier {
                        Some(q) => c
                            .qualifier
                            .as_deref()
                            .is_some_and(|cq| cq.eq_ignore_ascii_case(q)),
                        None => true,
                    }
            })
            .map(|(i, _)| i)
            .collect();
        match matches.as_slice() {
            [i] => Ok(*i),
            [] => {
                let full = qualifier.map_or_else(|| name.to_string(), |q| format!("{q}.{name}"));
                let hint = suggest(name, self.cols.iter().map(|c| c.name.as_str()));
                Err(SqlError::UnknownColumn { name: full, hint })
            }
            [first, ..] => Err(SqlError::AmbiguousColumn {
                name: name.to_string(),
                example: format!(
                    "{}.{name}",
                    self.cols[*first].qualifier.as_deref().unwrap_or("t")
                ),
            }),
        }
    }

    fn column(&self, i: usize) -> Expr {
        let c = &self.cols[i];
        Expr::col(i, c.name.clone(), c.ty.clone())
    }
}

/// A function call in the AST that is an aggregate (not a window).
fn agg_name(f: &sql::Function) -> Option<AggFunc> {
    if f.over.is_some() {
        return None;
    }
    agg_func(&object_name(&f.name))
}

fn agg_func(name: &str) -> Option<AggFunc> {
    Some(match name.to_ascii_lowercase().as_str() {
        "count" => AggFunc::Count,
        "sum" => AggFunc::Sum,
        "avg" | "mean" => AggFunc::Avg,
        "min" => AggFunc::Min,
        "max" => AggFunc::Max,
        _ => return None,
    })
}

fn object_name(n: &sql::ObjectName) -> String {
    n.0.iter()
        .map(|p| match p {
            sql::ObjectNamePart::Identifier(i) => i.value.clone(),
            sql::ObjectNamePart::Function(f) => f.name.value.clone(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn ident_name(i: &sql::Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_ascii_lowercase()
    }
}

/// Expressions whose bound form replaces the AST node wherever it appears
/// (group keys, aggregates and window calls after they are computed).
#[derive(Default)]
struct Replacements {
    by_text: HashMap<String, Expr>,
}

pub(crate) struct Binder<'a> {
    provider: &'a dyn DataLayer,
    ctes: Vec<HashMap<String, (Plan, Scope)>>,
    depth: usize,
    next_instance: usize,
    /// The whole statement, for printing corrected queries.
    statement: &'a sql::Statement,
}

fn func_args(f: &sql::Function) -> Result<(Vec<&sql::Expr>, bool, bool), SqlError> {
    match &f.args {
        sql::FunctionArguments::None => Ok((vec![], false, false)),
        sql::FunctionArguments::Subquery(_) => {
            Err(SqlError::unsupported("subquery as a function argument"))
        }
        sql::FunctionArguments::List(list) => {
            if !list.clauses.is_empty() {
                return Err(SqlError::unsupported(format!(
                    "clauses inside {}(…)",
                    object_name(&f.name)
                )));
            }
            let distinct = matches!(
                list.duplicate_treatment,
                Some(sql::DuplicateTreatment::Distinct)
            );
            let mut out = Vec::new();
            let mut star = false;
            for a in &list.args {
                match a {
                    sql::FunctionArg::Unnamed(sql::FunctionArgExpr::Expr(e)) => out.push(e),
                    sql::FunctionArg::Unnamed(sql::FunctionArgExpr::Wildcard) => star = true,
                    _ => return Err(SqlError::unsupported(format!("argument `{a}`"))),
                }
            }
            Ok((out, distinct, star))
        }
    }
}

fn literal_usize(e: &sql::Expr, what: &str) -> Result<usize, SqlError> {
    match e {
        sql::Expr::Value(v) => match &v.value {
            sql::Value::Number(n, _) => n.parse::<usize>().map_err(|_| {
                SqlError::plan(format!("{what} must be a non-negative integer, got {n}"))
            }),
            other => Err(SqlError::plan(format!(
                "{what} must be a non-negative integer, got {other}"
            ))),
        },
        other => Err(SqlError::plan(format!(
            "{what} must be a non-negative integer literal, got {other}"
        ))),
    }
}

/// SQL type name → Arrow type.
fn cast_type(t: &sql::DataType) -> Result<DataType, SqlError> {
    let s = t.to_string().to_ascii_uppercase();
    let head = s.split(['(', ' ']).next().unwrap_or("");
    Ok(match head {
        "INT" | "INTEGER" | "BIGINT" | "SMALLINT" | "TINYINT" | "INT8" | "INT4" | "INT2"
        | "HUGEINT" | "UBIGINT" => DataType::Int64,
        "DOUBLE" | "FLOAT" | "REAL" | "DECIMAL" | "NUMERIC" | "FLOAT8" | "FLOAT4" => {
            DataType::Float64
        }
        "VARCHAR" | "TEXT" | "STRING" | "CHAR" | "CHARACTER" | "JSON" => DataType::Utf8,
        "BOOLEAN" | "BOOL" => DataType::Boolean,
        "TIMESTAMP" | "TIMESTAMPTZ" | "DATETIME" | "DATE" => ts_type(),
        _ => return Err(SqlError::unsupported(format!("type {t}"))),
    })
}

fn number_literal(n: &str) -> Result<Scalar, SqlError> {
    if let Ok(i) = n.parse::<i64>() {
        return Ok(Scalar::Int(i));
    }
    n.parse::<f64>()
        .map(Scalar::Float)
        .map_err(|_| SqlError::type_error(format!("bad number {n}")))
}

/// Wrap `e` in a cast to `to` unless it already has that type.
fn coerce(e: Expr, to: &DataType) -> Expr {
    let from = e.data_type();
    if &from == to || matches!(to, DataType::Null) {
        return e;
    }
    if let (Expr::Literal(Scalar::Null), _) = (&e, to) {
        return Expr::Cast {
            expr: Box::new(e),
            to: to.clone(),
        };
    }
    Expr::Cast {
        expr: Box::new(e),
        to: to.clone(),
    }
}

fn bool_type_check(e: &Expr, what: &str) -> Result<(), SqlError> {
    match e.data_type() {
        DataType::Boolean | DataType::Null => Ok(()),
        other => Err(SqlError::type_error(format!(
            "{what} must be BOOLEAN, found {}",
            type_name(&other)
        ))),
    }
}

impl<'a> Binder<'a> {
    pub(crate) fn new(provider: &'a dyn DataLayer, statement: &'a sql::Statement) -> Self {
        Binder {
            provider,
            ctes: Vec::new(),
            depth: 0,
            next_instance: 0,
            statement,
        }
    }

    fn enter(&mut self) -> Result<(), SqlError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(SqlError::TooDeep { limit: MAX_DEPTH });
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// Bind a full query.
    pub(crate) fn bind_query(&mut self, q: &sql::Query) -> Result<Plan, SqlError> {
        self.query(q).map(|(p, _)| p)
    }

    fn query(&mut self, q: &sql::Query) -> Result<(Plan, Scope), SqlError> {
        self.enter()?;
        let r = self.query_inner(q);
        self.leave();
        r
    }

    fn query_inner(&mut self, q: &sql::Query) -> Result<(Plan, Scope), SqlError> {
        if q.fetch.is_some()
            || !q.locks.is_empty()
            || q.for_clause.is_some()
            || q.settings.is_some()
            || q.format_clause.is_some()
            || !q.pipe_operators.is_empty()
        {
            return Err(SqlError::unsupported(
                "FETCH, FOR, SETTINGS, FORMAT and pipe operators",
            ));
        }
        let pushed_cte = if let Some(with) = &q.with {
            if with.recursive {
                return Err(SqlError::unsupported("WITH RECURSIVE"));
            }
            self.ctes.push(HashMap::new());
            for cte in &with.cte_tables {
                let name = ident_name(&cte.alias.name);
                let (plan, mut scope) = self.query(&cte.query)?;
                let (plan, scope2) = self.apply_alias(plan, &mut scope, &cte.alias)?;
                self.ctes
                    .last_mut()
                    .expect("pushed")
                    .insert(name, (plan, scope2));
            }
            true
        } else {
            false
        };
        let (limit, offset) = match &q.limit_clause {
            None => (None, 0),
            Some(sql::LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) => {
                if !limit_by.is_empty() {
                    return Err(SqlError::unsupported("LIMIT BY"));
                }
                let l = match limit {
                    Some(sql::Expr::Value(v)) if matches!(v.value, sql::Value::Null) => None,
                    Some(e) => Some(literal_usize(e, "LIMIT")?),
                    None => None,
                };
                let o = offset
                    .as_ref()
                    .map(|o| literal_usize(&o.value, "OFFSET"))
                    .transpose()?
                    .unwrap_or(0);
                (l, o)
            }
            Some(sql::LimitClause::OffsetCommaLimit { offset, limit }) => (
                Some(literal_usize(limit, "LIMIT")?),
                literal_usize(offset, "OFFSET")?,
            ),
        };
        let order: Vec<&sql::OrderByExpr> = match &q.order_by {
            None => vec![],
            Some(ob) => match &ob.kind {
                sql::OrderByKind::Expressions(v) => v.iter().collect(),
                sql::OrderByKind::All(_) => return Err(SqlError::unsupported("ORDER BY ALL")),
            },
        };
        let result = match &*q.body {
            sql::SetExpr::Select(s) => self.select(s, &order, limit, offset),
            other => {
                let (plan, scope) = self.set_expr(other)?;
                self.finish_order_limit(plan, scope, &order, limit, offset)
            }
        };
        if pushed_cte {
            self.ctes.pop();
        }
        result
    }

    /// ORDER BY / LIMIT over an output scope (set operations, VALUES).
    fn finish_order_limit(
        &mut self,
        mut plan: Plan,
        scope: Scope,
        order: &[&sql::OrderByExpr],
        limit: Option<usize>,
        offset: usize,
    ) -> Result<(Plan, Scope), SqlError> {
        if !order.is_empty() {
            let mut keys = Vec::new();
            for o in order {
                let expr = match &o.expr {
                    sql::Expr::Value(v) if matches!(v.value, sql::Value::Number(..)) => {
                        let n = literal_usize(&o.expr, "ORDER BY position")?;
                        if n == 0 || n > scope.cols.len() {
                            return Err(SqlError::plan(format!(
                                "ORDER BY position {n} is not in the select list"
                            )));
                        }
                        scope.column(n - 1)
                    }
                    e => self.expr(e, &scope, &Replacements::default())?,
                };
                keys.push(sort_key(expr, &o.options));
            }
            plan = Plan::Sort {
                input: Box::new(plan),
                keys,
                fetch: limit.map(|l| l + offset),
            };
        }
        if limit.is_some() || offset > 0 {
            plan = Plan::Limit {
                input: Box::new(plan),
                limit,
                offset,
            };
        }
        Ok((plan, scope))
    }

    fn set_expr(&mut self, s: &sql::SetExpr) -> Result<(Plan, Scope), SqlError> {
        self.enter()?;
        let r = match s {
            sql::SetExpr::Select(sel) => self.select(sel, &[], None, 0),
            sql::SetExpr::Query(q) => self.query(q),
            sql::SetExpr::Values(v) => self.values(v),
            sql::SetExpr::SetOperation {
                left,
                op,
                set_quantifier,
                right,
            } => {
                if *op != sql::SetOperator::Union {
                    return Err(SqlError::unsupported(format!("{op}")));
                }
                let all = matches!(set_quantifier, sql::SetQuantifier::All);
                let distinct = matches!(
                    set_quantifier,
                    sql::SetQuantifier::None | sql::SetQuantifier::Distinct
                );
                if !all && !distinct {
                    return Err(SqlError::unsupported(format!("UNION {set_quantifier}")));
                }
                let (lp, ls) = self.set_expr(left)?;
                let (rp, rs) = self.set_expr(right)?;
                let mut inputs = match lp {
                    Plan::Union { inputs, .. } if all => inputs,
                    other => vec![other],
                };
                inputs.push(rp);
                let _ = rs;
                let (plan, scope) = self.union(inputs, &ls)?;
                if distinct {
                    Ok((
                        Plan::Distinct {
                            input: Box::new(plan),
                        },
                        scope,
                    ))
                } else {
                    Ok((plan, scope))
                }
            }
            other => Err(SqlError::NotReadOnly {
                what: other
                    .to_string()
                    .split_whitespace()
                    .next()
                    .unwrap_or("statement")
                    .to_string(),
            }),
        };
        self.leave();
        r
    }

    fn union(&mut self, inputs: Vec<Plan>, first: &Scope) -> Result<(Plan, Scope), SqlError> {
        let n = first.cols.len();
        let schemas: Vec<_> = inputs.iter().map(Plan::schema).collect();
        for s in &schemas {
            if s.fields().len() != n {
                return Err(SqlError::plan(format!(
                    "UNION inputs have {} and {} columns",
                    n,
                    s.fields().len()
                )));
            }
        }
        let mut types = Vec::with_capacity(n);
        for i in 0..n {
            let mut t = schemas[0].field(i).data_type().clone();
            for s in &schemas[1..] {
                t = common_type(&t, s.field(i).data_type()).ok_or_else(|| {
                    SqlError::type_error(format!(
                        "UNION column {} mixes {} and {}",
                        i + 1,
                        type_name(&t),
                        type_name(s.field(i).data_type())
                    ))
                })?;
            }
            if t == DataType::Null {
                t = DataType::Utf8;
            }
            types.push(t);
        }
        let schema = make_schema(
            first
                .cols
                .iter()
                .zip(&types)
                .map(|(c, t)| (c.name.clone(), t.clone(), true))
                .collect(),
        );
        let inputs = inputs
            .into_iter()
            .zip(schemas)
            .map(|(p, s)| {
                if s.fields()
                    .iter()
                    .zip(&types)
                    .all(|(f, t)| f.data_type() == t)
                {
                    return p;
                }
                let exprs: Vec<Expr> = s
                    .fields()
                    .iter()
                    .enumerate()
                    .zip(&types)
                    .map(|((i, f), t)| {
                        coerce(Expr::col(i, f.name().clone(), f.data_type().clone()), t)
                    })
                    .collect();
                Plan::Project {
                    input: Box::new(p),
                    exprs,
                    schema: schema.clone(),
                }
            })
            .collect();
        let scope = Scope {
            cols: first
                .cols
                .iter()
                .zip(types)
                .map(|(c, t)| ScopeCol {
                    qualifier: None,
                    name: c.name.clone(),
                    ty: t,
                    nullable: true,
                    origin: None,
                    hidden: false,
                })
                .collect(),
        };
        Ok((Plan::Union { inputs, schema }, scope))
    }

    fn values(&mut self, v: &sql::Values) -> Result<(Plan, Scope), SqlError> {
        let empty = Scope::default();
        let mut rows = Vec::new();
        let mut types: Vec<DataType> = Vec::new();
        for (r, row) in v.rows.iter().enumerate() {
            let mut out = Vec::new();
            for (c, e) in row.iter().enumerate() {
                let bound = self.expr(e, &empty, &Replacements::default())?;
                let s = super::expr::eval_constant(&bound)?;
                if r == 0 {
                    types.push(s.data_type());
                } else if c < types.len() {
                    types[c] = common_type(&types[c], &s.data_type()).ok_or_else(|| {
                        SqlError::type_error(format!("VALUES column {} mixes types", c + 1))
                    })?;
                }
                out.push(s);
            }
            if r > 0 && out.len() != types.len() {
                return Err(SqlError::plan("VALUES rows have different lengths"));
            }
            rows.push(out);
        }
        let types: Vec<DataType> = types
            .into_iter()
            .map(|t| {
                if t == DataType::Null {
                    DataType::Utf8
                } else {
                    t
                }
            })
            .collect();
        let cols: Vec<ScopeCol> = types
            .iter()
            .enumerate()
            .map(|(i, t)| ScopeCol {
                qualifier: None,
                name: format!("col{i}"),
                ty: t.clone(),
                nullable: true,
                origin: None,
                hidden: false,
            })
            .collect();
        let scope = Scope { cols };
        let rows = rows
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .zip(&types)
                    .map(|(s, t)| super::expr::cast_scalar(s, t))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((
            Plan::Values {
                schema: scope.schema(),
                rows,
            },
            scope,
        ))
    }

    fn apply_alias(
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

    fn table_factor(&mut self, t: &sql::TableFactor) -> Result<(Plan, Scope), SqlError> {
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

    fn scan(
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

    fn from_item(&mut self, t: &sql::TableWithJoins) -> Result<(Plan, Scope), SqlError> {
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

    fn from(&mut self, from: &[sql::TableWithJoins]) -> Result<(Plan, Scope), SqlError> {
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

    #[allow(clippy::too_many_lines)]
    fn select(
        &mut self,
        s: &sql::Select,
        order: &[&sql::OrderByExpr],
        limit: Option<usize>,
        offset: usize,
    ) -> Result<(Plan, Scope), SqlError> {
        if s.top.is_some()
            || s.into.is_some()
            || !s.lateral_views.is_empty()
            || s.prewhere.is_some()
            || !s.cluster_by.is_empty()
            || !s.distribute_by.is_empty()
            || !s.sort_by.is_empty()
            || s.qualify.is_some()
            || !s.named_window.is_empty()
            || !s.connect_by.is_empty()
        {
            return Err(SqlError::unsupported("TOP, INTO, LATERAL VIEW, PREWHERE, CLUSTER/DISTRIBUTE/SORT BY, QUALIFY, WINDOW and CONNECT BY"));
        }
        let (mut plan, mut scope) = self.from(&s.from)?;
        // WHERE
        if let Some(w) = &s.selection {
            let pred = self.expr(w, &scope, &Replacements::default())?;
            bool_type_check(&pred, "WHERE")?;
            // Comma joins: the WHERE carries the join keys.
            check_comma_joins(&plan, &scope, &pred, self.statement)?;
            plan = Plan::Filter {
                input: Box::new(plan),
                predicate: pred,
            };
        } else {
            check_comma_joins(
                &plan,
                &scope,
                &Expr::Literal(Scalar::Bool(true)),
                self.statement,
            )?;
        }

        // Expand the select list.
        let mut items: Vec<(Option<&sql::Expr>, Option<String>, Option<usize>)> = Vec::new(); // (expr, alias, wildcard column)
        for item in &s.projection {
            match item {
                sql::SelectItem::UnnamedExpr(e) => items.push((Some(e), None, None)),
                sql::SelectItem::ExprWithAlias { expr, alias } => {
                    items.push((Some(expr), Some(ident_name(alias)), None));
                }
                sql::SelectItem::Wildcard(opts) => {
                    if opts.opt_exclude.is_some()
                        || opts.opt_except.is_some()
                        || opts.opt_replace.is_some()
                        || opts.opt_rename.is_some()
                    {
                        return Err(SqlError::unsupported("wildcard options"));
                    }
                    for (i, c) in scope.cols.iter().enumerate() {
                        if !c.hidden {
                            items.push((None, None, Some(i)));
                        }
                    }
                }
                sql::SelectItem::QualifiedWildcard(kind, _) => {
                    let q = match kind {
                        sql::SelectItemQualifiedWildcardKind::ObjectName(n) => {
                            object_name(n).to_ascii_lowercase()
                        }
                        sql::SelectItemQualifiedWildcardKind::Expr(_) => {
                            return Err(SqlError::unsupported("expression wildcards"))
                        }
                    };
                    let before = items.len();
                    for (i, c) in scope.cols.iter().enumerate() {
                        if c.qualifier
                            .as_deref()
                            .is_some_and(|cq| cq.eq_ignore_ascii_case(&q))
                        {
                            items.push((None, None, Some(i)));
                        }
                    }
                    if items.len() == before {
                        return Err(SqlError::UnknownRelation {
                            name: q,
                            hint: String::new(),
                        });
                    }
                }
                sql::SelectItem::ExprWithAliases { .. } => {
                    return Err(SqlError::unsupported("multiple aliases"))
                }
            }
        }

        // Aggregation.
        let group_asts: Vec<&sql::Expr> = match &s.group_by {
            sql::GroupByExpr::Expressions(v, mods) => {
                if !mods.is_empty() {
                    return Err(SqlError::unsupported("GROUP BY modifiers"));
                }
                v.iter().collect()
            }
            sql::GroupByExpr::All(_) => return Err(SqlError::unsupported("GROUP BY ALL")),
        };
        let mut agg_asts: Vec<&sql::Function> = Vec::new();
        for (e, _, _) in &items {
            if let Some(e) = e {
                collect_aggs(e, &mut agg_asts);
            }
        }
        if let Some(h) = &s.having {
            collect_aggs(h, &mut agg_asts);
        }
        for o in order {
            collect_aggs(&o.expr, &mut agg_asts);
        }
        let aggregated = !group_asts.is_empty() || !agg_asts.is_empty() || s.having.is_some();
        let mut repl = Replacements::default();
        if aggregated {
            let mut group = Vec::new();
            let mut fields = Vec::new();
            for g in &group_asts {
                // GROUP BY position or select alias.
                let resolved: &sql::Expr = match g {
                    sql::Expr::Value(v) if matches!(v.value, sql::Value::Number(..)) => {
                        let n = literal_usize(g, "GROUP BY position")?;
                        match items.get(n.wrapping_sub(1)) {
                            Some((Some(e), _, _)) => e,
                            _ => {
                                return Err(SqlError::plan(format!(
                                    "GROUP BY position {n} is not an expression in the select list"
                                )))
                            }
                        }
                    }
                    sql::Expr::Identifier(id) if scope.resolve(None, &ident_name(id)).is_err() => {
                        match items
                            .iter()
                            .find(|(_, a, _)| a.as_deref() == Some(&ident_name(id)))
                        {
                            Some((Some(e), _, _)) => e,
                            _ => g,
                        }
                    }
                    _ => g,
                };
                let e = self.expr(resolved, &scope, &Replacements::default())?;
                let name = match &e {
                    Expr::Column { name, .. } => name.clone(),
                    _ => resolved.to_string(),
                };
                fields.push((name, e.data_type(), true));
                repl.by_text.insert(
                    canon(resolved),
                    Expr::col(
                        group.len(),
                        fields.last().expect("pushed").0.clone(),
                        e.data_type(),
                    ),
                );
                if let sql::Expr::Identifier(_) | sql::Expr::CompoundIdentifier(_) = resolved {
                    // A bare column also matches when written with or without qualifier.
                    if let Expr::Column { name, .. } = &e {
                        repl.by_text.insert(
                            format!("#col:{name}"),
                            Expr::col(group.len(), name.clone(), e.data_type()),
                        );
                    }
                }
                group.push(e);
            }
            let mut aggs: Vec<AggCall> = Vec::new();
            for f in &agg_asts {
                let key = canon_fn(f);
                if repl.by_text.contains_key(&key) {
                    continue;
                }
                let func = agg_name(f).expect("collected aggregates");
                let (args, distinct, star) = func_args(f)?;
                if f.filter.is_some() || !f.within_group.is_empty() || f.null_treatment.is_some() {
                    return Err(SqlError::unsupported("FILTER / WITHIN GROUP on aggregates"));
                }
                let arg = match (func, args.as_slice(), star) {
                    (AggFunc::Count, [], true) => None,
                    (_, [a], false) => {
                        let mut inner = Replacements::default();
                        inner.by_text.clear();
                        if contains_agg(a) {
                            return Err(SqlError::plan("aggregate functions cannot be nested"));
                        }
                        Some(self.expr(a, &scope, &inner)?)
                    }
                    _ => {
                        return Err(SqlError::plan(format!(
                            "{}() takes one argument",
                            func.name()
                        )))
                    }
                };
                let ty = match (func, arg.as_ref().map(Expr::data_type)) {
                    (AggFunc::Count, _) => DataType::Int64,
                    (AggFunc::Avg, Some(t)) if is_numeric(&t) || t == DataType::Null => {
                        DataType::Float64
                    }
                    (AggFunc::Sum, Some(DataType::Int64)) => DataType::Int64,
                    (AggFunc::Sum, Some(DataType::Float64 | DataType::Null)) => DataType::Float64,
                    (AggFunc::Min | AggFunc::Max, Some(t)) => t,
                    (f, Some(t)) => {
                        return Err(SqlError::type_error(format!(
                            "{}() of {}",
                            f.name(),
                            type_name(&t)
                        )))
                    }
                    (_, None) => return Err(SqlError::plan("only COUNT accepts *")),
                };
                let idx = group.len() + aggs.len();
                fields.push((f.to_string(), ty.clone(), true));
                repl.by_text
                    .insert(key, Expr::col(idx, f.to_string(), ty.clone()));
                aggs.push(AggCall {
                    func,
                    arg,
                    distinct,
                    ty,
                });
            }
            let schema = make_schema(fields.clone());
            plan = Plan::Aggregate {
                input: Box::new(plan),
                group,
                aggs,
                schema,
            };
            // After aggregation only group keys and aggregates are visible.
            scope = Scope {
                cols: fields
                    .into_iter()
                    .map(|(name, ty, nullable)| ScopeCol {
                        qualifier: None,
                        name,
                        ty,
                        nullable,
                        origin: None,
                        hidden: true,
                    })
                    .collect(),
            };
            if let Some(h) = &s.having {
                let pred = self.post_agg_expr(h, &scope, &repl)?;
                bool_type_check(&pred, "HAVING")?;
                plan = Plan::Filter {
                    input: Box::new(plan),
                    predicate: pred,
                };
            }
        }

        // Window functions.
        let mut win_asts: Vec<&sql::Function> = Vec::new();
        for (e, _, _) in &items {
            if let Some(e) = e {
                collect_windows(e, &mut win_asts);
            }
        }
        for o in order {
            collect_windows(&o.expr, &mut win_asts);
        }
        if !win_asts.is_empty() {
            let base = scope.cols.len();
            let mut calls = Vec::new();
            let mut fields: Vec<(String, DataType, bool)> = scope
                .cols
                .iter()
                .map(|c| (c.name.clone(), c.ty.clone(), c.nullable))
                .collect();
            for f in win_asts {
                let key = canon_fn(f);
                if repl.by_text.contains_key(&key) {
                    continue;
                }
                let call = self.window_call(f, &scope, &repl, aggregated)?;
                let idx = base + calls.len();
                fields.push((f.to_string(), call.ty.clone(), true));
                repl.by_text
                    .insert(key, Expr::col(idx, f.to_string(), call.ty.clone()));
                calls.push(call);
            }
            let schema = make_schema(fields.clone());
            plan = Plan::Window {
                input: Box::new(plan),
                calls,
                schema,
            };
            let hidden = aggregated;
            scope = Scope {
                cols: fields
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, ty, nullable))| {
                        let mut c = scope.cols.get(i).cloned().unwrap_or(ScopeCol {
                            qualifier: None,
                            name: name.clone(),
                            ty: ty.clone(),
                            nullable,
                            origin: None,
                            hidden,
                        });
                        c.name = name;
                        c.ty = ty;
                        c
                    })
                    .collect(),
            };
        }

        // Projection.
        let mut exprs = Vec::new();
        let mut out_cols: Vec<ScopeCol> = Vec::new();
        for (e, alias, wild) in &items {
            let (expr, name, origin, qualifier) = match (e, wild) {
                (_, Some(i)) => {
                    if aggregated {
                        return Err(SqlError::plan(
                            "SELECT * cannot be used with GROUP BY or aggregates",
                        ));
                    }
                    let c = &scope.cols[*i];
                    (
                        scope.column(*i),
                        c.name.clone(),
                        c.origin.clone(),
                        c.qualifier.clone(),
                    )
                }
                (Some(e), None) => {
                    let bound = if aggregated {
                        self.post_agg_expr(e, &scope, &repl)?
                    } else {
                        self.expr(e, &scope, &repl)?
                    };
                    let (origin, qualifier) = match &bound {
                        Expr::Column { index, .. } => (
                            scope.cols[*index].origin.clone(),
                            scope.cols[*index].qualifier.clone(),
                        ),
                        _ => (None, None),
                    };
                    let name = alias.clone().unwrap_or_else(|| match (&bound, e) {
                        (
                            Expr::Column { name, .. },
                            sql::Expr::Identifier(_) | sql::Expr::CompoundIdentifier(_),
                        ) => name.clone(),
                        _ => e.to_string(),
                    });
                    (bound, name, origin, qualifier)
                }
                (None, None) => unreachable!("select item without expression"),
            };
            out_cols.push(ScopeCol {
                qualifier,
                name,
                ty: expr.data_type(),
                nullable: true,
                origin,
                hidden: false,
            });
            exprs.push(expr);
        }
        let visible = exprs.len();
        let distinct = match &s.distinct {
            None | Some(sql::Distinct::All) => false,
            Some(sql::Distinct::Distinct) => true,
            Some(sql::Distinct::On(_)) => return Err(SqlError::unsupported("DISTINCT ON")),
        };

        // ORDER BY: select outputs first, then (without DISTINCT) input expressions.
        let mut keys = Vec::new();
        for o in order {
            let target = match &o.expr {
                sql::Expr::Value(v) if matches!(v.value, sql::Value::Number(..)) => {
                    let n = literal_usize(&o.expr, "ORDER BY position")?;
                    if n == 0 || n > visible {
                        return Err(SqlError::plan(format!(
                            "ORDER BY position {n} is not in the select list"
                        )));
                    }
                    Some(n - 1)
                }
                sql::Expr::Identifier(id) => {
                    let name = ident_name(id);
                    let by_alias = items
                        .iter()
                        .position(|(_, a, _)| a.as_deref() == Some(name.as_str()));
                    by_alias
                        .or_else(|| {
                            let in_scope = scope.resolve(None, &name).is_ok();
                            (!in_scope || aggregated)
                                .then(|| {
                                    out_cols
                                        .iter()
                                        .position(|c| c.name.eq_ignore_ascii_case(&name))
                                })
                                .flatten()
                        })
                        .or_else(|| {
                            let text = canon(&o.expr);
                            items
                                .iter()
                                .position(|(ie, _, _)| ie.is_some_and(|ie| canon(ie) == text))
                        })
                }
                e => {
                    let text = canon(e);
                    items
                        .iter()
                        .position(|(ie, _, _)| ie.is_some_and(|ie| canon(ie) == text))
                }
            };
            let idx = if let Some(i) = target {
                i
            } else {
                if distinct {
                    return Err(SqlError::plan(format!("with SELECT DISTINCT, ORDER BY expressions must appear in the select list: {}", o.expr)));
                }
                let bound = if aggregated {
                    self.post_agg_expr(&o.expr, &scope, &repl)?
                } else {
                    self.expr(&o.expr, &scope, &repl)?
                };
                out_cols.push(ScopeCol {
                    qualifier: None,
                    name: format!("__order{}", keys.len()),
                    ty: bound.data_type(),
                    nullable: true,
                    origin: None,
                    hidden: true,
                });
                exprs.push(bound);
                exprs.len() - 1
            };
            let c = &out_cols[idx];
            keys.push(sort_key(
                Expr::col(idx, c.name.clone(), c.ty.clone()),
                &o.options,
            ));
        }
        let proj_scope = Scope { cols: out_cols };
        plan = Plan::Project {
            input: Box::new(plan),
            exprs,
            schema: proj_scope.schema(),
        };
        if distinct {
            plan = Plan::Distinct {
                input: Box::new(plan),
            };
        }
        if !keys.is_empty() {
            plan = Plan::Sort {
                input: Box::new(plan),
                keys,
                fetch: limit.map(|l| l + offset),
            };
        }
        if limit.is_some() || offset > 0 {
            plan = Plan::Limit {
                input: Box::new(plan),
                limit,
                offset,
            };
        }
        let mut final_scope = proj_scope;
        if final_scope.cols.len() > visible {
            final_scope.cols.truncate(visible);
            let exprs = (0..visible).map(|i| final_scope.column(i)).collect();
            plan = Plan::Project {
                input: Box::new(plan),
                exprs,
                schema: final_scope.schema(),
            };
        }
        Ok((plan, final_scope))
    }

    fn window_call(
        &mut self,
        f: &sql::Function,
        scope: &Scope,
        repl: &Replacements,
        aggregated: bool,
    ) -> Result<WindowCall, SqlError> {
        let name = object_name(&f.name).to_ascii_lowercase();
        let Some(sql::WindowType::WindowSpec(spec)) = &f.over else {
            return Err(SqlError::unsupported("named windows"));
        };
        if spec.window_frame.is_some() {
            return Err(SqlError::unsupported(
                "explicit window frames (the default frame is used)",
            ));
        }
        let bind = |b: &mut Self, e: &sql::Expr| {
            if aggregated {
                b.post_agg_expr(e, scope, repl)
            } else {
                b.expr(e, scope, repl)
            }
        };
        let partition = spec
            .partition_by
            .iter()
            .map(|e| bind(self, e))
            .collect::<Result<Vec<_>, _>>()?;
        let mut order = Vec::new();
        for o in &spec.order_by {
            order.push(sort_key(bind(self, &o.expr)?, &o.options));
        }
        let (args_ast, distinct, star) = func_args(f)?;
        if distinct {
            return Err(SqlError::unsupported("DISTINCT in window functions"));
        }
        let args = args_ast
            .iter()
            .map(|e| bind(self, e))
            .collect::<Result<Vec<_>, _>>()?;
        let (func, ty) = match name.as_str() {
            "row_number" => (WinFunc::RowNumber, DataType::Int64),
            "rank" => (WinFunc::Rank, DataType::Int64),
            "dense_rank" => (WinFunc::DenseRank, DataType::Int64),
            "lag" | "lead" => {
                let Some(first) = args.first() else {
                    return Err(SqlError::plan(format!("{name}() needs an argument")));
                };
                if args.len() > 1 && !matches!(args[1], Expr::Literal(Scalar::Int(_))) {
                    return Err(SqlError::plan(format!(
                        "the offset of {name}() must be an integer literal"
                    )));
                }
                (
                    if name == "lag" {
                        WinFunc::Lag
                    } else {
                        WinFunc::Lead
                    },
                    first.data_type(),
                )
            }
            other => match agg_func(other) {
                Some(a) => {
                    let t = match (a, args.first().map(Expr::data_type), star) {
                        (AggFunc::Count, _, _) => DataType::Int64,
                        (AggFunc::Avg, Some(_), _) => DataType::Float64,
                        (AggFunc::Sum, Some(DataType::Int64), _) => DataType::Int64,
                        (AggFunc::Sum, Some(_), _) => DataType::Float64,
                        (_, Some(t), _) => t,
                        (_, None, _) => {
                            return Err(SqlError::plan(format!("{other}() needs an argument")))
                        }
                    };
                    (WinFunc::Agg(a), t)
                }
                None => {
                    return Err(SqlError::UnknownFunction {
                        name: other.to_string(),
                        hint: suggest(
                            other,
                            [
                                "row_number",
                                "rank",
                                "dense_rank",
                                "lag",
                                "lead",
                                "sum",
                                "count",
                                "avg",
                                "min",
                                "max",
                            ],
                        ),
                    })
                }
            },
        };
        Ok(WindowCall {
            func,
            args,
            partition,
            order,
            ty,
        })
    }

    /// Bind an expression after aggregation: group keys and aggregates are
    /// replaced; any other column is an error.
    fn post_agg_expr(
        &mut self,
        e: &sql::Expr,
        scope: &Scope,
        repl: &Replacements,
    ) -> Result<Expr, SqlError> {
        if let Some(x) = repl.by_text.get(&canon(e)) {
            return Ok(x.clone());
        }
        match e {
            sql::Expr::Identifier(id) => {
                let name = ident_name(id);
                repl.by_text.get(&format!("#col:{name}")).cloned().ok_or_else(|| {
                    SqlError::plan(format!("column `{name}` must appear in GROUP BY or be used in an aggregate function"))
                })
            }
            sql::Expr::CompoundIdentifier(ids) => {
                let name = ident_name(ids.last().expect("compound identifiers have parts"));
                repl.by_text.get(&format!("#col:{name}")).cloned().ok_or_else(|| {
                    SqlError::plan(format!("column `{e}` must appear in GROUP BY or be used in an aggregate function"))
                })
            }
            _ => self.expr_with(e, scope, repl, true),
        }
    }

    fn expr(
        &mut self,
        e: &sql::Expr,
        scope: &Scope,
        repl: &Replacements,
    ) -> Result<Expr, SqlError> {
        self.expr_with(e, scope, repl, false)
    }

    #[allow(clippy::too_many_lines)]
    fn expr_with(
        &mut self,
        e: &sql::Expr,
        scope: &Scope,
        repl: &Replacements,
        post_agg: bool,
    ) -> Result<Expr, SqlError> {
        if let Some(x) = repl.by_text.get(&canon(e)) {
            return Ok(x.clone());
        }
        self.enter()?;
        let r = self.expr_inner(e, scope, repl, post_agg);
        self.leave();
        r
    }

    #[allow(clippy::too_many_lines)]
    fn expr_inner(
        &mut self,
        e: &sql::Expr,
        scope: &Scope,
        repl: &Replacements,
        post_agg: bool,
    ) -> Result<Expr, SqlError> {
        let sub = |b: &mut Self, x: &sql::Expr| {
            if post_agg {
                b.post_agg_expr(x, scope, repl)
            } else {
                b.expr_with(x, scope, repl, false)
            }
        };
        Ok(match e {
            sql::Expr::Identifier(id) => scope.column(scope.resolve(None, &ident_name(id))?),
            sql::Expr::CompoundIdentifier(ids) => match ids.as_slice() {
                [q, c] => scope.column(scope.resolve(Some(&ident_name(q)), &ident_name(c))?),
                [_, q, c] => scope.column(scope.resolve(Some(&ident_name(q)), &ident_name(c))?),
                _ => {
                    return Err(SqlError::UnknownColumn {
                        name: e.to_string(),
                        hint: String::new(),
                    })
                }
            },
            sql::Expr::Value(v) => Expr::Literal(match &v.value {
                sql::Value::Number(n, _) => number_literal(n)?,
                sql::Value::SingleQuotedString(s)
                | sql::Value::EscapedStringLiteral(s)
                | sql::Value::UnicodeStringLiteral(s) => Scalar::Str(s.clone()),
                sql::Value::Boolean(b) => Scalar::Bool(*b),
                sql::Value::Null => Scalar::Null,
                sql::Value::DoubleQuotedString(s) => {
                    return Err(SqlError::UnknownColumn {
                        name: s.clone(),
                        hint: String::new(),
                    })
                }
                other => return Err(SqlError::unsupported(format!("literal {other}"))),
            }),
            sql::Expr::TypedString(ts) => {
                let to = cast_type(&ts.data_type)?;
                let text = match &ts.value.value {
                    sql::Value::SingleQuotedString(s) => s.clone(),
                    other => other.to_string(),
                };
                Expr::Literal(super::expr::cast_scalar(Scalar::Str(text), &to)?)
            }
            sql::Expr::Nested(x) => sub(self, x)?,
            sql::Expr::UnaryOp { op, expr } => {
                let x = sub(self, expr)?;
                match op {
                    sql::UnaryOperator::Not => {
                        bool_type_check(&x, "NOT")?;
                        Expr::Not(Box::new(x))
                    }
                    sql::UnaryOperator::Minus => {
                        if let Expr::Literal(Scalar::Int(v)) = x {
                            Expr::Literal(Scalar::Int(-v))
                        } else if let Expr::Literal(Scalar::Float(v)) = x {
                            Expr::Literal(Scalar::Float(-v))
                        } else if is_numeric(&x.data_type()) {
                            Expr::Neg(Box::new(x))
                        } else {
                            return Err(SqlError::type_error(format!(
                                "cannot negate {}",
                                type_name(&x.data_type())
                            )));
                        }
                    }
                    sql::UnaryOperator::Plus => x,
                    other => return Err(SqlError::unsupported(format!("operator {other}"))),
                }
            }
            sql::Expr::BinaryOp { left, op, right }
                if matches!(
                    op,
                    sql::BinaryOperator::Arrow | sql::BinaryOperator::LongArrow
                ) && rotate_json_access(left, op, right).is_some() =>
            {
                let rotated = rotate_json_access(left, op, right).expect("checked");
                sub(self, &rotated)?
            }
            sql::Expr::BinaryOp { left, op, right } => {
                let l = sub(self, left)?;
                let r = sub(self, right)?;
                binary(op, l, r)?
            }
            sql::Expr::IsNull(x) => Expr::IsNull {
                expr: Box::new(sub(self, x)?),
                negated: false,
            },
            sql::Expr::IsNotNull(x) => Expr::IsNull {
                expr: Box::new(sub(self, x)?),
                negated: true,
            },
            sql::Expr::IsTrue(x)
            | sql::Expr::IsFalse(x)
            | sql::Expr::IsNotTrue(x)
            | sql::Expr::IsNotFalse(x) => {
                let v = sub(self, x)?;
                bool_type_check(&v, "IS TRUE/FALSE")?;
                let want = matches!(e, sql::Expr::IsTrue(_) | sql::Expr::IsNotTrue(_));
                let negated = matches!(e, sql::Expr::IsNotTrue(_) | sql::Expr::IsNotFalse(_));
                // coalesce(x = want, false), optionally negated.
                let cmp = Expr::Call {
                    func: Func::Coalesce,
                    args: vec![
                        Expr::Binary {
                            op: BinOp::Eq,
                            left: Box::new(v),
                            right: Box::new(Expr::Literal(Scalar::Bool(want))),
                            ty: DataType::Boolean,
                        },
                        Expr::Literal(Scalar::Bool(false)),
                    ],
                    ty: DataType::Boolean,
                };
                if negated {
                    Expr::Not(Box::new(cmp))
                } else {
                    cmp
                }
            }
            sql::Expr::IsDistinctFrom(..) | sql::Expr::IsNotDistinctFrom(..) => {
                return Err(SqlError::unsupported("IS [NOT] DISTINCT FROM"))
            }
            sql::Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let x = sub(self, expr)?;
                let lo = sub(self, low)?;
                let hi = sub(self, high)?;
                let both = Expr::Binary {
                    op: BinOp::And,
                    left: Box::new(binary(&sql::BinaryOperator::GtEq, x.clone(), lo)?),
                    right: Box::new(binary(&sql::BinaryOperator::LtEq, x, hi)?),
                    ty: DataType::Boolean,
                };
                if *negated {
                    Expr::Not(Box::new(both))
                } else {
                    both
                }
            }
            sql::Expr::Like {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            }
            | sql::Expr::ILike {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            } => {
                if *any || escape_char.is_some() {
                    return Err(SqlError::unsupported("LIKE ANY and ESCAPE"));
                }
                let x = sub(self, expr)?;
                let p = sub(self, pattern)?;
                for (what, v) in [("LIKE operand", &x), ("LIKE pattern", &p)] {
                    if !matches!(v.data_type(), DataType::Utf8 | DataType::Null) {
                        return Err(SqlError::type_error(format!(
                            "{what} must be TEXT, found {}",
                            type_name(&v.data_type())
                        )));
                    }
                }
                Expr::Like {
                    expr: Box::new(x),
                    pattern: Box::new(p),
                    negated: *negated,
                    case_insensitive: matches!(e, sql::Expr::ILike { .. }),
                }
            }
            sql::Expr::InList {
                expr,
                list,
                negated,
            } => {
                let x = sub(self, expr)?;
                let mut t = x.data_type();
                let mut items = Vec::with_capacity(list.len());
                for item in list {
                    let v = sub(self, item)?;
                    t = common_type(&t, &v.data_type()).ok_or_else(|| {
                        SqlError::type_error(format!(
                            "IN list mixes {} and {}",
                            type_name(&t),
                            type_name(&v.data_type())
                        ))
                    })?;
                    items.push(v);
                }
                let x = coerce(x, &t);
                let items = items.into_iter().map(|v| coerce(v, &t)).collect();
                Expr::InList {
                    expr: Box::new(x),
                    list: items,
                    negated: *negated,
                }
            }
            sql::Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => {
                let x = sub(self, expr)?;
                let (plan, sscope) = self.query(subquery)?;
                if sscope.cols.len() != 1 {
                    return Err(SqlError::plan(format!(
                        "the IN subquery returns {} columns; it must return one",
                        sscope.cols.len()
                    )));
                }
                let st = sscope.cols[0].ty.clone();
                let t = common_type(&x.data_type(), &st).ok_or_else(|| {
                    SqlError::type_error(format!(
                        "IN compares {} with {}",
                        type_name(&x.data_type()),
                        type_name(&st)
                    ))
                })?;
                let plan = if st == t {
                    plan
                } else {
                    let schema = make_schema(vec![(sscope.cols[0].name.clone(), t.clone(), true)]);
                    Plan::Project {
                        input: Box::new(plan),
                        exprs: vec![coerce(sscope.column(0), &t)],
                        schema,
                    }
                };
                Expr::InSubquery {
                    expr: Box::new(coerce(x, &t)),
                    plan: Box::new(plan),
                    negated: *negated,
                }
            }
            sql::Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                let op = operand.as_ref().map(|o| sub(self, o)).transpose()?;
                let mut whens = Vec::new();
                let mut t = DataType::Null;
                for cw in conditions {
                    let w = sub(self, &cw.condition)?;
                    let then = sub(self, &cw.result)?;
                    t = common_type(&t, &then.data_type()).ok_or_else(|| {
                        SqlError::type_error("CASE branches have different types")
                    })?;
                    whens.push((w, then));
                }
                let els = else_result.as_ref().map(|x| sub(self, x)).transpose()?;
                if let Some(x) = &els {
                    t = common_type(&t, &x.data_type()).ok_or_else(|| {
                        SqlError::type_error("CASE branches have different types")
                    })?;
                }
                let op = match op {
                    Some(o) => {
                        let mut ot = o.data_type();
                        for (w, _) in &whens {
                            ot = common_type(&ot, &w.data_type()).ok_or_else(|| {
                                SqlError::type_error("CASE operand and WHEN values differ in type")
                            })?;
                        }
                        whens = whens
                            .into_iter()
                            .map(|(w, r)| (coerce(w, &ot), r))
                            .collect();
                        Some(Box::new(coerce(o, &ot)))
                    }
                    None => {
                        for (w, _) in &whens {
                            bool_type_check(w, "WHEN")?;
                        }
                        None
                    }
                };
                let whens = whens.into_iter().map(|(w, r)| (w, coerce(r, &t))).collect();
                Expr::Case {
                    operand: op,
                    whens,
                    else_: els.map(|x| Box::new(coerce(x, &t))),
                    ty: t,
                }
            }
            sql::Expr::Cast {
                kind,
                expr,
                data_type,
                format,
                ..
            } => {
                if format.is_some() {
                    return Err(SqlError::unsupported("CAST … FORMAT"));
                }
                let _ = kind;
                let x = sub(self, expr)?;
                let to = cast_type(data_type)?;
                let cast = if let Expr::Literal(s) = &x {
                    Expr::Literal(super::expr::cast_scalar(s.clone(), &to)?)
                } else {
                    Expr::Cast {
                        expr: Box::new(x),
                        to,
                    }
                };
                // DATE is a TIMESTAMP at midnight UTC.
                if matches!(data_type, sql::DataType::Date) {
                    super::functions::typed_call(
                        Func::DateTrunc,
                        vec![Expr::Literal(Scalar::Str("day".into())), cast],
                    )?
                } else {
                    cast
                }
            }
            sql::Expr::Extract { field, expr, .. } => {
                let x = sub(self, expr)?;
                let x = coerce_ts(x)?;
                super::functions::typed_call(
                    Func::Extract,
                    vec![
                        Expr::Literal(Scalar::Str(field.to_string().to_ascii_lowercase())),
                        x,
                    ],
                )?
            }
            sql::Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![sub(self, expr)?];
                args.push(match substring_from {
                    Some(f) => sub(self, f)?,
                    None => Expr::Literal(Scalar::Int(1)),
                });
                if let Some(f) = substring_for {
                    args.push(sub(self, f)?);
                }
                super::functions::typed_call(Func::Substr, args)?
            }
            sql::Expr::Trim {
                trim_where,
                trim_what,
                expr,
                trim_characters,
            } => {
                if trim_where.is_some() || trim_what.is_some() || trim_characters.is_some() {
                    return Err(SqlError::unsupported(
                        "TRIM with LEADING/TRAILING/characters",
                    ));
                }
                super::functions::typed_call(Func::Trim, vec![sub(self, expr)?])?
            }
            sql::Expr::Function(f) => {
                if f.over.is_some() {
                    return Err(SqlError::plan(format!(
                        "window function {f} is not allowed here"
                    )));
                }
                if agg_name(f).is_some() {
                    return Err(SqlError::plan(format!("aggregate {f} is not allowed here")));
                }
                let name = object_name(&f.name).to_ascii_lowercase();
                let (args_ast, distinct, star) = func_args(f)?;
                if distinct || star || f.filter.is_some() {
                    return Err(SqlError::plan(format!(
                        "{name}() does not take DISTINCT, * or FILTER"
                    )));
                }
                let mut args = Vec::with_capacity(args_ast.len());
                for a in args_ast {
                    args.push(sub(self, a)?);
                }
                super::functions::bind_function(&name, args)?
            }
            sql::Expr::Subquery(_) | sql::Expr::Exists { .. } => {
                return Err(SqlError::unsupported(
                    "scalar and EXISTS subqueries (use IN or a join)",
                ))
            }
            sql::Expr::Interval(_) => return Err(SqlError::unsupported("INTERVAL")),
            other => return Err(SqlError::unsupported(format!("expression `{other}`"))),
        })
    }
}

fn coerce_ts(x: Expr) -> Result<Expr, SqlError> {
    match x.data_type() {
        DataType::Timestamp(..) => Ok(x),
        DataType::Utf8 | DataType::Null => Ok(Expr::Cast {
            expr: Box::new(x),
            to: ts_type(),
        }),
        other => Err(SqlError::type_error(format!(
            "expected a TIMESTAMP, found {}",
            type_name(&other)
        ))),
    }
}

/// Bind a binary operator with type coercion.
fn binary(op: &sql::BinaryOperator, l: Expr, r: Expr) -> Result<Expr, SqlError> {
    use sql::BinaryOperator as B;
    let op = match op {
        B::Eq => BinOp::Eq,
        B::NotEq => BinOp::NotEq,
        B::Lt => BinOp::Lt,
        B::LtEq => BinOp::LtEq,
        B::Gt => BinOp::Gt,
        B::GtEq => BinOp::GtEq,
        B::And => BinOp::And,
        B::Or => BinOp::Or,
        B::Plus => BinOp::Plus,
        B::Minus => BinOp::Minus,
        B::Multiply => BinOp::Mul,
        B::Divide => BinOp::Div,
        B::Modulo => BinOp::Mod,
        B::StringConcat => BinOp::Concat,
        B::Arrow => return super::functions::bind_function("->", vec![l, r]),
        B::LongArrow => return super::functions::bind_function("->>", vec![l, r]),
        other => return Err(SqlError::unsupported(format!("operator {other}"))),
    };
    let (lt, rt) = (l.data_type(), r.data_type());
    match op {
        BinOp::And | BinOp::Or => {
            bool_type_check(&l, op.symbol_name())?;
            bool_type_check(&r, op.symbol_name())?;
            Ok(Expr::Binary {
                op,
                left: Box::new(l),
                right: Box::new(r),
                ty: DataType::Boolean,
            })
        }
        o if o.is_comparison() => {
            // A string literal compared with a number or boolean takes that
            // type, as in DuckDB: `step_id < '10'` compares numbers.
            let peer_typed = |e: Expr, peer: &DataType| -> Result<Expr, SqlError> {
                match e {
                    Expr::Literal(s @ Scalar::Str(_))
                        if matches!(
                            peer,
                            DataType::Int64 | DataType::Float64 | DataType::Boolean
                        ) =>
                    {
                        Ok(Expr::Literal(super::expr::cast_scalar(s, peer)?))
                    }
                    e => Ok(e),
                }
            };
            let l = peer_typed(l, &rt)?;
            let r = peer_typed(r, &lt)?;
            let (lt, rt) = (l.data_type(), r.data_type());
            let t = common_type(&lt, &rt).ok_or_else(|| {
                SqlError::type_error(format!(
                    "cannot compare {} with {}",
                    type_name(&lt),
                    type_name(&rt)
                ))
            })?;
            Ok(Expr::Binary {
                op,
                left: Box::new(coerce(l, &t)),
                right: Box::new(coerce(r, &t)),
                ty: DataType::Boolean,
            })
        }
        BinOp::Concat => Ok(Expr::Binary {
            op,
            left: Box::new(coerce(l, &DataType::Utf8)),
            right: Box::new(coerce(r, &DataType::Utf8)),
            ty: DataType::Utf8,
        }),
        _ => {
            let ok = |t: &DataType| is_numeric(t) || *t == DataType::Null;
            if !ok(&lt) || !ok(&rt) {
                return Err(SqlError::type_error(format!(
                    "arithmetic on {} and {}",
                    type_name(&lt),
                    type_name(&rt)
                )));
            }
            let mut t = common_type(&lt, &rt).unwrap_or(DataType::Float64);
            if t == DataType::Null {
                t = DataType::Int64;
            }
            if op == BinOp::Div {
                t = DataType::Float64;
            }
            Ok(Expr::Binary {
                op,
                left: Box::new(coerce(l, &t)),
                right: Box::new(coerce(r, &t)),
                ty: t,
            })
        }
    }
}

impl BinOp {
    fn symbol_name(self) -> &'static str {
        match self {
            BinOp::And => "AND",
            BinOp::Or => "OR",
            _ => "operator",
        }
    }
}

fn sort_key(expr: Expr, o: &sql::OrderByOptions) -> SortKey {
    let asc = o.asc.unwrap_or(true);
    // Default like PostgreSQL and DuckDB: NULLs last ascending… DuckDB puts NULLs last in both.
    let nulls_first = o.nulls_first.unwrap_or(false);
    SortKey {
        expr,
        asc,
        nulls_first,
    }
}

/// A canonical text for matching AST nodes (case-folded identifiers).
fn canon(e: &sql::Expr) -> String {
    match e {
        sql::Expr::Nested(x) => canon(x),
        sql::Expr::Function(f) => canon_fn(f),
        other => other.to_string().to_ascii_lowercase(),
    }
}

fn canon_fn(f: &sql::Function) -> String {
    f.to_string().to_ascii_lowercase()
}

fn contains_agg(e: &sql::Expr) -> bool {
    let mut v = Vec::new();
    collect_aggs(e, &mut v);
    !v.is_empty()
}

fn walk<'e>(e: &'e sql::Expr, f: &mut dyn FnMut(&'e sql::Expr) -> bool) {
    if !f(e) {
        return;
    }
    use sql::Expr as E;
    match e {
        E::BinaryOp { left, right, .. } => {
            walk(left, f);
            walk(right, f);
        }
        E::UnaryOp { expr, .. }
        | E::Nested(expr)
        | E::IsNull(expr)
        | E::IsNotNull(expr)
        | E::IsTrue(expr)
        | E::IsFalse(expr)
        | E::IsNotTrue(expr)
        | E::IsNotFalse(expr)
        | E::Cast { expr, .. }
        | E::Extract { expr, .. } => walk(expr, f),
        E::Between {
            expr, low, high, ..
        } => {
            walk(expr, f);
            walk(low, f);
            walk(high, f);
        }
        E::Like { expr, pattern, .. } | E::ILike { expr, pattern, .. } => {
            walk(expr, f);
            walk(pattern, f);
        }
        E::InList { expr, list, .. } => {
            walk(expr, f);
            for x in list {
                walk(x, f);
            }
        }
        E::InSubquery { expr, .. } => walk(expr, f),
        E::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            if let Some(o) = operand {
                walk(o, f);
            }
            for c in conditions {
                walk(&c.condition, f);
                walk(&c.result, f);
            }
            if let Some(x) = else_result {
                walk(x, f);
            }
        }
        E::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => {
            walk(expr, f);
            if let Some(x) = substring_from {
                walk(x, f);
            }
            if let Some(x) = substring_for {
                walk(x, f);
            }
        }
        E::Trim { expr, .. } => walk(expr, f),
        E::Function(func) => {
            if let sql::FunctionArguments::List(l) = &func.args {
                for a in &l.args {
                    if let sql::FunctionArg::Unnamed(sql::FunctionArgExpr::Expr(x)) = a {
                        walk(x, f);
                    }
                }
            }
            if let Some(sql::WindowType::WindowSpec(spec)) = &func.over {
                for p in &spec.partition_by {
                    walk(p, f);
                }
                for o in &spec.order_by {
                    walk(&o.expr, f);
                }
            }
        }
        _ => {}
    }
}

fn collect_aggs<'e>(e: &'e sql::Expr, out: &mut Vec<&'e sql::Function>) {
    walk(e, &mut |x| {
        if let sql::Expr::Function(f) = x {
            if agg_name(f).is_some() {
                out.push(f);
                return false;
            }
        }
        true
    });
}

fn collect_windows<'e>(e: &'e sql::Expr, out: &mut Vec<&'e sql::Function>) {
    walk(e, &mut |x| {
        if let sql::Expr::Function(f) = x {
            if f.over.is_some() {
                out.push(f);
                return false;
            }
        }
        true
    });
}

/// Split a join predicate into equality keys (left side column expr = right
/// side expr) and a residual.
fn split_equi(pred: Expr, left_n: usize) -> (Vec<(Expr, Expr)>, Option<Expr>) {
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

fn coerce_keys(
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
enum JoinFix {
    On,
    Where,
}

const ID_COLUMNS: &[&str] = &[
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
fn check_source_local(
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
fn check_comma_joins(
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
fn corrected_sql(
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

fn fix_set_expr(
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

/// sqlparser ranks `->`/`->>` below comparisons, so `doc->>'k' = 'v'` arrives
/// as `doc ->> ('k' = 'v')`. Rebuild the tree the way PostgreSQL and DuckDB
/// read it, with the JSON operator binding first. `None` when `right` needs no
/// change.
fn rotate_json_access(
    left: &sql::Expr,
    op: &sql::BinaryOperator,
    right: &sql::Expr,
) -> Option<sql::Expr> {
    use sql::BinaryOperator as B;
    let access = |inner: &sql::Expr| -> Box<sql::Expr> {
        Box::new(
            rotate_json_access(left, op, inner).unwrap_or_else(|| sql::Expr::BinaryOp {
                left: Box::new(left.clone()),
                op: op.clone(),
                right: Box::new(inner.clone()),
            }),
        )
    };
    let mut r = right.clone();
    match &mut r {
        sql::Expr::Like { expr, .. }
        | sql::Expr::ILike { expr, .. }
        | sql::Expr::InList { expr, .. }
        | sql::Expr::InSubquery { expr, .. }
        | sql::Expr::Between { expr, .. } => *expr = access(expr),
        sql::Expr::IsNull(y) | sql::Expr::IsNotNull(y) => *y = access(y),
        sql::Expr::BinaryOp {
            left: y,
            op: B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq | B::StringConcat,
            ..
        } => {
            *y = access(y);
        }
        _ => return None,
    }
    Some(r)
}
