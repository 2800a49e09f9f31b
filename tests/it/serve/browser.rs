//! The web explorer in headless Chromium, driven by playwright-core
//! (`tests/browser/explorer.mjs`). `.ci/test` installs both and sets
//! `PCHRONICLE_REQUIRE_BROWSER=1`, so a missing browser fails there; run
//! alone without them, the test says it was skipped.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::serve::harness::Served;

fn browser_ready(dir: &Path) -> Result<(), String> {
    let chromium =
        std::env::var("PCHRONICLE_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() {
        return Err(format!("no Chromium at {chromium}"));
    }
    if !dir.join("node_modules/playwright-core").exists() {
        return Err("playwright-core is not installed (npm ci in tests/browser)".into());
    }
    if Command::new("node").arg("--version").output().is_err() {
        return Err("node is not installed".into());
    }
    Ok(())
}

/// A 1×1 PNG.
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

/// A terminal agent's trajectory: coloured multi-line output answering a
/// call, a long output that names no call (as terminus-2 writes them), and
/// two screenshots, one inside the Dataset and one a symlink leading out of
/// it. `outside` is a directory outside the Dataset.
pub fn terminal_doc(data: &Path, outside: &Path) {
    std::fs::create_dir_all(data.join("shots/images")).unwrap();
    std::fs::write(data.join("shots/images/inside.png"), PNG).unwrap();
    std::fs::write(outside.join("secret.png"), PNG).unwrap();
    std::os::unix::fs::symlink(
        outside.join("secret.png"),
        data.join("shots/images/outside.png"),
    )
    .unwrap();
    let long: String = (0..120).fold(String::new(), |mut s, i| {
        s.push_str(&format!("row {i} of the long output\n"));
        s
    });
    let model = "openrouter/anthropic/claude-3.7-sonnet-20250219-thinking-extended";
    let doc = json!({"schema_version": "ATIF-v1.6", "session_id": "term-session",
    "agent": {"name": "terminus-2", "version": "1", "model_name": model},
    "steps": [
        {"step_id": 1, "source": "user", "message": "Run the tests"},
        {"step_id": 2, "source": "agent", "model_name": model, "message": "Running.", "metrics": {"prompt_tokens": 10, "completion_tokens": 2},
         "tool_calls": [{"tool_call_id": "c1", "function_name": "bash_command", "arguments": {"keystrokes": "python main.py\n"}}],
         "observation": {"results": [{"source_call_id": "c1", "content":
            "root@host:/app# python main.py\r\nTraceback (most recent call last):\r\n  File \"/app/main.py\", line 3, in <module>\r\n\u{1b}[31mError\u{1b}[0m: ModuleNotFoundError\r\n\troot@host:/app# "}]}},
        {"step_id": 3, "source": "agent", "model_name": model, "message": "Long listing.", "metrics": {"prompt_tokens": 10, "completion_tokens": 2},
         "tool_calls": [{"tool_call_id": "c2", "function_name": "bash_command", "arguments": {"keystrokes": "cat big.log\n"}}],
         "observation": {"results": [{"content": long}]}},
        {"step_id": 4, "source": "agent", "model_name": model, "message": "Screenshots.", "metrics": {"prompt_tokens": 10, "completion_tokens": 2},
         "tool_calls": [{"tool_call_id": "c3", "function_name": "screenshot", "arguments": {}}],
         "observation": {"results": [{"source_call_id": "c3", "content": [
            {"type": "text", "text": "two screenshots"},
            {"type": "image", "source": {"media_type": "image/png", "path": "images/inside.png"}},
            {"type": "image", "source": {"media_type": "image/png", "path": "images/outside.png"}}
         ]}]}}
    ]});
    std::fs::write(
        data.join("shots/term.json"),
        serde_json::to_vec(&doc).unwrap(),
    )
    .unwrap();
}

#[test]
fn explorer_in_a_real_browser() {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if let Err(why) = browser_ready(&scripts) {
        assert!(
            std::env::var_os("PCHRONICLE_REQUIRE_BROWSER").is_none(),
            "browser tests required but unavailable: {why}"
        );
        // Straight to the terminal: the harness captures `eprintln!`.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!("skipped suite `serve::browser`: {why}\n").as_bytes(),
        );
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let data = crate::serve::api::dataset(t.path());
    // A 2,000-step trajectory for the virtualised timeline.
    let steps: Vec<_> = (1..=2000)
        .map(|i| json!({"step_id": i, "source": if i % 2 == 1 { "user" } else { "agent" }, "message": format!("long step {i}")}))
        .collect();
    let long = json!({"schema_version": "ATIF-v1.7", "session_id": "long-session",
        "agent": {"name": "a", "version": "1", "model_name": "m"}, "steps": steps});
    std::fs::write(data.join("long.json"), serde_json::to_vec(&long).unwrap()).unwrap();
    terminal_doc(&data, t.path());
    let s = Served::start(t.path(), "[[datasets]]\nname = \"evals\"\nuri = \"data\"\n");
    // Screenshots go to docs/screenshots when asked for.
    let shots = std::env::var("PCHRONICLE_SCREENSHOTS").unwrap_or_default();
    let out = Command::new("node")
        .arg(scripts.join("explorer.mjs"))
        .arg(format!("http://{}", s.addr))
        .arg(&shots)
        .current_dir(&scripts)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "browser checks failed:\n{stdout}\n{stderr}\nserver log tail:\n{}",
        s.log()
            .iter()
            .rev()
            .take(30)
            .rev()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(stdout.contains("browser checks passed"), "{stdout}");
}
