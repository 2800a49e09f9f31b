//! `gateway.toml`: the Gateway's routes, credentials (by environment
//! variable name), network policy and ports. It is the only place these
//! come from; requests never name an upstream.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::GatewayError;
use crate::s3::policy::{canonical_ip, classify, AddressClass};
use crate::s3::Allowlist;

/// Most routes.
const MAX_ROUTES: usize = 256;
/// The default session header.
pub const DEFAULT_SESSION_HEADER: &str = "x-pchronicle-session-id";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    listen: String,
    #[serde(default)]
    admin_listen: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    session_header: Option<String>,
    #[serde(default)]
    capture_level: Option<String>,
    #[serde(default)]
    max_body_bytes: Option<u64>,
    #[serde(default)]
    max_capture_bytes: Option<u64>,
    #[serde(default)]
    upstream_timeout_seconds: Option<f64>,
    #[serde(default)]
    max_connections: Option<usize>,
    #[serde(default)]
    flush_interval_ms: Option<u64>,
    #[serde(default)]
    compact_interval_seconds: Option<u64>,
    #[serde(default)]
    version_retention_seconds: Option<u64>,
    #[serde(default)]
    network: NetworkEntry,
    #[serde(default)]
    models: Vec<RouteEntry>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkEntry {
    #[serde(default)]
    allow_hosts: Vec<String>,
    #[serde(default)]
    allow_http: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteEntry {
    name: String,
    provider: String,
    upstream: String,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    forward: Option<String>,
}

/// How much of each exchange is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureLevel {
    /// Envelope, headers (redacted), status, model, usage and timing; no bodies.
    Summary,
    /// Also the request body and the response body (a stream as its
    /// assembled body, without the SSE frames).
    Dialogue,
    /// Everything, including the SSE wire of streams.
    Full,
}

impl CaptureLevel {
    /// The name written in the file and in events.
    pub fn name(self) -> &'static str {
        match self {
            CaptureLevel::Summary => "summary",
            CaptureLevel::Dialogue => "dialogue",
            CaptureLevel::Full => "full",
        }
    }
}

/// Which wire protocol family an upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// OpenAI-compatible: `/v1/chat/completions`, `/v1/responses`.
    OpenAi,
    /// Anthropic-compatible: `/v1/messages`.
    Anthropic,
}

impl Provider {
    /// The name written in the file and in events.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }
}

/// One model route.
#[derive(Clone)]
pub struct Route {
    /// Model name matched: exact, `*`, or a `prefix*` pattern.
    pub name: String,
    /// Protocol family.
    pub provider: Provider,
    /// Upstream base URL (scheme, host, optional port and path prefix; no
    /// trailing slash). The request path is appended.
    pub upstream: String,
    /// The upstream host (for logs).
    pub upstream_host: String,
    /// Name of the environment variable holding the key.
    pub api_key_env: Option<String>,
    /// The key itself (read at start; never written anywhere).
    pub api_key: Option<String>,
    /// Model name sent upstream instead of the requested one.
    pub forward: Option<String>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("name", &self.name)
            .field("provider", &self.provider)
            .field("upstream", &self.upstream)
            .field("upstream_host", &self.upstream_host)
            .field("api_key_env", &self.api_key_env)
            .field(
                "api_key",
                &self.api_key.as_ref().map(|_| crate::util::redact::REDACTED),
            )
            .field("forward", &self.forward)
            .finish()
    }
}

impl Route {
    /// Whether this route serves `model`.
    pub fn matches(&self, model: &str) -> bool {
        if self.name == "*" {
            return true;
        }
        match self.name.strip_suffix('*') {
            Some(prefix) => model.starts_with(prefix),
            None => self.name == model,
        }
    }
}

