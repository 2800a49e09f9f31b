//! Binding scalar expressions: names, operators, casts and functions.

use super::{
    agg_name, bool_type_check, cast_type, coerce, common_type, func_args, ident_name, is_numeric,
    make_schema, number_literal, object_name, sql, ts_type, type_name, BinOp, Binder, DataType,
    Expr, Func, Plan, Replacements, Scalar, Scope, SortKey, SqlError,
};

impl Binder<'_> {
    pub(super) fn expr(
        &mut self,
        e: &sql::Expr,
        scope: &Scope,
        repl: &Replacements,
    ) -> Result<Expr, SqlError> {
        self.expr_with(e, scope, repl, false)
    }

    #[allow(clippy::too_many_lines)]
    pub(super) fn expr_with(
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
    pub(super) fn expr_inner(
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
                Expr::Literal(crate::sql::expr::cast_scalar(Scalar::Str(text), &to)?)
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
                    Expr::Literal(crate::sql::expr::cast_scalar(s.clone(), &to)?)
                } else {
                    Expr::Cast {
                        expr: Box::new(x),
                        to,
                    }
                };
                // DATE is a TIMESTAMP at midnight UTC.
                if matches!(data_type, sql::DataType::Date) {
                    crate::sql::functions::typed_call(
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
                crate::sql::functions::typed_call(
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
                crate::sql::functions::typed_call(Func::Substr, args)?
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
                crate::sql::functions::typed_call(Func::Trim, vec![sub(self, expr)?])?
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
                crate::sql::functions::bind_function(&name, args)?
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

pub(super) fn coerce_ts(x: Expr) -> Result<Expr, SqlError> {
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
pub(super) fn binary(op: &sql::BinaryOperator, l: Expr, r: Expr) -> Result<Expr, SqlError> {
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
        B::Arrow => return crate::sql::functions::bind_function("->", vec![l, r]),
        B::LongArrow => return crate::sql::functions::bind_function("->>", vec![l, r]),
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
                        Ok(Expr::Literal(crate::sql::expr::cast_scalar(s, peer)?))
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
    pub(super) fn symbol_name(self) -> &'static str {
        match self {
            BinOp::And => "AND",
            BinOp::Or => "OR",
            _ => "operator",
        }
    }
}

pub(super) fn sort_key(expr: Expr, o: &sql::OrderByOptions) -> SortKey {
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
pub(super) fn canon(e: &sql::Expr) -> String {
    match e {
        sql::Expr::Nested(x) => canon(x),
        sql::Expr::Function(f) => canon_fn(f),
        other => other.to_string().to_ascii_lowercase(),
    }
}

pub(super) fn canon_fn(f: &sql::Function) -> String {
    f.to_string().to_ascii_lowercase()
}

pub(super) fn contains_agg(e: &sql::Expr) -> bool {
    let mut v = Vec::new();
    collect_aggs(e, &mut v);
    !v.is_empty()
}

pub(super) fn walk<'e>(e: &'e sql::Expr, f: &mut dyn FnMut(&'e sql::Expr) -> bool) {
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

pub(super) fn collect_aggs<'e>(e: &'e sql::Expr, out: &mut Vec<&'e sql::Function>) {
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

pub(super) fn collect_windows<'e>(e: &'e sql::Expr, out: &mut Vec<&'e sql::Function>) {
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
