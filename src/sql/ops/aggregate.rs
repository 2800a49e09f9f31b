//! The state of GROUP BY with COUNT / COUNT(DISTINCT) / SUM / AVG / MIN /
//! MAX (the operator is `hash_aggregate`).
//!
//! Group keys are row-encoded and hashed; each aggregate keeps one
//! accumulator slot per group, updated batch by batch.

use std::collections::HashSet;

use crate::util::hash::{FastMap, FastSet};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, StringArray,
    TimestampNanosecondArray,
};
use arrow::datatypes::{
    ArrowNativeType, DataType, Float64Type, Int64Type, SchemaRef, TimestampNanosecondType,
};
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, SortField};

use super::super::expr::eval;
use super::super::logical::{AggCall, AggFunc, Expr};
use super::super::SqlError;

/// A comparable, hashable cell (for DISTINCT and MIN/MAX of any type).
#[derive(Debug, Clone, PartialEq, PartialOrd)]
enum Val {
    I(i64),
    F(f64),
    S(String),
    B(bool),
}

impl Eq for Val {}

impl std::hash::Hash for Val {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        match self {
            Val::I(v) => (0u8, *v).hash(h),
            Val::F(v) => (1u8, if *v == 0.0 { 0 } else { v.to_bits() }).hash(h),
            Val::S(v) => (2u8, v).hash(h),
            Val::B(v) => (3u8, *v).hash(h),
        }
    }
}

fn val(a: &dyn Array, i: usize) -> Option<Val> {
    if a.is_null(i) {
        return None;
    }
    Some(match a.data_type() {
        DataType::Int64 => Val::I(a.as_primitive::<Int64Type>().value(i)),
        DataType::Float64 => Val::F(a.as_primitive::<Float64Type>().value(i)),
        DataType::Timestamp(..) => Val::I(a.as_primitive::<TimestampNanosecondType>().value(i)),
        DataType::Utf8 => Val::S(a.as_string::<i32>().value(i).to_string()),
        DataType::Boolean => Val::B(a.as_boolean().value(i)),
        _ => return None,
    })
}

/// Cell `i` of `a` against `b`, without copying a string cell.
fn cmp_cell(a: &dyn Array, i: usize, b: &Val) -> Option<std::cmp::Ordering> {
    match (a.data_type(), b) {
        (DataType::Utf8, Val::S(s)) => Some(a.as_string::<i32>().value(i).cmp(s.as_str())),
        _ => val(a, i)?.partial_cmp(b),
    }
}

enum Acc {
    Count(Vec<i64>),
    SumInt { sum: Vec<i128>, seen: Vec<bool> },
    SumFloat { sum: Vec<f64>, seen: Vec<bool> },
    Avg { sum: Vec<f64>, n: Vec<i64> },
    MinMax { best: Vec<Option<Val>>, max: bool },
    Distinct(Vec<HashSet<Val>>),
}

/// Byte equality of two keys. Keys are mostly short (ids, model names):
/// up to 16 bytes they are compared as two overlapping words each, without
/// a call into `memcmp`.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |x: &[u8], at: usize| u64::from_ne_bytes(x[at..at + 8].try_into().expect("8 bytes"));
    let half = |x: &[u8], at: usize| u32::from_ne_bytes(x[at..at + 4].try_into().expect("4 bytes"));
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// Adds `value(i)` of the valid rows into `sum[groups[i]]`, in row order.
/// Rows come in runs of one group (the steps of a document); a run is added
/// up in a register and stored once, rather than through memory per row.
/// The additions happen in the same order either way, so float sums are
/// the same to the last bit.
fn sum_runs<T: Copy + std::ops::AddAssign>(
    groups: &[usize],
    nulls: Option<&arrow::buffer::NullBuffer>,
    value: impl Fn(usize) -> T,
    sum: &mut [T],
    seen: &mut [bool],
) {
    let mut i = 0;
    while i < groups.len() {
        let g = groups[i];
        let (mut acc, mut any) = (sum[g], false);
        while i < groups.len() && groups[i] == g {
            if nulls.is_none_or(|n| n.is_valid(i)) {
                acc += value(i);
                any = true;
            }
            i += 1;
        }
        sum[g] = acc;
        seen[g] |= any;
    }
}

