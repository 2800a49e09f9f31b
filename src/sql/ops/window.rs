//! Window functions: ROW_NUMBER, RANK, DENSE_RANK, LAG, LEAD and aggregates
//! over the default frame (the whole partition without ORDER BY; rows up to
//! and including the current row's peers with ORDER BY).

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, Int64Array, UInt32Array};
use arrow::compute::{lexsort_to_indices, take, SortColumn, SortOptions};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;

use super::super::expr::eval;
use super::super::logical::{AggFunc, Expr, WinFunc, WindowCall};
use super::super::value::Scalar;
use super::super::SqlError;
use super::{BoxOp, Operator, Reservation};

/// Window functions over `input`: the whole input is held (a partition
/// may span it), then one column per call is appended.
pub struct WindowOp<'s> {
    pub input: BoxOp<'s>,
    pub input_schema: SchemaRef,
    pub calls: Vec<WindowCall>,
    pub schema: SchemaRef,
    pub mem: Reservation<'s>,
    pub done: bool,
}

impl Operator for WindowOp<'_> {
    fn next(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        if self.done {
            return Ok(None);
        }
        self.done = true;
        let batches = super::drain(&mut self.input, &mut self.mem)?;
        let all = super::concat(&self.input_schema, &batches)?;
        drop(batches);
        let mut cols: Vec<ArrayRef> = all.columns().to_vec();
        for c in &self.calls {
            cols.push(one(&all, c)?);
        }
        let options =
            arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(all.num_rows()));
        Ok(Some(RecordBatch::try_new_with_options(
            self.schema.clone(),
            cols,
            &options,
        )?))
    }
}

fn one(all: &RecordBatch, call: &WindowCall) -> Result<ArrayRef, SqlError> {
    let n = all.num_rows();
    if n == 0 {
        return Ok(new_null_array(&call.ty, 0));
    }
    let parts = call
        .partition
        .iter()
        .map(|e| eval(e, all))
        .collect::<Result<Vec<_>, _>>()?;
    let orders = call
        .order
        .iter()
        .map(|k| eval(&k.expr, all))
        .collect::<Result<Vec<_>, _>>()?;
    // Sort by partition keys, then order keys; stable on row index.
    let mut sort_cols: Vec<SortColumn> = parts
        .iter()
        .map(|p| SortColumn {
            values: p.clone(),
            options: Some(SortOptions {
                descending: false,
                nulls_first: true,
            }),
        })
        .collect();
    for (k, v) in call.order.iter().zip(&orders) {
        sort_cols.push(SortColumn {
            values: v.clone(),
            options: Some(SortOptions {
                descending: !k.asc,
                nulls_first: k.nulls_first,
            }),
        });
    }
    let idx: Vec<u32> = if sort_cols.is_empty() {
        (0..n as u32).collect()
    } else {
        sort_cols.push(SortColumn {
            values: Arc::new(UInt32Array::from_iter_values(0..n as u32)),
            options: None,
        });
        lexsort_to_indices(&sort_cols, None)?.values().to_vec()
    };
    let (_, part_rows) = if parts.is_empty() {
        (None, None)
    } else {
        let (c, r) = super::encode_rows(&parts)?;
        (Some(c), Some(r))
    };
    let (_, order_rows) = if orders.is_empty() {
        (None, None)
    } else {
        let (c, r) = super::encode_rows(&orders)?;
        (Some(c), Some(r))
    };
    let same_part = |a: u32, b: u32| {
        part_rows
            .as_ref()
            .is_none_or(|r| r.row(a as usize) == r.row(b as usize))
    };
    let peers = |a: u32, b: u32| {
        order_rows
            .as_ref()
            .is_none_or(|r| r.row(a as usize) == r.row(b as usize))
    };
    // Partition boundaries over the sorted order.
    let mut bounds = Vec::new();
    let mut start = 0;
    for k in 1..=n {
        if k == n || !same_part(idx[k - 1], idx[k]) {
            bounds.push((start, k));
            start = k;
        }
    }
    let args = call
        .args
        .iter()
        .map(|e| eval(e, all))
        .collect::<Result<Vec<_>, _>>()?;
    match call.func {
        WinFunc::RowNumber | WinFunc::Rank | WinFunc::DenseRank => {
            let mut out = vec![0i64; n];
            for &(s, e) in &bounds {
                let (mut rank, mut dense) = (0i64, 0i64);
                for k in s..e {
                    let pos = (k - s) as i64 + 1;
                    let new_peer_group = k == s || !peers(idx[k - 1], idx[k]);
                    if new_peer_group {
                        rank = pos;
                        dense += 1;
                    }
                    out[idx[k] as usize] = match call.func {
                        WinFunc::RowNumber => pos,
                        WinFunc::Rank => rank,
                        _ => dense,
                    };
                }
            }
            Ok(Arc::new(Int64Array::from(out)))
        }
        WinFunc::Lag | WinFunc::Lead => {
            let offset = match call.args.get(1) {
                Some(Expr::Literal(Scalar::Int(o))) => *o,
                _ => 1,
            };
            let default = args.get(2).cloned();
            let value = &args[0];
            // Source row for each output row (None → default).
            let mut src: Vec<Option<u32>> = vec![None; n];
            for &(s, e) in &bounds {
                for k in s..e {
                    let t = if call.func == WinFunc::Lag {
                        k as i64 - offset
                    } else {
                        k as i64 + offset
                    };
                    if t >= s as i64 && t < e as i64 {
                        src[idx[k] as usize] = Some(idx[t as usize]);
                    }
                }
            }
            let taken = take(value, &src.iter().copied().collect::<UInt32Array>(), None)?;
            match default {
                Some(d) => {
                    let d = if d.data_type() == taken.data_type() {
                        d
                    } else {
                        super::super::expr::cast_array(&d, taken.data_type())?
                    };
                    let has_src: arrow::array::BooleanArray =
                        src.iter().map(|s| Some(s.is_some())).collect();
                    Ok(arrow::compute::kernels::zip::zip(&has_src, &taken, &d)?)
                }
                None => Ok(taken),
            }
        }
        WinFunc::Agg(func) => {
            // Running aggregate over peer groups: O(n) per partition.
            let arg = args.first();
            let mut out: Vec<Scalar> = vec![Scalar::Null; n];
            for &(s, e) in &bounds {
                let mut state = Running::new(func);
                let mut k = s;
                while k < e {
                    let mut end = k + 1;
                    if call.order.is_empty() {
                        end = e;
                    } else {
                        while end < e && peers(idx[k], idx[end]) {
                            end += 1;
                        }
                    }
                    for j in k..end {
                        state.add(arg, idx[j] as usize)?;
                    }
                    let v = state.value();
                    for j in k..end {
                        out[idx[j] as usize] = v.clone();
                    }
                    k = end;
                }
            }
            scalars_to_array(&out, &call.ty)
        }
    }
}

