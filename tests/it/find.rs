//! `find` semantics: every hit set equals a brute-force evaluation of the
//! expression row by row over the decoded text (same analyzer, no index;
//! tool output decoded from its raw JSON here, independently of the
//! library), Chinese recall equals a LIKE ground truth, and the cache index
//! follows Source changes. The corpora carry terminal output as real agents
//! record it: prompts, tracebacks, ANSI colours, CRLF, tabs, printed JSON.

use std::collections::BTreeSet;
use std::path::Path;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int64Type;
use pchronicle::catalog::{DatasetUri, DiscoveryLimits};
use pchronicle::dataset::Mounts;
use pchronicle::find::exec::{self, selector_columns, Deadline, Identity};
use pchronicle::find::predicate::Predicate;
use pchronicle::find::prepare::{self, BuildPolicy};
use pchronicle::find::{parse_match_expression, FindExpr};
use pchronicle::fts::{find_terms, BUILD_COLUMNS};
use pchronicle::table::Table;

type Key = (String, String, Option<String>, Option<i64>);

struct Row {
    key: Key,
    role: Option<String>,
    text: [Option<String>; 5],
    json: [Option<serde_json::Value>; 2],
}

fn mounts(dir: &Path) -> Mounts {
    let uri = DatasetUri::local(dir, Path::new("/"));
    Mounts::open(
        &[("dataset".into(), uri)],
        DiscoveryLimits::default(),
        false,
        1 << 28,
    )
    .unwrap()
}

/// The text a person reads in an observation, decoded from its raw JSON by
/// hand: each result's content string, or its text parts and `[image: path]`
/// for image parts, or `[subagent: id]` for a subagent reference; joined
/// with newlines.
fn decoded_observation(raw: &str) -> Option<String> {
    use serde_json::Value;
    let v: Value = serde_json::from_str(raw).unwrap();
    let mut pieces: Vec<String> = Vec::new();
    for r in v["results"].as_array()? {
        match &r["content"] {
            Value::String(s) => pieces.push(s.clone()),
            Value::Array(parts) => {
                for p in parts {
                    match (p["text"].as_str(), p["type"].as_str()) {
                        (Some(t), _) => pieces.push(t.to_string()),
                        (None, Some("image")) => pieces.push(format!(
                            "[image: {}]",
                            p["source"]["path"].as_str().unwrap()
                        )),
                        other => panic!("unexpected part {other:?}"),
                    }
                }
            }
            Value::Null => {}
            other => panic!("unexpected content {other}"),
        }
        if let Some(refs) = r["subagent_trajectory_ref"].as_array() {
            for x in refs {
                pieces.push(format!(
                    "[subagent: {}]",
                    x["trajectory_id"].as_str().unwrap()
                ));
            }
        }
    }
    pieces.retain(|p| !p.is_empty());
    (!pieces.is_empty()).then(|| pieces.join("\n"))
}

