//! The web explorer's static files, embedded in the binary. The page is
//! plain ES modules: no build step, no network at build or run time.

use super::server::{Ctx, Reply};
use super::WebError;
use crate::error::Error;

/// The Content-Security-Policy of every response: scripts and styles from
/// this origin only, no inline code, no frames, no plugins.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const FILES: [(&str, &str, &[u8]); 4] = [
    (
        "/",
        "text/html; charset=utf-8",
        include_bytes!("../../assets/index.html"),
    ),
    (
        "/app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/app.js"),
    ),
    (
        "/style.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/style.css"),
    ),
    (
        "/favicon.svg",
        "image/svg+xml",
        include_bytes!("../../assets/favicon.svg"),
    ),
];

/// Serve a static file.
pub fn route(ctx: &Ctx<'_>) -> Result<Reply, Error> {
    if !matches!(ctx.method.as_str(), "GET" | "HEAD") {
        return Err(WebError::MethodNotAllowed {
            method: ctx.method.clone(),
        }
        .into());
    }
    let path = if ctx.path == "/index.html" {
        "/"
    } else {
        ctx.path.as_str()
    };
    let (_, ct, body) =
        FILES
            .iter()
            .find(|(p, _, _)| *p == path)
            .ok_or_else(|| WebError::NotFound {
                what: "page".into(),
            })?;
    Ok(Reply {
        status: 200,
        content_type: ct,
        body: body.to_vec(),
        headers: Vec::new(),
    })
}