/// The parsed Gateway configuration.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// The file (for messages).
    pub path: String,
    /// Proxy listen address (loopback).
    pub listen: SocketAddr,
    /// Admin listen address (loopback), when configured.
    pub admin_listen: Option<SocketAddr>,
    /// Agent id written on every event.
    pub agent_id: String,
    /// Header carrying the client's session id (lower case).
    pub session_header: String,
    /// What is captured.
    pub capture_level: CaptureLevel,
    /// Largest request body accepted.
    pub max_body_bytes: u64,
    /// Largest body kept in one event (larger ones are cut and marked).
    pub max_capture_bytes: u64,
    /// Time an upstream may take to connect, and between two reads.
    pub upstream_timeout: Duration,
    /// Most open client connections.
    pub max_connections: usize,
    /// How often captured events move from the WAL into `events.lance`.
    pub flush_interval: Duration,
    /// How often the sink compacts `events.lance` (None: never).
    pub compact_interval: Option<Duration>,
    /// How long replaced versions of `events.lance` are kept for readers
    /// pinned to them.
    pub version_retention: Duration,
    /// Upstream hosts allowed (`network.allow_hosts`), parsed.
    pub allow: Allowlist,
    /// Routes, in order (the first match wins).
    pub routes: Vec<Route>,
    /// The routes' key values of 4 characters or more, computed once.
    secrets: Secrets,
}

/// Key values, never printed by `Debug`.
#[derive(Clone)]
struct Secrets(Vec<String>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} redacted>", self.0.len())
    }
}

impl GatewayConfig {
    /// Read and check `path`; keys are read from the environment.
    pub fn load(path: &Path) -> Result<Self, GatewayError> {
        let text =
            crate::util::config::read_config_file(path).map_err(|reason| GatewayError::Config {
                path: path.display().to_string(),
                reason,
            })?;
        Self::parse(&text, &path.display().to_string(), &|k| {
            std::env::var(k).ok()
        })
    }

