//! The logical plan and bound expressions. `Display` prints the plan tree
//! (what `EXPLAIN` shows).

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::value::{type_name, Scalar};

/// A bound scalar expression over the columns of its input.
#[derive(Debug, Clone)]
pub enum Expr {
    /// Input column by position.
    Column {
        /// Position in the input schema.
        index: usize,
        /// Display name.
        name: String,
        /// Type.
        ty: DataType,
    },
    /// A constant.
    Literal(Scalar),
    /// `left op right`.
    Binary {
        /// Operator.
        op: BinOp,
        /// Left operand.
        left: Box<Expr>,
        /// Right operand.
        right: Box<Expr>,
        /// Result type.
        ty: DataType,
    },
    /// `NOT e`.
    Not(Box<Expr>),
    /// `-e`.
    Neg(Box<Expr>),
    /// `e IS [NOT] NULL`.
    IsNull {
        /// Operand.
        expr: Box<Expr>,
        /// IS NOT NULL.
        negated: bool,
    },
    /// `e [NOT] [I]LIKE pattern`.
    Like {
        /// Operand.
        expr: Box<Expr>,
        /// Pattern.
        pattern: Box<Expr>,
        /// NOT LIKE.
        negated: bool,
        /// ILIKE.
        case_insensitive: bool,
    },
    /// `e [NOT] IN (list)`.
    InList {
        /// Operand.
        expr: Box<Expr>,
        /// Candidates (same type as the operand).
        list: Vec<Expr>,
        /// NOT IN.
        negated: bool,
    },
    /// `e [NOT] IN (subquery)` (uncorrelated).
    InSubquery {
        /// Operand.
        expr: Box<Expr>,
        /// The subquery (one column).
        plan: Box<Plan>,
        /// NOT IN.
        negated: bool,
    },
    /// `e [NOT] IN (values)`: a subquery's result, materialised before execution.
    InValues {
        /// Operand.
        expr: Box<Expr>,
        /// The values.
        values: arrow::array::ArrayRef,
        /// NOT IN.
        negated: bool,
    },
    /// `CASE [operand] WHEN … THEN … [ELSE …] END`.
    Case {
        /// Operand of the simple form.
        operand: Option<Box<Expr>>,
        /// (condition or value, result) pairs.
        whens: Vec<(Expr, Expr)>,
        /// ELSE.
        else_: Option<Box<Expr>>,
        /// Result type.
        ty: DataType,
    },
    /// `CAST(e AS t)`.
    Cast {
        /// Operand.
        expr: Box<Expr>,
        /// Target type.
        to: DataType,
    },
    /// A scalar function.
    Call {
        /// Function.
        func: Func,
        /// Arguments.
        args: Vec<Expr>,
        /// Result type.
        ty: DataType,
    },
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `=`
    Eq,
    /// `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
    /// `AND`
    And,
    /// `OR`
    Or,
    /// `+`
    Plus,
    /// `-`
    Minus,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
    /// `||`
    Concat,
}

impl BinOp {
    fn symbol(self) -> &'static str {
        match self {
            BinOp::Eq => "=",
            BinOp::NotEq => "<>",
            BinOp::Lt => "<",
            BinOp::LtEq => "<=",
            BinOp::Gt => ">",
            BinOp::GtEq => ">=",
            BinOp::And => "AND",
            BinOp::Or => "OR",
            BinOp::Plus => "+",
            BinOp::Minus => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Concat => "||",
        }
    }

    /// True for comparisons.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::NotEq | BinOp::Lt | BinOp::LtEq | BinOp::Gt | BinOp::GtEq
        )
    }
}

/// Scalar functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    /// lower(text)
    Lower,
    /// upper(text)
    Upper,
    /// length(text) in characters
    Length,
    /// substr(text, start [, len]) (1-based)
    Substr,
    /// trim(text)
    Trim,
    /// coalesce(a, b, …)
    Coalesce,
    /// nullif(a, b)
    NullIf,
    /// abs(n)
    Abs,
    /// round(n [, digits])
    Round,
    /// date_trunc(unit, ts)
    DateTrunc,
    /// extract(field FROM ts) / date_part(field, ts)
    Extract,
    /// json_extract(json, path) → JSON text
    JsonExtract,
    /// json_extract_string(json, path) → text
    JsonExtractString,
    /// `json -> key` (JSON)
    JsonArrow,
    /// `json ->> key` (text)
    JsonLongArrow,
    /// concat(a, b, …)
    Concat,
    /// replace(text, from, to)
    Replace,
    /// starts_with(text, prefix)
    StartsWith,
    /// contains(text, needle)
    Contains,
}

