//! Query-time tokenizing never loads the full Jieba dictionary: Latin text
//! needs no dictionary, and CJK text gets one reduced to its own words.
//! (A separate test binary, so no other test has loaded it first.)

use pchronicle::fts::{dictionary_loaded, tokens};

#[test]
fn queries_do_not_load_the_dictionary() {
    assert!(!dictionary_loaded());
    let latin: Vec<String> = tokens("Timeout while retrying")
        .into_iter()
        .map(|t| t.0)
        .collect();
    assert_eq!(latin, ["timeout", "while", "retrying"]);
    assert!(!dictionary_loaded(), "a Latin query loaded the dictionary");
    let zh: Vec<String> = tokens("数据库连接超时").into_iter().map(|t| t.0).collect();
    assert!(zh.contains(&"超时".to_string()), "{zh:?}");
    assert!(zh.contains(&"数据库".to_string()), "{zh:?}");
    assert!(!dictionary_loaded(), "a CJK query loaded the dictionary");
}
