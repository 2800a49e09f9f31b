//! Binding one SELECT: grouping, aggregates, windows and HAVING.

use super::{
    agg_func, agg_name, bool_type_check, canon, canon_fn, check_comma_joins, collect_aggs,
    collect_windows, contains_agg, func_args, ident_name, is_numeric, literal_usize, make_schema,
    object_name, order_and_limit, sort_key, sql, suggest, type_name, AggCall, AggFunc, Binder,
    DataType, Expr, Plan, Replacements, Scalar, Scope, ScopeCol, SqlError, WinFunc, WindowCall,
};

impl Binder<'_> {
    #[allow(clippy::too_many_lines)]
    pub(super) fn select(
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
        plan = order_and_limit(plan, keys, limit, offset);
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

    pub(super) fn window_call(
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
    pub(super) fn post_agg_expr(
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
}
