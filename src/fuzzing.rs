//! The properties the fuzz targets check (one function per target in
//! `fuzz/fuzz_targets/`). `tests/it/fuzz_corpus.rs` runs every input kept under
//! `fuzz/corpus/` and `fuzz/regressions/` through the same functions, so a
//! crasher once found stays fixed in the ordinary test suite.
//!
//! Each function takes arbitrary bytes and panics when its property fails;
//! returning means the input was handled (accepted or refused with a code).

use serde_json::Value;

use crate::catalog::SnapshotRef;
use crate::cli::settings::UserSettings;
use crate::formats::events::{assemble_stream, project_records, Protocol};
use crate::formats::model::Storyline;
use crate::formats::sniff::{sniff_bytes, Sniffer};
use crate::formats::{decode_bytes, DecodeCtx, DecodeOptions};
use crate::store::current::Current;

/// A fuzz target: its name (the directory under `fuzz/corpus/`) and property.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    ("decode", decode),
    ("sniff", sniff),
    ("snapshot_ref", snapshot_ref),
    ("settings", settings),
    ("find_expr", find_expr),
    ("sql", sql),
    ("current", current),
    ("warehouse_config", warehouse_config),
    ("gateway_config", gateway_config),
    ("http_head", http_head),
    ("captured_events", captured_events),
];

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A document survives a Storyline JSON round trip unchanged.
fn round_trips(d: &Storyline) {
    let json = serde_json::to_string(d).expect("a decoded document serialises");
    let back: Storyline = serde_json::from_str(&json).expect("and parses back as Storyline");
    assert_eq!(&back, d);
}

/// Sniffing and every exchange decoder: no panic on any bytes; each decoded
/// document round-trips through Storyline JSON.
pub fn decode(data: &[u8]) {
    let mut ctx = DecodeCtx::new("fuzz.json");
    let mut docs = Vec::new();
    let _ = decode_bytes(data, DecodeOptions::full(1 << 20), &mut ctx, &mut |d| {
        docs.push(d);
    });
    docs.iter().for_each(round_trips);
}

/// The sniffer: feeding the bytes in two pieces gives the shape of one feed.
pub fn sniff(data: &[u8]) {
    let whole = sniff_bytes(data);
    let cut = data.len() / 2;
    let mut s = Sniffer::new();
    s.feed(&data[..cut]);
    s.feed(&data[cut..]);
    assert_eq!(s.finish(), whole);
}

/// An accepted snapshot reference prints to a canonical text that parses
/// back to it.
pub fn snapshot_ref(data: &[u8]) {
    let Some(s) = text(data) else { return };
    if let Ok(r) = s.parse::<SnapshotRef>() {
        let printed = r.to_string();
        // Several spellings may be accepted (`01` for `1`, keys in any
        // order); the printed one is canonical: it re-parses to the same
        // reference and prints the same again.
        let again = printed
            .parse::<SnapshotRef>()
            .unwrap_or_else(|e| panic!("printed {printed:?} does not parse: {e}"));
        assert_eq!(again, r, "{s:?} -> {printed:?}");
        assert_eq!(again.to_string(), printed);
    }
}

/// The user settings file loads or is refused with a `PC-SET-` code; what
/// loads prints and loads back equal.
pub fn settings(data: &[u8]) {
    let Some(s) = text(data) else { return };
    match UserSettings::parse(s, "settings.toml") {
        Ok(loaded) => {
            let printed = loaded.to_toml().expect("accepted settings print");
            let again = UserSettings::parse(&printed, "settings.toml")
                .unwrap_or_else(|e| panic!("printed settings {printed:?} do not load: {e}"));
            assert_eq!(again, loaded);
        }
        Err(e) => assert!(e.code().starts_with("PC-SET-"), "{}", e.code()),
    }
}

/// The `--match` parser: an accepted expression prints to a canonical form
/// that parses to the same expression and prints the same.
pub fn find_expr(data: &[u8]) {
    let Some(s) = text(data) else { return };
    if let Ok(e) = crate::find::parse_match_expression(s) {
        let printed = e.to_string();
        // Quoting can make the canonical form longer than one `--match` may
        // be: then the bounded parser refuses it by size, and it parses
        // without the bound.
        if printed.len() > crate::find::MAX_EXPRESSION_BYTES {
            let refused = crate::find::parse_match_expression(&printed).unwrap_err();
            assert_eq!(refused.code(), "PC-FND-004", "{refused}");
        }
        let again = crate::find::parse_expression_text(&printed)
            .unwrap_or_else(|err| panic!("canonical form {printed:?} does not parse: {err}"));
        assert_eq!(again, e, "{printed:?}");
        assert_eq!(again.to_string(), printed);
    }
}