    /// Parse `text`; `env` looks up key variables.
    pub fn parse(
        text: &str,
        path: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, GatewayError> {
        let bad = |reason: String| GatewayError::Config {
            path: path.to_string(),
            reason,
        };
        let file: File = toml::from_str(text).map_err(|e| bad(e.message().to_string()))?;
        let listen = loopback(&file.listen, "listen", path)?;
        let admin_listen = file
            .admin_listen
            .as_deref()
            .map(|a| loopback(a, "admin_listen", path))
            .transpose()?;
        if let Some(a) = admin_listen {
            if a.port() != 0 && a == listen {
                return Err(bad("admin_listen must differ from listen".into()));
            }
        }
        let capture_level = match file.capture_level.as_deref().unwrap_or("full") {
            "summary" => CaptureLevel::Summary,
            "dialogue" => CaptureLevel::Dialogue,
            "full" => CaptureLevel::Full,
            other => {
                return Err(bad(format!(
                    "capture_level `{}` is not summary, dialogue or full",
                    crate::util::text::escape_control(other)
                )))
            }
        };
        let session_header = file
            .session_header
            .unwrap_or_else(|| DEFAULT_SESSION_HEADER.to_string())
            .to_ascii_lowercase();
        if session_header.is_empty()
            || !session_header
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        {
            return Err(bad("session_header must be a header name".into()));
        }
        if crate::util::redact::is_credential_header(&session_header) {
            return Err(bad(format!(
                "session_header `{session_header}` carries credentials; choose another header"
            )));
        }
        let agent_id = file.agent_id.unwrap_or_else(|| "gateway".to_string());
        if agent_id.is_empty() || agent_id.len() > 256 {
            return Err(bad("agent_id must be 1 to 256 characters".into()));
        }
        let allow = Allowlist::parse_entries(&file.network.allow_hosts)
            .map_err(|e| bad(format!("network.allow_hosts: {e}")))?;
        if file.models.is_empty() {
            return Err(bad(
                "no [[models]] route: add at least one (name = \"*\" matches every model)".into(),
            ));
        }
        if file.models.len() > MAX_ROUTES {
            return Err(bad(format!("more than {MAX_ROUTES} [[models]] routes")));
        }
        let mut routes = Vec::with_capacity(file.models.len());
        for (i, r) in file.models.into_iter().enumerate() {
            let at = format!("models[{i}]");
            if r.name.is_empty() {
                return Err(bad(format!("{at}.name is empty")));
            }
            let provider = match r.provider.as_str() {
                "openai" => Provider::OpenAi,
                "anthropic" => Provider::Anthropic,
                other => {
                    return Err(bad(format!(
                        "{at}.provider `{}` is not openai or anthropic",
                        crate::util::text::escape_control(other)
                    )))
                }
            };
            let (upstream, host) = check_upstream(&r.upstream, &allow, file.network.allow_http)
                .map_err(|why| GatewayError::UpstreamRefused {
                    route: r.name.clone(),
                    reason: why,
                })?;
            let api_key = match &r.api_key_env {
                None => None,
                Some(var) => match env(var) {
                    // Keys go into a header: visible ASCII only (a stray
                    // newline or space from a key file is refused, not sent).
                    Some(k) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_graphic()) => Some(k),
                    v => {
                        return Err(GatewayError::MissingKey {
                            route: r.name.clone(),
                            var: var.clone(),
                            problem: if v.is_none_or(|k| k.is_empty()) {
                                "is not set"
                            } else {
                                "holds characters a header cannot carry (spaces, line breaks or other controls, non-ASCII)"
                            },
                        })
                    }
                },
            };
            routes.push(Route {
                name: r.name,
                provider,
                upstream,
                upstream_host: host,
                api_key_env: r.api_key_env,
                api_key,
                forward: r.forward.filter(|f| !f.is_empty()),
            });
        }
        let in_range = |key: &str, v: Option<u64>, lo: u64, hi: u64, default: u64| {
            let v = v.unwrap_or(default);
            if (lo..=hi).contains(&v) {
                Ok(v)
            } else {
                Err(bad(format!("{key} must be between {lo} and {hi}")))
            }
        };
        let max_body_bytes = in_range(
            "max_body_bytes",
            file.max_body_bytes,
            1024,
            1 << 30,
            32 << 20,
        )?;
        let max_capture_bytes = in_range(
            "max_capture_bytes",
            file.max_capture_bytes,
            1024,
            super::wal::MAX_RECORD_BYTES as u64 / 8,
            16 << 20,
        )?;
        let max_connections = in_range(
            "max_connections",
            file.max_connections.map(|v| v as u64),
            1,
            65_536,
            512,
        )? as usize;
        let flush_ms = in_range("flush_interval_ms", file.flush_interval_ms, 10, 60_000, 500)?;
        let compact_s = in_range(
            "compact_interval_seconds",
            file.compact_interval_seconds,
            0,
            86_400 * 7,
            300,
        )?;
        let retention_s = in_range(
            "version_retention_seconds",
            file.version_retention_seconds,
            60,
            86_400 * 30,
            3600,
        )?;
        let secs = file.upstream_timeout_seconds.unwrap_or(300.0);
        if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
            return Err(bad("upstream_timeout_seconds must be in (0, 86400]".into()));
        }
        Ok(GatewayConfig {
            path: path.to_string(),
            listen,
            admin_listen,
            agent_id,
            session_header,
            capture_level,
            max_body_bytes,
            max_capture_bytes,
            upstream_timeout: Duration::from_secs_f64(secs),
            max_connections,
            flush_interval: Duration::from_millis(flush_ms),
            compact_interval: (compact_s > 0).then(|| Duration::from_secs(compact_s)),
            version_retention: Duration::from_secs(retention_s),
            allow,
            secrets: Secrets(
                routes
                    .iter()
                    .filter_map(|r| r.api_key.clone())
                    .filter(|k| k.len() >= 4)
                    .collect(),
            ),
            routes,
        })
    }

    /// The first route serving `model` over `provider`.
    pub fn route(&self, model: &str, provider: Provider) -> Option<&Route> {
        self.routes
            .iter()
            .find(|r| r.provider == provider && r.matches(model))
    }

    /// Every configured key value (to scrub from anything written).
    pub fn secrets(&self) -> &[String] {
        &self.secrets.0
    }
}

/// Resolves upstream host names for the HTTP client and keeps only the
/// addresses the network policy allows: never a cloud metadata or
/// link-local address; a loopback, private or otherwise non-public address
/// only when `allow_hosts` lists it (or a CIDR holding it), or for
/// `localhost`. A name that resolves to nothing allowed fails to connect.
pub struct PolicyResolver {
    /// The parsed `allow_hosts`.
    pub allow: Allowlist,
}

