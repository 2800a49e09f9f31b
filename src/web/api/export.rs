//! The export route: one trajectory re-encoded in an exchange format, as a
//! download.

use crate::dataset::Mount;
use crate::error::Error;
use crate::formats::ExportFormat;
use crate::web::server::{Ctx, Reply, WarehouseView};

use super::trajectory::{locate, read_documents, source_of};
use super::{bad, not_found};

pub(super) fn export(
    ctx: &mut Ctx<'_>,
    cat: &WarehouseView,
    m: &Mount,
    doc: &str,
) -> Result<Reply, Error> {
    let format: ExportFormat = ctx
        .param("format")
        .unwrap_or("storyline")
        .parse()
        .map_err(|e| bad(format!("`format` {e}")))?;
    let (source, row) = locate(ctx, cat, m, doc)?;
    let want = row["storage_ordinal"].as_i64().unwrap_or(-1);
    let src = source_of(m, &source)?;
    let mut docs = Vec::new();
    read_documents(ctx, cat, src, &mut |d, ordinal| {
        if ordinal as i64 == want {
            docs.push(d.clone());
        }
    })?;
    if docs.is_empty() {
        return Err(not_found("trajectory"));
    }
    let (records, losses) = crate::formats::encode_documents(format, &docs);
    let mut body = Vec::new();
    if records.len() == 1 {
        serde_json::to_writer_pretty(&mut body, &records[0])
            .map_err(|e| Error::Internal(e.to_string()))?;
        body.push(b'\n');
    } else {
        for r in &records {
            serde_json::to_writer(&mut body, r).map_err(|e| Error::Internal(e.to_string()))?;
            body.push(b'\n');
        }
    }
    let ext = if records.len() == 1 { "json" } else { "jsonl" };
    let safe: String = doc
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let name = format!("{safe}.{format}.{ext}");
    let mut dropped: Vec<String> = losses
        .iter()
        .map(|l| format!("{}: {}", l.field, l.reason))
        .collect();
    dropped.sort();
    dropped.dedup();
    let mut headers = vec![
        (
            "Content-Disposition",
            format!("attachment; filename=\"{name}\""),
        ),
        ("X-Pchronicle-Snapshot-Id", m.snapshot.snapshot_id.clone()),
    ];
    if !dropped.is_empty() {
        headers.push(("X-Pchronicle-Dropped", dropped.len().to_string()));
    }
    Ok(Reply {
        status: 200,
        content_type: "application/json",
        body,
        headers,
    })
}
