//! Faults the built binary must survive (issue 9): an import killed at
//! random points, an import that runs out of file space, a store whose
//! `CURRENT` is corrupt, a file truncated between discovery and read, and
//! readers whose stdout closes early.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pchronicle"));
    c.env_remove("PCHRONICLE_SETTINGS").env("NO_COLOR", "1");
    c
}

fn example(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/dataset")
        .join(sub)
}

/// `import --from input --output target` with HOME at `home`, not yet run.
fn import_cmd(home: &Path, input: &Path, target: &Path) -> Command {
    let mut c = bin();
    c.env("HOME", home)
        .args(["import", "--from"])
        .arg(input)
        .arg("--output")
        .arg(target);
    c
}

/// `pchronicle COMMAND DATASET ARGS…` with HOME and the cache under `home`.
fn run_on(home: &Path, command: &str, dataset: &Path, args: &[&str]) -> Output {
    bin()
        .env("HOME", home)
        .env("PCHRONICLE_CACHE_DIR", home.join("cache"))
        .arg(command)
        .arg(dataset)
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A small deterministic generator for kill delays.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

/// Visible entries of `dir` (hidden staging and lock files excluded).
fn visible(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    v.sort();
    v
}

#[test]
fn an_import_killed_at_random_points_leaves_nothing_or_a_complete_store() {
    let home = tempfile::tempdir().unwrap();
    let input = example("golang__exp");
    // How long one import takes here, to spread the kills over it.
    let started = std::time::Instant::now();
    let o = import_cmd(home.path(), &input, &home.path().join("reference"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let span = (started.elapsed().as_millis() as u64).max(20);
    let reference = bin()
        .env("HOME", home.path())
        .args(["status", "--format", "json", "-q"])
        .arg(home.path().join("reference"))
        .output()
        .unwrap();
    let want: serde_json::Value = serde_json::from_slice(&reference.stdout).unwrap();

    let mut rng = Lcg(7);
    let (mut absent, mut complete) = (0, 0);
    for round in 0..16 {
        let target = home.path().join(format!("t{round}"));
        let mut child = import_cmd(home.path(), &input, &target)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.next(span + span / 2)));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        if target.exists() {
            complete += 1;
        } else {
            absent += 1;
            // The target can be created afterwards: no lock or leftover blocks it.
            let o = import_cmd(home.path(), &input, &target).output().unwrap();
            assert_eq!(o.status.code(), Some(0), "round {round}: {}", stderr(&o));
        }
        // Either way the target is now a complete, valid store.
        let got = bin()
            .env("HOME", home.path())
            .args(["status", "--errors", "strict", "--format", "json", "-q"])
            .arg(&target)
            .output()
            .unwrap();
        assert_eq!(
            got.status.code(),
            Some(0),
            "round {round}: {}",
            stderr(&got)
        );
        let got: serde_json::Value = serde_json::from_slice(&got.stdout).unwrap();
        for k in ["trajectories", "steps", "tool_calls", "ready"] {
            assert_eq!(got["totals"][k], want["totals"][k], "round {round}: {k}");
        }
    }
    // Nothing but the targets is visible beside them.
    let mut names: Vec<String> = (0..16).map(|r| format!("t{r}")).collect();
    names.push("reference".into());
    names.sort();
    assert_eq!(visible(home.path()), names);
    assert!(absent + complete == 16);
}

#[test]
fn an_import_out_of_file_space_fails_cleanly() {
    // RLIMIT_FSIZE with SIGXFSZ ignored: writes past 64 KiB fail with EFBIG,
    // as on a full disk.
    let home = tempfile::tempdir().unwrap();
    let target = home.path().join("big");
    let o = Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f 64; exec "$0" import --from "$1" --output "$2""#)
        .arg(env!("CARGO_BIN_EXE_pchronicle"))
        .arg(example("golang__exp"))
        .arg(&target)
        .env("HOME", home.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("error[PC-"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(!target.exists());
    assert!(
        visible(home.path()).is_empty(),
        "{:?}",
        visible(home.path())
    );
}

#[test]
fn a_corrupt_current_is_an_error_source_or_a_strict_failure() {
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("wh").join("s");
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    let o = import_cmd(home.path(), &example("golang__exp"), &store)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::write(store.join("CURRENT"), b"{\"control_version\": 1, \"revis").unwrap();
    let report = bin()
        .env("HOME", home.path())
        .args(["status", "--format", "json", "-q"])
        .arg(home.path().join("wh"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(v["totals"]["error"], 1, "{v}");
    assert_eq!(v["sources"][0]["reason"]["code"], "PC-FMT-013", "{v}");
    let strict = bin()
        .env("HOME", home.path())
        .args(["status", "--errors", "strict"])
        .arg(home.path().join("wh"))
        .output()
        .unwrap();
    assert_eq!(strict.status.code(), Some(2));
    assert!(
        stderr(&strict).contains("PC-CAT-010"),
        "{}",
        stderr(&strict)
    );
}

#[test]
fn a_file_truncated_after_discovery_fails_the_read() {
    use pchronicle::catalog::read::{read_source, ReadFailure};
    use pchronicle::catalog::{CatalogSnapshot, DatasetUri, DiscoveryLimits};
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.json");
    std::fs::copy(example("DeepLink-org__Persisting/unicode_zh_15.json"), &f).unwrap();
    let uri = DatasetUri::local(dir.path(), Path::new("/"));
    let snap = CatalogSnapshot::open(&uri, DiscoveryLimits::default(), false).unwrap();
    let len = std::fs::metadata(&f).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let r = read_source(
        &snap.sources[0],
        pchronicle::formats::DecodeOptions::full(1 << 30),
        &mut |_| {},
    );
    assert!(
        matches!(r, Err(ReadFailure::Fatal(ref e)) if e.code() == "PC-CAT-008"),
        "{r:?}"
    );
}

#[test]
fn readers_whose_stdout_closes_early_exit_quietly() {
    let home = tempfile::tempdir().unwrap();
    let ds = example("");
    for args in [
        vec![
            "query",
            "SELECT * FROM steps",
            "--format",
            "jsonl",
            "--max-rows",
            "100000",
        ],
        vec!["find", "--match", "the", "--format", "json"],
        vec!["export", "--format", "atif", "--output", "-"],
        vec!["status", "--format", "json"],
        vec!["export", "--format", "atif", "--output", "-", "--stream"],
        vec!["analysis", "tools", "--format", "jsonl"],
    ] {
        let mut cmd = bin();
        cmd.env("HOME", home.path())
            .env("PCHRONICLE_CACHE_DIR", home.path().join("cache"));
        if args[0] == "export" {
            cmd.args(["export", "--from"]).arg(&ds).args(&args[1..]);
        } else if args[0] == "analysis" {
            cmd.args(&args[..2]).arg(&ds).args(&args[2..]);
        } else {
            cmd.arg(args[0]).arg(&ds).args(&args[1..]);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read one byte, then hang up.
        let mut out = child.stdout.take().unwrap();
        let mut one = [0u8; 1];
        let _ = out.read(&mut one);
        drop(out);
        let o = child.wait_with_output().unwrap();
        let e = stderr(&o);
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{args:?}: {:?} {e}",
            o.status
        );
        assert!(
            !e.contains("panicked") && !e.contains("Broken pipe"),
            "{args:?}: {e}"
        );
    }
}

#[test]
fn outputs_that_run_out_of_file_space_leave_no_partial_file() {
    // The same 4 KiB file-size limit for `export` (plain and streamed) and
    // `query --output`: a coded failure, and no output file at all.
    let home = tempfile::tempdir().unwrap();
    let ds = example("");
    for (i, args) in [
        vec![
            "export", "--from", "DS", "--format", "atif", "--output", "OUT",
        ],
        vec![
            "export", "--from", "DS", "--format", "atif", "--output", "OUT", "--stream",
        ],
        vec![
            "query",
            "DS",
            "SELECT * FROM steps",
            "--format",
            "jsonl",
            "--output",
            "OUT",
        ],
    ]
    .into_iter()
    .enumerate()
    {
        let out = home.path().join(format!("out-{i}.json"));
        let args: Vec<String> = args
            .iter()
            .map(|a| match *a {
                "DS" => ds.display().to_string(),
                "OUT" => out.display().to_string(),
                other => other.to_string(),
            })
            .collect();
        let o = Command::new("sh")
            .arg("-c")
            .arg(r#"trap '' XFSZ; ulimit -f 4; exec "$@""#)
            .arg("sh")
            .arg(env!("CARGO_BIN_EXE_pchronicle"))
            .args(&args)
            .env("HOME", home.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(
            e.contains("[PC-IO-001]") || e.contains("[PC-EXP-004]"),
            "{args:?}: {e}"
        );
        assert!(!e.contains("panicked"), "{e}");
        assert!(!out.exists(), "{args:?} left {}", out.display());
        assert!(
            visible(home.path()).is_empty(),
            "{:?}",
            visible(home.path())
        );
    }
}

/// The `*.lance` data files of a store's tables.
fn data_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            data_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "lance")
            && p.parent().is_some_and(|d| d.ends_with("data"))
        {
            out.push(p);
        }
    }
}

#[test]
fn a_corrupt_lance_fragment_is_an_error_source_or_a_strict_failure() {
    let home = tempfile::tempdir().unwrap();
    let wh = home.path().join("wh");
    std::fs::create_dir_all(&wh).unwrap();
    let store = wh.join("s");
    let o = import_cmd(home.path(), &example("golang__exp"), &store)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut files = Vec::new();
    data_files(&store.join("generations"), &mut files);
    assert!(!files.is_empty());
    for f in &files {
        let len = std::fs::metadata(f).unwrap().len() as usize;
        std::fs::write(f, vec![0xA5u8; len]).unwrap();
    }
    let report = bin()
        .env("HOME", home.path())
        .args(["status", "--format", "json", "-q"])
        .arg(&wh)
        .output()
        .unwrap();
    assert!(!stderr(&report).contains("panicked"), "{}", stderr(&report));
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(v["totals"]["ready"], 0, "{v}");
    assert!(
        v["sources"][0]["reason"]["code"]
            .as_str()
            .is_some_and(|c| c.starts_with("PC-")),
        "{v}"
    );
    // A query skips the damaged store with a warning; under strict it fails.
    let query = |strict: bool| {
        let mut c = bin();
        c.env("HOME", home.path())
            .args(["query", "--format", "csv"]);
        if strict {
            c.args(["--errors", "strict"]);
        }
        c.arg(&wh)
            .arg("SELECT count(*) AS n FROM steps")
            .output()
            .unwrap()
    };
    let report = query(false);
    assert_eq!(report.status.code(), Some(0), "{}", stderr(&report));
    assert_eq!(String::from_utf8_lossy(&report.stdout), "n\n0\n");
    assert!(
        stderr(&report).contains("warning[PC-FMT-014]"),
        "{}",
        stderr(&report)
    );
    let strict = query(true);
    assert_eq!(strict.status.code(), Some(2), "{}", stderr(&strict));
    assert!(
        stderr(&strict).contains("error[PC-CAT-010]") && stderr(&strict).contains("[PC-FMT-014]"),
        "{}",
        stderr(&strict)
    );
    assert!(!stderr(&strict).contains("panicked"), "{}", stderr(&strict));
}

#[test]
fn racing_imports_repeatedly_leave_exactly_one_complete_store() {
    let home = tempfile::tempdir().unwrap();
    for round in 0..6 {
        let target = home.path().join(format!("race{round}"));
        let spawn = || {
            import_cmd(home.path(), &example("golang__exp"), &target)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let wins = [&a, &b]
            .iter()
            .filter(|o| o.status.code() == Some(0))
            .count();
        assert_eq!(wins, 1, "round {round}: {} / {}", stderr(&a), stderr(&b));
        let loser = if a.status.code() == Some(0) { &b } else { &a };
        let e = stderr(loser);
        assert!(e.contains("PC-IMP-001") || e.contains("PC-IMP-002"), "{e}");
        let st = bin()
            .env("HOME", home.path())
            .args(["status", "--errors", "strict", "--format", "json", "-q"])
            .arg(&target)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
        assert_eq!(v["totals"]["steps"], 33, "round {round}: {v}");
    }
}

/// A tmpfs of `kib` KiB mounted on a temporary directory, unmounted on drop.
/// `None` (the test is skipped, saying so) when the process may not mount.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(kib: u32) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .output()
            .ok()?;
        if !o.status.success() {
            eprintln!(
                "skipped: cannot mount a tmpfs here ({})",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return None;
        }
        Some(Tmpfs(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    /// KiB in use, as the file system reports it.
    fn used_kib(&self) -> u64 {
        let o = Command::new("df")
            .args(["-k", "--output=used"])
            .arg(self.path())
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .nth(1)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_file_system_fails_imports_and_outputs_cleanly() {
    // A real full disk (ENOSPC), beside the RLIMIT_FSIZE tests above.
    let Some(fs) = Tmpfs::mount(64) else { return };
    let home = tempfile::tempdir().unwrap();
    let target = fs.path().join("target");
    let o = import_cmd(home.path(), &example("golang__exp"), &target)
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("error[PC-STO-002]"), "{e}");
    assert!(e.contains("No space left on device"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(!target.exists());
    // Nothing is left: no staging tree, no lock file.
    let left: Vec<String> = std::fs::read_dir(fs.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(fs.used_kib(), 0);

    // An output file that does not fit: PC-IO-001 and no file, no temporary.
    let out = fs.path().join("out.csv");
    let o = run_on(
        home.path(),
        "query",
        &example(""),
        &[
            "SELECT * FROM steps",
            "--format",
            "csv",
            "--output",
            out.to_str().unwrap(),
        ],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("error[PC-IO-001]"), "{e}");
    assert!(!out.exists());
    assert_eq!(fs.used_kib(), 0);
}

#[test]
fn an_import_whose_index_does_not_fit_publishes_a_complete_store() {
    // Room for the tables but not for the full-text index: the store is
    // published complete with a PC-FND-003 warning; `find` builds the index
    // in its cache on first use.
    let Some(fs) = Tmpfs::mount(256) else { return };
    let home = tempfile::tempdir().unwrap();
    let target = fs.path().join("target");
    let o = import_cmd(home.path(), &example("golang__exp"), &target)
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(e.contains("warning[PC-FND-003]"), "{e}");
    let o = run_on(
        home.path(),
        "query",
        &target,
        &[
            "SELECT count(*) AS steps FROM steps",
            "--format",
            "jsonl",
            "--errors",
            "strict",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), r#"{"steps":33}"#);
    let o = run_on(
        home.path(),
        "find",
        &target,
        &["--match", "hello", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!v["matches"].as_array().unwrap().is_empty(), "{v}");
}

#[test]
fn an_import_that_dies_on_either_side_of_its_publishing_rename() {
    // PCHRONICLE_FAILPOINT aborts the process (no cleanup, as kill -9) just
    // before and just after the rename that publishes the store.
    let home = tempfile::tempdir().unwrap();
    let input = example("golang__exp");
    for (point, published) in [
        ("import-before-rename", false),
        ("import-after-rename", true),
    ] {
        let wh = home.path().join(point);
        std::fs::create_dir_all(&wh).unwrap();
        let target = wh.join("t");
        let o = import_cmd(home.path(), &input, &target)
            .env("PCHRONICLE_FAILPOINT", point)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{point}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("failpoint {point}")),
            "{}",
            stderr(&o)
        );
        assert_eq!(target.exists(), published, "{point}");
        // The parent directory as a Dataset: the target is a complete store
        // or absent; a leftover staging tree is hidden and never a Source.
        let ls = run_on(
            home.path(),
            "status",
            &wh,
            &["--errors", "strict", "--format", "json", "-q"],
        );
        assert_eq!(ls.status.code(), Some(0), "{point}: {}", stderr(&ls));
        let v: serde_json::Value = serde_json::from_slice(&ls.stdout).unwrap();
        let want_steps = if published { 33 } else { 0 };
        assert_eq!(v["totals"]["steps"], want_steps, "{point}: {v}");
        // What the dead import left is reported, with its size, as held by
        // no one: the lock file, and the staging tree unless published.
        let left = leftovers(&wh);
        assert_eq!(
            left.len(),
            if published { 1 } else { 2 },
            "{point}: {left:?}"
        );
        assert_orphans_reported(&v, &wh, &left, point);
        // Nothing blocks a new import of the target afterwards (absent) or
        // it is refused as existing (published).
        let again = import_cmd(home.path(), &input, &target).output().unwrap();
        if published {
            assert!(
                stderr(&again).contains("[PC-IMP-001]"),
                "{}",
                stderr(&again)
            );
        } else {
            assert_eq!(again.status.code(), Some(0), "{point}: {}", stderr(&again));
        }
        // Reported, never deleted: the dead import's staging is still there
        // and still reported after the new import.
        let after = run_on(home.path(), "status", &wh, &["--format", "json", "-q"]);
        let v: serde_json::Value = serde_json::from_slice(&after.stdout).unwrap();
        let left_after = leftovers(&wh);
        for name in left.iter().filter(|n| n.contains("staging")) {
            assert!(left_after.contains(name), "{point}: {name} was removed");
        }
        assert_orphans_reported(&v, &wh, &left_after, point);
    }
}

/// Hidden entries an import made in `dir`, by name.
fn leftovers(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n.contains(".pchronicle-"))
        .collect();
    v.sort();
    v
}

/// Bytes and files under `p`.
fn tree_size(p: &Path) -> (u64, u64) {
    let m = std::fs::symlink_metadata(p).unwrap();
    if !m.is_dir() {
        return (m.len(), 1);
    }
    let mut t = (0, 0);
    for e in std::fs::read_dir(p).unwrap() {
        let (b, f) = tree_size(&e.unwrap().path());
        t = (t.0 + b, t.1 + f);
    }
    t
}

/// `status --format json` output `v` on `dir` lists exactly the `left`
/// entries, with their sizes and no live holder, and totals them.
fn assert_orphans_reported(v: &serde_json::Value, dir: &Path, left: &[String], point: &str) {
    let orphans = v["orphans"].as_array().expect("orphans array");
    let mut paths: Vec<&str> = orphans
        .iter()
        .map(|o| o["path"].as_str().unwrap())
        .collect();
    paths.sort_unstable();
    assert_eq!(paths, left, "{point}: {v}");
    let mut total = 0;
    for o in orphans {
        let name = o["path"].as_str().unwrap();
        let (bytes, files) = tree_size(&dir.join(name));
        assert_eq!(o["bytes"], bytes, "{point}: {o}");
        assert_eq!(o["files"], files, "{point}: {o}");
        assert_eq!(o["held"], false, "{point}: {o}");
        assert_eq!(o["target"], "t", "{point}: {o}");
        let kind = if name.ends_with(".lock") {
            "lock"
        } else {
            "staging"
        };
        assert_eq!(o["kind"], kind, "{point}: {o}");
        assert!(
            o["remove_with"].as_str().unwrap().starts_with("rm -"),
            "{o}"
        );
        total += bytes;
    }
    assert_eq!(v["totals"]["orphans"]["count"], left.len(), "{point}: {v}");
    assert_eq!(v["totals"]["orphans"]["bytes"], total, "{point}: {v}");
}

/// Leftovers of an import that is still running are reported as held by
/// it, with its process id; the report takes no lock of its own.
#[test]
fn a_running_imports_staging_is_reported_as_held() {
    let home = tempfile::tempdir().unwrap();
    let wh = home.path().join("wh");
    let me = std::process::id();
    let staging = wh.join(format!(".t.pchronicle-staging-{me}-1"));
    std::fs::create_dir_all(staging.join("runs.lance")).unwrap();
    std::fs::write(staging.join("runs.lance/data"), vec![7u8; 1000]).unwrap();
    // Another process's staging for the same target is not held.
    std::fs::create_dir_all(wh.join(".t.pchronicle-staging-1-2")).unwrap();
    let lock = std::fs::File::create(wh.join(".t.pchronicle-import.lock")).unwrap();
    lock.try_lock().unwrap();
    let o = run_on(home.path(), "status", &wh, &["--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let by_path = |p: &str| {
        v["orphans"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["path"] == p)
            .unwrap_or_else(|| panic!("{p} not in {v}"))
            .clone()
    };
    let held = by_path(&format!(".t.pchronicle-staging-{me}-1"));
    assert_eq!(
        (held["held"].clone(), held["pid"].clone()),
        (true.into(), me.into()),
        "{held}"
    );
    assert_eq!(
        (held["bytes"].clone(), held["files"].clone()),
        (1000.into(), 1.into())
    );
    assert_eq!(by_path(".t.pchronicle-staging-1-2")["held"], false);
    let l = by_path(".t.pchronicle-import.lock");
    assert_eq!(
        (l["held"].clone(), l["pid"].clone()),
        (true.into(), me.into()),
        "{l}"
    );
    assert!(
        stderr(&o).contains(&format!("import {me} still running); leave it")),
        "{}",
        stderr(&o)
    );
    // Still held by this process: the report took no lock.
    drop(lock);
}

/// Poll until `ready` holds while `child` runs; false if it ended first.
fn while_running(child: &mut std::process::Child, ready: impl Fn() -> bool) -> bool {
    let started = std::time::Instant::now();
    while !ready() {
        if child.try_wait().unwrap().is_some() || started.elapsed() > Duration::from_mins(2) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.try_wait().unwrap().is_none()
}

/// Send `sig` to `child` and wait: (output, seconds from the signal to the exit).
fn signal(child: std::process::Child, sig: &str) -> (Output, f64) {
    let sent = std::time::Instant::now();
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let o = child.wait_with_output().unwrap();
    (o, sent.elapsed().as_secs_f64())
}

/// SIGINT and SIGTERM stop `export`, `query` and `find` at once, remove
/// the files they had not finished (an export's temporary output, an
/// index being built), say what was cancelled and exit 130 or 143; the
/// next command works.
#[test]
fn signals_cancel_reads_and_remove_their_unfinished_files() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    pchronicle::corpus::generate(&pchronicle::corpus::Options {
        out: data.clone(),
        runs: 400,
        steps: 40,
        seed: 3,
        format: "atif".into(),
        subagent_every: 0,
        files_per_dir: 100,
    })
    .unwrap();
    let out_dir = home.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let cmd = |args: &[&str]| {
        let mut c = bin();
        c.env("HOME", home.path())
            .env("PCHRONICLE_CACHE_DIR", home.path().join("cache"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let entries = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let d = data.to_str().unwrap();

    // export to a file, streamed or not: interrupted while its temporary
    // file grows (both write records as they are converted).
    for extra in [&["--stream"][..], &[][..]] {
        let target = out_dir.join("all.jsonl");
        let mut child = cmd(&["export", "--from", d, "--format", "atif", "--output"])
            .arg(&target)
            .args(extra)
            .spawn()
            .unwrap();
        let pid = child.id();
        let tmp = out_dir.join(format!(".all.jsonl.tmp-{pid}"));
        assert!(
            while_running(&mut child, || std::fs::metadata(&tmp)
                .is_ok_and(|m| m.len() > 0)),
            "export {extra:?} ended before it was interrupted"
        );
        let (o, secs) = signal(child, "-INT");
        assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("interrupted (SIGINT): `export` cancelled, the unfinished work was removed (1 temporary path)"),
            "{}",
            stderr(&o)
        );
        assert!(secs < 5.0, "export {extra:?} took {secs} s to stop");
        assert_eq!(
            entries(&out_dir),
            Vec::<String>::new(),
            "export {extra:?} left files"
        );
    }

    // find, while it builds the Dataset's index in the cache: stopped, and
    // the next find builds or reuses a sound index.
    let mut child = cmd(&["find", d, "--match", "timeout", "--format", "json"])
        .spawn()
        .unwrap();
    assert!(
        while_running(&mut child, || !entries(&home.path().join("cache"))
            .is_empty()),
        "find ended before it was interrupted"
    );
    std::thread::sleep(Duration::from_millis(200));
    let (o, secs) = signal(child, "-TERM");
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    assert!(stderr(&o).contains("`find` cancelled"), "{}", stderr(&o));
    assert!(secs < 5.0, "find took {secs} s to stop");
    let o = cmd(&["find", d, "--match", "timeout", "--format", "json", "-q"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // A long query: stopped at once, nothing written.
    let q_out = out_dir.join("q.csv");
    let mut child = cmd(&[
        "query",
        d,
        "SELECT count(*), sum(length(a.observation_text || b.observation_text)) \
         FROM steps a JOIN steps b ON a.source_path = b.source_path",
        "--format",
        "csv",
        "--output",
    ])
    .arg(&q_out)
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "query ended before it was interrupted"
    );
    let (o, secs) = signal(child, "-INT");
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("`query` cancelled"), "{}", stderr(&o));
    assert!(secs < 5.0, "query took {secs} s to stop");
    assert_eq!(entries(&out_dir), Vec::<String>::new(), "query left files");
}
