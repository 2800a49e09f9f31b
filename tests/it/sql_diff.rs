//! The SQL differential suite: every query in `tests/sql/*.slt` runs in
//! pChronicle and in DuckDB (Python package `duckdb`, installed by
//! `.ci/setup`) over the same rows, and the results must be equal (as
//! multisets for `rowsort`, in order for `ordered`). `error` blocks must
//! fail in pChronicle with the given code.

use crate::support::copy_dir;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use pchronicle::catalog::{DatasetUri, DiscoveryLimits};
use pchronicle::cli::render::{cell_json, write_jsonl};
use pchronicle::dataset::{describe_relation, Mounts, RELATIONS};
use pchronicle::sql::{self, Limits, Statement};
use serde_json::Value;

#[derive(Debug)]
enum Block {
    Query {
        label: String,
        ordered: bool,
        sql: String,
    },
    Error {
        label: String,
        code: String,
        sql: String,
    },
}

fn parse_slt(path: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let head: Vec<&str> = t.split_whitespace().collect();
        let mut sql = String::new();
        for l in lines.by_ref() {
            if l.trim() == "----" {
                break;
            }
            sql.push_str(l);
            sql.push('\n');
        }
        let sql = sql.trim().to_string();
        match head.as_slice() {
            ["query", label, mode] => out.push(Block::Query {
                label: (*label).into(),
                ordered: *mode == "ordered",
                sql,
            }),
            ["error", label, code] => out.push(Block::Error {
                label: (*label).into(),
                code: (*code).into(),
                sql,
            }),
            other => panic!("{}: bad block header {other:?}", path.display()),
        }
    }
    out
}

fn corpus() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    pchronicle::corpus::generate(&pchronicle::corpus::Options {
        out: data.join("gen"),
        runs: 40,
        steps: 24,
        seed: 11,
        format: "atif".into(),
        subagent_every: 5,
        files_per_dir: 16,
    })
    .unwrap();
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/dataset");
    copy_dir(&ex, &data.join("examples"));
    (dir, data)
}

fn run_ours(mounts: &Mounts, sql_text: &str) -> Result<Vec<Vec<Value>>, String> {
    let stmt = sql::plan(sql_text, mounts).map_err(|e| e.code().to_string())?;
    let Statement::Query(plan) = stmt else {
        return Err("not a query".into());
    };
    let r = sql::execute(&plan, mounts, Limits::default()).map_err(|e| e.code().to_string())?;
    let mut rows = Vec::new();
    for b in &r.batches {
        for i in 0..b.num_rows() {
            rows.push(
                (0..b.num_columns())
                    .map(|c| cell_json(b.column(c).as_ref(), i))
                    .collect(),
            );
        }
    }
    Ok(rows)
}

