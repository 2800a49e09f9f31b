//! Reading a store natively: the stored columns of its tables at the
//! pinned versions, with `source_path` added (a store is one Source) and a
//! store's `trajectories` read from its documents table.

use super::Mounts;
use arrow::array::{ArrayRef, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use crate::catalog::Source;
use crate::sql::SqlError;
use crate::table::{Table, TableBuilder};

impl Mounts {
    /// [`Mounts::scan_steps_with_call_output`] for one store.
    pub(super) fn scan_store_call_output(
        &self,
        s: &Source,
        columns: &[usize],
        name: &'static str,
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        let store = match crate::catalog::read::open_store(s) {
            Ok(st) => st,
            Err(f) => return self.skip_or_fail(s, f),
        };
        let reader = match store.reader() {
            Ok(r) => r,
            Err(e) => return self.skip_or_fail(s, crate::catalog::read::store_failure(s, &e)),
        };
        let cols = Table::Steps.columns();
        let stored: Vec<&str> = columns
            .iter()
            .filter(|&&i| i != 0)
            .map(|&i| cols[i].name)
            .collect();
        let mut schema_fields: Vec<Field> = TableBuilder::new(Table::Steps, Some(columns))
            .schema()
            .fields()
            .iter()
            .map(|f| (**f).clone())
            .collect();
        schema_fields.push(Field::new(name, DataType::Utf8, true));
        let schema: SchemaRef = std::sync::Arc::new(Schema::new(schema_fields));
        let mut out = Vec::new();
        let scanned = reader.scan_steps_with_call_output(&stored, |b| -> Result<(), ScanError> {
            let n = b.num_rows();
            let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len() + 1);
            let mut from_store = 0usize;
            for &i in columns {
                if i == 0 {
                    arrays.push(std::sync::Arc::new(StringArray::from_iter_values(
                        std::iter::repeat_n(s.source_path.as_str(), n),
                    )));
                } else {
                    arrays.push(b.column(from_store).clone());
                    from_store += 1;
                }
            }
            arrays.push(b.column(b.num_columns() - 1).clone());
            let batch = RecordBatch::try_new(schema.clone(), arrays)?;
            out.push(post(batch)?);
            Ok(())
        });
        match scanned {
            Ok(()) => Ok(out),
            Err(ScanError::Store(e)) => {
                self.skip_or_fail(s, crate::catalog::read::store_failure(s, &e))
            }
            Err(ScanError::Sql(e)) => Err(e),
        }
    }

    /// Read stored columns of a store table natively, adding `source_path`.
    pub(super) fn scan_store(
        &self,
        s: &Source,
        table: Table,
        columns: &[usize],
        store_filter: Option<&str>,
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
    ) -> Result<Vec<RecordBatch>, SqlError> {
        let store = match crate::catalog::read::open_store(s) {
            Ok(st) => st,
            Err(f) => return self.skip_or_fail(s, f),
        };
        let cols = table.columns();
        let stored: Vec<&str> = columns
            .iter()
            .filter(|&&i| i != 0)
            .map(|&i| cols[i].name)
            .collect();
        let reader = match store.reader() {
            Ok(r) => r,
            Err(e) => return self.skip_or_fail(s, crate::catalog::read::store_failure(s, &e)),
        };
        // A store's `trajectories` rows are its documents table: the same
        // columns, with each time falling back to the steps' one.
        let phys = if table == Table::Trajectories {
            Table::Documents
        } else {
            table
        };
        let fallback = |c: &str| match (phys, c) {
            (Table::Documents, "started_at") => Some("first_step_at"),
            (Table::Documents, "finished_at") => Some("last_step_at"),
            _ => None,
        };
        let mut stored = stored;
        for c in stored.clone() {
            if let Some(f) = fallback(c) {
                if !stored.contains(&f) {
                    stored.push(f);
                }
            }
        }
        // Lance needs at least one column; read one when only source_path is asked for.
        let read_cols: Vec<&str> = if stored.is_empty() {
            // The first non-null integer column is the cheapest to decode.
            let first_int = cols
                .iter()
                .skip(1)
                .find(|c| !c.nullable && c.ty.arrow() == arrow::datatypes::DataType::Int64);
            vec![first_int.map_or("document_id", |c| c.name)]
        } else {
            stored.clone()
        };
        let schema = TableBuilder::new(table, Some(columns)).schema();
        let mut out = Vec::new();
        // Batches are filtered as they arrive (Lance decodes the next ones
        // meanwhile), so only rows that pass are kept.
        let scanned = reader.scan_each_where(
            phys,
            &read_cols,
            store_filter,
            |b| -> Result<(), ScanError> {
                let n = b.num_rows();
                let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
                let column = |name: &str| {
                    b.column_by_name(name)
                        .cloned()
                        .ok_or_else(|| SqlError::Internal(format!("store column {name} missing")))
                };
                for &i in columns {
                    if i == 0 {
                        arrays.push(std::sync::Arc::new(StringArray::from_iter_values(
                            std::iter::repeat_n(s.source_path.as_str(), n),
                        )));
                    } else if let Some(f) = fallback(cols[i].name) {
                        arrays.push(coalesce_times(&column(cols[i].name)?, &column(f)?));
                    } else {
                        arrays.push(column(cols[i].name)?);
                    }
                }
                let opts = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(n));
                let batch = RecordBatch::try_new_with_options(schema.clone(), arrays, &opts)?;
                out.push(post(batch)?);
                Ok(())
            },
        );
        match scanned {
            Ok(()) => Ok(out),
            Err(ScanError::Store(e)) => {
                self.skip_or_fail(s, crate::catalog::read::store_failure(s, &e))
            }
            Err(ScanError::Sql(e)) => Err(e),
        }
    }
}

/// Why a store scan stopped: a store that fails while read (a damaged
/// fragment) is a bad Source like any other; an error of the query itself
/// fails the query.
pub(super) enum ScanError {
    Store(crate::store::StoreError),
    Sql(SqlError),
}

impl From<crate::store::StoreError> for ScanError {
    fn from(e: crate::store::StoreError) -> Self {
        ScanError::Store(e)
    }
}

impl From<SqlError> for ScanError {
    fn from(e: SqlError) -> Self {
        ScanError::Sql(e)
    }
}

impl From<arrow::error::ArrowError> for ScanError {
    fn from(e: arrow::error::ArrowError) -> Self {
        ScanError::Sql(e.into())
    }
}

/// `a`, with its NULL times taken from `b` (both timestamp arrays).
fn coalesce_times(a: &ArrayRef, b: &ArrayRef) -> ArrayRef {
    use arrow::array::{Array, AsArray, TimestampNanosecondArray};
    use arrow::datatypes::TimestampNanosecondType;
    let (x, y) = (
        a.as_primitive::<TimestampNanosecondType>(),
        b.as_primitive::<TimestampNanosecondType>(),
    );
    let out: TimestampNanosecondArray = (0..x.len())
        .map(|i| {
            if x.is_valid(i) {
                Some(x.value(i))
            } else {
                y.is_valid(i).then(|| y.value(i))
            }
        })
        .collect();
    std::sync::Arc::new(out.with_timezone("UTC"))
}

impl From<crate::store::StoreError> for SqlError {
    fn from(e: crate::store::StoreError) -> Self {
        SqlError::Source {
            code: e.code(),
            message: e.to_string(),
        }
    }
}
