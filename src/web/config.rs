//! `warehouse.toml`: the static list of mounted Datasets and the server's
//! bounds. Names are fixed here; HTTP requests only ever name them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::WebError;
use crate::catalog::DatasetUri;

pub use crate::util::config::read_config_file;
/// Most Datasets one Warehouse mounts.
pub const MAX_DATASETS: usize = 128;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    listen: Option<String>,
    #[serde(default)]
    default_dataset: Option<String>,
    #[serde(default)]
    refresh_seconds: Option<u64>,
    #[serde(default)]
    datasets: Vec<DatasetEntry>,
    #[serde(default)]
    limits: LimitsEntry,
    #[serde(default)]
    proxy: Option<ProxyEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DatasetEntry {
    name: String,
    uri: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsEntry {
    workers: Option<usize>,
    request_timeout_seconds: Option<f64>,
    max_body_bytes: Option<u64>,
    max_url_bytes: Option<u64>,
    max_response_bytes: Option<u64>,
    max_rows: Option<u64>,
    memory_budget_bytes: Option<u64>,
    max_page_size: Option<usize>,
    max_find_results: Option<usize>,
    max_document_bytes: Option<u64>,
    max_connections: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProxyEntry {
    trusted: Vec<String>,
    #[serde(default)]
    hosts: Vec<String>,
    #[serde(default)]
    principal_header: Option<String>,
    #[serde(default)]
    dataset_header: Option<String>,
}

/// One mounted Dataset.
#[derive(Debug, Clone)]
pub struct DatasetConfig {
    /// The mount name (also its SQL schema).
    pub name: String,
    /// The normalised URI, fixed at start.
    pub uri: DatasetUri,
}

/// Bounds on every request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Worker threads answering requests.
    pub workers: usize,
    /// Wall-clock bound of one request's work.
    pub request_timeout: Duration,
    /// Largest request body.
    pub max_body_bytes: u64,
    /// Longest request target (path and query string).
    pub max_url_bytes: u64,
    /// Largest response body.
    pub max_response_bytes: u64,
    /// Most rows a SQL request returns.
    pub max_rows: u64,
    /// Operator memory bound of a SQL request.
    pub memory_budget: u64,
    /// Largest page of runs or steps.
    pub max_page_size: usize,
    /// Most find hits per request.
    pub max_find_results: usize,
    /// Largest single document decoded.
    pub max_document_bytes: u64,
    /// Most open connections.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            workers: 4,
            request_timeout: Duration::from_secs(30),
            max_body_bytes: 1 << 20,
            max_url_bytes: 16 << 10,
            max_response_bytes: 64 << 20,
            max_rows: 100_000,
            memory_budget: 2 << 30,
            max_page_size: 500,
            max_find_results: 1000,
            max_document_bytes: 1 << 30,
            max_connections: 256,
        }
    }
}

/// Reverse-proxy trust.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Peers whose identity headers are honoured.
    pub trusted: crate::s3::Allowlist,
    /// The trusted entries as written (for the start-up line).
    pub trusted_text: Vec<String>,
    /// Host names (lower case, without port) accepted in the Host header
    /// besides loopback ones: the names the proxy forwards.
    pub hosts: Vec<String>,
    /// Header naming the authenticated principal (lower case).
    pub principal_header: String,
    /// Header restricting the request to one Dataset name (lower case).
    pub dataset_header: String,
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct WarehouseConfig {
    /// `listen` from the file, if any.
    pub listen: Option<String>,
    /// The default Dataset name.
    pub default_dataset: Option<String>,
    /// Rebuild the Catalog Snapshots this often (None: only on SIGHUP).
    pub refresh: Option<Duration>,
    /// Mounted Datasets in file order.
    pub datasets: Vec<DatasetConfig>,
    /// Request bounds.
    pub limits: Limits,
    /// Trusted proxy mode.
    pub proxy: Option<ProxyConfig>,
}

/// Default principal header.
pub const PRINCIPAL_HEADER: &str = "x-pchronicle-principal";
/// Default Dataset header.
pub const DATASET_HEADER: &str = "x-pchronicle-dataset";

