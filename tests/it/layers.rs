//! Dependencies between the crate's top-level modules point down: every
//! `crate::X` a module of `src/` names must be an edge of [`ALLOWED`]. The
//! table is the architecture (docs/architecture.md prints it); a new edge
//! is a design decision, made here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// module → the modules it may use. Rows are ordered from the top (what
/// users run) to the bottom (helpers that know nothing of trajectories).
const ALLOWED: &[(&str, &[&str])] = &[
    // The surfaces: commands and the Warehouse. Nothing uses them; the fuzz
    // and corpus harnesses (test-only features) sit beside them.
    (
        "cli",
        &[
            "analysis", "catalog", "dataset", "error", "find", "formats", "gateway", "http",
            "ingest", "render", "s3", "sql", "store", "table", "util", "web",
        ],
    ),
    (
        "web",
        &[
            "catalog", "dataset", "error", "find", "formats", "http", "ingest", "render", "s3",
            "sql", "table", "util",
        ],
    ),
    (
        "fuzzing",
        &[
            "catalog", "cli", "dataset", "find", "formats", "gateway", "http", "s3", "sql",
            "store", "table", "util", "web",
        ],
    ),
    ("corpus", &["formats", "util"]),
    // The error every command reports, over the features' own errors.
    (
        "error",
        &[
            "catalog", "find", "formats", "gateway", "ingest", "sql", "util",
        ],
    ),
    // Features.
    ("gateway", &["formats", "http", "s3", "store", "util"]),
    (
        "ingest",
        &[
            "catalog", "dataset", "find", "formats", "s3", "sql", "store", "table", "util",
        ],
    ),
    ("analysis", &["sql"]),
    (
        "find",
        &[
            "catalog", "dataset", "formats", "fts", "s3", "sql", "store", "table", "util",
        ],
    ),
    ("render", &["formats", "sql", "util"]),
    // Relations over pinned Sources, and the engine that queries them.
    (
        "dataset",
        &["catalog", "formats", "sql", "store", "table", "util"],
    ),
    ("sql", &["table", "util"]),
    // Sources and derived indexes.
    ("catalog", &["formats", "s3", "store", "util"]),
    ("fts", &["util"]),
    // Storage and the model.
    ("store", &["formats", "s3", "table", "util"]),
    ("table", &["formats", "util"]),
    ("formats", &["util"]),
    // Leaves.
    ("s3", &["util"]),
    ("http", &["util"]),
    ("util", &[]),
];

fn module_of(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn uses(dir: &Path, root: &Path, out: &mut BTreeMap<String, BTreeSet<(String, String)>>) {
    let re = regex::Regex::new(r"crate::([a-z_][a-z0-9_]*)").unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            uses(&p, root, out);
            continue;
        }
        if p.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let rel = p.strip_prefix(root).unwrap();
        let from = module_of(rel);
        if from == "lib" || from == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for c in re.captures_iter(code) {
                let to = c[1].to_string();
                if to != from {
                    out.entry(from.clone())
                        .or_default()
                        .insert((to, format!("{}:{}", rel.display(), n + 1)));
                }
            }
        }
    }
}

#[test]
fn dependencies_point_down() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeMap::new();
    uses(&root, &root, &mut found);
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut bad = Vec::new();
    for (from, edges) in &found {
        let Some(ok) = allowed.get(from.as_str()) else {
            bad.push(format!("module `{from}` is not in the layer table"));
            continue;
        };
        for (to, at) in edges {
            if !ok.contains(&to.as_str()) {
                bad.push(format!("{from} → {to} ({at})"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "edges not in the layer table:\n{}",
        bad.join("\n")
    );
}

/// The table itself has no cycle: the layers are an order.
#[test]
fn the_layer_table_has_no_cycle() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    fn visit<'a>(
        m: &'a str,
        g: &BTreeMap<&'a str, &'a [&'a str]>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if done.contains(m) {
            return;
        }
        assert!(!path.contains(&m), "cycle: {} → {m}", path.join(" → "));
        path.push(m);
        for t in g.get(m).copied().unwrap_or_default() {
            visit(t, g, path, done);
        }
        path.pop();
        done.insert(m);
    }
    let mut done = BTreeSet::new();
    for m in allowed.keys() {
        visit(m, &allowed, &mut Vec::new(), &mut done);
    }
    for (m, to) in &allowed {
        for t in *to {
            assert!(allowed.contains_key(t), "{m} → {t}: {t} has no row");
        }
    }
}

/// docs/architecture.md prints [`ALLOWED`]: its "Allowed dependencies" table
/// must say exactly what this one says.
#[test]
fn the_architecture_page_prints_the_table() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let section = page
        .split("## Allowed dependencies")
        .nth(1)
        .expect("docs/architecture.md has an `Allowed dependencies` section");
    let section = section.split("\n## ").next().unwrap();
    let mut documented: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 2, "a row of two cells: {line}");
        let targets: BTreeSet<String> = cells[1]
            .split(',')
            .map(|t| t.trim().trim_matches('`').to_string())
            .filter(|t| !t.is_empty() && t != "—")
            .collect();
        for m in cells[0].split(',') {
            let m = m.trim().trim_matches('`').to_string();
            assert!(
                documented.insert(m.clone(), targets.clone()).is_none(),
                "`{m}` has two rows"
            );
        }
    }
    let table: BTreeMap<String, BTreeSet<String>> = ALLOWED
        .iter()
        .map(|(m, to)| (m.to_string(), to.iter().map(ToString::to_string).collect()))
        .collect();
    assert_eq!(
        documented, table,
        "docs/architecture.md and tests/layers.rs disagree"
    );
}
