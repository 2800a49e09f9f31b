//! The documentation keeps up with the code: every stable error code that
//! appears in the source is documented in docs/errors.md.

use std::collections::BTreeSet;
use std::path::Path;

fn codes_in(dir: &Path, re: &regex::Regex, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            codes_in(&p, re, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            for c in re.captures_iter(&text) {
                out.insert(c[1].to_string());
            }
        }
    }
}

#[test]
fn every_error_code_is_documented() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut codes = BTreeSet::new();
    let re = regex::Regex::new(r#""(PC-[A-Z0-9]+-\d{3})""#).unwrap();
    codes_in(&root.join("src"), &re, &mut codes);
    assert!(codes.len() > 20, "found {codes:?}");
    let doc = std::fs::read_to_string(root.join("docs/errors.md")).unwrap();
    let missing: Vec<_> = codes.iter().filter(|c| !doc.contains(c.as_str())).collect();
    assert!(missing.is_empty(), "undocumented codes: {missing:?}");
}
