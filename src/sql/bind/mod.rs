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

mod expression;
mod from;
mod select;

use expression::{canon, canon_fn, collect_aggs, collect_windows, contains_agg, sort_key};
use from::check_comma_joins;

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
        plan: Plan,
        scope: Scope,
        order: &[&sql::OrderByExpr],
        limit: Option<usize>,
        offset: usize,
    ) -> Result<(Plan, Scope), SqlError> {
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
        Ok((order_and_limit(plan, keys, limit, offset), scope))
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
}

/// `plan` sorted by `keys` (none: left in its order), then cut to `limit`
/// rows after `offset`. The sort keeps only the rows the limit can reach.
fn order_and_limit(plan: Plan, keys: Vec<SortKey>, limit: Option<usize>, offset: usize) -> Plan {
    let mut plan = plan;
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
    plan
}
