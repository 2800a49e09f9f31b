//! `serve`: a static, read-only Warehouse over configured Datasets — a JSON
//! API under `/api/v1` and the web explorer, both served from this binary
//! by a small synchronous HTTP/1.1 server ([`http`]).
//!
//! The configuration ([`config`]) fixes the mounted Datasets at start;
//! requests name them and never carry paths, URIs, endpoints or
//! credentials. Every request is answered synchronously by a small worker
//! pool, within the configured time, body and response bounds. The server
//! writes no Dataset; the only files it writes are `find`'s derived index
//! cache, as the CLI does.

pub mod api;
pub mod assets;
pub mod config;
mod media;
mod output;
pub mod server;

pub use config::WarehouseConfig;
pub use server::{ServeOptions, Warehouse};

/// Errors of the Warehouse server, each with a stable code and HTTP status.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WebError {
    /// The configuration file is not valid.
    #[error("warehouse config {path}: {reason}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The listen address is not a loopback address (or not an address).
    #[error("cannot listen on `{given}`: {reason}")]
    Listen {
        /// As given.
        given: String,
        /// Why not.
        reason: String,
    },
    /// The listen socket could not be opened.
    #[error("cannot listen on {addr}: {reason}")]
    Bind {
        /// The address.
        addr: String,
        /// The system's reason.
        reason: String,
    },
    /// A request named a Dataset that is not mounted.
    #[error("no dataset named `{name}` is mounted")]
    UnknownDataset {
        /// The name as given (escaped).
        name: String,
    },
    /// No such route, trajectory or step.
    #[error("{what} not found")]
    NotFound {
        /// What was looked up.
        what: String,
    },
    /// A parameter is missing or malformed.
    #[error("invalid request: {message}")]
    BadRequest {
        /// What is wrong.
        message: String,
    },
    /// Proxy mode without an identity.
    #[error("no authenticated principal: requests must come through the trusted proxy, which sets {header}")]
    Unauthenticated {
        /// The principal header.
        header: String,
    },
    /// The proxy restricted the request to another Dataset.
    #[error("dataset `{name}` is not permitted for this request")]
    Forbidden {
        /// The Dataset asked for.
        name: String,
    },
    /// The request line or body is larger than allowed.
    #[error("request too large: {what} exceeds {limit} bytes")]
    RequestTooLarge {
        /// URL or body.
        what: &'static str,
        /// The bound.
        limit: u64,
    },
    /// The answer is larger than allowed.
    #[error("response too large: more than {limit} bytes (narrow the request or use paging)")]
    ResponseTooLarge {
        /// The bound.
        limit: u64,
    },
    /// The method is not allowed on this route.
    #[error("method {method} not allowed here (the Warehouse is read-only)")]
    MethodNotAllowed {
        /// The method.
        method: String,
    },
    /// A document id occurs in several Sources, or several times in one.
    #[error("document `{document_id}` occurs {count} times; add {hint} (one of: {sources})")]
    Ambiguous {
        /// `source=PATH` or `ordinal=N`: what tells them apart.
        hint: &'static str,
        /// The id.
        document_id: String,
        /// How many Sources.
        count: usize,
        /// Some of them.
        sources: String,
    },
    /// The request's work took longer than allowed.
    #[error("the request took longer than {seconds}s")]
    Timeout {
        /// The bound.
        seconds: f64,
    },
    /// A JSON body does not parse or has the wrong shape.
    #[error("malformed JSON body: {message}")]
    MalformedBody {
        /// The parser's message.
        message: String,
    },
    /// A browser request from a page of another site.
    #[error("requests from pages of other sites are refused (Sec-Fetch-Site)")]
    CrossSite,
    /// The client closed its connection before the answer was ready; the
    /// work stopped (the answer goes nowhere, the access log records it).
    #[error("the client closed the connection; the request was cancelled")]
    ClientGone,
    /// The request head or body did not arrive in time.
    #[error("the request was not received within {seconds}s")]
    ClientTimeout {
        /// The bound.
        seconds: f64,
    },
    /// Too many open connections.
    #[error("too many open connections (limits.max_connections = {limit}); retry later")]
    Busy {
        /// The bound.
        limit: usize,
    },
    /// A body without Content-Length.
    #[error("a request body needs a Content-Length (chunked uploads are not accepted)")]
    LengthRequired,
    /// A media file a trajectory refers to cannot be served (path checks).
    #[error("media file refused: {reason}")]
    MediaRefused {
        /// Why.
        reason: String,
    },
    /// The Host header names no loopback address (DNS rebinding guard).
    #[error("the Host header `{host}` is not a loopback name or address; open the explorer at the address the server printed")]
    BadHost {
        /// The header as given (escaped).
        host: String,
    },
}

impl WebError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            WebError::Config { .. } => "PC-WEB-001",
            WebError::Listen { .. } => "PC-WEB-002",
            WebError::Bind { .. } => "PC-WEB-003",
            WebError::UnknownDataset { .. } => "PC-WEB-004",
            WebError::NotFound { .. } => "PC-WEB-005",
            WebError::BadRequest { .. } => "PC-WEB-006",
            WebError::Unauthenticated { .. } => "PC-WEB-007",
            WebError::Forbidden { .. } => "PC-WEB-008",
            WebError::RequestTooLarge { .. } => "PC-WEB-009",
            WebError::ResponseTooLarge { .. } => "PC-WEB-010",
            WebError::MethodNotAllowed { .. } => "PC-WEB-011",
            WebError::Ambiguous { .. } => "PC-WEB-012",
            WebError::Timeout { .. } => "PC-WEB-013",
            WebError::MalformedBody { .. } => "PC-WEB-014",
            WebError::BadHost { .. } => "PC-WEB-015",
            WebError::ClientTimeout { .. } => "PC-WEB-016",
            WebError::Busy { .. } => "PC-WEB-017",
            WebError::LengthRequired => "PC-WEB-018",
            WebError::CrossSite => "PC-WEB-019",
            WebError::MediaRefused { .. } => "PC-WEB-020",
            WebError::ClientGone => "PC-WEB-021",
        }
    }

    /// HTTP status for the error.
    pub fn status(&self) -> u16 {
        match self {
            WebError::Config { .. } | WebError::Listen { .. } | WebError::Bind { .. } => 500,
            WebError::UnknownDataset { .. } | WebError::NotFound { .. } => 404,
            WebError::BadRequest { .. } | WebError::MalformedBody { .. } => 400,
            WebError::Unauthenticated { .. } => 401,
            WebError::Forbidden { .. } => 403,
            WebError::RequestTooLarge { what, .. } => match *what {
                "URL" => 414,
                "head" => 431,
                _ => 413,
            },
            WebError::ResponseTooLarge { .. } => 422,
            WebError::MethodNotAllowed { .. } => 405,
            WebError::Ambiguous { .. } => 409,
            WebError::Timeout { .. } => 504,
            WebError::BadHost { .. } => 421,
            WebError::ClientTimeout { .. } => 408,
            WebError::Busy { .. } => 503,
            WebError::LengthRequired => 411,
            WebError::CrossSite => 403,
            WebError::MediaRefused { .. } => 403,
            // As nginx logs a request whose client closed the connection.
            WebError::ClientGone => 499,
        }
    }
}

impl crate::error::SurfaceError for WebError {
    fn code(&self) -> &'static str {
        WebError::code(self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl From<WebError> for crate::error::Error {
    fn from(e: WebError) -> Self {
        crate::error::Error::Surface(Box::new(e))
    }
}