impl Acc {
    fn new(call: &AggCall) -> Acc {
        if call.distinct {
            return Acc::Distinct(Vec::new());
        }
        match call.func {
            AggFunc::Count => Acc::Count(Vec::new()),
            AggFunc::Sum if call.ty == DataType::Int64 => Acc::SumInt {
                sum: Vec::new(),
                seen: Vec::new(),
            },
            AggFunc::Sum => Acc::SumFloat {
                sum: Vec::new(),
                seen: Vec::new(),
            },
            AggFunc::Avg => Acc::Avg {
                sum: Vec::new(),
                n: Vec::new(),
            },
            AggFunc::Min => Acc::MinMax {
                best: Vec::new(),
                max: false,
            },
            AggFunc::Max => Acc::MinMax {
                best: Vec::new(),
                max: true,
            },
        }
    }

    fn resize(&mut self, groups: usize) {
        match self {
            Acc::Count(c) => c.resize(groups, 0),
            Acc::SumInt { sum, seen } => {
                sum.resize(groups, 0);
                seen.resize(groups, false);
            }
            Acc::SumFloat { sum, seen } => {
                sum.resize(groups, 0.0);
                seen.resize(groups, false);
            }
            Acc::Avg { sum, n } => {
                sum.resize(groups, 0.0);
                n.resize(groups, 0);
            }
            Acc::MinMax { best, .. } => best.resize(groups, None),
            Acc::Distinct(s) => s.resize_with(groups, HashSet::new),
        }
    }

    fn update(&mut self, groups: &[usize], arg: Option<&ArrayRef>) -> Result<(), SqlError> {
        match (self, arg) {
            (Acc::Count(c), None) => {
                for &g in groups {
                    c[g] += 1;
                }
            }
            (Acc::Count(c), Some(a)) => {
                for (i, &g) in groups.iter().enumerate() {
                    if a.is_valid(i) {
                        c[g] += 1;
                    }
                }
            }
            (Acc::SumInt { sum, seen }, Some(a)) => {
                if a.data_type() == &DataType::Null {
                    return Ok(());
                }
                let a = a.as_primitive::<Int64Type>();
                sum_runs(groups, a.nulls(), |i| i128::from(a.value(i)), sum, seen);
            }
            (Acc::SumFloat { sum, seen }, Some(a)) => {
                if a.data_type() == &DataType::Null {
                    return Ok(());
                }
                let a = a.as_primitive::<Float64Type>();
                sum_runs(groups, a.nulls(), |i| a.value(i), sum, seen);
            }
            (Acc::Avg { sum, n }, Some(a)) => match a.data_type() {
                DataType::Int64 => {
                    let a = a.as_primitive::<Int64Type>();
                    for (i, &g) in groups.iter().enumerate() {
                        if a.is_valid(i) {
                            sum[g] += a.value(i) as f64;
                            n[g] += 1;
                        }
                    }
                }
                DataType::Float64 => {
                    let a = a.as_primitive::<Float64Type>();
                    for (i, &g) in groups.iter().enumerate() {
                        if a.is_valid(i) {
                            sum[g] += a.value(i);
                            n[g] += 1;
                        }
                    }
                }
                _ => {}
            },
            (Acc::MinMax { best, max }, Some(a)) => {
                let want = if *max {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Less
                };
                for (i, &g) in groups.iter().enumerate() {
                    if a.is_null(i) {
                        continue;
                    }
                    let better = match &best[g] {
                        None => true,
                        Some(b) => cmp_cell(a.as_ref(), i, b) == Some(want),
                    };
                    if better {
                        best[g] = val(a.as_ref(), i);
                    }
                }
            }
            (Acc::Distinct(sets), Some(a)) => {
                for (i, &g) in groups.iter().enumerate() {
                    if let Some(v) = val(a.as_ref(), i) {
                        sets[g].insert(v);
                    }
                }
            }
            _ => return Err(SqlError::Internal("aggregate without its argument".into())),
        }
        Ok(())
    }

    /// A DISTINCT accumulator: add the values of `rows` of `a`.
    fn update_rows(&mut self, groups: &[usize], a: &ArrayRef, rows: &[usize]) {
        if let Acc::Distinct(sets) = self {
            for &i in rows {
                if let Some(v) = val(a.as_ref(), i) {
                    sets[groups[i]].insert(v);
                }
            }
        }
    }

