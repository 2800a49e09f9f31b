//! Property tests: each vectorized operator (filter, aggregate, sort, join,
//! distinct, window) against a naive row-at-a-time reference, on random
//! tables split into random batches; and EXPLAIN snapshots of the plans.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use pchronicle::cli::render::cell_json;
use pchronicle::sql::{self, DataLayer, Limits, SqlError, Statement};
use proptest::prelude::*;
use serde_json::{json, Value};

type TRow = (i64, Option<i64>, Option<String>, Option<f64>);
type URow = (Option<i64>, String);

struct Mem {
    t: Vec<RecordBatch>,
    u: Vec<RecordBatch>,
}

fn t_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k", DataType::Int64, true),
        Field::new("g", DataType::Utf8, true),
        Field::new("v", DataType::Float64, true),
    ]))
}

fn u_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("w", DataType::Utf8, false),
    ]))
}

impl Mem {
    fn new(t: &[TRow], u: &[URow], parts: usize) -> Mem {
        let chunk = (t.len() / parts.max(1)).max(1);
        let mut tb: Vec<RecordBatch> = t
            .chunks(chunk)
            .map(|c| {
                RecordBatch::try_new(
                    t_schema(),
                    vec![
                        Arc::new(c.iter().map(|r| Some(r.0)).collect::<Int64Array>()),
                        Arc::new(c.iter().map(|r| r.1).collect::<Int64Array>()),
                        Arc::new(c.iter().map(|r| r.2.clone()).collect::<StringArray>()),
                        Arc::new(c.iter().map(|r| r.3).collect::<Float64Array>()),
                    ],
                )
                .unwrap()
            })
            .collect();
        if tb.is_empty() {
            tb.push(RecordBatch::new_empty(t_schema()));
        }
        let ub = vec![RecordBatch::try_new(
            u_schema(),
            vec![
                Arc::new(u.iter().map(|r| r.0).collect::<Int64Array>()),
                Arc::new(u.iter().map(|r| Some(r.1.clone())).collect::<StringArray>()),
            ],
        )
        .unwrap()];
        Mem { t: tb, u: ub }
    }
}

impl DataLayer for Mem {
    fn datasets(&self) -> Vec<String> {
        vec!["dataset".into()]
    }
    fn relation_names(&self) -> Vec<&'static str> {
        vec!["t", "u"]
    }
    fn relation(&self, _dataset: &str, relation: &str) -> Option<SchemaRef> {
        match relation {
            "t" => Some(t_schema()),
            "u" => Some(u_schema()),
            _ => None,
        }
    }
    fn is_entity(&self, _relation: &str) -> bool {
        false
    }
    fn scan(
        &self,
        _dataset: &str,
        relation: &str,
        columns: &[usize],
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        emit: &mut dyn FnMut(RecordBatch) -> Result<(), SqlError>,
        _check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<(), SqlError> {
        let src = if relation == "t" { &self.t } else { &self.u };
        for b in src {
            emit(post(b.project(columns)?)?)?;
        }
        Ok(())
    }
}

fn run(p: &impl DataLayer, q: &str) -> Vec<Vec<Value>> {
    let Statement::Query(plan) = sql::plan(q, p).unwrap() else {
        panic!("not a query")
    };
    let r = sql::execute(&plan, p, Limits::default()).unwrap();
    let mut rows = Vec::new();
    for b in &r.batches {
        for i in 0..b.num_rows() {
            rows.push(
                b.columns()
                    .iter()
                    .map(|c| cell_json(c.as_ref(), i))
                    .collect(),
            );
        }
    }
    rows
}

fn close(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        _ => a == b,
    }
}

