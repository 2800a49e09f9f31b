//! Settings resolved without a process: flags, environment, files.

use super::*;
use clap::Parser as _;

fn env(dir: &Path) -> Env {
    let mut vars = HashMap::new();
    vars.insert(
        "PCHRONICLE_SETTINGS".to_string(),
        dir.join("s.toml").display().to_string(),
    );
    Env {
        cwd: dir.to_path_buf(),
        vars,
        stdout_tty: false,
        stderr_tty: false,
    }
}

fn resolve(args: &[&str], env: &Env) -> Result<Settings, SettingsError> {
    let cli =
        Cli::try_parse_from(std::iter::once("pchronicle").chain(args.iter().copied())).unwrap();
    Settings::resolve_with(&cli, env)
}

#[test]
fn auto_format_follows_tty() {
    let d = tempfile::tempdir().unwrap();
    let mut e = env(d.path());
    assert_eq!(
        resolve(&["ls", "."], &e).unwrap().format,
        OutputFormat::Json
    );
    e.stdout_tty = true;
    assert_eq!(
        resolve(&["ls", "."], &e).unwrap().format,
        OutputFormat::Table
    );
    assert_eq!(
        resolve(&["ls", ".", "--format", "json"], &e)
            .unwrap()
            .format,
        OutputFormat::Json
    );
}

#[test]
fn dataset_falls_back_to_default_warehouse() {
    let d = tempfile::tempdir().unwrap();
    let e = env(d.path());
    assert_eq!(resolve(&["status"], &e).unwrap_err().code(), "PC-CLI-002");
    let wh = d.path().join("wh");
    std::fs::create_dir(&wh).unwrap();
    UserSettings {
        default_warehouse: Some(wh.display().to_string()),
        ..UserSettings::default()
    }
    .save(&d.path().join("s.toml"))
    .unwrap();
    let s = resolve(&["status"], &e).unwrap();
    let CommandSettings::Status { read, .. } = s.command else {
        panic!()
    };
    assert_eq!(read.dataset, DatasetUri::local(&wh, d.path()));
    // An explicit URI wins.
    let s = resolve(&["ls", "/"], &e).unwrap();
    let CommandSettings::Ls { read, .. } = s.command else {
        panic!()
    };
    assert_eq!(read.dataset.to_string(), "/");
}

#[test]
fn bad_values_have_codes() {
    let d = tempfile::tempdir().unwrap();
    let e = env(d.path());
    assert_eq!(
        resolve(&["ls", ".", "--max-files", "0"], &e)
            .unwrap_err()
            .code(),
        "PC-CLI-003"
    );
    std::fs::write(d.path().join("s.toml"), "nonsense = 1\n").unwrap();
    assert_eq!(resolve(&["ls"], &e).unwrap_err().code(), "PC-SET-002");
}

#[test]
fn no_color_respected() {
    let d = tempfile::tempdir().unwrap();
    let mut e = env(d.path());
    e.stderr_tty = true;
    assert!(resolve(&["ls", "."], &e).unwrap().color);
    e.vars.insert("NO_COLOR".into(), "1".into());
    assert!(!resolve(&["ls", "."], &e).unwrap().color);
}