impl Func {
    /// SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Func::Lower => "lower",
            Func::Upper => "upper",
            Func::Length => "length",
            Func::Substr => "substr",
            Func::Trim => "trim",
            Func::Coalesce => "coalesce",
            Func::NullIf => "nullif",
            Func::Abs => "abs",
            Func::Round => "round",
            Func::DateTrunc => "date_trunc",
            Func::Extract => "extract",
            Func::JsonExtract => "json_extract",
            Func::JsonExtractString => "json_extract_string",
            Func::JsonArrow => "->",
            Func::JsonLongArrow => "->>",
            Func::Concat => "concat",
            Func::Replace => "replace",
            Func::StartsWith => "starts_with",
            Func::Contains => "contains",
        }
    }
}

impl Expr {
    /// The result type.
    pub fn data_type(&self) -> DataType {
        match self {
            Expr::Column { ty, .. }
            | Expr::Binary { ty, .. }
            | Expr::Case { ty, .. }
            | Expr::Call { ty, .. } => ty.clone(),
            Expr::Literal(s) => s.data_type(),
            Expr::Not(_)
            | Expr::IsNull { .. }
            | Expr::Like { .. }
            | Expr::InList { .. }
            | Expr::InSubquery { .. }
            | Expr::InValues { .. } => DataType::Boolean,
            Expr::Neg(e) => e.data_type(),
            Expr::Cast { to, .. } => to.clone(),
        }
    }

    /// A column reference.
    pub fn col(index: usize, name: impl Into<String>, ty: DataType) -> Expr {
        Expr::Column {
            index,
            name: name.into(),
            ty,
        }
    }

