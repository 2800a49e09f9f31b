//! Decoding the shipped fixtures: every file decodes with the expected counts,
//! ids and links.

use std::path::{Path, PathBuf};

use pchronicle::catalog::read::read_source;
use pchronicle::catalog::{CatalogSnapshot, DatasetUri, DiscoveryLimits, SourceStatus};
use pchronicle::formats::model::{message_text, Storyline};
use pchronicle::formats::DecodeOptions;

fn dataset() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/dataset")
}

fn decode_all() -> Vec<(String, Vec<Storyline>)> {
    let uri = DatasetUri::local(&dataset(), Path::new("/"));
    let snap = CatalogSnapshot::open(&uri, DiscoveryLimits::default(), false).unwrap();
    snap.sources
        .iter()
        .map(|s| {
            assert_eq!(s.status, SourceStatus::Ready, "{}", s.source_path);
            let mut docs = Vec::new();
            let read = read_source(s, DecodeOptions::full(1 << 28), &mut |d| {
                docs.push(d.clone());
            })
            .unwrap_or_else(|e| panic!("{}: {e:?}", s.source_path));
            let degrading: Vec<_> = read.diagnostics.iter().filter(|d| d.degrades()).collect();
            assert!(degrading.is_empty(), "{}: {degrading:?}", s.source_path);
            (s.source_path.clone(), docs)
        })
        .collect()
}

fn find<'a>(all: &'a [(String, Vec<Storyline>)], suffix: &str) -> &'a [Storyline] {
    &all.iter()
        .find(|(p, _)| p.ends_with(suffix))
        .unwrap_or_else(|| panic!("no {suffix}"))
        .1
}

#[test]
fn every_fixture_decodes_with_expected_counts() {
    let all = decode_all();
    // (file, trajectories, steps, tool calls)
    let expected = [
        ("cybergym_07270003_trimmed.json", 1, 2, 0),
        ("cybergym_0729001_trimmed.json", 2, 7, 1),
        ("make-doom-for-mips_trimmed.actf.json", 1, 2, 1),
        ("multimodal_18.json", 1, 18, 2),
        ("protein-assembly_trimmed.actf.json", 1, 2, 1),
        ("unicode_zh_15.json", 1, 15, 1),
        ("harbor_multiagent_v1_7.json", 2, 5, 2),
        ("linear-history.trajectory.cont-1.json", 1, 8, 0),
        ("linear-history.trajectory.json", 1, 5, 0),
        (
            "hello-world-context-summarization.trajectory.json",
            1,
            10,
            7,
        ),
        ("summarization-1-summary.json", 1, 5, 2),
        ("hello-world-invalid-json.trajectory.json", 1, 5, 3),
    ];
    assert_eq!(all.len(), expected.len());
    for (file, trajectories, steps, calls) in expected {
        let docs = find(&all, file);
        assert_eq!(docs.len(), trajectories, "{file}");
        assert_eq!(
            docs.iter().map(|d| d.turns.len()).sum::<usize>(),
            steps,
            "{file}"
        );
        assert_eq!(
            docs.iter().map(Storyline::tool_call_count).sum::<usize>(),
            calls,
            "{file}"
        );
    }
}

#[test]
fn atif_embedded_subagent_is_linked() {
    let all = decode_all();
    let docs = find(&all, "harbor_multiagent_v1_7.json");
    let (root, child) = (&docs[0], &docs[1]);
    assert_eq!(root.document_id(), "traj_root_golden");
    assert_eq!(
        root.children.as_deref(),
        Some(&["traj_child_golden".to_string()][..])
    );
    assert_eq!(child.document_id(), "traj_child_golden");
    let parent = child.parent.as_ref().unwrap();
    assert_eq!(parent.psid, "traj_root_golden");
    assert_eq!(parent.scid.as_deref(), Some("call_worker"));
    assert_eq!(parent.ptid, Some(2));
    // ATIF v1.7 session ids are run-scoped: parent and child share the run.
    assert_eq!(root.run_id(), "harbor-golden-run");
    assert_eq!(child.run_id(), "harbor-golden-run");
    assert_eq!(child.session, "harbor-golden-run");
}

