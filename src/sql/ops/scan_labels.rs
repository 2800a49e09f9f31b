//! Labels a data layer hands on as dictionaries (the label columns a store
//! keeps so, see `store::schema::LABELS_AS_DICTIONARY_FROM`). A scan
//! answers each conjunct of its filter that reads one such column on the
//! column's few distinct values rather than on every row, keeps the rows
//! that pass, and only then turns the columns still used into text. A
//! filter on `step_source` and `model_name` over a million steps spent a
//! tenth of its CPU turning both columns into text for every row.
//!
//! The rest of the scan sees text as from any other Source, and evaluates
//! the whole filter again on the rows kept: a conjunct answered here gives
//! the same answer on them, so only rows it drops are spared. The rows
//! kept are the same; a conjunct that would fail on some row dropped here
//! is not run on it, as with the byte search of `scan_bytes` (SQL does not
//! promise in what order the parts of a `WHERE` run).

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, BooleanArray, DictionaryArray, RecordBatch};
use arrow::buffer::BooleanBuffer;
use arrow::compute::{cast, FilterBuilder};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use arrow::record_batch::RecordBatchOptions;

use super::super::expr::eval_predicate;
use super::super::logical::Expr;
use super::super::SqlError;

/// The conjuncts of a scan filter that read one column, by column.
pub struct LabelFilter {
    conjuncts: Vec<(usize, Expr)>,
    /// Every column the filter reads.
    reads: Vec<usize>,
}

impl LabelFilter {
    pub fn new(filter: Option<&Expr>) -> LabelFilter {
        let mut conjuncts = Vec::new();
        let mut reads = Vec::new();
        if let Some(f) = filter {
            f.columns(&mut reads);
            for c in f.clone().conjuncts() {
                let mut cols = Vec::new();
                c.columns(&mut cols);
                cols.sort_unstable();
                cols.dedup();
                if let [one] = cols[..] {
                    conjuncts.push((one, c));
                }
            }
        }
        LabelFilter { conjuncts, reads }
    }

    /// `b` with its dictionary columns as text (`b` itself when it has
    /// none): only the rows that the conjuncts on those columns keep, and
    /// the columns neither `needed` (all when `None`) nor read by the
    /// filter NULL. Other columns keep their type; `schema` (the scan's,
    /// which allows NULL wherever `needed` is given) names the fields.
    pub fn settle(
        &self,
        b: RecordBatch,
        schema: &SchemaRef,
        needed: Option<&[bool]>,
    ) -> Result<RecordBatch, SqlError> {
        let is_dictionary = |i: usize| matches!(b.column(i).data_type(), DataType::Dictionary(..));
        if !(0..b.num_columns()).any(is_dictionary) {
            return Ok(b);
        }
        let mut mask: Option<BooleanArray> = None;
        for (column, conjunct) in &self.conjuncts {
            if !is_dictionary(*column) {
                continue;
            }
            let Some(m) = on_values(&b, *column, conjunct)? else {
                continue;
            };
            mask = Some(match mask {
                Some(a) => arrow::compute::and(&a, &m)?,
                None => m,
            });
        }
        let rows = mask.as_ref().map_or(b.num_rows(), BooleanArray::true_count);
        let filter = mask.map(|m| FilterBuilder::new(&m).optimize().build());
        let used = |i: usize| {
            self.reads.contains(&i) || needed.is_none_or(|n| n.get(i).copied().unwrap_or(true))
        };
        let mut fields = Vec::with_capacity(b.num_columns());
        let mut columns = Vec::with_capacity(b.num_columns());
        for (i, c) in b.columns().iter().enumerate() {
            let c = match &filter {
                Some(f) if used(i) => f.filter(c)?,
                _ => c.clone(),
            };
            let declared = schema.field(i);
            // A dictionary becomes the type the scan declares (text).
            let c = match c.data_type() {
                DataType::Dictionary(..) if used(i) => cast(&c, declared.data_type())?,
                DataType::Dictionary(..) => new_null_array(declared.data_type(), rows),
                _ if !used(i) => new_null_array(c.data_type(), rows),
                _ => c,
            };
            fields.push(if declared.data_type() == c.data_type() {
                declared.clone()
            } else {
                Field::new(declared.name(), c.data_type().clone(), true)
            });
            columns.push(c);
        }
        let opts = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(
            Arc::new(Schema::new(fields)),
            columns,
            &opts,
        )?)
    }
}

