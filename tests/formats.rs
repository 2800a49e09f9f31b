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
