//! `GET /api/v1/datasets/{name}/media?source=PATH&path=REL`: an image a
//! trajectory refers to (a computer-use agent's screenshot), read-only.
//!
//! The path is resolved against the directory of the Source that names it,
//! with the checks `--source` applies (relative, no `.`/`..` segments, no
//! scheme), then the resolved file must still lie inside the Dataset once
//! symlinks are followed, be a regular file, have an image extension and
//! fit the size bound. Only local Datasets serve media.

use std::io::Read as _;
use std::path::Path;

use super::server::{Ctx, Reply};
use super::WebError;
use crate::dataset::Mount;
use crate::error::Error;

/// Largest media file served.
pub const MAX_MEDIA_BYTES: u64 = 32 << 20;

fn refused(reason: impl Into<String>) -> Error {
    WebError::MediaRefused {
        reason: reason.into(),
    }
    .into()
}

fn content_type(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return None,
    })
}

/// Serve one media file of mount `m`.
pub fn serve(ctx: &Ctx<'_>, m: &Mount) -> Result<Reply, Error> {
    let source = ctx
        .param("source")
        .ok_or_else(|| refused("`source` (the Source that names the file) is required"))?;
    let rel = ctx
        .param("path")
        .ok_or_else(|| refused("`path` is required"))?;
    let Some(root) = m.snapshot.dataset.local_path() else {
        return Err(refused("media are served for local Datasets only"));
    };
    let src = m
        .snapshot
        .sources
        .iter()
        .find(|s| s.source_path == source)
        .ok_or_else(|| WebError::NotFound {
            what: "source".into(),
        })?;
    crate::util::path::check_dataset_relative(rel).map_err(refused)?;
    if rel.contains('\\') {
        return Err(refused("backslashes are not allowed in a media path"));
    }
    // Relative to the directory holding the Source file (a store is its own
    // directory).
    let base = if src.source_path == "." {
        root.to_path_buf()
    } else {
        let p = root.join(&src.source_path);
        if p.is_dir() {
            p
        } else {
            p.parent()
                .map_or_else(|| root.to_path_buf(), Path::to_path_buf)
        }
    };
    let wanted = base.join(rel);
    let ty = content_type(&wanted)
        .ok_or_else(|| refused("only png, jpeg, gif and webp images are served"))?;
    let real_root =
        std::fs::canonicalize(root).map_err(|_| refused("the Dataset root is not readable"))?;
    let real = std::fs::canonicalize(&wanted).map_err(|_| WebError::NotFound {
        what: "media file".into(),
    })?;
    if !real.starts_with(&real_root) {
        return Err(refused("the path leads outside the Dataset"));
    }
    let meta = std::fs::metadata(&real).map_err(|_| WebError::NotFound {
        what: "media file".into(),
    })?;
    if !meta.is_file() {
        return Err(refused("not a regular file"));
    }
    if meta.len() > MAX_MEDIA_BYTES {
        return Err(refused(format!(
            "the file is larger than {MAX_MEDIA_BYTES} bytes"
        )));
    }
    let mut body = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(&real)
        .and_then(|f| f.take(MAX_MEDIA_BYTES).read_to_end(&mut body))
        .map_err(|_| WebError::NotFound {
            what: "media file".into(),
        })?;
    Ok(Reply {
        status: 200,
        content_type: ty,
        body,
        headers: Vec::new(),
    })
}