fn same_rows(mut got: Vec<Vec<Value>>, mut want: Vec<Vec<Value>>, ordered: bool) -> bool {
    if !ordered {
        let key = |r: &Vec<Value>| {
            r.iter()
                .map(|v| match v.as_f64() {
                    Some(f) => format!("{f:.6}"),
                    None => v.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\u{1}")
        };
        got.sort_by_key(key);
        want.sort_by_key(key);
    }
    got.len() == want.len()
        && got
            .iter()
            .zip(&want)
            .all(|(a, b)| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| close(x, y)))
}

fn opt<T: Into<Value>>(v: Option<T>) -> Value {
    v.map_or(Value::Null, Into::into)
}

fn tables() -> impl Strategy<Value = (Vec<TRow>, Vec<URow>, usize)> {
    let trow = (
        proptest::option::weighted(0.85, -3i64..4),
        proptest::option::weighted(0.8, prop_oneof![Just("a"), Just("b"), Just("c")]),
        proptest::option::weighted(0.8, (0u32..100).prop_map(|x| f64::from(x) / 100.0)),
    );
    let urow = (proptest::option::weighted(0.9, -3i64..4), "[xyz]{1,2}");
    (
        proptest::collection::vec(trow, 0..60),
        proptest::collection::vec(urow, 0..12),
        1usize..4,
    )
        .prop_map(|(t, u, parts)| {
            let t = t
                .into_iter()
                .enumerate()
                .map(|(i, (k, g, v))| (i as i64, k, g.map(str::to_string), v))
                .collect();
            (t, u, parts)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn filter_matches_rows((t, u, parts) in tables()) {
        let p = Mem::new(&t, &u, parts);
        let got = run(&p, "SELECT id FROM t WHERE (v > 0.5 AND g IS NOT NULL) OR k = 2");
        let want: Vec<Vec<Value>> = t
            .iter()
            .filter(|r| (r.3.is_some_and(|v| v > 0.5) && r.2.is_some()) || r.1 == Some(2))
            .map(|r| vec![json!(r.0)])
            .collect();
        prop_assert!(same_rows(got, want, false));
    }

    #[test]
    fn aggregate_matches_groups((t, u, parts) in tables()) {
        let p = Mem::new(&t, &u, parts);
        let got = run(&p, "SELECT g, count(*), count(v), sum(k), min(v), max(v), count(DISTINCT k), avg(v) FROM t GROUP BY g");
        let mut groups: HashMap<Option<String>, Vec<&TRow>> = HashMap::new();
        for r in &t {
            groups.entry(r.2.clone()).or_default().push(r);
        }
        let want: Vec<Vec<Value>> = groups
            .into_iter()
            .map(|(g, rs)| {
                let vs: Vec<f64> = rs.iter().filter_map(|r| r.3).collect();
                let ks: Vec<i64> = rs.iter().filter_map(|r| r.1).collect();
                let mut distinct = ks.clone();
                distinct.sort_unstable();
                distinct.dedup();
                vec![
                    opt(g),
                    json!(rs.len()),
                    json!(vs.len()),
                    if ks.is_empty() { Value::Null } else { json!(ks.iter().sum::<i64>()) },
                    opt(vs.iter().copied().reduce(f64::min)),
                    opt(vs.iter().copied().reduce(f64::max)),
                    json!(distinct.len()),
                    if vs.is_empty() { Value::Null } else { json!(vs.iter().sum::<f64>() / vs.len() as f64) },
                ]
            })
            .collect();
        prop_assert!(same_rows(got, want, false));
    }

    #[test]
    fn sort_matches_order((t, u, parts) in tables()) {
        let p = Mem::new(&t, &u, parts);
        let got = run(&p, "SELECT id, k, v FROM t ORDER BY v DESC NULLS LAST, k ASC NULLS FIRST, id");
        let mut rows: Vec<&TRow> = t.iter().collect();
        rows.sort_by(|a, b| {
            let v = match (a.3, b.3) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (Some(x), Some(y)) => y.partial_cmp(&x).unwrap(),
            };
            v.then_with(|| match (a.1, b.1) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Less,
                (Some(_), None) => std::cmp::Ordering::Greater,
                (Some(x), Some(y)) => x.cmp(&y),
            })
            .then(a.0.cmp(&b.0))
        });
        let want: Vec<Vec<Value>> = rows.iter().map(|r| vec![json!(r.0), opt(r.1), opt(r.3)]).collect();
        prop_assert!(same_rows(got, want, true));
        // LIMIT/OFFSET take a slice of that order.
        let got = run(&p, "SELECT id FROM t ORDER BY v DESC NULLS LAST, k ASC NULLS FIRST, id LIMIT 5 OFFSET 2");
        let want: Vec<Vec<Value>> = rows.iter().skip(2).take(5).map(|r| vec![json!(r.0)]).collect();
        prop_assert!(same_rows(got, want, true));
    }

    #[test]
    fn joins_match_nested_loops((t, u, parts) in tables()) {
        let p = Mem::new(&t, &u, parts);
        let got = run(&p, "SELECT t.id, u.w FROM t JOIN u ON t.k = u.k");
        let mut want = Vec::new();
        for a in &t {
            for b in &u {
                if a.1.is_some() && a.1 == b.0 {
                    want.push(vec![json!(a.0), json!(b.1)]);
                }
            }
        }
        prop_assert!(same_rows(got, want, false));
        let got = run(&p, "SELECT t.id, u.w FROM t LEFT JOIN u ON t.k = u.k");
        let mut want = Vec::new();
        for a in &t {
            let m: Vec<&URow> = u.iter().filter(|b| a.1.is_some() && a.1 == b.0).collect();
            if m.is_empty() {
                want.push(vec![json!(a.0), Value::Null]);
            }
            for b in m {
                want.push(vec![json!(a.0), json!(b.1)]);
            }
        }
        prop_assert!(same_rows(got, want, false));
    }

    #[test]
    fn distinct_matches_set((t, u, parts) in tables()) {
        let p = Mem::new(&t, &u, parts);
        let got = run(&p, "SELECT DISTINCT g, k FROM t");
        let mut want: Vec<Vec<Value>> = t.iter().map(|r| vec![opt(r.2.clone()), opt(r.1)]).collect();
        want.sort_by_key(|r| format!("{r:?}"));
        want.dedup();
        prop_assert!(same_rows(got, want, false));
    }

    #[test]
    fn windows_match_partitions((t, u, parts) in tables()) {
        let p = Mem::new(&t, &u, parts);
        let got = run(&p, "SELECT id, row_number() OVER (PARTITION BY g ORDER BY id), rank() OVER (PARTITION BY g ORDER BY k NULLS FIRST), lag(id) OVER (ORDER BY id), lead(k) OVER (ORDER BY id), sum(k) OVER (PARTITION BY g ORDER BY id) FROM t");
        let mut want = Vec::new();
        for (i, r) in t.iter().enumerate() {
            let part: Vec<&TRow> = t.iter().filter(|x| x.2 == r.2).collect();
            let row_number = part.iter().filter(|x| x.0 <= r.0).count();
            let key = |x: &TRow| x.1.map_or(i64::MIN, |k| k);
            let rank = 1 + part.iter().filter(|x| key(x) < key(r)).count();
            let lag = if i == 0 { Value::Null } else { json!(t[i - 1].0) };
            let lead = t.get(i + 1).map_or(Value::Null, |x| opt(x.1));
            let running: Vec<i64> = part.iter().filter(|x| x.0 <= r.0).filter_map(|x| x.1).collect();
            let sum = if running.is_empty() { Value::Null } else { json!(running.iter().sum::<i64>()) };
            want.push(vec![json!(r.0), json!(row_number), json!(rank), lag, lead, sum]);
        }
        prop_assert!(same_rows(got, want, false));
    }
}

#[test]
fn explain_shows_pushdown_and_pruning() {
    let t: Vec<TRow> = vec![(0, Some(1), Some("a".into()), Some(0.5))];
    let p = Mem::new(&t, &[(Some(1), "x".into())], 1);
    let explain = |q: &str| match sql::plan(&format!("EXPLAIN {q}"), &p).unwrap() {
        Statement::Explain(plan) => plan.to_string(),
        _ => panic!("not an explain"),
    };
    insta::assert_snapshot!(
        "filter_pushdown",
        explain("SELECT g, count(*) FROM t WHERE v > 0.5 GROUP BY g ORDER BY 2 DESC LIMIT 3")
    );
    insta::assert_snapshot!(
        "join_pruning",
        explain("SELECT t.id, u.w FROM t JOIN u ON t.k = u.k WHERE u.w = 'x' AND t.v < 1")
    );
    insta::assert_snapshot!(
        "window_and_subquery",
        explain("SELECT id, rank() OVER (PARTITION BY g ORDER BY v) FROM (SELECT * FROM t WHERE k IN (1, 2)) s")
    );
}

#[test]
fn explain_shows_the_physical_operators() {
    let t: Vec<TRow> = vec![(0, Some(1), Some("a".into()), Some(0.5))];
    let p = Mem::new(&t, &[(Some(1), "x".into())], 1);
    let explain = |q: &str| match sql::plan(&format!("EXPLAIN {q}"), &p).unwrap() {
        // Two workers, as on the CI machine, whatever the cores here.
        Statement::Explain(plan) => sql::explain::physical_on(&plan, 2),
        _ => panic!("not an explain"),
    };
    insta::assert_snapshot!(
        "physical_top_n_and_join",
        explain(
            "SELECT t.g, count(DISTINCT u.w) FROM t JOIN u ON t.k = u.k WHERE t.v > 0.5 \
             GROUP BY t.g ORDER BY 2 DESC LIMIT 3"
        )
    );
    insta::assert_snapshot!(
        "physical_distinct_union_window",
        explain(
            "SELECT DISTINCT g FROM (SELECT g FROM t UNION ALL SELECT w FROM u) s LIMIT 2 OFFSET 1"
        )
    );
}

/// EXPLAIN ANALYZE runs the query: rows and batches per operator are exact
/// (times are not, so they are masked).
#[test]
fn explain_analyze_counts_rows_per_operator() {
    let t: Vec<TRow> = (0..40)
        .map(|i| {
            (
                i,
                Some(i % 4),
                Some(format!("g{}", i % 3)),
                Some(i as f64 / 10.0),
            )
        })
        .collect();
    let p = Mem::new(&t, &[(Some(1), "x".into()), (Some(2), "y".into())], 4);
    let q = "EXPLAIN ANALYZE SELECT t.g, count(*) FROM t JOIN u ON t.k = u.k \
             WHERE t.v > 0.5 GROUP BY t.g ORDER BY 2 DESC, 1 LIMIT 2";
    let Statement::ExplainAnalyze(plan) = sql::plan(q, &p).unwrap() else {
        panic!("not EXPLAIN ANALYZE")
    };
    let text = sql::explain::analyze(&plan, &p, Limits::default()).unwrap();
    let masked = regex::Regex::new(r"[0-9.]+ms")
        .unwrap()
        .replace_all(&text, "Tms");
    let masked = regex::Regex::new(r"memory([= ])\d+KiB")
        .unwrap()
        .replace_all(&masked, "memory${1}M");
    let masked = regex::Regex::new(r"on \d+ workers?")
        .unwrap()
        .replace_all(&masked, "on W workers");
    insta::assert_snapshot!("analyze_counts", masked);
    // Too small a budget fails while the state grows.
    let tight = Limits {
        memory_budget: 64,
        ..Limits::default()
    };
    let e = sql::explain::analyze(&plan, &p, tight).unwrap_err();
    assert_eq!(e.code(), "PC-SQL-017", "{e}");
}

/// A layer whose table `j` has one JSON column, `doc`, that it says is
/// written JSON (`DataLayer::canonical_json`) when `written`. Its one row
/// names a member twice, which written JSON never does: the probe shows
/// which reading each part of a query used.
struct Written {
    written: bool,
}

fn j_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("doc", DataType::Utf8, true),
    ]))
}

