//! The Gateway: a loopback proxy for LLM APIs (OpenAI chat completions and
//! responses, Anthropic messages; streamed or not) that records every
//! exchange as canonical events (RFC-0002) into the target Dataset's
//! `events.lance`, and a small admin API.
//!
//! Capture path: the request event is made durable in the write-ahead log
//! ([`wal`]) before the request goes upstream, and the response event before
//! the client receives the end of the response; the sink ([`sink`]) moves
//! logged events into `events.lance` in the background and records how far
//! it got. A crash can therefore only repeat events (at-least-once), never
//! lose one the client saw answered; readers count the repeats
//! (`duplicate_count`). Runs, steps and tool calls are projected from the
//! events when the Dataset is read (`formats::events`), never written here.

mod admin;
mod capture;
pub mod config;
mod forward;
mod listen;
mod markdown;
mod relay;
pub mod sink;
pub mod wal;

pub use config::GatewayConfig;
pub use listen::{start, GatewayOptions};

/// Gateway errors, each with a stable code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    /// The configuration file is not valid.
    #[error("gateway config {path}: {reason}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A listen address is not loopback or cannot be opened.
    #[error("gateway cannot listen on `{given}`: {reason}")]
    Listen {
        /// As given.
        given: String,
        /// Why not.
        reason: String,
    },
    /// A route's upstream is outside the network policy.
    #[error("gateway route `{route}`: {reason}")]
    UpstreamRefused {
        /// The route name.
        route: String,
        /// Why.
        reason: String,
    },
    /// A route names a key variable that is not set, or whose value a
    /// header cannot carry.
    #[error("gateway route `{route}`: environment variable `{var}` (api_key_env) {problem}")]
    MissingKey {
        /// The route name.
        route: String,
        /// The variable.
        var: String,
        /// What is wrong with it (never the value).
        problem: &'static str,
    },
    /// No route serves the requested model.
    #[error("no gateway route serves model `{model}` over {provider}")]
    NoRoute {
        /// The model asked for (escaped).
        model: String,
        /// The protocol family.
        provider: &'static str,
    },
    /// The request is not one the Gateway forwards.
    #[error("{0}")]
    BadRequest(String),
    /// The upstream could not be reached or failed mid-response.
    #[error("upstream {host} failed: {reason}")]
    Upstream {
        /// The upstream host.
        host: String,
        /// What happened.
        reason: String,
    },
    /// The upstream did not answer in time.
    #[error("upstream {host} did not answer within {seconds} s")]
    UpstreamTimeout {
        /// The upstream host.
        host: String,
        /// The bound.
        seconds: f64,
    },
    /// The event could not be made durable; the request was not forwarded.
    #[error("capture failed: {reason}")]
    Capture {
        /// Why.
        reason: String,
    },
    /// The target Dataset cannot be chosen or used.
    #[error("gateway target: {0}")]
    Target(String),
    /// The state directory (WAL, checkpoint) is unusable.
    #[error("gateway state {path}: {reason}")]
    State {
        /// The directory or file.
        path: String,
        /// Why.
        reason: String,
    },
    /// Appending to `events.lance` failed (retried by the sink).
    #[error("appending to events.lance failed: {0}")]
    Sink(String),
    /// No such route on the proxy or admin listener.
    #[error("{0}")]
    NotFound(String),
    /// The Host header names another site.
    #[error("Host `{0}` is not a loopback name")]
    Host(String),
    /// A browser page of another site sent the request.
    #[error("requests from web pages (an Origin header, or Sec-Fetch-Site other than none or same-origin) are refused: the Gateway spends its routes' keys only for programs")]
    CrossSite,
}

impl GatewayError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            GatewayError::Config { .. } => "PC-GW-001",
            GatewayError::Listen { .. } => "PC-GW-002",
            GatewayError::UpstreamRefused { .. } => "PC-GW-003",
            GatewayError::MissingKey { .. } => "PC-GW-004",
            GatewayError::NoRoute { .. } => "PC-GW-005",
            GatewayError::BadRequest(_) => "PC-GW-006",
            GatewayError::Upstream { .. } => "PC-GW-007",
            GatewayError::UpstreamTimeout { .. } => "PC-GW-008",
            GatewayError::Capture { .. } => "PC-GW-009",
            GatewayError::Target(_) => "PC-GW-010",
            GatewayError::State { .. } => "PC-GW-011",
            GatewayError::Sink(_) => "PC-GW-012",
            GatewayError::NotFound(_) => "PC-GW-013",
            GatewayError::Host(_) => "PC-GW-014",
            GatewayError::CrossSite => "PC-GW-015",
        }
    }

    /// HTTP status when answered to a client.
    pub fn status(&self) -> u16 {
        match self {
            GatewayError::NoRoute { .. } | GatewayError::NotFound(_) => 404,
            GatewayError::BadRequest(_) => 400,
            GatewayError::Upstream { .. } => 502,
            GatewayError::UpstreamTimeout { .. } => 504,
            GatewayError::Capture { .. } | GatewayError::Sink(_) => 503,
            GatewayError::Host(_) => 421,
            GatewayError::CrossSite => 403,
            _ => 500,
        }
    }
}