/// The SQL front end: any text is a supported read-only statement or is
/// refused with a `PC-SQL-` code; never a panic or a stack overflow.
pub fn sql(data: &[u8]) {
    let Some(s) = text(data) else { return };
    if let Err(e) = crate::sql::parse::parse(s) {
        assert!(e.code().starts_with("PC-SQL-"), "{}", e.code());
    }
}

/// A store's `CURRENT` pointer: accepted pointers name only safe generation
/// directories and survive a write/read round trip.
pub fn current(data: &[u8]) {
    if let Ok(c) = Current::parse(data) {
        if let Some(k) = &c.committed {
            for g in [&k.generation, &k.table_generation] {
                assert!(crate::store::current::valid_generation(g), "{g:?}");
                assert!(!g.contains(['/', '\\', '.']), "{g:?}");
            }
        }
        let bytes = serde_json::to_vec(&c).expect("an accepted pointer serialises");
        assert_eq!(Current::parse(&bytes).expect("and parses back"), c);
    }
}

/// warehouse.toml: accepted or refused with `PC-WEB-001`; accepted names are
/// valid SQL schema names and unique.
pub fn warehouse_config(data: &[u8]) {
    let Some(s) = text(data) else { return };
    let dir = std::env::temp_dir();
    match crate::web::config::WarehouseConfig::parse(s, std::path::Path::new("w.toml"), &dir) {
        Ok(c) => {
            let mut names: Vec<&str> = c.datasets.iter().map(|d| d.name.as_str()).collect();
            let n = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), n, "dataset names are unique");
            for name in names {
                let b = name.as_bytes();
                assert!(
                    !b.is_empty() && b.len() <= 64 && b[0].is_ascii_lowercase(),
                    "{name:?}"
                );
                assert!(
                    b.iter().all(|c| c.is_ascii_lowercase()
                        || c.is_ascii_digit()
                        || *c == b'_'
                        || *c == b'-'),
                    "{name:?}"
                );
            }
            if let Some(d) = &c.default_dataset {
                assert!(c.datasets.iter().any(|x| &x.name == d), "{d:?}");
            }
        }
        Err(e) => assert!(e.code().starts_with("PC-WEB-"), "{}", e.code()),
    }
}

/// gateway.toml: accepted or refused with a `PC-GW-` code; what is accepted
/// listens on loopback only and never shows a key value in its `Debug`.
pub fn gateway_config(data: &[u8]) {
    let Some(s) = text(data) else { return };
    // Key values carry a hash of the input, which the input cannot spell
    // out itself: found in `Debug` output, it can only come from a key.
    let marker = format!("pcfuzzkey{}", &blake3::hash(data).to_hex()[..16]);
    let env = |k: &str| Some(format!("{marker}{}", k.len()));
    match crate::gateway::config::GatewayConfig::parse(s, "gateway.toml", &env) {
        Ok(c) => {
            assert!(c.listen.ip().to_canonical().is_loopback(), "{}", c.listen);
            if let Some(a) = c.admin_listen {
                assert!(a.ip().to_canonical().is_loopback(), "{a}");
            }
            let debug = format!("{c:?}");
            assert!(!debug.contains(&marker), "a key value in Debug output");
        }
        Err(e) => assert!(e.code().starts_with("PC-GW-"), "{}", e.code()),
    }
}

/// The HTTP request head parser of `serve` and the Gateway: any head is
/// accepted or refused; an accepted one has an upper-case method, an
/// origin-form target without controls, and header names that are tokens.
pub fn http_head(data: &[u8]) {
    let lines: Option<Vec<String>> = data
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .take_while(|l| !l.is_empty())
        .map(|l| String::from_utf8(l.to_vec()).ok())
        .collect();
    let Some(lines) = lines else { return };
    if lines.is_empty() {
        return;
    }
    if let Ok((method, target, _, headers, _)) = crate::http::parse_head_lines(&lines) {
        assert!(!method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase()));
        assert!(target.starts_with('/'));
        assert!(!target.bytes().any(|b| b.is_ascii_control() || b == b' '));
        for (k, v) in &headers {
            assert!(!k.is_empty() && !k.contains(':'));
            assert!(
                !v.bytes().any(|c| (c < 0x20 && c != b'\t') || c == 0x7f),
                "a control in the value of {k}: {v:?}"
            );
        }
    }
}

/// Captured Gateway traffic: SSE assembly for each protocol and the
/// projection of event lines onto trajectories never panic, and every
/// projected document round-trips through Storyline JSON.
pub fn captured_events(data: &[u8]) {
    let Some(s) = text(data) else { return };
    for p in [
        Protocol::ChatCompletions,
        Protocol::Responses,
        Protocol::AnthropicMessages,
    ] {
        let _ = assemble_stream(p, s);
    }
    let events: Vec<Value> = s
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(Value::is_object)
        .collect();
    let refs: Vec<(&Value, i64)> = events.iter().map(|e| (e, 1)).collect();
    project_records(&refs, "fuzz/events.lance")
        .iter()
        .for_each(round_trips);
}