/// Each row's answer to `conjunct`, which reads only `column` of `b`, a
/// dictionary: the conjunct runs once on each distinct value and on NULL,
/// and rows take their value's answer. `None` when the values cannot be
/// answered so (keys other than 32-bit, as many values as rows, or an
/// error on a value, which may be one no row of `b` holds): the rows then
/// answer for themselves.
fn on_values(
    b: &RecordBatch,
    column: usize,
    conjunct: &Expr,
) -> Result<Option<BooleanArray>, SqlError> {
    let Some(dict) = b
        .column(column)
        .as_any()
        .downcast_ref::<DictionaryArray<Int32Type>>()
    else {
        return Ok(None);
    };
    let values = dict.values();
    let n = values.len();
    // Lance hands each batch its page's whole dictionary; where that has
    // as many values as the batch has rows, the rows answer as cheaply.
    if n >= dict.len() {
        return Ok(None);
    }
    // The values, then a NULL for rows without a label.
    let mut one =
        arrow::compute::concat(&[values.as_ref(), &new_null_array(values.data_type(), 1)])?;
    if one.data_type() != &DataType::Utf8 {
        one = cast(&one, &DataType::Utf8)?;
    }
    let fields: Vec<Field> = b
        .schema()
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let ty = if i == column {
                DataType::Utf8
            } else {
                f.data_type().clone()
            };
            Field::new(f.name(), ty, true)
        })
        .collect();
    let columns: Vec<ArrayRef> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if i == column {
                one.clone()
            } else {
                new_null_array(f.data_type(), n + 1)
            }
        })
        .collect();
    let on_values = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
    let Ok(answers) = eval_predicate(conjunct, &on_values) else {
        return Ok(None);
    };
    let pass: Vec<bool> = (0..=n)
        .map(|k| answers.is_valid(k) && answers.value(k))
        .collect();
    let keys = dict.keys();
    let rows = BooleanBuffer::collect_bool(keys.len(), |i| {
        let k = if keys.is_null(i) {
            n
        } else {
            usize::try_from(keys.value(i)).unwrap_or(n)
        };
        pass.get(k).copied().unwrap_or(false)
    });
    Ok(Some(BooleanArray::new(rows, None)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::value::Scalar;
    use arrow::array::{AsArray, Int64Array, StringArray};

    fn column(index: usize, name: &str) -> Expr {
        Expr::Column {
            index,
            name: name.into(),
            ty: DataType::Utf8,
        }
    }

    fn text(s: &str) -> Expr {
        Expr::Literal(Scalar::Str(s.into()))
    }

    fn eq(left: Expr, value: &str) -> Expr {
        Expr::Binary {
            op: crate::sql::logical::BinOp::Eq,
            left: Box::new(left),
            right: Box::new(text(value)),
            ty: DataType::Boolean,
        }
    }

    /// Rows of three columns: a step's source and model as dictionaries,
    /// and its id.
    fn batch() -> (RecordBatch, SchemaRef) {
        let source: DictionaryArray<Int32Type> = vec![
            Some("agent"),
            Some("user"),
            Some("agent"),
            None,
            Some("agent"),
            Some("system"),
        ]
        .into_iter()
        .collect();
        let model: DictionaryArray<Int32Type> = vec![
            Some("claude-sonnet-4"),
            None,
            Some("gpt-4o"),
            Some("claude-opus"),
            Some("claude-sonnet-4"),
            None,
        ]
        .into_iter()
        .collect();
        let ids = Int64Array::from(vec![1, 2, 3, 4, 5, 6]);
        let b = RecordBatch::try_from_iter(vec![
            ("step_source", Arc::new(source) as ArrayRef),
            ("model_name", Arc::new(model) as ArrayRef),
            ("step_id", Arc::new(ids) as ArrayRef),
        ])
        .unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("step_source", DataType::Utf8, true),
            Field::new("model_name", DataType::Utf8, true),
            Field::new("step_id", DataType::Int64, true),
        ]));
        (b, schema)
    }

    /// The same rows with text columns, as from any other Source.
    fn as_text(b: &RecordBatch, schema: &SchemaRef) -> RecordBatch {
        let columns = b
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                DataType::Dictionary(..) => cast(c, &DataType::Utf8).unwrap(),
                _ => c.clone(),
            })
            .collect();
        RecordBatch::try_new(schema.clone(), columns).unwrap()
    }

    fn ids(b: &RecordBatch) -> Vec<i64> {
        b.column(2)
            .as_primitive::<arrow::datatypes::Int64Type>()
            .values()
            .to_vec()
    }

    #[test]
    fn conjuncts_on_labels_keep_the_rows_the_filter_keeps() {
        let (b, schema) = batch();
        let filters = [
            eq(column(0, "step_source"), "agent"),
            Expr::Like {
                expr: Box::new(column(1, "model_name")),
                pattern: Box::new(text("claude%")),
                negated: true,
                case_insensitive: false,
            },
            Expr::IsNull {
                expr: Box::new(column(1, "model_name")),
                negated: false,
            },
        ];
        for f in &filters {
            let kept = LabelFilter::new(Some(f))
                .settle(b.clone(), &schema, None)
                .unwrap();
            let text = as_text(&b, &schema);
            let want =
                arrow::compute::filter_record_batch(&text, &eval_predicate(f, &text).unwrap())
                    .unwrap();
            assert_eq!(kept, want, "{f:?}");
        }
        // Both at once, as in `WHERE step_source = 'agent' AND model_name
        // LIKE 'claude%'`.
        let both = Expr::and_all(vec![
            filters[0].clone(),
            Expr::Like {
                expr: Box::new(column(1, "model_name")),
                pattern: Box::new(text("claude%")),
                negated: false,
                case_insensitive: false,
            },
        ]);
        let kept = LabelFilter::new(both.as_ref())
            .settle(b, &schema, None)
            .unwrap();
        assert_eq!(ids(&kept), [1, 5]);
        assert_eq!(
            kept.column(1).as_string::<i32>().iter().collect::<Vec<_>>(),
            [Some("claude-sonnet-4"), Some("claude-sonnet-4")]
        );
    }

    #[test]
    fn labels_not_used_are_null_and_others_as_read() {
        let (b, schema) = batch();
        // Only step_id is used above the scan, and nothing filters.
        let kept = LabelFilter::new(None)
            .settle(b.clone(), &schema, Some(&[false, false, true]))
            .unwrap();
        assert_eq!(kept.num_rows(), 6);
        assert_eq!(kept.column(0).data_type(), &DataType::Utf8);
        assert_eq!(kept.column(0).null_count(), 6);
        assert_eq!(ids(&kept), [1, 2, 3, 4, 5, 6]);
        // A column the filter reads is text even when not needed above.
        let f = eq(column(0, "step_source"), "user");
        let kept = LabelFilter::new(Some(&f))
            .settle(b.clone(), &schema, Some(&[false, false, true]))
            .unwrap();
        assert_eq!(ids(&kept), [2]);
        assert_eq!(kept.column(0).as_string::<i32>().value(0), "user");
        // Text batches pass untouched.
        let text = as_text(&b, &schema);
        let same = LabelFilter::new(Some(&f))
            .settle(text.clone(), &schema, None)
            .unwrap();
        assert_eq!(same, text);
    }

    /// As Lance hands them: NULL as a value some keys point at, values no
    /// row of the batch uses, and a batch sliced out of a longer one.
    #[test]
    fn null_values_unused_values_and_slices_answer_as_text() {
        let values = StringArray::from(vec![
            Some("agent"),
            None,
            Some("user"),
            Some("unused"),
            Some("system"),
        ]);
        let keys = arrow::array::Int32Array::from(vec![
            Some(0),
            Some(1),
            Some(2),
            None,
            Some(4),
            Some(0),
            Some(1),
            Some(2),
            Some(0),
            Some(4),
        ]);
        let dict = DictionaryArray::try_new(keys, Arc::new(values)).unwrap();
        let ids = Int64Array::from((1..=10).collect::<Vec<i64>>());
        let b = RecordBatch::try_from_iter(vec![
            ("step_source", Arc::new(dict) as ArrayRef),
            ("step_id", Arc::new(ids) as ArrayRef),
        ])
        .unwrap()
        .slice(2, 7);
        let schema = Arc::new(Schema::new(vec![
            Field::new("step_source", DataType::Utf8, true),
            Field::new("step_id", DataType::Int64, true),
        ]));
        let filters = [
            eq(column(0, "step_source"), "agent"),
            Expr::IsNull {
                expr: Box::new(column(0, "step_source")),
                negated: false,
            },
            Expr::Not(Box::new(eq(column(0, "step_source"), "agent"))),
        ];
        let want_ids = [vec![6, 9], vec![4, 7], vec![3, 5, 8]];
        for (f, want) in filters.iter().zip(want_ids) {
            let kept = LabelFilter::new(Some(f))
                .settle(b.clone(), &schema, None)
                .unwrap();
            let text = as_text(&b, &schema);
            let rows =
                arrow::compute::filter_record_batch(&text, &eval_predicate(f, &text).unwrap())
                    .unwrap();
            assert_eq!(kept, rows, "{f:?}");
            let got: Vec<i64> = kept
                .column(1)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec();
            assert_eq!(got, want, "{f:?}");
        }
    }

    #[test]
    fn a_conjunct_that_fails_on_a_value_is_left_to_the_rows() {
        let (b, schema) = batch();
        // CAST('agent' AS BIGINT) fails; the rows answer it themselves.
        let f = Expr::Binary {
            op: crate::sql::logical::BinOp::Eq,
            left: Box::new(Expr::Cast {
                expr: Box::new(column(0, "step_source")),
                to: DataType::Int64,
            }),
            right: Box::new(Expr::Literal(Scalar::Int(1))),
            ty: DataType::Boolean,
        };
        let kept = LabelFilter::new(Some(&f)).settle(b, &schema, None).unwrap();
        assert_eq!(kept.num_rows(), 6);
    }
}
