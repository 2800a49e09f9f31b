//! Every input kept for the fuzz targets in git — the hand-kept seeds under
//! `fuzz/seeds/<target>/` and every minimised crasher under
//! `fuzz/regressions/<target>/` — runs through the target's property
//! (`pchronicle::fuzzing`) in the ordinary test suite. The corpora that
//! `fuzz/run.sh` grows (`fuzz/corpus/`, not in git) are not read here.

use std::path::{Path, PathBuf};

use pchronicle::fuzzing::TARGETS;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_target_is_built_by_the_fuzz_workspace_and_has_seeds() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    for (name, _) in TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no [[bin]] {name}"
        );
        let src = std::fs::read_to_string(root().join(format!("fuzz_targets/{name}.rs")))
            .unwrap_or_else(|e| panic!("fuzz_targets/{name}.rs: {e}"));
        assert!(
            src.contains(&format!("pchronicle::fuzzing::{name}(data)")),
            "fuzz_targets/{name}.rs does not check pchronicle::fuzzing::{name}"
        );
        assert!(
            !inputs(&root().join("seeds").join(name)).is_empty(),
            "fuzz/seeds/{name} has no seed"
        );
    }
}

#[test]
fn kept_corpora_and_crashers_still_hold_their_properties() {
    let mut ran = 0usize;
    for (name, check) in TARGETS {
        for sub in ["seeds", "regressions"] {
            for path in inputs(&root().join(sub).join(name)) {
                let data = std::fs::read(&path).unwrap();
                let outcome = std::panic::catch_unwind(|| check(&data));
                assert!(outcome.is_ok(), "{name}: {} fails", path.display());
                ran += 1;
            }
        }
    }
    assert!(ran >= TARGETS.len(), "only {ran} inputs");
    eprintln!("{ran} kept inputs checked");
}