    /// Visit direct children.
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::Column { .. } | Expr::Literal(_) => vec![],
            Expr::Binary { left, right, .. } => vec![left, right],
            Expr::Not(e)
            | Expr::Neg(e)
            | Expr::IsNull { expr: e, .. }
            | Expr::Cast { expr: e, .. } => vec![e],
            Expr::Like { expr, pattern, .. } => vec![expr, pattern],
            Expr::InList { expr, list, .. } => {
                std::iter::once(&**expr).chain(list.iter()).collect()
            }
            Expr::InSubquery { expr, .. } | Expr::InValues { expr, .. } => vec![expr],
            Expr::Case {
                operand,
                whens,
                else_,
                ..
            } => {
                let mut v: Vec<&Expr> = operand.iter().map(|b| &**b).collect();
                for (w, t) in whens {
                    v.push(w);
                    v.push(t);
                }
                v.extend(else_.iter().map(|b| &**b));
                v
            }
            Expr::Call { args, .. } => args.iter().collect(),
        }
    }

    /// Mutable direct children.
    pub fn children_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Expr::Column { .. } | Expr::Literal(_) => vec![],
            Expr::Binary { left, right, .. } => vec![left, right],
            Expr::Not(e)
            | Expr::Neg(e)
            | Expr::IsNull { expr: e, .. }
            | Expr::Cast { expr: e, .. } => vec![e],
            Expr::Like { expr, pattern, .. } => vec![expr, pattern],
            Expr::InList { expr, list, .. } => std::iter::once(&mut **expr)
                .chain(list.iter_mut())
                .collect(),
            Expr::InSubquery { expr, .. } | Expr::InValues { expr, .. } => vec![expr],
            Expr::Case {
                operand,
                whens,
                else_,
                ..
            } => {
                let mut v: Vec<&mut Expr> = operand.iter_mut().map(|b| &mut **b).collect();
                for (w, t) in whens {
                    v.push(w);
                    v.push(t);
                }
                v.extend(else_.iter_mut().map(|b| &mut **b));
                v
            }
            Expr::Call { args, .. } => args.iter_mut().collect(),
        }
    }

    /// Every column index the expression reads.
    pub fn columns(&self, out: &mut Vec<usize>) {
        if let Expr::Column { index, .. } = self {
            out.push(*index);
        }
        for c in self.children() {
            c.columns(out);
        }
    }

    /// Rewrite column indexes with `f`.
    pub fn remap(&mut self, f: &dyn Fn(usize) -> usize) {
        if let Expr::Column { index, .. } = self {
            *index = f(*index);
        }
        for c in self.children_mut() {
            c.remap(f);
        }
    }

    /// True when the expression has no column references (and no subquery).
    pub fn is_constant(&self) -> bool {
        !matches!(self, Expr::Column { .. } | Expr::InSubquery { .. })
            && self.children().iter().all(|c| c.is_constant())
    }

    /// Split a conjunction into its terms.
    pub fn conjuncts(self) -> Vec<Expr> {
        match self {
            Expr::Binary {
                op: BinOp::And,
                left,
                right,
                ..
            } => {
                let mut v = left.conjuncts();
                v.extend(right.conjuncts());
                v
            }
            other => vec![other],
        }
    }

    /// Join terms with AND (None for no terms).
    pub fn and_all(mut terms: Vec<Expr>) -> Option<Expr> {
        let first = terms.pop()?;
        Some(terms.into_iter().rev().fold(first, |acc, t| Expr::Binary {
            op: BinOp::And,
            left: Box::new(t),
            right: Box::new(acc),
            ty: DataType::Boolean,
        }))
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Column { name, .. } => f.write_str(name),
            Expr::Literal(s) => write!(f, "{s}"),
            Expr::Binary {
                op, left, right, ..
            } => write!(f, "({left} {} {right})", op.symbol()),
            Expr::Not(e) => write!(f, "(NOT {e})"),
            Expr::Neg(e) => write!(f, "(-{e})"),
            Expr::IsNull { expr, negated } => {
                write!(f, "({expr} IS {}NULL)", if *negated { "NOT " } else { "" })
            }
            Expr::Like {
                expr,
                pattern,
                negated,
                case_insensitive,
            } => write!(
                f,
                "({expr} {}{} {pattern})",
                if *negated { "NOT " } else { "" },
                if *case_insensitive { "ILIKE" } else { "LIKE" }
            ),
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                write!(f, "({expr} {}IN (", if *negated { "NOT " } else { "" })?;
                for (i, e) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str("))")
            }
            Expr::InSubquery { expr, negated, .. } => {
                write!(
                    f,
                    "({expr} {}IN (<subquery>))",
                    if *negated { "NOT " } else { "" }
                )
            }
            Expr::InValues {
                expr,
                values,
                negated,
            } => {
                write!(
                    f,
                    "({expr} {}IN (<{} values>))",
                    if *negated { "NOT " } else { "" },
                    values.len()
                )
            }
            Expr::Case {
                operand,
                whens,
                else_,
                ..
            } => {
                f.write_str("CASE")?;
                if let Some(o) = operand {
                    write!(f, " {o}")?;
                }
                for (w, t) in whens {
                    write!(f, " WHEN {w} THEN {t}")?;
                }
                if let Some(e) = else_ {
                    write!(f, " ELSE {e}")?;
                }
                f.write_str(" END")
            }
            Expr::Cast { expr, to } => write!(f, "CAST({expr} AS {})", type_name(to)),
            Expr::Call {
                func: Func::JsonArrow | Func::JsonLongArrow,
                args,
                ..
            } if args.len() == 2 => {
                let op = if matches!(
                    self,
                    Expr::Call {
                        func: Func::JsonArrow,
                        ..
                    }
                ) {
                    "->"
                } else {
                    "->>"
                };
                write!(f, "({} {op} {})", args[0], args[1])
            }
            Expr::Call { func, args, .. } => {
                write!(f, "{}(", func.name())?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// Aggregate functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFunc {
    /// COUNT
    Count,
    /// SUM
    Sum,
    /// AVG
    Avg,
    /// MIN
    Min,
    /// MAX
    Max,
}

impl AggFunc {
    /// SQL name.
    pub fn name(self) -> &'static str {
        match self {
            AggFunc::Count => "count",
            AggFunc::Sum => "sum",
            AggFunc::Avg => "avg",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
        }
    }
}

/// One aggregate of an Aggregate node.
#[derive(Debug, Clone)]
pub struct AggCall {
    /// Function.
    pub func: AggFunc,
    /// Argument (`None` for COUNT(*)).
    pub arg: Option<Expr>,
    /// DISTINCT.
    pub distinct: bool,
    /// Output type.
    pub ty: DataType,
}