#[test]
fn atif_continuation_and_copied_context() {
    let all = decode_all();
    let first = &find(&all, "linear-history.trajectory.json")[0];
    assert_eq!(
        first.continued_trajectory_ref.as_deref(),
        Some("trajectory.cont-1.json")
    );
    let cont = &find(&all, "linear-history.trajectory.cont-1.json")[0];
    assert_eq!(cont.run_id(), first.run_id());
    assert!(cont.turns[..4].iter().all(|t| t.copied == Some(true)));
    assert!(cont.turns[4..].iter().all(|t| t.copied.is_none()));
}

#[test]
fn atif_multimodal_parts_keep_image_paths() {
    let all = decode_all();
    let doc = &find(&all, "multimodal_18.json")[0];
    let with_image = doc
        .turns
        .iter()
        .find(|t| t.msg.is_array())
        .expect("a multimodal turn");
    let text = message_text(&with_image.msg);
    assert!(text.contains("[image:"), "{text}");
    // Parts are kept as given, not inlined or rewritten.
    assert!(serde_json::to_string(&with_image.msg)
        .unwrap()
        .contains("image_url"));
}

#[test]
fn atif_reasoning_and_metrics() {
    let all = decode_all();
    let doc = &find(&all, "unicode_zh_15.json")[0];
    assert!(doc.turns.iter().any(|t| t.reason.is_some()));
    assert!(doc
        .turns
        .iter()
        .any(|t| t.latency_ms.is_some() && t.ttft_ms.is_some()));
    let call = doc
        .turns
        .iter()
        .flat_map(|t| t.tool_calls.iter().flatten())
        .next()
        .unwrap();
    assert!(
        call.duration_ms.is_some(),
        "duration copied from tool_call extra"
    );
    assert!(doc.turns.iter().any(|t| message_text(&t.msg)
        .chars()
        .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c))));
}

#[test]
fn actf_attempts_become_trajectories_with_results() {
    let all = decode_all();
    let doc = &find(&all, "protein-assembly_trimmed.actf.json")[0];
    assert_eq!(doc.run.as_deref(), Some("protein-assembly-trimmed"));
    assert_eq!(doc.attempt_id.as_deref(), Some("1"));
    let result = doc.task.as_ref().unwrap().result.as_ref().unwrap();
    assert_eq!(result.correct, Some(serde_json::json!(false)));
    let call = doc
        .turns
        .iter()
        .flat_map(|t| t.tool_calls.iter().flatten())
        .next()
        .unwrap();
    assert_eq!(call.tcid, "item-2");
    assert_eq!(call.func, "command_execution");
    assert_eq!(call.response.as_ref().unwrap().exit_code, Some(0));
    let results = doc.turns[1].observation.as_ref().unwrap()["results"]
        .as_array()
        .unwrap();
    // Observation items are kept as written; they name their call by `id`
    // (or `tool_use_id`).
    let link = results[0]
        .get("tool_use_id")
        .or_else(|| results[0].get("id"));
    assert_eq!(link, Some(&serde_json::json!("item-2")), "{}", results[0]);
    // Unknown root keys are kept for the round trip.
    let doom = &find(&all, "make-doom-for-mips_trimmed.actf.json")[0];
    let fields = &doom.unknown_fields.as_ref().unwrap()["sources"]["actf"]["fields"];
    assert!(
        fields
            .get("/attempts/1/trajectory/steps/1/fixture_extension")
            .is_some(),
        "{fields}"
    );
}

#[test]
fn openai_rows_group_by_session_in_step_order() {
    let all = decode_all();
    let docs = find(&all, "cybergym_0729001_trimmed.json");
    assert_eq!(
        docs.iter().map(|d| d.session.as_str()).collect::<Vec<_>>(),
        ["cyber-b", "cyber-c"]
    );
    let b = &docs[0];
    let texts: Vec<String> = b.turns.iter().map(|t| message_text(&t.msg)).collect();
    assert_eq!(
        texts,
        [
            "You are a test agent.",
            "Begin.",
            "Started.",
            "Continue.",
            "Finished."
        ]
    );
    assert_eq!(b.turns[0].copied, Some(true));
    assert_eq!(b.run.as_deref(), Some("cybergym_0729001"));
    let c = &docs[1];
    let call = &c.turns[1].tool_calls.as_ref().unwrap()[0];
    assert_eq!(call.tcid, "call-status");
    assert_eq!(call.args, serde_json::json!({"verbose": true}));
}

