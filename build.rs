//! Build script.
//!
//! Compiles Jieba's word list (from the `jieba-rs` sources cargo already
//! unpacked) into a finite-state map, so a query can be segmented with the
//! handful of dictionary words it contains instead of loading the whole
//! dictionary first. When the word list cannot be found (unusual source
//! layouts), an empty map is written and queries load the full dictionary.

use std::io::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=assets");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=Cargo.lock");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let (fst, total) = match find_dict().and_then(|p| std::fs::read_to_string(p).ok()) {
        Some(text) => compile(&text),
        None => {
            println!(
                "cargo:warning=jieba word list not found; queries will load the full dictionary"
            );
            (empty_map(), 0)
        }
    };
    std::fs::write(out.join("jieba_first.bin"), first_table(&fst)).expect("write table");
    std::fs::write(out.join("jieba_words.fst"), fst).expect("write fst");
    let mut f = std::fs::File::create(out.join("jieba_words.rs")).expect("write rs");
    writeln!(
        f,
        "/// Sum of all word frequencies of the dictionary (0 when absent).\n#[allow(clippy::unreadable_literal)]\npub const TOTAL: u64 = {total};"
    )
    .expect("write rs");
}

/// The jieba-rs version from Cargo.lock.
fn jieba_version(manifest: &Path) -> Option<String> {
    let lock = std::fs::read_to_string(manifest.join("Cargo.lock")).ok()?;
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l.trim() == "name = \"jieba-rs\"" {
            let v = lines.next()?.trim();
            return v
                .strip_prefix("version = \"")
                .and_then(|v| v.strip_suffix('"'))
                .map(str::to_string);
        }
    }
    None
}

fn find_dict() -> Option<PathBuf> {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let version = jieba_version(&manifest)?;
    let crate_dir = format!("jieba-rs-{version}");
    let rel = Path::new("src").join("data").join("dict.txt");
    // Vendored sources first, then the registry cache.
    let vendored = manifest.join("vendor").join("jieba-rs").join(&rel);
    if vendored.is_file() {
        return Some(vendored);
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let src = home.join("registry").join("src");
    for index in std::fs::read_dir(&src).ok()?.flatten() {
        let p = index.path().join(&crate_dir).join(&rel);
        if p.is_file() {
            println!("cargo:rerun-if-changed={}", p.display());
            return Some(p);
        }
    }
    None
}

/// Word → frequency, as jieba-rs reads the list: every line counts towards
/// the total, and a repeated word keeps its last frequency.
fn compile(text: &str) -> (Vec<u8>, u64) {
    let mut words: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    let mut total = 0u64;
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let Some(word) = it.next() else { continue };
        let freq: u64 = it.next().and_then(|f| f.parse().ok()).unwrap_or(0);
        total += freq;
        words.insert(word, freq);
    }
    let mut b = tantivy_fst::MapBuilder::memory();
    for (w, f) in &words {
        b.insert(w.as_bytes(), *f).expect("sorted keys");
    }
    (b.into_inner().expect("fst"), total)
}

/// For each CJK Unified Ideograph (U+4E00..=U+9FFF), where the map stands
/// after the character's bytes: `node address << 32 | output so far`, or
/// `u64::MAX` when no word starts with it; little-endian, 8 bytes each.
/// The segmenter starts each route step there instead of at the root.
fn first_table(fst: &[u8]) -> Vec<u8> {
    let fst = tantivy_fst::raw::Fst::new(fst).expect("fst");
    let mut out = Vec::with_capacity((0x9FFF - 0x4E00 + 1) * 8);
    for c in (0x4E00..=0x9FFF).filter_map(char::from_u32) {
        let mut node = fst.root();
        let mut sum = 0u64;
        let mut found = true;
        for &byte in c.encode_utf8(&mut [0; 4]).as_bytes() {
            let Some(i) = node.find_input(byte) else {
                found = false;
                break;
            };
            let t = node.transition(i);
            sum += t.out.value();
            node = fst.node(t.addr);
        }
        let addr = node.addr() as u64;
        let v = if found {
            assert!(
                addr < 1 << 32 && sum < 1 << 32,
                "map too large for the table"
            );
            addr << 32 | sum
        } else {
            u64::MAX
        };
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn empty_map() -> Vec<u8> {
    tantivy_fst::MapBuilder::memory().into_inner().expect("fst")
}