/// Running state of a window aggregate.
struct Running {
    func: AggFunc,
    count: i64,
    int_sum: i128,
    float_sum: f64,
    is_float: bool,
    best: Option<Scalar>,
}

impl Running {
    fn new(func: AggFunc) -> Self {
        Running {
            func,
            count: 0,
            int_sum: 0,
            float_sum: 0.0,
            is_float: false,
            best: None,
        }
    }

    fn add(&mut self, arg: Option<&ArrayRef>, i: usize) -> Result<(), SqlError> {
        let Some(a) = arg else {
            self.count += 1;
            return Ok(());
        };
        let v = Scalar::from_array(a.as_ref(), i)?;
        match v {
            Scalar::Null => {}
            Scalar::Int(x) => {
                self.count += 1;
                self.int_sum += i128::from(x);
                self.float_sum += x as f64;
                self.consider(Scalar::Int(x));
            }
            Scalar::Float(x) => {
                self.count += 1;
                self.is_float = true;
                self.float_sum += x;
                self.consider(Scalar::Float(x));
            }
            other => {
                self.count += 1;
                self.consider(other);
            }
        }
        Ok(())
    }

    fn consider(&mut self, v: Scalar) {
        let replace = match (&self.best, &v) {
            (None, _) => true,
            (Some(Scalar::Int(b)), Scalar::Int(x)) | (Some(Scalar::Ts(b)), Scalar::Ts(x)) => {
                (self.func == AggFunc::Max) == (x > b) && x != b
            }
            (Some(Scalar::Float(b)), Scalar::Float(x)) => {
                (self.func == AggFunc::Max) == (x > b) && x != b
            }
            (Some(Scalar::Str(b)), Scalar::Str(x)) => {
                (self.func == AggFunc::Max) == (x > b) && x != b
            }
            (Some(Scalar::Bool(b)), Scalar::Bool(x)) => {
                (self.func == AggFunc::Max) == (x > b) && x != b
            }
            _ => false,
        };
        if replace {
            self.best = Some(v);
        }
    }

    fn value(&self) -> Scalar {
        match self.func {
            AggFunc::Count => Scalar::Int(self.count),
            _ if self.count == 0 => Scalar::Null,
            AggFunc::Sum if self.is_float => Scalar::Float(self.float_sum),
            AggFunc::Sum => i64::try_from(self.int_sum).map_or(Scalar::Null, Scalar::Int),
            AggFunc::Avg => Scalar::Float(self.float_sum / self.count as f64),
            AggFunc::Min | AggFunc::Max => self.best.clone().unwrap_or(Scalar::Null),
        }
    }
}

fn scalars_to_array(v: &[Scalar], ty: &DataType) -> Result<ArrayRef, SqlError> {
    let arrays: Vec<ArrayRef> = v
        .iter()
        .map(|s| {
            let a = s.to_array(1);
            if a.data_type() == ty || s.is_null() {
                if s.is_null() {
                    Ok(new_null_array(ty, 1))
                } else {
                    Ok(a)
                }
            } else {
                super::super::expr::cast_array(&a, ty)
            }
        })
        .collect::<Result<_, SqlError>>()?;
    if arrays.is_empty() {
        return Ok(new_null_array(ty, 0));
    }
    let refs: Vec<&dyn Array> = arrays.iter().map(AsRef::as_ref).collect();
    Ok(arrow::compute::concat(&refs)?)
}