impl PolicyResolver {
    /// The allowed subset of `addrs` for `host`.
    pub fn filter(&self, host: &str, addrs: Vec<std::net::IpAddr>) -> Vec<std::net::IpAddr> {
        addrs
            .into_iter()
            .filter(|ip| match classify(canonical_ip(*ip)) {
                AddressClass::Metadata | AddressClass::LinkLocal => false,
                AddressClass::Public => true,
                AddressClass::Loopback if host.eq_ignore_ascii_case("localhost") => true,
                _ => self.allow.allows_ip(*ip),
            })
            .collect()
    }
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        let me = PolicyResolver {
            allow: self.allow.clone(),
        };
        Box::pin(async move {
            let h = host.clone();
            let found =
                tokio::task::spawn_blocking(move || crate::s3::policy::system_resolver(&h, 0))
                    .await
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            let ok = me.filter(&host, found);
            if ok.is_empty() {
                return Err(format!(
                    "`{host}` resolves to no address the network policy allows (metadata, link-local, or a private address not in allow_hosts)"
                )
                .into());
            }
            let addrs: reqwest::dns::Addrs =
                Box::new(ok.into_iter().map(|ip| std::net::SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

fn loopback(given: &str, key: &str, path: &str) -> Result<SocketAddr, GatewayError> {
    crate::http::listen_addr(given).map_err(|reason| GatewayError::Listen {
        given: format!("{key} = {given}"),
        reason: format!(
            "cannot listen on `{}`: {reason} ({path})",
            crate::util::text::escape_control(given)
        ),
    })
}

/// Check an upstream base URL against the network policy; returns the URL
/// without a trailing slash and its host.
fn check_upstream(
    text: &str,
    allow: &Allowlist,
    allow_http: bool,
) -> Result<(String, String), String> {
    let u = url::Url::parse(text).map_err(|e| format!("upstream is not a URL: {e}"))?;
    match u.scheme() {
        "https" => {}
        "http" if allow_http => {}
        "http" => {
            return Err(
                "plain-HTTP upstream refused: set network.allow_http = true to allow it".into(),
            )
        }
        s => return Err(format!("upstream scheme `{s}` is not http or https")),
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err("upstream URL must not embed credentials (use api_key_env)".into());
    }
    if u.query().is_some() || u.fragment().is_some() {
        return Err("upstream URL must not have a query or fragment".into());
    }
    let host = match u.host() {
        Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
        Some(url::Host::Ipv4(ip)) => {
            let ip = std::net::IpAddr::V4(ip);
            if matches!(
                classify(canonical_ip(ip)),
                AddressClass::Metadata | AddressClass::LinkLocal
            ) {
                return Err("upstream is a cloud metadata or link-local address".into());
            }
            ip.to_string()
        }
        Some(url::Host::Ipv6(ip)) => {
            let ipa = std::net::IpAddr::V6(ip);
            if matches!(
                classify(canonical_ip(ipa)),
                AddressClass::Metadata | AddressClass::LinkLocal
            ) {
                return Err("upstream is a cloud metadata or link-local address".into());
            }
            ip.to_string()
        }
        None => return Err("upstream URL has no host".into()),
    };
    if !allow.allows_host(&host) {
        return Err(format!(
            "upstream host `{host}` is not in network.allow_hosts"
        ));
    }
    let base = u.as_str().trim_end_matches('/').to_string();
    Ok((base, host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<GatewayConfig, GatewayError> {
        GatewayConfig::parse(text, "gateway.toml", &|k| {
            (k == "KEY").then(|| "sk-secret-value".to_string())
        })
    }

    const OK: &str = r#"
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
[network]
allow_hosts = ["127.0.0.1", "api.example.com"]
allow_http = true
[[models]]
name = "gpt-*"
provider = "openai"
upstream = "http://127.0.0.1:9/"
api_key_env = "KEY"
forward = "real"
[[models]]
name = "*"
provider = "anthropic"
upstream = "https://api.example.com"
"#;

    #[test]
    fn routes_match_in_order() {
        let c = parse(OK).unwrap();
        assert!(
            !format!("{c:?}").contains("sk-secret-value"),
            "Debug hides keys"
        );
        assert_eq!(
            c.route("gpt-4o", Provider::OpenAi).unwrap().upstream,
            "http://127.0.0.1:9"
        );
        assert!(c.route("o3", Provider::OpenAi).is_none());
        assert_eq!(c.route("claude", Provider::Anthropic).unwrap().name, "*");
        assert_eq!(c.routes[0].api_key.as_deref(), Some("sk-secret-value"));
        assert_eq!(c.capture_level, CaptureLevel::Full);
    }

    #[test]
    fn resolved_addresses_follow_the_policy() {
        let r = PolicyResolver {
            allow: Allowlist::parse_entries(["api.example.com", "10.0.0.0/8"]).unwrap(),
        };
        let ips = |v: &[&str]| -> Vec<std::net::IpAddr> {
            v.iter().map(|s| s.parse().unwrap()).collect()
        };
        assert_eq!(
            r.filter(
                "api.example.com",
                ips(&[
                    "169.254.169.254",
                    "127.0.0.1",
                    "10.1.2.3",
                    "8.8.8.8",
                    "192.168.1.1"
                ])
            ),
            ips(&["10.1.2.3", "8.8.8.8"])
        );
        assert_eq!(
            r.filter("localhost", ips(&["127.0.0.1", "::1"])),
            ips(&["127.0.0.1", "::1"])
        );
        assert!(r
            .filter("api.example.com", ips(&["fd00:ec2::254"]))
            .is_empty());
    }

    #[test]
    fn policy_and_fields_are_enforced() {
        let e = parse(&OK.replace("\"127.0.0.1\", ", "")).unwrap_err();
        assert_eq!(e.code(), "PC-GW-003");
        let e = parse(&OK.replace("allow_http = true", "allow_http = false")).unwrap_err();
        assert_eq!(e.code(), "PC-GW-003");
        let e = parse(&OK.replace(
            "listen = \"127.0.0.1:0\"\nadmin",
            "listen = \"0.0.0.0:0\"\nadmin",
        ))
        .unwrap_err();
        assert_eq!(e.code(), "PC-GW-002");
        let e = parse(&OK.replace("api_key_env = \"KEY\"", "api_key_env = \"NOPE\"")).unwrap_err();
        assert_eq!(e.code(), "PC-GW-004");
        assert!(e.to_string().contains("is not set"), "{e}");
        // A key value a header cannot carry is refused, and not shown.
        for bad in ["sk-abc\n", "sk abc", "sk-\u{7f}", "sk-é"] {
            let e =
                GatewayConfig::parse(OK, "gateway.toml", &|_| Some(bad.to_string())).unwrap_err();
            assert_eq!(e.code(), "PC-GW-004", "{bad:?}");
            assert!(
                e.to_string().contains("cannot carry") && !e.to_string().contains("sk"),
                "{e}"
            );
        }
        let e = parse(&OK.replace("admin_listen", "max_body_bytes = 0\nadmin_listen")).unwrap_err();
        assert_eq!(e.code(), "PC-GW-001");
        let e =
            parse(&OK.replace("admin_listen", "flush_interval_ms = 1\nadmin_listen")).unwrap_err();
        assert_eq!(e.code(), "PC-GW-001");
        let e = parse(&format!("{OK}\nsurprise = 1\n")).unwrap_err();
        assert_eq!(e.code(), "PC-GW-001");
        let e =
            parse(&OK.replace("http://127.0.0.1:9/", "http://user:pw@127.0.0.1:9/")).unwrap_err();
        assert!(!e.to_string().contains("pw@"), "{e}");
        let meta = OK
            .replace("\"127.0.0.1\", ", "\"169.254.169.254\", ")
            .replace("http://127.0.0.1:9/", "http://169.254.169.254/");
        assert_eq!(parse(&meta).unwrap_err().code(), "PC-GW-003");
        let link_local = OK
            .replace("\"127.0.0.1\", ", "\"169.254.1.1\", ")
            .replace("http://127.0.0.1:9/", "http://169.254.1.1/");
        assert_eq!(parse(&link_local).unwrap_err().code(), "PC-GW-003");
    }
}