impl fmt::Display for AggCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = if self.distinct { "DISTINCT " } else { "" };
        match &self.arg {
            Some(a) => write!(f, "{}({d}{a})", self.func.name()),
            None => write!(f, "{}(*)", self.func.name()),
        }
    }
}

/// Window functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WinFunc {
    /// ROW_NUMBER()
    RowNumber,
    /// RANK()
    Rank,
    /// DENSE_RANK()
    DenseRank,
    /// LAG(e [, offset [, default]])
    Lag,
    /// LEAD(e [, offset [, default]])
    Lead,
    /// An aggregate over the window frame.
    Agg(AggFunc),
}

/// A sort key.
#[derive(Debug, Clone)]
pub struct SortKey {
    /// Expression over the input.
    pub expr: Expr,
    /// Ascending.
    pub asc: bool,
    /// NULLs before other values.
    pub nulls_first: bool,
}

impl fmt::Display for SortKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} NULLS {}",
            self.expr,
            if self.asc { "ASC" } else { "DESC" },
            if self.nulls_first { "FIRST" } else { "LAST" }
        )
    }
}

/// One window function of a Window node.
#[derive(Debug, Clone)]
pub struct WindowCall {
    /// Function.
    pub func: WinFunc,
    /// Arguments.
    pub args: Vec<Expr>,
    /// PARTITION BY.
    pub partition: Vec<Expr>,
    /// ORDER BY.
    pub order: Vec<SortKey>,
    /// Output type.
    pub ty: DataType,
}

/// Join kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// INNER JOIN
    Inner,
    /// LEFT [OUTER] JOIN
    Left,
}

/// A logical plan node.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Read a relation of a mounted Dataset.
    Scan {
        /// Mount (SQL schema) name.
        dataset: String,
        /// Relation name.
        relation: String,
        /// The relation's full schema.
        table_schema: SchemaRef,
        /// Columns read, as indexes into `table_schema`; the output schema.
        columns: Vec<usize>,
        /// Predicate over the output columns, applied while scanning.
        filter: Option<Expr>,
    },
    /// Literal rows.
    Values {
        /// Output schema.
        schema: SchemaRef,
        /// Rows.
        rows: Vec<Vec<Scalar>>,
    },
    /// Keep rows where the predicate is true.
    Filter {
        /// Input.
        input: Box<Plan>,
        /// Predicate.
        predicate: Expr,
    },
    /// Compute expressions.
    Project {
        /// Input.
        input: Box<Plan>,
        /// One per output column.
        exprs: Vec<Expr>,
        /// Output schema.
        schema: SchemaRef,
    },
    /// GROUP BY and aggregates: output is the group columns then the aggregates.
    Aggregate {
        /// Input.
        input: Box<Plan>,
        /// Grouping expressions.
        group: Vec<Expr>,
        /// Aggregates.
        aggs: Vec<AggCall>,
        /// Output schema.
        schema: SchemaRef,
    },
    /// Window functions, appended as columns.
    Window {
        /// Input.
        input: Box<Plan>,
        /// Functions.
        calls: Vec<WindowCall>,
        /// Output schema.
        schema: SchemaRef,
    },
    /// ORDER BY.
    Sort {
        /// Input.
        input: Box<Plan>,
        /// Keys.
        keys: Vec<SortKey>,
        /// Only this many rows are needed (from a LIMIT above).
        fetch: Option<usize>,
    },
    /// LIMIT / OFFSET.
    Limit {
        /// Input.
        input: Box<Plan>,
        /// LIMIT.
        limit: Option<usize>,
        /// OFFSET.
        offset: usize,
    },
    /// SELECT DISTINCT.
    Distinct {
        /// Input.
        input: Box<Plan>,
    },
    /// Hash join on equality keys, with an optional residual predicate.
    Join {
        /// Left input.
        left: Box<Plan>,
        /// Right input.
        right: Box<Plan>,
        /// Kind.
        kind: JoinKind,
        /// (left expr, right expr) equality keys.
        on: Vec<(Expr, Expr)>,
        /// Residual predicate over the joined columns.
        filter: Option<Expr>,
        /// Output schema (left columns then right columns).
        schema: SchemaRef,
    },
    /// UNION ALL.
    Union {
        /// Inputs.
        inputs: Vec<Plan>,
        /// Output schema.
        schema: SchemaRef,
    },
}

