//! Reading a store natively: the stored columns of its tables at the
//! pinned versions, with `source_path` added (a store is one Source) and a
//! store's `trajectories` read from its documents table.

use super::scan::DocumentScan;
use super::Mounts;
use arrow::array::{ArrayRef, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use crate::catalog::Source;
use crate::sql::SqlError;
use crate::table::{Table, TableBuilder};
use crate::util::ordered::OrderedMap;

impl Mounts {
    /// Read `scan` over one store: its stored columns at the pinned
    /// versions, each batch to `post`, then to `emit` as it comes.
    pub(super) fn scan_store(
        &self,
        s: &Source,
        scan: &DocumentScan<'_>,
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        emit: &mut dyn FnMut(RecordBatch) -> Result<(), SqlError>,
    ) -> Result<(), SqlError> {
        let store = match crate::catalog::read::open_store(s) {
            Ok(st) => st,
            Err(f) => return self.skip_or_fail(s, f),
        };
        let reader = match store.reader() {
            Ok(r) => r,
            Err(e) => return self.skip_or_fail(s, crate::catalog::read::store_failure(s, &e)),
        };
        let mut emitted = false;
        let mut emit = |b: RecordBatch| -> Result<(), ScanError> {
            emitted = true;
            emit(b).map_err(ScanError::Sql)
        };
        // Lance decodes on its own threads; the scan's predicate (a JSON
        // path, a LIKE over tool output) runs on workers beside it, and the
        // batches still reach `emit` in storage order.
        let workers = crate::util::rt::cores();
        let scanned = std::thread::scope(|scope| -> Result<(), ScanError> {
            let mut map = OrderedMap::start(scope, workers, post);
            let mut out = |b: Result<RecordBatch, SqlError>| emit(b?);
            {
                let mut each = |b: RecordBatch| map.push(b, &mut out);
                match scan.call_output {
                    Some(name) => scan_call_output(&reader, s, scan.columns, name, &mut each),
                    None => scan_table(&reader, s, scan, &mut each),
                }?;
            }
            map.finish(&mut out)
        });
        match scanned {
            Ok(()) => Ok(()),
            // Rows already given out cannot be taken back: a store that
            // fails part way fails the query instead of being skipped.
            Err(ScanError::Store(e)) if emitted => Err(e.into()),
            Err(ScanError::Store(e)) => {
                self.skip_or_fail(s, crate::catalog::read::store_failure(s, &e))
            }
            Err(ScanError::Sql(e)) => Err(e),
        }
    }
}

/// Steps of a store with the text of their calls' results.
fn scan_call_output(
    reader: &crate::store::StoreReader,
    s: &Source,
    columns: &[usize],
    name: &'static str,
    each: &mut dyn FnMut(RecordBatch) -> Result<(), ScanError>,
) -> Result<(), ScanError> {
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
    let mut paths = SourcePaths::new(&s.source_path);
    reader.scan_steps_with_call_output(&stored, |b| -> Result<(), ScanError> {
        let n = b.num_rows();
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len() + 1);
        let mut from_store = 0usize;
        for &i in columns {
            if i == 0 {
                arrays.push(paths.get(n));
            } else {
                arrays.push(b.column(from_store).clone());
                from_store += 1;
            }
        }
        arrays.push(b.column(b.num_columns() - 1).clone());
        each(RecordBatch::try_new(schema.clone(), arrays)?)
    })
}

/// Stored columns of a store table, with `source_path` added.
fn scan_table(
    reader: &crate::store::StoreReader,
    s: &Source,
    scan: &DocumentScan<'_>,
    each: &mut dyn FnMut(RecordBatch) -> Result<(), ScanError>,
) -> Result<(), ScanError> {
    let (table, columns) = (scan.table, scan.columns);
    let cols = table.columns();
    let mut stored: Vec<&str> = columns
        .iter()
        .filter(|&&i| i != 0)
        .map(|&i| cols[i].name)
        .collect();
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
    for c in stored.clone() {
        if let Some(f) = fallback(c) {
            if !stored.contains(&f) {
                stored.push(f);
            }
        }
    }
    // Lance needs at least one column; read one when only source_path is asked for.
    if stored.is_empty() {
        // The first non-null integer column is the cheapest to decode.
        let first_int = cols
            .iter()
            .skip(1)
            .find(|c| !c.nullable && c.ty.arrow() == arrow::datatypes::DataType::Int64);
        stored.push(first_int.map_or("document_id", |c| c.name));
    }
    let schema = TableBuilder::new(table, Some(columns)).schema();
    let mut paths = SourcePaths::new(&s.source_path);
    // Batches are filtered as they arrive (Lance decodes the next ones
    // meanwhile), so only rows that pass are kept.
    let assemble = |b: RecordBatch| -> Result<(), ScanError> {
        let n = b.num_rows();
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
        let column = |name: &str| {
            b.column_by_name(name)
                .cloned()
                .ok_or_else(|| SqlError::Internal(format!("store column {name} missing")))
        };
        for &i in columns {
            if i == 0 {
                arrays.push(paths.get(n));
            } else if let Some(f) = fallback(cols[i].name) {
                arrays.push(coalesce_times(&column(cols[i].name)?, &column(f)?));
            } else {
                arrays.push(column(cols[i].name)?);
            }
        }
        let opts = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(n));
        each(RecordBatch::try_new_with_options(
            as_read(&schema, &arrays),
            arrays,
            &opts,
        )?)
    };
    // For SQL, text views kept as bytes and labels kept as dictionaries
    // stay so: the engine checks and turns into text the rows its filter
    // keeps (`DataLayer::scan`).
    let views = if scan.stored {
        crate::store::Views::Stored
    } else {
        crate::store::Views::Text
    };
    reader.scan_views_where(phys, &stored, scan.store_filter, views, assemble)
}