    fn finish(self, call: &AggCall) -> Result<ArrayRef, SqlError> {
        Ok(match self {
            Acc::Count(c) => Arc::new(Int64Array::from(c)),
            Acc::SumInt { sum, seen } => {
                let mut out = Vec::with_capacity(sum.len());
                for (s, ok) in sum.into_iter().zip(seen) {
                    out.push(if ok {
                        Some(
                            i64::try_from(s)
                                .map_err(|_| SqlError::type_error("SUM overflows BIGINT"))?,
                        )
                    } else {
                        None
                    });
                }
                Arc::new(Int64Array::from(out))
            }
            Acc::SumFloat { sum, seen } => Arc::new(
                sum.into_iter()
                    .zip(seen)
                    .map(|(s, ok)| ok.then_some(s))
                    .collect::<Float64Array>(),
            ),
            Acc::Avg { sum, n } => Arc::new(
                sum.into_iter()
                    .zip(n)
                    .map(|(s, c)| (c > 0).then(|| s / c as f64))
                    .collect::<Float64Array>(),
            ),
            Acc::MinMax { best, .. } => vals_to_array(best, &call.ty),
            Acc::Distinct(sets) => match call.func {
                AggFunc::Count => Arc::new(
                    sets.into_iter()
                        .map(|s| s.len() as i64)
                        .collect::<Int64Array>(),
                ),
                AggFunc::Sum if call.ty == DataType::Int64 => Arc::new(
                    sets.into_iter()
                        .map(|s| {
                            (!s.is_empty()).then(|| {
                                s.iter()
                                    .map(|v| if let Val::I(x) = v { *x } else { 0 })
                                    .sum::<i64>()
                            })
                        })
                        .collect::<Int64Array>(),
                ),
                AggFunc::Sum | AggFunc::Avg => {
                    let avg = call.func == AggFunc::Avg;
                    Arc::new(
                        sets.into_iter()
                            .map(|s| {
                                if s.is_empty() {
                                    return None;
                                }
                                let total: f64 = s
                                    .iter()
                                    .map(|v| match v {
                                        Val::I(x) => *x as f64,
                                        Val::F(x) => *x,
                                        _ => 0.0,
                                    })
                                    .sum();
                                Some(if avg { total / s.len() as f64 } else { total })
                            })
                            .collect::<Float64Array>(),
                    )
                }
                AggFunc::Min | AggFunc::Max => {
                    let max = call.func == AggFunc::Max;
                    let best = sets
                        .into_iter()
                        .map(|s| {
                            let it = s.into_iter();
                            if max {
                                it.max_by(|a, b| {
                                    a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal)
                                })
                            } else {
                                it.min_by(|a, b| {
                                    a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal)
                                })
                            }
                        })
                        .collect();
                    vals_to_array(best, &call.ty)
                }
            },
        })
    }
}

fn vals_to_array(v: Vec<Option<Val>>, ty: &DataType) -> ArrayRef {
    match ty {
        DataType::Int64 => Arc::new(
            v.into_iter()
                .map(|x| match x {
                    Some(Val::I(i)) => Some(i),
                    _ => None,
                })
                .collect::<Int64Array>(),
        ),
        DataType::Float64 => Arc::new(
            v.into_iter()
                .map(|x| match x {
                    Some(Val::F(f)) => Some(f),
                    _ => None,
                })
                .collect::<Float64Array>(),
        ),
        DataType::Timestamp(..) => Arc::new(
            v.into_iter()
                .map(|x| match x {
                    Some(Val::I(i)) => Some(i),
                    _ => None,
                })
                .collect::<TimestampNanosecondArray>()
                .with_timezone("UTC"),
        ),
        DataType::Boolean => Arc::new(
            v.into_iter()
                .map(|x| match x {
                    Some(Val::B(b)) => Some(b),
                    _ => None,
                })
                .collect::<BooleanArray>(),
        ),
        _ => Arc::new(
            v.into_iter()
                .map(|x| match x {
                    Some(Val::S(s)) => Some(s),
                    _ => None,
                })
                .collect::<StringArray>(),
        ),
    }
}

/// The groups seen so far and their accumulators.
pub struct Grouper {
    accs: Vec<Acc>,
    key_types: Vec<DataType>,
    conv: RowConverter,
    index: FastMap<Box<[u8]>, usize>,
    first_rows: Vec<Box<[u8]>>,
    /// One text key (a name, an id): grouped by the text itself, without
    /// encoding rows; the NULL key is a group of its own.
    text_index: Option<FastMap<Box<str>, usize>>,
    null_group: Option<usize>,
    n_groups: usize,
    key_bytes: usize,
    gids: Vec<usize>,
    /// `(group, DISTINCT argument)` pairs seen, per DISTINCT aggregate:
    /// only a new pair is turned into a value.
    seen: Vec<FastSet<Box<[u8]>>>,
    /// The encoder of each DISTINCT argument, made on its first batch.
    encoders: Vec<Option<RowConverter>>,
}

