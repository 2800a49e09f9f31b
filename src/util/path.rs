//! Lexical path normalisation and Dataset-relative path checks.

use std::path::{Component, Path, PathBuf};

/// Make `p` absolute against `cwd` and remove `.`, `..` and repeated or
/// trailing separators without touching the file system. `..` above the root
/// stays at the root.
pub fn lexical_absolute(p: &Path, cwd: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(s) => out.push(s),
        }
    }
    out
}

/// Check that `rel` is a clean Dataset-relative path: not empty, not absolute,
/// no scheme, no `.`/`..` segments, no empty segments, no NUL. Returns the
/// reason when it is not.
pub fn check_dataset_relative(rel: &str) -> Result<(), &'static str> {
    if rel.is_empty() {
        return Err("the path is empty");
    }
    if rel.contains('\0') {
        return Err("the path contains a NUL byte");
    }
    if rel.starts_with('/') || rel.starts_with('\\') {
        return Err("absolute paths are not allowed; give a path relative to the Dataset");
    }
    if rel.contains("://") {
        return Err("URIs are not allowed; give a path relative to the Dataset");
    }
    // `.` alone names a store that is the Dataset itself.
    if rel == "." {
        return Ok(());
    }
    for seg in rel.split('/') {
        match seg {
            "" => return Err("the path has an empty segment"),
            "." | ".." => return Err("`.` and `..` segments are not allowed"),
            _ => {}
        }
    }
    Ok(())
}

/// Render a relative path with `/` separators.
pub fn to_slash(rel: &Path) -> String {
    let mut s = String::new();
    for (i, c) in rel.components().enumerate() {
        if i > 0 {
            s.push('/');
        }
        s.push_str(&c.as_os_str().to_string_lossy());
    }
    s
}

/// pChronicle's cache directory: `$PCHRONICLE_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/pchronicle`, else `~/.cache/pchronicle`.
pub fn cache_base() -> Option<PathBuf> {
    std::env::var_os("PCHRONICLE_CACHE_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(|v| PathBuf::from(v).join("pchronicle"))
        })
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache").join("pchronicle"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_cases() {
        let cwd = Path::new("/home/u/work");
        for (input, want) in [
            ("data", "/home/u/work/data"),
            ("./data/", "/home/u/work/data"),
            ("data/./x/..", "/home/u/work/data"),
            ("/a//b/", "/a/b"),
            ("/../../a", "/a"),
            ("..", "/home/u"),
            ("/", "/"),
        ] {
            assert_eq!(
                lexical_absolute(Path::new(input), cwd),
                PathBuf::from(want),
                "{input}"
            );
        }
    }

    #[test]
    fn relative_checks() {
        assert!(check_dataset_relative("runs/a.json").is_ok());
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a//b",
            "s3://b/k",
            "./a",
        ] {
            assert!(check_dataset_relative(bad).is_err(), "{bad}");
        }
    }
}