#[test]
fn decoded_documents_round_trip_through_storyline_json() {
    for (path, docs) in decode_all() {
        for d in docs {
            let text = serde_json::to_string(&d).unwrap();
            let back: Storyline =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert_eq!(back, d, "{path}");
            // And it is a valid Storyline document for the Storyline reader.
            let mut ctx = pchronicle::formats::DecodeCtx::new(path.clone());
            let mut n = 0;
            pchronicle::formats::decode_bytes(
                text.as_bytes(),
                DecodeOptions::full(1 << 28),
                &mut ctx,
                &mut |_| n += 1,
            )
            .unwrap_or_else(|e| panic!("{path}: {e}"));
            assert_eq!(n, 1, "{path}");
        }
    }
}

// ------------------------------------------------- conversion completeness
//
// For every fixture file and a generated corpus, in every source format, and
// for every export format: encode the file's documents (together, as
// `export` does), read the records back with that format's decoder, and
// compare the Storyline JSON field by field. Every field that differs must
// be named by a reported loss: a loss pointer equal to the differing pointer
// or a prefix of it. Only these representational differences are ignored
// (see `normalized`):
//
// - `origin`: where the document was read from (the copy was read from the
//   target format);
// - `unknown_fields` and `unknown_key_counts`: the residual of the source
//   format; the target's decoder records its own (a residual the target
//   cannot carry is still reported, as `/unknown_fields/sources/NAME`);
// - a `run` equal to the `session` of a document without a parent: it says
//   no more than an absent run (`Storyline::explicit_run`);
// - a turn `kind` equal to the kind derived from its source and tool calls
//   (`Turn::derived_kind`).

use pchronicle::formats::encode::Loss;
use pchronicle::formats::{decode_bytes, encode_documents, DecodeCtx, ExportFormat};
use serde_json::Value;

const TARGETS: [ExportFormat; 4] = [
    ExportFormat::Atif,
    ExportFormat::Actf,
    ExportFormat::OpenAiMessages,
    ExportFormat::Storyline,
];

fn candidate_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            candidate_files(&p, out);
        } else if pchronicle::formats::is_candidate_name(&p.file_name().unwrap().to_string_lossy())
        {
            out.push(p);
        }
    }
}

fn decode_path(p: &Path) -> Vec<Storyline> {
    let bytes = std::fs::read(p).unwrap();
    let mut ctx = DecodeCtx::new(p.display().to_string());
    let mut docs = Vec::new();
    let found = decode_bytes(&bytes, DecodeOptions::full(1 << 28), &mut ctx, &mut |d| {
        docs.push(d);
    })
    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(found.is_some(), "{}: no format detected", p.display());
    docs
}

/// The documents of every shipped fixture file, one group per file.
fn fixture_groups() -> Vec<(String, Vec<Storyline>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["examples/dataset", "tests/fixtures"] {
        candidate_files(&root.join(dir), &mut files);
    }
    files.sort();
    files
        .iter()
        .map(|p| (p.display().to_string(), decode_path(p)))
        .collect()
}

/// A generated corpus in each generated format, one group per file.
fn generated_groups() -> Vec<(String, Vec<Storyline>)> {
    let dir = tempfile::tempdir().unwrap();
    for format in ["atif", "actf", "openai"] {
        pchronicle::corpus::generate(&pchronicle::corpus::Options {
            out: dir.path().join(format),
            runs: 6,
            steps: 8,
            seed: 18,
            format: format.into(),
            subagent_every: 3,
            files_per_dir: 1000,
        })
        .unwrap();
    }
    let mut files = Vec::new();
    candidate_files(dir.path(), &mut files);
    files.sort();
    files
        .iter()
        .map(|p| {
            let name = format!(
                "generated {}",
                p.strip_prefix(dir.path()).unwrap().display()
            );
            (name, decode_path(p))
        })
        .collect()
}