impl Grouper {
    /// No groups yet.
    pub fn new(group: &[Expr], aggs: &[AggCall]) -> Result<Self, SqlError> {
        let key_types: Vec<DataType> = group
            .iter()
            .map(Expr::data_type)
            .map(|t| {
                if t == DataType::Null {
                    DataType::Utf8
                } else {
                    t
                }
            })
            .collect();
        let conv = RowConverter::new(
            key_types
                .iter()
                .map(|t| SortField::new(t.clone()))
                .collect(),
        )?;
        let text = key_types == [DataType::Utf8];
        let n_groups = usize::from(group.is_empty());
        let mut accs: Vec<Acc> = aggs.iter().map(Acc::new).collect();
        for a in &mut accs {
            a.resize(n_groups);
        }
        Ok(Grouper {
            accs,
            key_types,
            conv,
            index: FastMap::default(),
            first_rows: Vec::new(),
            text_index: text.then(FastMap::default),
            null_group: None,
            n_groups,
            key_bytes: 0,
            gids: Vec::new(),
            seen: aggs.iter().map(|_| FastSet::default()).collect(),
            encoders: aggs.iter().map(|_| None).collect(),
        })
    }

    /// An estimate of the bytes held.
    pub fn bytes(&self, aggs: usize) -> usize {
        let distinct: usize = self
            .seen
            .iter()
            .map(|s| s.len() * 48 + s.iter().map(|k| k.len()).sum::<usize>())
            .sum();
        self.n_groups * (64 + 16 * aggs) + 2 * self.key_bytes + 2 * distinct
    }

    /// Add the rows of `b`.
    pub fn push(
        &mut self,
        b: &RecordBatch,
        group: &[Expr],
        aggs: &[AggCall],
    ) -> Result<(), SqlError> {
        let rows_n = b.num_rows();
        if rows_n == 0 {
            return Ok(());
        }
        self.gids.clear();
        if group.is_empty() {
            self.gids.resize(rows_n, 0);
        } else {
            let keys = group
                .iter()
                .zip(&self.key_types)
                .map(|(g, t)| {
                    let a = eval(g, b)?;
                    if a.data_type() == t {
                        Ok(a)
                    } else {
                        super::super::expr::cast_array(&a, t)
                    }
                })
                .collect::<Result<Vec<_>, SqlError>>()?;
            if self.text_index.is_some() {
                self.group_text(keys[0].as_string::<i32>());
            } else {
                self.group_rows(&keys)?;
            }
            for a in &mut self.accs {
                a.resize(self.n_groups);
            }
        }
        let per_agg = self.accs.iter_mut().zip(aggs).zip(&mut self.seen);
        for (((acc, call), seen), enc) in per_agg.zip(&mut self.encoders) {
            let arg = call.arg.as_ref().map(|e| eval(e, b)).transpose()?;
            if let (Acc::Distinct(_), Some(a)) = (&acc, &arg) {
                if enc.is_none() {
                    *enc = Some(RowConverter::new(vec![SortField::new(
                        a.data_type().clone(),
                    )])?);
                }
                let conv = enc.as_ref().expect("set above");
                let fresh = first_seen(seen, &self.gids, a, conv)?;
                acc.update_rows(&self.gids, a, &fresh);
                continue;
            }
            acc.update(&self.gids, arg.as_ref())?;
        }
        Ok(())
    }

    /// Group ids of one text key column.
    fn group_text(&mut self, a: &arrow::array::StringArray) {
        let index = self.text_index.as_mut().expect("text keys");
        // Keys come in runs (the steps of one document): a value equal to
        // the last one seen is in that one's group, without a lookup. NULLs
        // do not end a run, since nullable keys such as a step's model
        // alternate with NULL (a user step between two agent steps). The
        // run test compares the value's bytes in place, most rows do
        // nothing else.
        let (offsets, bytes) = (a.value_offsets(), a.value_data());
        let nulls = a.nulls().filter(|n| n.null_count() > 0);
        self.gids.reserve(a.len());
        let mut last: Option<(&[u8], usize)> = None;
        for i in 0..a.len() {
            if nulls.is_some_and(|n| n.is_null(i)) {
                let g = *self.null_group.get_or_insert_with(|| {
                    self.n_groups += 1;
                    self.n_groups - 1
                });
                self.gids.push(g);
                continue;
            }
            let cell = &bytes[offsets[i].as_usize()..offsets[i + 1].as_usize()];
            if let Some((l, g)) = last {
                if same_bytes(cell, l) {
                    self.gids.push(g);
                    continue;
                }
            }
            let v = a.value(i);
            let id = if let Some(&g) = index.get(v) {
                g
            } else {
                let g = self.n_groups;
                self.n_groups += 1;
                index.insert(v.into(), g);
                self.key_bytes += v.len();
                g
            };
            last = Some((cell, id));
            self.gids.push(id);
        }
    }

