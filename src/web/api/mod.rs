//! The read-only JSON API under `/api/v1`. Handlers name Datasets only by
//! their configured mount names; nothing here writes.
//!
//! This file holds the route table and what every route family shares
//! (parameters, errors, the deadline); each family has its own file.

mod cache;
mod catalog;
mod export;
mod find;
mod lists;
mod rows;
mod sql;
mod trajectory;

pub use cache::DocCache;

use super::server::{Ctx, Reply, WarehouseView};
use super::WebError;
use crate::dataset::Mount;
use crate::error::Error;
use crate::sql::SqlError;
use lists::Listing;

/// The OpenAPI description of this API.
const OPENAPI: &str = include_str!("../../../assets/openapi.json");

/// Route an `/api/…` request.
pub(crate) fn route(ctx: &mut Ctx<'_>) -> Result<Reply, Error> {
    let segs = ctx.segments.clone().ok_or_else(|| WebError::BadRequest {
        message: "the path is not valid percent-encoded UTF-8".into(),
    })?;
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let get = matches!(ctx.method.as_str(), "GET" | "HEAD");
    let method_ok = |allowed_post: bool| -> Result<(), Error> {
        if get || (allowed_post && ctx.method == "POST") {
            Ok(())
        } else {
            Err(WebError::MethodNotAllowed {
                method: ctx.method.clone(),
            }
            .into())
        }
    };
    match segs.as_slice() {
        ["api", "v1", "health"] => {
            method_ok(false)?;
            catalog::health(ctx)
        }
        ["api", "v1", "openapi.json"] => {
            method_ok(false)?;
            Ok(Reply {
                status: 200,
                content_type: "application/json",
                body: OPENAPI.as_bytes().to_vec(),
                headers: Vec::new(),
            })
        }
        ["api", "v1", "catalog"] => {
            method_ok(false)?;
            catalog::catalog(ctx)
        }
        ["api", "v1", "query"] => {
            method_ok(true)?;
            sql::query(ctx)
        }
        ["api", "v1", "datasets", name, rest @ ..] => {
            method_ok(false)?;
            let cat = ctx.state.catalog();
            let mount = dataset(ctx, &cat, name)?;
            match rest {
                [] => catalog::dataset_detail(ctx, mount),
                ["sources"] => catalog::sources(mount),
                ["runs"] => lists::list(ctx, &cat, mount, Listing::Runs),
                ["trajectories"] => lists::list(ctx, &cat, mount, Listing::Trajectories),
                ["summary"] => sql::summary(ctx, &cat, mount),
                ["find"] => find::find(ctx, &cat, mount),
                ["media"] => super::media::serve(ctx, mount),
                ["trajectories", doc] => trajectory::trajectory(ctx, &cat, mount, doc),
                ["trajectories", doc, "steps"] => trajectory::steps_page(ctx, &cat, mount, doc),
                ["trajectories", doc, "steps", index] => {
                    trajectory::step_detail(ctx, &cat, mount, doc, index)
                }
                ["trajectories", doc, "export"] => export::export(ctx, &cat, mount, doc),
                _ => Err(not_found("route")),
            }
        }
        _ => Err(not_found("route")),
    }
}

fn not_found(what: &str) -> Error {
    WebError::NotFound {
        what: what.to_string(),
    }
    .into()
}

fn bad(message: impl Into<String>) -> Error {
    WebError::BadRequest {
        message: message.into(),
    }
    .into()
}

/// The mount named `name`, after the proxy's Dataset restriction.
fn dataset<'c>(ctx: &mut Ctx<'_>, cat: &'c WarehouseView, name: &str) -> Result<&'c Mount, Error> {
    let shown = crate::util::text::escape_control(name).into_owned();
    let shown: String = shown.chars().take(80).collect();
    if let Some(only) = &ctx.dataset_restriction {
        if only != name {
            return Err(WebError::Forbidden { name: shown }.into());
        }
    }
    let m = cat
        .mounts
        .mounts()
        .iter()
        .find(|m| m.name == name)
        .ok_or(WebError::UnknownDataset { name: shown })?;
    ctx.dataset = Some(m.name.clone());
    ctx.snapshot_id = Some(m.snapshot.snapshot_id.clone());
    Ok(m)
}

/// Parse a non-negative integer parameter with a default and a cap.
fn param_usize(ctx: &Ctx<'_>, name: &str, default: usize, max: usize) -> Result<usize, Error> {
    match ctx.param(name) {
        None | Some("") => Ok(default.min(max)),
        Some(v) => {
            let n: usize = v
                .parse()
                .map_err(|_| bad(format!("`{name}` must be a non-negative integer")))?;
            Ok(n.min(max))
        }
    }
}

fn check_cb(ctx: &Ctx<'_>) -> impl Fn() -> Result<(), SqlError> + Sync {
    let seconds = ctx.state.config.limits.request_timeout.as_secs_f64();
    let deadline = ctx.deadline;
    let gone = std::sync::Arc::clone(&ctx.gone);
    move || {
        if gone.load(std::sync::atomic::Ordering::Relaxed) {
            Err(SqlError::Cancelled)
        } else if std::time::Instant::now() > deadline {
            Err(SqlError::Timeout { seconds })
        } else {
            Ok(())
        }
    }
}

fn timeout_error(ctx: &Ctx<'_>, e: SqlError) -> Error {
    match e {
        SqlError::Timeout { .. } => WebError::Timeout {
            seconds: ctx.state.config.limits.request_timeout.as_secs_f64(),
        }
        .into(),
        e => e.into(),
    }
}

/// Cut `s` to `n` characters and an ellipsis; true when it was longer.
fn truncate_chars(s: &mut String, n: usize) -> bool {
    if let Some((i, _)) = s.char_indices().nth(n) {
        s.truncate(i);
        s.push('…');
        true
    } else {
        false
    }
}

fn public_text(ctx: &Ctx<'_>, s: &str) -> String {
    super::server::public_message(&ctx.state.config, s)
}
