//! What `export` writes for every real trajectory of the repository, in
//! every format, streamed or not, recorded as digests of the bytes: a
//! change to any exported byte shows in the snapshot. A store imported from
//! the same file must export the same bytes as the file itself.

use std::path::{Path, PathBuf};

use crate::cli::common::TestEnv;
use crate::support::{export_args, root};

/// The trajectory files shipped as the example dataset and as test
/// fixtures, relative to the repository, in path order.
fn fixtures() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "json" || x == "jsonl") {
                out.push(p.strip_prefix(root()).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("examples/dataset"), &mut out);
    walk(&root().join("tests/fixtures"), &mut out);
    out.sort();
    out
}

/// Exit code and bytes written to stdout by `export` of `from`.
fn export(env: &TestEnv, from: &Path, format: &str, stream: bool) -> (i32, Vec<u8>) {
    let mut args = export_args(from, format);
    if stream {
        args.push("--stream");
    }
    let o = env.cmd().args(&args).output().unwrap();
    (o.status.code().unwrap_or(-1), o.stdout)
}

#[test]
fn every_fixture_exports_the_recorded_bytes_from_its_file_and_its_store() {
    let env = TestEnv::new();
    let mut table = String::new();
    for (i, rel) in fixtures().iter().enumerate() {
        // A Dataset of this one file, and a store imported from it.
        let files = env.path().join(format!("f{i}"));
        std::fs::create_dir_all(&files).unwrap();
        let name = rel.file_name().unwrap();
        std::fs::copy(root().join(rel), files.join(name)).unwrap();
        let store = env.path().join(format!("s{i}"));
        let imported = env
            .cmd()
            .args(["import", "--from", files.to_str().unwrap()])
            .args(["--output", store.to_str().unwrap(), "-q"])
            .output()
            .unwrap();
        assert_eq!(
            imported.status.code(),
            Some(0),
            "{}: {}",
            rel.display(),
            String::from_utf8_lossy(&imported.stderr)
        );
        for format in ["atif", "actf", "openai-messages", "storyline"] {
            for stream in [false, true] {
                let (code, bytes) = export(&env, &files, format, stream);
                let stored = export(&env, &store, format, stream);
                assert!(
                    stored == (code, bytes.clone()),
                    "{} as {format} (stream: {stream}): the store's export differs from the file's",
                    rel.display()
                );
                let digest = blake3::hash(&bytes).to_hex();
                table.push_str(&format!(
                    "{} {format}{} exit={code} bytes={} blake3={}\n",
                    rel.display(),
                    if stream { " --stream" } else { "" },
                    bytes.len(),
                    &digest[..16],
                ));
            }
        }
    }
    insta::assert_snapshot!(table);
}