fn all_groups() -> Vec<(String, Vec<Storyline>)> {
    let mut groups = fixture_groups();
    groups.extend(generated_groups());
    groups
}

/// The Storyline JSON of `d` without the allowed representational
/// differences.
fn normalized(d: &Storyline) -> Value {
    let mut v = serde_json::to_value(d).unwrap();
    let o = v.as_object_mut().unwrap();
    for k in ["origin", "unknown_fields", "unknown_key_counts"] {
        o.remove(k);
    }
    if d.explicit_run().is_none() {
        o.remove("run");
    }
    if let Some(Value::Array(turns)) = o.get_mut("turns") {
        for (t, tv) in d.turns.iter().zip(turns.iter_mut()) {
            if !t.has_own_kind() {
                if let Some(m) = tv.as_object_mut() {
                    m.remove("kind");
                }
            }
        }
    }
    v
}

/// JSON pointers where `a` and `b` differ: per key in objects, per element
/// in arrays of one length, else the value itself.
fn differences(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (x.get(k), y.get(k)) {
                    (Some(av), Some(bv)) => differences(av, bv, &p, out),
                    _ => out.push(p),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (av, bv)) in x.iter().zip(y).enumerate() {
                differences(av, bv, &format!("{at}/{i}"), out);
            }
        }
        _ => out.push(at.to_string()),
    }
}

fn covered(p: &str, losses: &[Loss]) -> bool {
    losses
        .iter()
        .any(|l| p == l.field || p.starts_with(&format!("{}/", l.field)))
}

/// Read `records` back as one JSON Lines file of the target format.
fn read_back(name: &str, target: ExportFormat, records: &[Value]) -> Vec<Storyline> {
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r).unwrap());
        text.push('\n');
    }
    let mut ctx = DecodeCtx::new("read-back.jsonl");
    let mut back = Vec::new();
    decode_bytes(
        text.as_bytes(),
        DecodeOptions::full(1 << 28),
        &mut ctx,
        &mut |d| back.push(d),
    )
    .unwrap_or_else(|e| panic!("{name} as {target:?} does not read back: {e}"));
    back
}

/// The differences of one conversion that no reported loss names.
fn unreported(name: &str, docs: &[Storyline], target: ExportFormat) -> Vec<String> {
    let (records, losses) = encode_documents(target, docs);
    let back = read_back(name, target, &records);
    assert_eq!(
        back.len(),
        docs.len(),
        "{name} as {target:?}: documents read back"
    );
    let back: Vec<Value> = back.iter().map(normalized).collect();
    let mut free = vec![true; back.len()];
    let mut problems = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let want = normalized(d);
        // The copy of this document is the read-back document with the
        // fewest unreported differences (ids may change on the way).
        let mut best: Option<(usize, Vec<String>)> = None;
        for (j, b) in back.iter().enumerate() {
            if !free[j] {
                continue;
            }
            let mut diffs = Vec::new();
            differences(&want, b, "", &mut diffs);
            diffs.retain(|p| !covered(p, &losses));
            if best.as_ref().is_none_or(|(_, u)| diffs.len() < u.len()) {
                best = Some((j, diffs));
            }
        }
        let (j, diffs) = best.expect("as many documents read back as written");
        free[j] = false;
        problems.extend(
            diffs.into_iter().map(|p| {
                format!("{name} as {target:?}, document {i}: {p} differs, no loss names it")
            }),
        );
    }
    problems
}