/// Values compare equal across engines: numbers within a relative 1e-9,
/// timestamps by instant, JSON text by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        }
        (Value::String(x), Value::String(y)) => {
            if x == y {
                return true;
            }
            let ts = |s: &str| pchronicle::formats::storyline::parse_rfc3339(s);
            if let (Some(p), Some(q)) = (ts(x), ts(y)) {
                // DuckDB keeps microseconds; pChronicle keeps nanoseconds.
                return p.div_euclid(1000) == q.div_euclid(1000);
            }
            match (
                serde_json::from_str::<Value>(x),
                serde_json::from_str::<Value>(y),
            ) {
                (Ok(p), Ok(q)) if (p.is_object() || p.is_array()) => same(&p, &q),
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn sort_key(row: &[Value]) -> String {
    row.iter()
        .map(|v| match v {
            Value::Number(n) => format!("{:.9e}", n.as_f64().unwrap_or(0.0)),
            Value::String(s) => pchronicle::formats::storyline::parse_rfc3339(s)
                .map_or_else(|| s.clone(), |ns| ns.div_euclid(1000).to_string()),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\u{1}")
}

#[test]
fn differential_against_duckdb() {
    need!("sql_diff", crate::support::Need::Python("duckdb"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut blocks = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("tests/sql"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .collect();
    files.sort();
    for f in &files {
        blocks.extend(parse_slt(f));
    }
    // The analysis reports are plans on the same engine: check them too.
    for r in [
        pchronicle::analysis::Report::Agents,
        pchronicle::analysis::Report::Models,
        pchronicle::analysis::Report::Tools,
    ] {
        blocks.push(Block::Query {
            label: format!("analysis-{}", r.name()),
            ordered: true,
            sql: pchronicle::analysis::sql(r, 100_000),
        });
    }
    let queries = blocks
        .iter()
        .filter(|b| matches!(b, Block::Query { .. }))
        .count();
    assert!(
        queries >= 150,
        "the suite should hold at least 150 queries, found {queries}"
    );

    let (dir, data) = corpus();
    let uri = DatasetUri::local(&data, Path::new("/"));
    let mounts = Mounts::open(
        &[("dataset".into(), uri)],
        DiscoveryLimits::default(),
        false,
        1 << 28,
    )
    .unwrap();
    // The same rows for DuckDB.
    let export = dir.path().join("export");
    std::fs::create_dir_all(&export).unwrap();
    for rel in RELATIONS {
        let stmt = sql::plan(&format!("SELECT * FROM dataset.{rel}"), &mounts).unwrap();
        let Statement::Query(plan) = stmt else {
            unreachable!()
        };
        let r = sql::execute(&plan, &mounts, Limits::default()).unwrap();
        let mut f = std::fs::File::create(export.join(format!("{rel}.jsonl"))).unwrap();
        write_jsonl(&mut f, &r.schema, &r.batches).unwrap();
        let schema: Vec<(String, String)> = describe_relation(rel)
            .into_iter()
            .map(|(n, t, _, _)| (n, t))
            .collect();
        std::fs::write(
            export.join(format!("{rel}.schema.json")),
            serde_json::to_string(&schema).unwrap(),
        )
        .unwrap();
    }
    let mut qmap = BTreeMap::new();
    for b in &blocks {
        if let Block::Query { label, sql, .. } = b {
            assert!(
                qmap.insert(label.clone(), sql.clone()).is_none(),
                "duplicate label {label}"
            );
        }
    }
    let qfile = dir.path().join("queries.json");
    let list: Vec<Value> = qmap
        .iter()
        .map(|(l, s)| serde_json::json!({"label": l, "sql": s}))
        .collect();
    std::fs::write(&qfile, serde_json::to_string(&list).unwrap()).unwrap();
    let outfile = dir.path().join("oracle.json");
    let py = crate::support::python();
    let st = Command::new(&py)
        .arg(root.join("tests/sql/oracle.py"))
        .arg(&export)
        .arg(&qfile)
        .arg(&outfile)
        .output()
        .expect("run python");
    assert!(
        st.status.success(),
        "the DuckDB oracle failed (run `bash .ci/setup`): {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let oracle: BTreeMap<String, Value> =
        serde_json::from_slice(&std::fs::read(&outfile).unwrap()).unwrap();

    let mut failures = Vec::new();
    for b in &blocks {
        match b {
            Block::Query {
                label,
                ordered,
                sql,
            } => {
                let expected = &oracle[label];
                if let Some(e) = expected.get("error") {
                    failures.push(format!("{label}: DuckDB failed: {e}"));
                    continue;
                }
                let mut want: Vec<Vec<Value>> =
                    serde_json::from_value(expected["rows"].clone()).unwrap();
                let mut got = match run_ours(&mounts, sql) {
                    Ok(r) => r,
                    Err(code) => {
                        failures.push(format!("{label}: pChronicle failed with {code}\n  {sql}"));
                        continue;
                    }
                };
                if !ordered {
                    want.sort_by_key(|r| sort_key(r));
                    got.sort_by_key(|r| sort_key(r));
                }
                let equal = want.len() == got.len()
                    && want.iter().zip(&got).all(|(w, g)| {
                        w.len() == g.len() && w.iter().zip(g).all(|(x, y)| same(x, y))
                    });
                if !equal {
                    let show = |r: &Vec<Vec<Value>>| {
                        r.iter()
                            .take(5)
                            .map(|x| serde_json::to_string(x).unwrap())
                            .collect::<Vec<_>>()
                            .join("\n    ")
                    };
                    failures.push(format!(
                        "{label}: results differ ({} vs {} rows)\n  {sql}\n  DuckDB:\n    {}\n  pChronicle:\n    {}",
                        want.len(),
                        got.len(),
                        show(&want),
                        show(&got)
                    ));
                }
            }
            Block::Error { label, code, sql } => match run_ours(&mounts, sql) {
                Ok(_) => failures.push(format!("{label}: expected {code}, the query ran\n  {sql}")),
                Err(c) if &c == code => {}
                Err(c) => failures.push(format!("{label}: expected {code}, got {c}\n  {sql}")),
            },
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} blocks failed:\n{}",
        failures.len(),
        blocks.len(),
        failures.join("\n\n")
    );
}