/// What a terminal shows, written here apart from the library: CRLF as a
/// newline, OSC strings and CSI sequences removed, then each line replayed
/// with carriage returns and backspaces moving the cursor, other controls
/// dropped.
fn terminal_view(text: &str) -> String {
    let osc = regex::Regex::new(r"\x1b\][^\x07\n]*(\x07|\x1b\\)?").unwrap();
    let csi = regex::Regex::new(r"\x1b\[[0-?]*[ -/]*[@-~]?").unwrap();
    let t = text.replace("\r\n", "\n");
    let t = osc.replace_all(&t, "");
    let t = csi.replace_all(&t, "");
    t.split('\n')
        .map(|line| {
            let mut shown: Vec<char> = Vec::new();
            let mut at = 0usize;
            for c in line.chars() {
                match c {
                    '\r' => at = 0,
                    '\u{8}' => at = at.saturating_sub(1),
                    '\t' => {
                        if at < shown.len() {
                            shown[at] = c;
                        } else {
                            shown.push(c);
                        }
                        at += 1;
                    }
                    c if c.is_control() => {}
                    c => {
                        if at < shown.len() {
                            shown[at] = c;
                        } else {
                            shown.push(c);
                        }
                        at += 1;
                    }
                }
            }
            shown.into_iter().collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of results given on calls themselves, by step: (source,
/// document, step id) → the decoded strings, in call order.
fn call_outputs(m: &Mounts) -> std::collections::HashMap<(String, String, i64), String> {
    let batches = m
        .scan_sources(
            "dataset",
            Table::ToolCalls,
            &["source_path", "document_id", "step_id", "result"],
            &|_| true,
            &|b| Ok(b),
            &|| Ok(()),
        )
        .unwrap();
    let mut out: std::collections::HashMap<(String, String, i64), String> =
        std::collections::HashMap::default();
    for b in &batches {
        let s = |i: usize| b.column(i).as_string::<i32>();
        let step = b.column(2).as_primitive::<Int64Type>();
        for r in 0..b.num_rows() {
            if s(3).is_null(r) {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(s(3).value(r)).unwrap();
            let text = match v {
                serde_json::Value::String(t) => t,
                serde_json::Value::Null => continue,
                // Structured results of real files: the library's rendering.
                other => pchronicle::formats::text::content_text(&other),
            };
            let e = out
                .entry((s(0).value(r).into(), s(1).value(r).into(), step.value(r)))
                .or_default();
            if !e.is_empty() {
                e.push('\n');
            }
            e.push_str(&text);
        }
    }
    out
}

/// Every step of the mount with the text the index must search. With
/// `by_hand`, observations are decoded here from their raw JSON and checked
/// against the library's `observation_text`; otherwise (real files with
/// shapes the hand decoder does not know) the library's column is taken.
fn rows(m: &Mounts, by_hand: bool) -> Vec<Row> {
    let mut cols = BUILD_COLUMNS.to_vec();
    cols.push("observation");
    let calls = call_outputs(m);
    let batches = m
        .scan_sources(
            "dataset",
            Table::Steps,
            &cols,
            &|_| true,
            &|b| Ok(b),
            &|| Ok(()),
        )
        .unwrap();
    let mut out = Vec::new();
    for b in &batches {
        let s = |i: usize, r: usize| {
            let a = b.column(i).as_string::<i32>();
            (!a.is_null(r)).then(|| a.value(r).to_string())
        };
        let step = b.column(4).as_primitive::<Int64Type>();
        for r in 0..b.num_rows() {
            let observation = if by_hand {
                // The library's decoded column equals the hand decoding.
                let decoded = s(BUILD_COLUMNS.len(), r).and_then(|raw| decoded_observation(&raw));
                assert_eq!(s(10, r), decoded, "observation_text of row {r}");
                decoded
            } else {
                s(10, r)
            };
            // Results given on the step's calls are searched as tool output.
            let own = (!step.is_null(r))
                .then(|| calls.get(&(s(0, r).unwrap(), s(1, r).unwrap(), step.value(r))))
                .flatten();
            let observation = match (observation, own) {
                (Some(o), Some(c)) => Some(format!("{o}\n{c}")),
                (o, c) => o.or_else(|| c.cloned()),
            };
            out.push(Row {
                key: (
                    s(0, r).unwrap(),
                    s(1, r).unwrap(),
                    s(3, r),
                    (!step.is_null(r)).then(|| step.value(r)),
                ),
                role: s(5, r),
                text: [s(8, r), s(9, r), observation, s(11, r), s(12, r)],
                json: [
                    s(13, r).and_then(|t| serde_json::from_str(&t).ok()),
                    s(14, r).and_then(|t| serde_json::from_str(&t).ok()),
                ],
            });
        }
    }
    out
}

/// The reference: evaluate the AST on one row without any index.
fn reference(e: &FindExpr, row: &Row) -> bool {
    match e {
        FindExpr::Text { field, text, .. } => {
            let terms = exec::query_terms(text).unwrap();
            let (cols, role) = selector_columns(*field);
            if role.is_some() && role != row.role.as_deref() {
                return false;
            }
            cols.iter().any(|&c| {
                row.text[c]
                    .as_deref()
                    .is_some_and(|t| find_terms(&terminal_view(t), &terms).is_some())
            })
        }
        FindExpr::Json {
            column,
            path,
            op,
            value,
            ..
        } => {
            let p = Predicate::new(path, *op, value).unwrap();
            let cols: Vec<usize> = match column.as_deref() {
                None => vec![0, 1],
                Some("metrics") => vec![0],
                Some("extra") => vec![1],
                Some(other) => panic!("column {other}"),
            };
            cols.iter()
                .any(|&c| row.json[c].as_ref().is_some_and(|v| p.eval(v)))
        }
        FindExpr::Not(x) => !reference(x, row),
        FindExpr::And(v) => v.iter().all(|x| reference(x, row)),
        FindExpr::Or(v) => v.iter().any(|x| reference(x, row)),
    }
}

fn search(m: &Mounts, cache: &Path, expr: &FindExpr) -> (Vec<Key>, u64) {
    search_first(m, cache, expr, usize::MAX / 2)
}

/// The first `max_results` hits in the order `find` gives them, and the
/// total.
fn search_first(m: &Mounts, cache: &Path, expr: &FindExpr, max_results: usize) -> (Vec<Key>, u64) {
    let p = prepare::prepare(m, "dataset", Some(cache), BuildPolicy::Build, &|_| {}).unwrap();
    assert!(p.fts_available, "{:?}", p.reason);
    let list = exec::search_steps(
        &p.indexes,
        Some(expr),
        &Identity::default(),
        max_results,
        Deadline {
            at: None,
            seconds: 0.0,
        },
    )
    .unwrap();
    let keys = list
        .hits
        .iter()
        .map(|h| {
            (
                h.source_path.clone(),
                h.document_id.clone(),
                h.session_id.clone(),
                h.step_id,
            )
        })
        .collect();
    (keys, list.total)
}

fn corpus(dir: &Path, runs: u64, format: &str, seed: u64) {
    pchronicle::corpus::generate(&pchronicle::corpus::Options {
        out: dir.to_path_buf(),
        runs,
        steps: 16,
        seed,
        format: format.into(),
        subagent_every: 5,
        files_per_dir: 10,
    })
    .unwrap();
}

const EXPRESSIONS: &[&str] = &[
    "timeout",
    "超时",
    "数据库",
    "重试",
    "数据",
    "请求超时",
    "\"connection timeout\"",
    "#user(超时)",
    "#assistant(retry)",
    "#agent(数据库)",
    "#system(You)",
    "#reasoning(缓存)",
    "#observation(失败)",
    "#prompt(queue)",
    "#message(deploy)",
    "#model(gpt)",
    "#all(权限)",
    "#content(latency)",
    "timeout OR 超时",
    "timeout AND NOT retry",
    "NOT 超时",
    "(#user(timeout) OR #assistant(retry)) AND NOT #system(example)",
    "超时 AND $.priority>=2",
    "数据库 OR $.priority=3",
    "NOT (超时 OR timeout) AND #json.metrics(\"$.prompt_tokens\") > 3000",
    "#json.extra(\"$.tags\")=\"important\"",
    "$.score < 0.1",
    "$.extra.latency_ms >= 4000 AND 重试",
    "cache AND miss AND NOT 命中",
    "Timeout",
    // Words people read in terminal output: at the start of a line, after a
    // prompt, a tab or an ANSI colour code, inside JSON a tool printed.
    "Traceback",
    "ModuleNotFoundError",
    "\"most recent call last\"",
    "#observation(collected)",
    "#observation(Compiling)",
    "#observation(modified)",
    "#observation(ERROR) AND NOT #observation(WARN)",
    "#observation(\"status\")",
    "#all(AssertionError) OR #content(pytest)",
    "root AND NOT Traceback",
    "#observation(Successfully installed)",
    "#observation(超时) OR #observation(failed)",
    "\"No such file or directory\"",
    "#content(passed) AND #observation(FAILED)",
    // Phrases of CJK words are looked up as pair terms (more in
    // `cjk_phrases_from_pair_terms_equal_the_reference`).
    "'请求，超时'",
    "'数据连接'",
    "#user('超时重试') OR NOT '数据库连接'",
];

#[test]
fn every_hit_set_equals_the_reference_evaluation() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    corpus(&data.join("atif"), 40, "atif", 11);
    corpus(&data.join("actf"), 8, "actf", 12);
    corpus(&data.join("openai"), 20, "openai", 13);
    let cache = tmp.path().join("cache");
    let m = mounts(&data);
    let all = rows(&m, true);
    assert!(all.len() > 500, "corpus too small: {}", all.len());
    let informative = hit_sets_equal_the_reference(&m, &cache, &all);
    // The expressions discriminate: most match some rows but not all.
    assert!(
        informative >= EXPRESSIONS.len() - 3,
        "only {informative} informative expressions"
    );
}

/// The same on the real trajectory files shipped with the project (the
/// example Dataset and the Harbor golden runs), searched in place and
/// through a store that `import` made of the Harbor runs (its own index,
/// which reads results given on calls from the store's `tool_calls`).
#[test]
fn shipped_fixtures_hit_sets_equal_the_reference() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    for dir in [
        root.join("examples/dataset"),
        root.join("tests/fixtures/harbor"),
    ] {
        let m = mounts(&dir);
        let all = rows(&m, false);
        assert!(all.len() >= 10, "{}: {} steps", dir.display(), all.len());
        hit_sets_equal_the_reference(&m, &tmp.path().join("cache"), &all);
    }
    let data = tmp.path().join("actf");
    corpus(&data, 12, "actf", 31);
    let store = tmp.path().join("store");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pchronicle"))
        .args(["import", "--from"])
        .arg(&data)
        .arg("--output")
        .arg(&store)
        .arg("-q")
        .env("PCHRONICLE_CACHE_DIR", tmp.path().join("unused"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = mounts(&store);
    let all = rows(&m, false);
    assert!(
        all.iter()
            .any(|r| r.text[2].as_deref().is_some_and(|t| t.contains("root@"))),
        "no call output in the store's steps"
    );
    hit_sets_equal_the_reference(&m, &tmp.path().join("cache"), &all);
}

/// Compare every expression's hits with the reference over `all`; returns
/// how many expressions matched some rows but not all.
fn hit_sets_equal_the_reference(m: &Mounts, cache: &Path, all: &[Row]) -> usize {
    expressions_equal_the_reference(m, cache, all, EXPRESSIONS)
}

fn expressions_equal_the_reference(
    m: &Mounts,
    cache: &Path,
    all: &[Row],
    expressions: &[&str],
) -> usize {
    let mut informative = 0;
    for text in expressions {
        let e = parse_match_expression(text).unwrap();
        let mut want: Vec<Key> = all
            .iter()
            .filter(|r| reference(&e, r))
            .map(|r| r.key.clone())
            .collect();
        want.sort();
        eprintln!("{text}: {} of {}", want.len(), all.len());
        if !want.is_empty() && want.len() < all.len() {
            informative += 1;
        }
        let (mut got, total) = search(m, cache, &e);
        assert_eq!(total as usize, got.len(), "{text}: total");
        got.sort();
        assert_eq!(
            got,
            want,
            "{text}: hit set differs ({} vs {} reference)",
            got.len(),
            want.len()
        );
    }
    informative
}

/// With a bound on the results, the hits are the first of the whole hit
/// list in Source order, and the total is unchanged, also when a segment
/// holds many times more matches than are kept; and phrases, searched in
/// parallel document ranges in segments this large, match the reference.
#[test]
fn bounded_results_are_the_first_in_source_order() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    corpus(&data, 400, "atif", 41);
    let cache = tmp.path().join("cache");
    let m = mounts(&data);
    // Segments this large are searched for phrases in parallel ranges.
    let every = rows(&m, false);
    expressions_equal_the_reference(
        &m,
        &cache,
        &every,
        &[
            "请求超时",
            "\"most recent call last\"",
            "\"connection timeout\" OR 数据库",
        ],
    );
    for text in [
        "NOT qqqzzzq",
        "超时 OR timeout",
        "#observation(root)",
        "'请求超时'",
    ] {
        let e = parse_match_expression(text).unwrap();
        let (all, total) = search(&m, &cache, &e);
        assert!(all.len() > 50, "{text}: {} hits", all.len());
        for n in [1, 7, 100, 2500].into_iter().filter(|&n| n <= all.len()) {
            let (first, t) = search_first(&m, &cache, &e, n);
            assert_eq!(t, total, "{text}: total with {n}");
            assert_eq!(first, all[..n], "{text}: first {n}");
        }
    }
}

#[test]
fn chinese_recall_equals_like() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    corpus(&data, 60, "atif", 21);
    let m = mounts(&data);
    let all = rows(&m, true);
    // Chinese words, and words of terminal output that were missed when tool
    // output was indexed as JSON (`\nTraceback` read as `ntraceback`).
    for word in [
        "超时",
        "数据库",
        "重试",
        "Traceback",
        "ModuleNotFoundError",
        "collected",
    ] {
        // LIKE '%word%' over the content columns (message, observation, prompt).
        let like: BTreeSet<Key> = all
            .iter()
            .filter(|r| {
                [0, 2, 3]
                    .iter()
                    .any(|&c| r.text[c].as_deref().is_some_and(|t| t.contains(word)))
            })
            .map(|r| r.key.clone())
            .collect();
        assert!(!like.is_empty(), "{word} never occurs");
        let (got, _) = search(
            &m,
            &tmp.path().join("cache"),
            &parse_match_expression(word).unwrap(),
        );
        let got: BTreeSet<Key> = got.into_iter().collect();
        assert_eq!(got, like, "{word}: recall/precision differ from LIKE");
    }
}

#[test]
fn the_cache_index_follows_source_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    corpus(&data, 6, "atif", 31);
    let cache = tmp.path().join("cache");
    let find = |q: &str| {
        let m = mounts(&data);
        let p = prepare::prepare(&m, "dataset", Some(&cache), BuildPolicy::Build, &|_| {}).unwrap();
        let hits = exec::search_steps(
            &p.indexes,
            Some(&parse_match_expression(q).unwrap()),
            &Identity::default(),
            1000,
            Deadline {
                at: None,
                seconds: 0.0,
            },
        )
        .unwrap();
        (p.report, hits.hits)
    };
    let (r, _) = find("timeout");
    assert_eq!(r.indexed_sources, 6);
    let (r, _) = find("timeout");
    assert_eq!(
        (r.indexed_sources, r.reused_sources),
        (0, 6),
        "second search reuses the index"
    );

    // Change one file: only it is re-indexed, and its new text is found.
    let file = data.join("part-0000/run-0000002.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    v["steps"][1]["message"] = serde_json::json!("zanzibar 独角兽 appears now");
    std::fs::write(&file, serde_json::to_vec(&v).unwrap()).unwrap();
    let (r, hits) = find("zanzibar");
    assert_eq!(r.indexed_sources, 1);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].source_path, "part-0000/run-0000002.json");
    let (_, hits) = find("独角兽");
    assert_eq!(hits.len(), 1);

    // Delete it: its steps disappear from results.
    std::fs::remove_file(&file).unwrap();
    let (_, hits) = find("zanzibar");
    assert!(hits.is_empty());

    // Without permission to build, a stale index is reported unavailable.
    corpus(&data.join("more"), 1, "atif", 32);
    let m = mounts(&data);
    let p = prepare::prepare(&m, "dataset", Some(&cache), BuildPolicy::ReuseOnly, &|_| {}).unwrap();
    assert!(!p.fts_available);
    assert!(p.reason.unwrap().contains("--no-build-index"));
}

#[test]
fn deep_and_wide_expressions_do_not_overflow() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    corpus(&data, 3, "atif", 41);
    let m = mounts(&data);
    // Thousands of OR terms in one --match are refused by size, but combined
    // expressions built in code may be large: evaluation is iterative.
    let terms: Vec<FindExpr> = (0..3000)
        .map(|i| parse_match_expression(&format!("word{i}")).unwrap())
        .chain(std::iter::once(parse_match_expression("timeout").unwrap()))
        .collect();
    let e = FindExpr::Or(terms);
    let (got, _) = search(&m, &tmp.path().join("cache"), &e);
    let (want, _) = search(
        &m,
        &tmp.path().join("cache"),
        &parse_match_expression("timeout").unwrap(),
    );
    assert_eq!(got, want);
}

