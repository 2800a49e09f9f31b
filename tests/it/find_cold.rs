//! Tokenizing never loads Jieba's full dictionary (about 30 MB of heap):
//! Latin text needs no dictionary, and CJK text, in queries and in the
//! index alike, is segmented from the word list compiled into the binary.
//! The check needs a process in which nothing has tokenised yet, so the test
//! runs itself again in a fresh process of this test binary.

use pchronicle::fts::{dictionary_loaded, find_terms, tokens};

const CHILD: &str = "PCHRONICLE_FIND_COLD_CHILD";

#[test]
fn tokenizing_does_not_load_the_dictionary() {
    if std::env::var_os(CHILD).is_none() {
        let o = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "find_cold::tokenizing_does_not_load_the_dictionary",
                "--exact",
                "--test-threads",
                "1",
            ])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && out.contains("1 passed"),
            "{out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        return;
    }
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
    // The index's analyzer, through the phrase finder that shares it.
    let text = "请求数据库连接超时";
    assert_eq!(find_terms(text, &[(0, "超时".into())]), Some(21));
    assert!(
        !dictionary_loaded(),
        "the index analyzer loaded the dictionary"
    );
}