/// `schema` with the type of each of `arrays` where it differs: the text
/// views and labels a store keeps as bytes and dictionaries.
fn as_read(schema: &SchemaRef, arrays: &[ArrayRef]) -> SchemaRef {
    if schema
        .fields()
        .iter()
        .zip(arrays)
        .all(|(f, a)| f.data_type() == a.data_type())
    {
        return schema.clone();
    }
    std::sync::Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .zip(arrays)
            .map(|(f, a)| f.as_ref().clone().with_data_type(a.data_type().clone()))
            .collect::<Vec<_>>(),
    ))
}

/// The `source_path` column of a store's batches: one value on every row,
/// built once per scan and sliced for each batch instead of written out
/// again for every row.
struct SourcePaths<'a> {
    path: &'a str,
    column: Option<ArrayRef>,
}

impl<'a> SourcePaths<'a> {
    fn new(path: &'a str) -> Self {
        SourcePaths { path, column: None }
    }

    /// The column for a batch of `n` rows.
    fn get(&mut self, n: usize) -> ArrayRef {
        let fits = self.column.as_ref().is_some_and(|c| c.len() >= n);
        if !fits {
            let rows = n.max(crate::dataset::BATCH_ROWS);
            self.column = Some(std::sync::Arc::new(StringArray::from_iter_values(
                std::iter::repeat_n(self.path, rows),
            )));
        }
        self.column.as_ref().expect("set above").slice(0, n)
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

#[cfg(test)]
mod tests {
    use super::super::Mounts;
    use crate::formats::{decode_bytes, DecodeCtx, DecodeOptions};
    use crate::sql::DataLayer;
    use crate::table::Table;
    use arrow::datatypes::DataType;
    use arrow::record_batch::RecordBatch;
    use std::path::Path;

    /// SQL's scans of a store of layout 5 get the text views as the bytes
    /// they are stored as (its filter checks what it keeps), and labels as
    /// dictionaries; every other reader gets text.
    #[test]
    fn sql_scans_get_text_views_as_bytes_and_labels_as_dictionaries() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("s");
        let mut w = crate::store::StoreWriter::create(&root).unwrap();
        let f = "terminus_2_hello-world-timeout.trajectory.json";
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/harbor");
        let bytes = std::fs::read(path.join(f)).unwrap();
        let mut ctx = DecodeCtx::new(f);
        decode_bytes(&bytes, DecodeOptions::full(1 << 30), &mut ctx, &mut |d| {
            w.push(d).unwrap();
        })
        .unwrap();
        w.finish().unwrap();
        let uri = crate::catalog::DatasetUri::parse(root.to_str().unwrap(), dir.path()).unwrap();
        let specs = [("dataset".to_string(), uri)];
        let mounts = Mounts::open(
            &specs,
            crate::catalog::DiscoveryLimits::default(),
            false,
            1 << 30,
        )
        .unwrap();
        let col = Table::Steps.index_of("observation_text").unwrap();
        let label = Table::Steps.index_of("model_name").unwrap();
        let seen = std::sync::Mutex::new(Vec::new());
        let post = |b: RecordBatch| {
            seen.lock().unwrap().push((
                b.column(0).data_type().clone(),
                b.column(1).data_type().clone(),
            ));
            Ok(b)
        };
        mounts
            .scan(
                "dataset",
                "steps",
                &[col, label],
                &post,
                &mut |_| Ok(()),
                &|| Ok(()),
            )
            .unwrap();
        let seen = seen.into_inner().unwrap();
        assert!(!seen.is_empty());
        assert!(
            seen.iter()
                .all(|(v, l)| v == &DataType::Binary && matches!(l, DataType::Dictionary(..))),
            "{seen:?}"
        );
        let text = mounts
            .scan_sources(
                "dataset",
                Table::Steps,
                &["observation_text", "model_name"],
                &|_| true,
                &Ok,
                &|| Ok(()),
            )
            .unwrap();
        assert!(text
            .iter()
            .all(|b| b.columns().iter().all(|c| c.data_type() == &DataType::Utf8)));
        assert!(text.iter().map(RecordBatch::num_rows).sum::<usize>() > 0);
    }
}