impl DataLayer for Written {
    fn datasets(&self) -> Vec<String> {
        vec!["dataset".into()]
    }
    fn relation_names(&self) -> Vec<&'static str> {
        vec!["j"]
    }
    fn relation(&self, _dataset: &str, relation: &str) -> Option<SchemaRef> {
        (relation == "j").then(j_schema)
    }
    fn is_entity(&self, _relation: &str) -> bool {
        false
    }
    fn canonical_json(&self, relation: &str, column: &str) -> bool {
        self.written && relation == "j" && column == "doc"
    }
    fn scan(
        &self,
        _dataset: &str,
        _relation: &str,
        columns: &[usize],
        post: &(dyn Fn(RecordBatch) -> Result<RecordBatch, SqlError> + Sync),
        emit: &mut dyn FnMut(RecordBatch) -> Result<(), SqlError>,
        _check: &(dyn Fn() -> Result<(), SqlError> + Sync),
    ) -> Result<(), SqlError> {
        let b = RecordBatch::try_new(
            j_schema(),
            vec![
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(StringArray::from(vec![r#"{"a":1,"a":2}"#])),
            ],
        )
        .unwrap();
        emit(post(b.project(columns)?)?)
    }
}

/// A scan reads a JSON path over a column the layer says is written JSON
/// only up to the member, in its filter and in the aggregate its workers
/// run; other operators, and a layer that promises nothing, read the
/// text whole. The batches a scan hands on carry no mark.
#[test]
fn scans_read_written_json_up_to_the_member() {
    let (written, plain) = (Written { written: true }, Written { written: false });
    let first = "SELECT count(*) FROM j WHERE doc ->> 'a' = '1'";
    assert_eq!(run(&written, first), vec![vec![json!(1)]]);
    assert_eq!(run(&plain, first), vec![vec![json!(0)]]);
    let sum = "SELECT sum(CAST(doc ->> 'a' AS BIGINT)) FROM j";
    assert_eq!(run(&written, sum), vec![vec![json!(1)]]);
    assert_eq!(run(&plain, sum), vec![vec![json!(2)]]);
    // Above a LIMIT the path is not evaluated in the scan: read whole. (A
    // probe of where the path runs today, not a promise: pushing it into
    // the scan would be as right for a layer that keeps its word.)
    let above = "SELECT doc ->> 'a' FROM (SELECT doc FROM j LIMIT 1)";
    assert_eq!(run(&written, above), vec![vec![json!("2")]]);
    let Statement::Query(plan) =
        sql::plan("SELECT doc FROM j WHERE doc ->> 'a' = '1'", &written).unwrap()
    else {
        panic!("not a query")
    };
    let r = sql::execute(&plan, &written, Limits::default()).unwrap();
    assert_eq!(
        r.batches.iter().map(RecordBatch::num_rows).sum::<usize>(),
        1
    );
    for b in &r.batches {
        for f in b.schema().fields() {
            assert!(f.metadata().is_empty(), "{f:?}");
        }
    }
}
