//! The web explorer in headless Chromium, driven by playwright-core
//! (`tests/browser/explorer.mjs`). `.ci/test` installs both and sets
//! `PCHRONICLE_REQUIRE_BROWSER=1`, so a missing browser fails there; run
//! alone without them, the test says it was skipped.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::harness::Served;

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

#[test]
fn explorer_in_a_real_browser() {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if let Err(why) = browser_ready(&scripts) {
        assert!(
            std::env::var_os("PCHRONICLE_REQUIRE_BROWSER").is_none(),
            "browser tests required but unavailable: {why}"
        );
        eprintln!("skipped: {why}");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let data = crate::api::dataset(t.path());
    // A 2,000-step trajectory for the virtualised timeline.
    let steps: Vec<_> = (1..=2000)
        .map(|i| json!({"step_id": i, "source": if i % 2 == 1 { "user" } else { "agent" }, "message": format!("long step {i}")}))
        .collect();
    let long = json!({"schema_version": "ATIF-v1.7", "session_id": "long-session",
        "agent": {"name": "a", "version": "1", "model_name": "m"}, "steps": steps});
    std::fs::write(data.join("long.json"), serde_json::to_vec(&long).unwrap()).unwrap();
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
