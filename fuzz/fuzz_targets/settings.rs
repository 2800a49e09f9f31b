//! The user settings file: any text either loads or is refused with a code;
//! what loads saves and loads back equal.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pchronicle::cli::settings::UserSettings;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("pc-fuzz-settings-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("settings.toml");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    match UserSettings::load(&path) {
        Ok(s) => {
            s.save(&path).expect("save");
            assert_eq!(UserSettings::load(&path).expect("reload"), s);
        }
        Err(e) => assert!(e.code().starts_with("PC-SET-")),
    }
});