/// True for a valid mount name: a lower-case letter, then up to 63 lower-case
/// letters, digits, `_` or `-`.
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

impl WarehouseConfig {
    /// Read and validate `path`.
    pub fn load(path: &Path) -> Result<Self, WebError> {
        let text = read_config_file(path).map_err(|reason| WebError::Config {
            path: path.display().to_string(),
            reason,
        })?;
        let dir = path
            .canonicalize()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("."));
        Self::parse(&text, path, &dir)
    }

    /// Parse `text`; relative local URIs resolve against `dir`.
    pub fn parse(text: &str, path: &Path, dir: &Path) -> Result<Self, WebError> {
        let bad = |reason: String| WebError::Config {
            path: path.display().to_string(),
            reason,
        };
        let file: File = toml::from_str(text).map_err(|e| bad(e.message().to_string()))?;
        if file.datasets.is_empty() {
            return Err(bad("no [[datasets]]: mount at least one".into()));
        }
        if file.datasets.len() > MAX_DATASETS {
            return Err(bad(format!("more than {MAX_DATASETS} datasets")));
        }
        let mut names = BTreeSet::new();
        let mut datasets = Vec::with_capacity(file.datasets.len());
        for d in &file.datasets {
            if !valid_name(&d.name) {
                return Err(bad(format!(
                    "dataset name `{}` is not valid: use a lower-case letter, then lower-case letters, digits, `_` or `-` (at most 64)",
                    crate::util::text::escape_control(&d.name)
                )));
            }
            if !names.insert(d.name.clone()) {
                return Err(bad(format!("dataset name `{}` is used twice", d.name)));
            }
            let uri = DatasetUri::parse(&d.uri, dir)
                .map_err(|e| bad(format!("dataset `{}`: {e}", d.name)))?;
            datasets.push(DatasetConfig {
                name: d.name.clone(),
                uri,
            });
        }
        if let Some(def) = &file.default_dataset {
            if !names.contains(def) {
                return Err(bad(format!(
                    "default_dataset `{}` names no [[datasets]] entry",
                    crate::util::text::escape_control(def)
                )));
            }
        }
        let d = Limits::default();
        let l = &file.limits;
        let positive = |name: &str, v: Option<u64>, default: u64| -> Result<u64, WebError> {
            match v {
                Some(0) => Err(bad(format!("limits.{name} must be > 0"))),
                Some(v) => Ok(v),
                None => Ok(default),
            }
        };
        let timeout = match l.request_timeout_seconds {
            None => d.request_timeout,
            Some(t) if t.is_finite() && t > 0.0 && t <= 86_400.0 => Duration::from_secs_f64(t),
            Some(_) => {
                return Err(bad(
                    "limits.request_timeout_seconds must be in (0, 86400]".into()
                ))
            }
        };
        let workers = match l.workers {
            None => d.workers,
            Some(w) if (1..=256).contains(&w) => w,
            Some(_) => return Err(bad("limits.workers must be in 1..=256".into())),
        };
        let limits = Limits {
            workers,
            request_timeout: timeout,
            max_body_bytes: positive("max_body_bytes", l.max_body_bytes, d.max_body_bytes)?,
            max_url_bytes: positive("max_url_bytes", l.max_url_bytes, d.max_url_bytes)?,
            max_response_bytes: positive(
                "max_response_bytes",
                l.max_response_bytes,
                d.max_response_bytes,
            )?,
            max_rows: positive("max_rows", l.max_rows, d.max_rows)?,
            memory_budget: positive(
                "memory_budget_bytes",
                l.memory_budget_bytes,
                d.memory_budget,
            )?,
            max_page_size: positive(
                "max_page_size",
                l.max_page_size.map(|v| v as u64),
                d.max_page_size as u64,
            )? as usize,
            max_find_results: positive(
                "max_find_results",
                l.max_find_results.map(|v| v as u64),
                d.max_find_results as u64,
            )? as usize,
            max_document_bytes: positive(
                "max_document_bytes",
                l.max_document_bytes,
                d.max_document_bytes,
            )?,
            max_connections: positive(
                "max_connections",
                l.max_connections.map(|v| v as u64),
                d.max_connections as u64,
            )? as usize,
        };
        let proxy = match &file.proxy {
            None => None,
            Some(p) => {
                if p.trusted.is_empty() {
                    return Err(bad(
                        "proxy.trusted is empty: list the proxy's addresses".into()
                    ));
                }
                let trusted = crate::s3::Allowlist::parse_entries(p.trusted.iter())
                    .map_err(|e| bad(format!("proxy.trusted: {e}")))?;
                let header = |v: &Option<String>, default: &str, key: &str| {
                    let h = v.as_deref().unwrap_or(default).to_ascii_lowercase();
                    if h.is_empty()
                        || !h
                            .bytes()
                            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
                    {
                        Err(bad(format!("proxy.{key} is not a header name")))
                    } else {
                        Ok(h)
                    }
                };
                Some(ProxyConfig {
                    trusted,
                    trusted_text: p.trusted.clone(),
                    hosts: p
                        .hosts
                        .iter()
                        .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
                        .collect(),
                    principal_header: header(
                        &p.principal_header,
                        PRINCIPAL_HEADER,
                        "principal_header",
                    )?,
                    dataset_header: header(&p.dataset_header, DATASET_HEADER, "dataset_header")?,
                })
            }
        };
        Ok(WarehouseConfig {
            listen: file.listen,
            default_dataset: file.default_dataset,
            refresh: file
                .refresh_seconds
                .filter(|s| *s > 0)
                .map(Duration::from_secs),
            datasets,
            limits,
            proxy,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<WarehouseConfig, WebError> {
        WarehouseConfig::parse(text, Path::new("w.toml"), Path::new("/srv/conf"))
    }

    #[test]
    fn relative_paths_resolve_from_the_config_directory() {
        let c = parse("[[datasets]]\nname = \"evals\"\nuri = \"data/evals\"\n").unwrap();
        assert_eq!(c.datasets[0].uri.to_string(), "/srv/conf/data/evals");
        assert_eq!(c.limits.workers, 4);
    }

    #[test]
    fn bad_files_are_refused() {
        for (text, what) in [
            ("", "no [[datasets]]"),
            ("[[datasets]]\nname = \"a\"\nuri = \"/x\"\nextra = 1\n", "unknown field"),
            ("[[datasets]]\nname = \"a\"\nuri = \"/x\"\n[[datasets]]\nname = \"a\"\nuri = \"/y\"\n", "used twice"),
            ("[[datasets]]\nname = \"../a\"\nuri = \"/x\"\n", "not valid"),
            ("[[datasets]]\nname = \"A\"\nuri = \"/x\"\n", "not valid"),
            ("default_dataset = \"b\"\n[[datasets]]\nname = \"a\"\nuri = \"/x\"\n", "names no"),
            ("[[datasets]]\nname = \"a\"\nuri = \"/x\"\n[limits]\nworkers = 0\n", "workers"),
            ("[[datasets]]\nname = \"a\"\nuri = \"/x\"\n[proxy]\ntrusted = []\n", "empty"),
            ("[[datasets]]\nname = \"a\"\nuri = \"s3://u:p@b/x\"\n", "dataset `a`"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(what), "{text:?}: {e}");
        }
    }

    #[test]
    fn proxy_headers_default_and_lower_case() {
        let c = parse("[[datasets]]\nname = \"a\"\nuri = \"/x\"\n[proxy]\ntrusted = [\"127.0.0.1\"]\nprincipal_header = \"X-User\"\n").unwrap();
        let p = c.proxy.unwrap();
        assert_eq!(p.principal_header, "x-user");
        assert_eq!(p.dataset_header, DATASET_HEADER);
        assert!(p.trusted.allows_ip("127.0.0.1".parse().unwrap()));
        assert!(!p.trusted.allows_ip("127.0.0.2".parse().unwrap()));
    }
}
