//! Property tests: equivalent spellings of a local Dataset URI normalise to
//! one identity, and normalisation is idempotent.

use std::path::Path;

use pchronicle::catalog::DatasetUri;
use proptest::prelude::*;

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9_-]{1,6}",
        1 => Just(".".to_string()),
    ]
}

proptest! {
    #[test]
    fn spellings_share_identity(segs in proptest::collection::vec(segment(), 1..6), trailing in any::<bool>(), detour in "[a-z]{1,4}") {
        let cwd = Path::new("/nonexistent-root/cwd");
        let plain = segs.join("/");
        let a = DatasetUri::parse(&plain, cwd).unwrap();
        // Same path with a detour through a sibling and back, and a trailing slash.
        let mut detoured = format!("{detour}/../{plain}");
        if trailing { detoured.push('/'); }
        let b = DatasetUri::parse(&detoured, cwd).unwrap();
        prop_assert_eq!(&a, &b);
        // Absolute and file:// spellings too.
        let abs = a.to_string();
        prop_assert_eq!(&DatasetUri::parse(&abs, cwd).unwrap(), &a);
        prop_assert_eq!(&DatasetUri::parse(&format!("file://{abs}"), cwd).unwrap(), &a);
        // Idempotent.
        prop_assert_eq!(DatasetUri::parse(&a.to_string(), Path::new("/elsewhere")).unwrap(), a.clone());
        // Normal form: absolute, no `.`/`..`, no trailing slash (except the root).
        let s = a.to_string();
        prop_assert!(s.starts_with('/'));
        prop_assert!(!s.split('/').any(|x| x == "." || x == ".."));
        prop_assert!(s == "/" || !s.ends_with('/'));
    }
}