    /// Group ids of row-encoded keys.
    fn group_rows(&mut self, keys: &[ArrayRef]) -> Result<(), SqlError> {
        let rows = self.conv.convert_columns(keys)?;
        // As for text keys: a run of equal keys needs one lookup.
        let mut last: Option<(&[u8], usize)> = None;
        for i in 0..rows.num_rows() {
            let bytes: &[u8] = rows.row(i).data();
            if let Some((l, g)) = last {
                if l == bytes {
                    self.gids.push(g);
                    continue;
                }
            }
            let id = if let Some(&g) = self.index.get(bytes) {
                g
            } else {
                let g = self.n_groups;
                self.n_groups += 1;
                self.index.insert(bytes.into(), g);
                self.first_rows.push(bytes.into());
                self.key_bytes += bytes.len();
                g
            };
            last = Some((bytes, id));
            self.gids.push(id);
        }
        Ok(())
    }

    /// The groups and their aggregates, under `schema`.
    pub fn finish(self, schema: &SchemaRef, aggs: &[AggCall]) -> Result<RecordBatch, SqlError> {
        let mut cols: Vec<ArrayRef> = if self.key_types.is_empty() {
            Vec::new()
        } else if let Some(index) = &self.text_index {
            let mut keys: Vec<Option<&str>> = vec![None; self.n_groups];
            for (k, &g) in index {
                keys[g] = Some(k);
            }
            vec![Arc::new(StringArray::from(keys)) as ArrayRef]
        } else {
            let parser = self.conv.parser();
            let rows = self.first_rows.iter().map(|r| parser.parse(r));
            self.conv.convert_rows(rows)?
        };
        for (acc, call) in self.accs.into_iter().zip(aggs) {
            cols.push(acc.finish(call)?);
        }
        // Group key casts for NULL-typed keys.
        let cols = cols
            .into_iter()
            .zip(schema.fields())
            .map(|(c, f)| {
                if c.data_type() == f.data_type() {
                    Ok(c)
                } else {
                    super::super::expr::cast_array(&c, f.data_type())
                }
            })
            .collect::<Result<Vec<_>, SqlError>>()?;
        let options =
            arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(self.n_groups));
        Ok(RecordBatch::try_new_with_options(
            schema.clone(),
            cols,
            &options,
        )?)
    }
}

/// The rows of `arg` whose `(group, value)` pair is not in `seen` yet
/// (adding them); NULLs never are.
fn first_seen(
    seen: &mut FastSet<Box<[u8]>>,
    gids: &[usize],
    arg: &ArrayRef,
    conv: &RowConverter,
) -> Result<Vec<usize>, SqlError> {
    let mut key: Vec<u8> = Vec::new();
    let mut fresh = Vec::new();
    let mut note = |i: usize, g: usize, value: &[u8]| {
        key.clear();
        key.extend_from_slice(&(g as u64).to_le_bytes());
        key.extend_from_slice(value);
        if !seen.contains(key.as_slice()) {
            seen.insert(key.as_slice().into());
            fresh.push(i);
        }
    };
    // Text is its own key (an aggregate's argument has one type, so its
    // keys never mix with row-encoded ones), and a value repeating the row
    // before it in the same group was noted there: DISTINCT over session
    // ids, which come in runs, looks up each run once.
    if let Some(text) = arg.as_string_opt::<i32>() {
        let mut last: Option<(usize, &str)> = None;
        for (i, &g) in gids.iter().enumerate() {
            if text.is_null(i) {
                continue;
            }
            let v = text.value(i);
            if last != Some((g, v)) {
                last = Some((g, v));
                note(i, g, v.as_bytes());
            }
        }
        return Ok(fresh);
    }
    let rows = conv.convert_columns(std::slice::from_ref(arg))?;
    for (i, &g) in gids.iter().enumerate() {
        if !arg.is_null(i) {
            note(i, g, rows.row(i).as_ref());
        }
    }
    Ok(fresh)
}

#[cfg(test)]
mod tests {
    use super::same_bytes;

    #[test]
    fn same_bytes_is_byte_equality() {
        // Every length up to 40 bytes, equal and differing at each position,
        // and every pair of lengths.
        for n in 0..40usize {
            let a: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
            assert!(same_bytes(&a, &a.clone()), "{n}");
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!same_bytes(&a, &b), "{n} {at}");
            }
            for m in 0..40usize {
                if m != n {
                    let b: Vec<u8> = (0..m).map(|i| (i * 7 + 1) as u8).collect();
                    assert!(!same_bytes(&a, &b), "{n} {m}");
                }
            }
        }
    }
}