#[test]
fn every_conversion_reports_each_field_it_does_not_keep() {
    let groups = all_groups();
    assert!(groups.len() >= 17, "{} groups", groups.len());
    let mut problems = Vec::new();
    for (name, docs) in &groups {
        for target in TARGETS {
            problems.extend(unreported(name, docs, target));
        }
    }
    assert!(
        problems.is_empty(),
        "{} unreported differences:\n{}",
        problems.len(),
        problems
            .iter()
            .take(80)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn same_format_and_storyline_conversions_lose_nothing() {
    for (name, docs) in all_groups() {
        let own = match docs[0].origin.as_ref().map(|o| o.format.as_str()) {
            Some("atif") => ExportFormat::Atif,
            Some("actf") => ExportFormat::Actf,
            Some("openai-msg") => ExportFormat::OpenAiMessages,
            other => panic!("{name}: unexpected origin {other:?}"),
        };
        for target in [own, ExportFormat::Storyline] {
            let (records, losses) = encode_documents(target, &docs);
            assert!(losses.is_empty(), "{name} as {target:?}: {losses:?}");
            let back = read_back(&name, target, &records);
            assert_eq!(back.len(), docs.len(), "{name} as {target:?}");
            let mut want: Vec<Value> = docs.iter().map(normalized).collect();
            let mut got: Vec<Value> = back.iter().map(normalized).collect();
            // ACTF writes a task's attempts by key; compare as sets.
            want.sort_by_key(Value::to_string);
            got.sort_by_key(Value::to_string);
            assert_eq!(got, want, "{name} as {target:?}");
        }
    }
}

#[test]
fn openai_exports_give_the_source_records_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for rel in [
        "tests/fixtures/openai/openhands_sft.jsonl",
        "tests/fixtures/openai/rows_history.jsonl",
        "examples/dataset/DeepLink-org__Persisting/cybergym_07270003_trimmed.json",
        "examples/dataset/DeepLink-org__Persisting/cybergym_0729001_trimmed.json",
    ] {
        let path = root.join(rel);
        let text = std::fs::read_to_string(&path).unwrap();
        let original: Vec<Value> = match serde_json::from_str::<Value>(&text) {
            Ok(Value::Array(a)) => a,
            Ok(v) => vec![v],
            Err(_) => text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
        };
        let docs = decode_path(&path);
        let (records, losses) = encode_documents(ExportFormat::OpenAiMessages, &docs);
        assert!(losses.is_empty(), "{rel}: {losses:?}");
        assert_eq!(records, original, "{rel}");
        // And through Storyline JSON, which keeps the argument text too.
        let (sl, _) = encode_documents(ExportFormat::Storyline, &docs);
        let again = read_back(rel, ExportFormat::Storyline, &sl);
        let (records, _) = encode_documents(ExportFormat::OpenAiMessages, &again);
        assert_eq!(records, original, "{rel} through Storyline JSON");
    }
}

#[test]
fn openai_arguments_keep_their_text() {
    let line = r#"{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"b\": 1, \"a\": \"caf\\u00e9\"}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"{\"unterminated"}},{"id":"c","type":"function","function":{"name":"h","arguments":"\"quoted\""}},{"id":"d","type":"function","function":{"name":"k","arguments":{"as":"json"}}}]}]}"#;
    let mut ctx = DecodeCtx::new("a.jsonl");
    let mut docs = Vec::new();
    decode_bytes(
        line.as_bytes(),
        DecodeOptions::full(1 << 20),
        &mut ctx,
        &mut |d| {
            docs.push(d);
        },
    )
    .unwrap();
    let calls = docs[0].turns[0].tool_calls.as_ref().unwrap();
    assert_eq!(calls[0].args, serde_json::json!({"a": "café", "b": 1}));
    assert_eq!(
        calls[0].args_raw.as_deref(),
        Some(r#"{"b": 1, "a": "caf\u00e9"}"#)
    );
    // Not JSON, or a quoted JSON string: kept as the string itself.
    assert_eq!(calls[1].args, serde_json::json!("{\"unterminated"));
    assert_eq!(calls[2].args, serde_json::json!("\"quoted\""));
    let (records, losses) = encode_documents(ExportFormat::OpenAiMessages, &docs);
    assert!(losses.is_empty(), "{losses:?}");
    let original: Value = serde_json::from_str(line).unwrap();
    assert_eq!(records, vec![original]);
}
