//! Key columns hashed and compared row by row in place, without encoding
//! rows first: a join hashes each probe batch's key columns into one
//! `u64` per row, and checks a candidate pair by comparing the column
//! values themselves.

use std::hash::Hasher;

use arrow::array::{make_comparator, Array, ArrayRef, AsArray, DynComparator};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Float64Type, Int64Type, TimestampNanosecondType};

use super::super::SqlError;
use crate::util::hash::FastHasher;

/// Mixed in for a NULL cell.
const NULL_MARK: u64 = 0x6e75_6c6c;

/// One hash per row over all of `cols`.
pub fn hash_rows(cols: &[ArrayRef], rows: usize) -> Result<Vec<u64>, SqlError> {
    let mut hashes = vec![0u64; rows];
    for c in cols {
        hash_column(c, &mut hashes)?;
    }
    Ok(hashes)
}

fn mix(h: &mut u64, word: u64) {
    let mut s = FastHasher::default();
    s.write_u64(*h);
    s.write_u64(word);
    *h = s.finish();
}

fn hash_column(c: &ArrayRef, hashes: &mut [u64]) -> Result<(), SqlError> {
    let nulls = c.null_count() > 0;
    macro_rules! each {
        ($value:expr) => {
            for (i, h) in hashes.iter_mut().enumerate() {
                if nulls && c.is_null(i) {
                    mix(h, NULL_MARK);
                } else {
                    mix(h, $value(i));
                }
            }
        };
    }
    match c.data_type() {
        DataType::Utf8 => {
            let a = c.as_string::<i32>();
            // Keys come in runs (the steps of one document share its id):
            // a value equal to the one before it reuses that one's hash.
            let mut last: Option<(&str, u64)> = None;
            each!(|i| {
                let v = a.value(i);
                match last {
                    Some((l, h)) if l == v => h,
                    _ => {
                        let mut s = FastHasher::default();
                        s.write(v.as_bytes());
                        let h = s.finish();
                        last = Some((v, h));
                        h
                    }
                }
            });
        }
        DataType::Int64 => {
            let a = c.as_primitive::<Int64Type>();
            each!(|i| a.value(i) as u64);
        }
        DataType::Float64 => {
            let a = c.as_primitive::<Float64Type>();
            each!(|i| a.value(i).to_bits());
        }
        DataType::Timestamp(..) => {
            let a = c.as_primitive::<TimestampNanosecondType>();
            each!(|i| a.value(i) as u64);
        }
        DataType::Boolean => {
            let a = c.as_boolean();
            each!(|i| u64::from(a.value(i)));
        }
        DataType::Null => each!(|_| NULL_MARK),
        _ => {
            // Any other type, hashed by its text form.
            let text = arrow::compute::cast(c, &DataType::Utf8)?;
            hash_column(&text, hashes)?;
        }
    }
    Ok(())
}

/// For each key column, a comparison of row `i` of `left` with row `j` of
/// `right` (same types).
pub fn comparators(left: &[ArrayRef], right: &[ArrayRef]) -> Result<Vec<DynComparator>, SqlError> {
    left.iter()
        .zip(right)
        .map(|(l, r)| {
            Ok(make_comparator(
                l.as_ref(),
                r.as_ref(),
                SortOptions::default(),
            )?)
        })
        .collect()
}

/// True when every key of row `i` (left) equals that of row `j` (right).
pub fn equal(cmps: &[DynComparator], i: usize, j: usize) -> bool {
    cmps.iter().all(|c| c(i, j).is_eq())
}

/// True when any key of row `i` is NULL.
pub fn any_null(cols: &[ArrayRef], i: usize) -> bool {
    cols.iter().any(|k| k.is_null(i))
}