/// Maintenance publishes a new store snapshot; its own full-text index is
/// rebuilt for it, so searches keep using the store's index.
#[test]
fn maintained_stores_keep_their_own_index() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("actf");
    corpus(&data, 8, "actf", 41);
    let store = tmp.path().join("store");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pchronicle"))
        .args(["import", "--from"])
        .arg(&data)
        .arg("--output")
        .arg(&store)
        .arg("-q")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = rows(&mounts(&store), false);
    let r = pchronicle::ingest::maintain::maintain(
        &store,
        &pchronicle::store::MaintainOptions::default(),
    )
    .unwrap();
    assert!(r.fts_indexed);
    let m = mounts(&store);
    let after = rows(&m, false);
    assert_eq!(after.len(), before.len());
    let p = prepare::prepare(&m, "dataset", None, BuildPolicy::ReuseOnly, &|_| {}).unwrap();
    assert!(p.fts_available, "{:?}", p.reason);
    assert_eq!(p.report.reused_sources, 1);
    hit_sets_equal_the_reference(&m, &tmp.path().join("cache"), &after);
}

/// JSON comparisons are answered from leaves indexed by path; on cells with
/// every shape JSON allows, the hits equal the row-by-row evaluation: lax
/// arrays, `2` = `2.0` but not `"2"`, negative zero, integers beyond 2^53,
/// keys that need quoting, deep paths, null and booleans, and cells too
/// large or too long to be broken into leaves (evaluated from the store).
#[test]
fn json_comparisons_from_indexed_leaves_equal_the_reference() {
    use serde_json::json;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    corpus(&data, 6, "atif", 51);
    let long = "L".repeat(600);
    let many: Vec<u64> = (0..5000).collect();
    let cells = [
        json!({"p": 2, "tags": ["x", "y"]}),
        json!({"p": 2.0, "tags": "x"}),
        json!({"p": "2", "tags": [["x"], {"k": "x"}]}),
        json!({"p": [1, 3, "4"], "n": null}),
        json!({"p": -0.0, "big": 9_007_199_254_740_993_u64, "t": true}),
        json!({"p": 1e300, "big": 9_007_199_254_740_992_u64, "t": false}),
        json!({"weird key.x": {"a b": [0, {"c": 5}]}, "p": -3}),
        json!({"long": long, "p": 2}),
        json!({"many": many, "p": 7}),
        json!({"p": null, "nested": {"deep": {"deeper": [{"x": 1}, {"x": 2}]}}}),
        json!({"u": u64::MAX, "p": 2.5}),
        json!({"p": -1e-300, "tags": []}),
        json!({}),
    ];
    let mut k = 0usize;
    for e in crate::support::json_files(&data) {
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&e).unwrap()).unwrap();
        for step in v["steps"].as_array_mut().unwrap() {
            step["extra"] = cells[k % cells.len()].clone();
            if step.get("metrics").is_some() {
                step["metrics"]["extra"] = cells[(k + 5) % cells.len()].clone();
            }
            k += 1;
        }
        std::fs::write(&e, serde_json::to_vec(&v).unwrap()).unwrap();
    }
    let m = mounts(&data);
    let all = rows(&m, true);
    assert!(
        all.iter().any(|r| r.json[1] == Some(cells[8].clone())),
        "the cells did not reach the steps relation"
    );
    let long_eq = format!("$.long = \"{long}\"");
    let exprs = [
        "$.p = 2",
        "$.p >= 2",
        "$.p > 2",
        "$.p < 0",
        "$.p <= -3",
        "$.p = \"2\"",
        "$.p != 2",
        "$.p = 0",
        "$.p = 2.5",
        "$.p >= 1e300",
        "$.p = null",
        "$.p = 4",
        "$.p = \"4\"",
        "$.tags = \"x\"",
        "$.tags[0] = \"x\"",
        "$.tags[1].k = \"x\"",
        "$.n = null",
        "$.t = true",
        "$.t = false",
        "$.big = 9007199254740993",
        "$.big = 9007199254740992",
        "$.big > 9007199254740992",
        "$.u > 1",
        "#json.extra(\"$[\\\"weird key.x\\\"][\\\"a b\\\"][1].c\") = 5",
        "#json.extra(\"$[\\\"weird key.x\\\"][\\\"a b\\\"]\") = 0",
        &long_eq,
        "$.many = 4999",
        "$.many[4999] >= 4999",
        "$.nested.deep.deeper[1].x = 2",
        "$.extra.p = 2",
        "#json.metrics(\"$.extra.p\") >= 2",
        "#json.metrics(\"$.prompt_tokens\") > 2000",
        "$.p = 2 OR $.t = true",
        "NOT $.p = 2",
        "timeout AND $.p >= 2",
        "NOT timeout AND $.tags = \"x\"",
    ];
    let informative = expressions_equal_the_reference(&m, &tmp.path().join("cache"), &all, &exprs);
    assert!(
        informative >= exprs.len() - 2,
        "only {informative} informative"
    );
}

