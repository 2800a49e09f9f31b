//! Dataset URIs: parsing, credential checks and normalisation.
//!
//! A Dataset's identity is its normalised URI. Local directories normalise to
//! an absolute path with symlinks resolved when the directory exists, and
//! lexically (no `.`/`..`, no trailing `/`) when it does not yet.

use std::fmt;
use std::path::{Path, PathBuf};

use super::CatalogError;
use crate::s3::S3Uri;
use crate::util::path::lexical_absolute;

/// A normalised Dataset URI.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DatasetUri {
    /// A local directory, absolute and normalised.
    Local(PathBuf),
    /// An S3 prefix, `s3://bucket/prefix/` (see [`S3Uri`]).
    S3(S3Uri),
}

impl DatasetUri {
    /// Parse and normalise `input`, resolving relative paths against `cwd`.
    pub fn parse(input: &str, cwd: &Path) -> Result<Self, CatalogError> {
        if input.trim().is_empty() {
            return Err(invalid(input, "the URI is empty"));
        }
        if input.contains('\0') {
            return Err(invalid(input, "the URI contains a NUL byte"));
        }
        if let Some((scheme, rest)) = split_scheme(input) {
            let lower = scheme.to_ascii_lowercase();
            check_credentials(rest)?;
            return match lower.as_str() {
                "file" => {
                    let path = rest.strip_prefix("localhost").unwrap_or(rest);
                    if !path.starts_with('/') {
                        return Err(invalid(input, "a file URI must be `file:///absolute/path`"));
                    }
                    if path.contains('?') || path.contains('#') {
                        return Err(invalid(
                            input,
                            "a file URI must not have a query or fragment",
                        ));
                    }
                    let decoded = crate::util::text::percent_decode(path)
                        .ok_or_else(|| invalid(input, "bad percent-encoding"))?;
                    Ok(Self::local(Path::new(&decoded), cwd))
                }
                "s3" => S3Uri::parse(input)
                    .map(DatasetUri::S3)
                    .map_err(|e| CatalogError::S3(e.into())),
                _ => Err(CatalogError::UnsupportedScheme {
                    scheme: scheme.to_string(),
                }),
            };
        }
        Ok(Self::local(Path::new(input), cwd))
    }

    /// Normalise a local path.
    pub fn local(p: &Path, cwd: &Path) -> Self {
        DatasetUri::Local(Self::normalise_local(p, cwd))
    }

    /// The normalised form of a local Dataset path: absolute, symlinks
    /// resolved when it exists, lexically cleaned when it does not.
    pub fn normalise_local(p: &Path, cwd: &Path) -> PathBuf {
        let abs = lexical_absolute(p, cwd);
        std::fs::canonicalize(&abs).unwrap_or(abs)
    }

    /// The local directory, if this is a local Dataset.
    pub fn local_path(&self) -> Option<&Path> {
        match self {
            DatasetUri::Local(p) => Some(p),
            DatasetUri::S3(_) => None,
        }
    }

    /// The S3 location, if this is an S3 Dataset.
    pub fn s3(&self) -> Option<&S3Uri> {
        match self {
            DatasetUri::S3(u) => Some(u),
            DatasetUri::Local(_) => None,
        }
    }
}

impl fmt::Display for DatasetUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatasetUri::Local(p) => write!(f, "{}", p.display()),
            DatasetUri::S3(u) => write!(f, "{u}"),
        }
    }
}

/// `scheme://rest` → (`scheme`, `rest`). A Windows-style drive letter or a plain
/// path is not a scheme.
fn split_scheme(input: &str) -> Option<(&str, &str)> {
    let idx = input.find("://")?;
    let scheme = &input[..idx];
    let valid = scheme.len() >= 2
        && scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then(|| (scheme, &input[idx + 3..]))
}

fn check_credentials(rest: &str) -> Result<(), CatalogError> {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(CatalogError::CredentialsInUri {
            what: "user information before `@`",
        });
    }
    if let Some(q) = rest.split_once('?').map(|(_, q)| q) {
        if crate::s3::policy::is_signed_query(q) {
            return Err(CatalogError::CredentialsInUri {
                what: "a signed or token query parameter",
            });
        }
    }
    Ok(())
}

/// A URI as an error message may show it: credentials removed (the one
/// redaction of `util::redact`) and control characters escaped.
fn shown(input: &str) -> String {
    crate::util::text::escape_control(&crate::util::redact::redact(input)).into_owned()
}

fn invalid(uri: &str, reason: &str) -> CatalogError {
    CatalogError::InvalidUri {
        uri: shown(uri),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<DatasetUri, CatalogError> {
        DatasetUri::parse(s, Path::new("/nonexistent-cwd/w"))
    }

    #[test]
    fn equivalent_spellings_share_identity() {
        let a = p("data").unwrap();
        for other in [
            "./data",
            "data/",
            "data/.",
            "x/../data",
            "/nonexistent-cwd/w/data",
            "file:///nonexistent-cwd/w/data/",
        ] {
            assert_eq!(p(other).unwrap(), a, "{other}");
        }
        assert_eq!(a.to_string(), "/nonexistent-cwd/w/data");
    }

    #[test]
    fn refuses_credentials_and_schemes() {
        assert_eq!(
            p("s3://AKIA:secret@bucket/x").unwrap_err().code(),
            "PC-CAT-003"
        );
        assert_eq!(
            p("s3://bucket/x?X-Amz-Signature=abc").unwrap_err().code(),
            "PC-CAT-003"
        );
        assert_eq!(p("http://example.com/x").unwrap_err().code(), "PC-CAT-002");
        assert_eq!(
            p("s3://bucket/prefix").unwrap().to_string(),
            "s3://bucket/prefix/"
        );
        assert_eq!(p("s3://bucket//a/./b").unwrap_err().code(), "PC-S3-001");
        assert_eq!(p("s3://Bucket/a").unwrap_err().code(), "PC-S3-001");
        assert_eq!(p("").unwrap_err().code(), "PC-CAT-001");
        assert_eq!(p("file://relative").unwrap_err().code(), "PC-CAT-001");
    }

    #[test]
    fn redaction_hides_secrets() {
        let r = shown("s3://AKIA:secret@bucket/x?X-Amz-Signature=abc");
        assert!(
            !r.contains("secret") && !r.contains("abc") && !r.contains("AKIA"),
            "{r}"
        );
    }
}