impl Plan {
    /// The output schema.
    pub fn schema(&self) -> SchemaRef {
        match self {
            Plan::Scan {
                table_schema,
                columns,
                ..
            } => Arc::new(
                table_schema
                    .project(columns)
                    .unwrap_or_else(|_| Schema::empty()),
            ),
            Plan::Values { schema, .. }
            | Plan::Project { schema, .. }
            | Plan::Aggregate { schema, .. }
            | Plan::Window { schema, .. }
            | Plan::Join { schema, .. }
            | Plan::Union { schema, .. } => schema.clone(),
            Plan::Filter { input, .. }
            | Plan::Sort { input, .. }
            | Plan::Limit { input, .. }
            | Plan::Distinct { input } => input.schema(),
        }
    }

    /// Inputs of this node.
    pub fn inputs(&self) -> Vec<&Plan> {
        match self {
            Plan::Scan { .. } | Plan::Values { .. } => vec![],
            Plan::Filter { input, .. }
            | Plan::Project { input, .. }
            | Plan::Aggregate { input, .. }
            | Plan::Window { input, .. }
            | Plan::Sort { input, .. }
            | Plan::Limit { input, .. }
            | Plan::Distinct { input } => vec![input],
            Plan::Join { left, right, .. } => vec![left, right],
            Plan::Union { inputs, .. } => inputs.iter().collect(),
        }
    }

    pub(crate) fn line(&self) -> String {
        let list = |v: &[Expr]| {
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Plan::Scan {
                dataset,
                relation,
                table_schema,
                columns,
                filter,
            } => {
                let cols: Vec<&str> = columns
                    .iter()
                    .map(|&i| table_schema.field(i).name().as_str())
                    .collect();
                let mut s = format!("Scan: {dataset}.{relation} columns=[{}]", cols.join(", "));
                if let Some(f) = filter {
                    s.push_str(&format!(" filter={f}"));
                }
                s
            }
            Plan::Values { rows, schema } => format!(
                "Values: {} rows x {} columns",
                rows.len(),
                schema.fields().len()
            ),
            Plan::Filter { predicate, .. } => format!("Filter: {predicate}"),
            Plan::Project { exprs, schema, .. } => {
                let items: Vec<String> = exprs
                    .iter()
                    .zip(schema.fields())
                    .map(|(e, f)| {
                        let e = e.to_string();
                        if e == *f.name() {
                            e
                        } else {
                            format!("{e} AS {}", f.name())
                        }
                    })
                    .collect();
                format!("Project: {}", items.join(", "))
            }
            Plan::Aggregate { group, aggs, .. } => format!(
                "Aggregate: group=[{}] aggs=[{}]",
                list(group),
                aggs.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Plan::Window { calls, schema, .. } => {
                let n = schema.fields().len() - calls.len();
                let names: Vec<&str> = schema.fields()[n..]
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect();
                format!("Window: [{}]", names.join(", "))
            }
            Plan::Sort { keys, fetch, .. } => {
                let k: Vec<String> = keys.iter().map(ToString::to_string).collect();
                match fetch {
                    Some(n) => format!("Sort: {} (top {n})", k.join(", ")),
                    None => format!("Sort: {}", k.join(", ")),
                }
            }
            Plan::Limit { limit, offset, .. } => match limit {
                Some(l) => format!("Limit: {l} offset={offset}"),
                None => format!("Limit: none offset={offset}"),
            },
            Plan::Distinct { .. } => "Distinct".to_string(),
            Plan::Join {
                kind, on, filter, ..
            } => {
                let keys: Vec<String> = on.iter().map(|(l, r)| format!("{l} = {r}")).collect();
                let mut s = format!("{:?}Join: on=[{}]", kind, keys.join(", "));
                if let Some(f) = filter {
                    s.push_str(&format!(" filter={f}"));
                }
                s
            }
            Plan::Union { inputs, .. } => format!("UnionAll: {} inputs", inputs.len()),
        }
    }

    fn fmt_tree(&self, f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
        writeln!(f, "{}{}", "  ".repeat(depth), self.line())?;
        for i in self.inputs() {
            i.fmt_tree(f, depth + 1)?;
        }
        Ok(())
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_tree(f, 0)
    }
}

/// A schema from (name, type, nullable) triples.
pub fn make_schema(fields: Vec<(String, DataType, bool)>) -> SchemaRef {
    Arc::new(Schema::new(
        fields
            .into_iter()
            .map(|(n, t, null)| Field::new(n, t, null))
            .collect::<Vec<_>>(),
    ))
}