/// Phrases of CJK words are looked up as pair terms of adjacent words; on
/// messages made to catch a pair index that differs from positions, the
/// hits equal the row-by-row evaluation: words apart by punctuation or by a
/// Latin word, phrases through sub-words of longer words, three and four
/// words, repeated words, kana and hangul.
#[test]
fn cjk_phrases_from_pair_terms_equal_the_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    corpus(&data, 6, "atif", 53);
    let messages = [
        "数据库连接超时，请求重试",
        "请求，超时。",
        "请求 timeout 超时",
        "缓存 timeout 超时后重试",
        "中华人民共和国成立了",
        "南京市长江大桥",
        "连接数据库",
        "数据库，连接池耗尽",
        "第3次重试请求超时",
        "请求超时请求超时",
        "接続がタイムアウトしました",
        "요청 시간 초과",
        "超时",
    ];
    let mut k = 0usize;
    for e in crate::support::json_files(&data) {
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&e).unwrap()).unwrap();
        for step in v["steps"].as_array_mut().unwrap() {
            if k % 3 != 2 {
                step["message"] = messages[k % messages.len()].into();
            }
            k += 1;
        }
        std::fs::write(&e, serde_json::to_vec(&v).unwrap()).unwrap();
    }
    let m = mounts(&data);
    let all = rows(&m, true);
    let exprs = [
        "'数据库连接'",
        "'数据连接'",
        "'连接超时'",
        "'请求超时'",
        "'请求，超时'",
        "'超时请求'",
        "'数据库连接超时'",
        "'连接超时请求重试'",
        "'timeout 超时'",
        "'请求 timeout 超时'",
        "'缓存 timeout'",
        "'超时后重试'",
        "'共和国成立'",
        "'中华人民共和国成立'",
        "'长江大桥'",
        "'请求超时请求'",
        "'タイムアウト'",
        "'요청 시간'",
        "#user('请求超时')",
        "NOT '请求超时'",
        "'请求超时' AND '超时请求'",
        "'请求超时' OR '长江大桥'",
    ];
    let informative = expressions_equal_the_reference(&m, &tmp.path().join("cache"), &all, &exprs);
    assert!(
        informative >= exprs.len() - 2,
        "only {informative} informative"
    );
}
