//! `find [DATASET] --match EXPR …`: the RFC-0012 search.

use serde_json::{json, Value};

use super::report_snapshot;
use crate::catalog::CatalogError;
use crate::cli::out::{json_bytes, Align, Grid, Out};
use crate::cli::settings::FindSettings;
use crate::cli::ExitStatus;
use crate::dataset::Mounts;
use crate::error::Error;
use crate::find::exec::HitList;
use crate::find::scope::Scope;
use crate::find::search;
use crate::find::TOKENIZER_NAME;

const MOUNT: &str = "dataset";

/// Run the command.
pub fn run(s: &FindSettings, out: &mut Out) -> Result<ExitStatus, Error> {
    let mounts = Mounts::open(
        &[(MOUNT.to_string(), s.dataset.clone())],
        s.limits,
        s.strict,
        s.max_document_bytes,
    )?;
    let snap = &mounts.mounts()[0].snapshot;
    report_snapshot(out, snap);
    if s.strict {
        if let Some(x) = snap
            .sources
            .iter()
            .find(|x| x.status != crate::catalog::SourceStatus::Ready)
        {
            let reason = x
                .reason
                .clone()
                .unwrap_or_else(|| crate::catalog::StatusReason::new("PC-CAT-010", "not ready"));
            return Err(CatalogError::StrictSource {
                source_path: x.source_path.clone(),
                status: x.status.name(),
                reason_code: reason.code,
                reason: reason.message,
            }
            .into());
        }
    }
    if let Some(src) = &s.identity.source {
        if !snap.sources.iter().any(|x| &x.source_path == src) {
            return Err(CatalogError::UnknownSource {
                given: crate::util::text::escape_control(src).into_owned(),
            }
            .into());
        }
    }

    let quiet = out.quiet();
    let info = |m: &str| {
        if !quiet {
            eprintln!("{m}");
        }
    };
    let outcome = search::search(
        &mounts,
        &search::Request {
            mount: MOUNT,
            dataset: &s.dataset,
            expr: s.expr.as_ref(),
            identity: &s.identity,
            scope: s.scope,
            max_results: s.max_results,
            timeout: s.timeout,
            build_index: s.build_index,
        },
        &info,
    )?;
    let r = &outcome.report;
    if r.indexed_sources > 0 {
        out.info(&format!(
            "indexed {} Source{} ({} steps, {:.1} MB of text) in {:.2}s",
            r.indexed_sources,
            if r.indexed_sources == 1 { "" } else { "s" },
            r.indexed_steps,
            r.indexed_text_bytes as f64 / 1e6,
            r.index_seconds
        ));
    }
    for (code, msg) in &outcome.warnings {
        out.warn(code, msg);
    }
    let notes: Vec<String> = s
        .matches
        .iter()
        .flat_map(|m| crate::find::operator_notes(m))
        .collect();
    for n in &notes {
        out.note(n);
    }
    render(
        &notes,
        s,
        out,
        &snap.snapshot_id,
        outcome.hits,
        outcome.fts_available,
        outcome.reason,
    )
}

fn render(
    notes: &[String],
    s: &FindSettings,
    out: &mut Out,
    snapshot_id: &str,
    list: HitList,
    fts_available: bool,
    reason: Option<String>,
) -> Result<ExitStatus, Error> {
    let hits: Vec<Value> = list
        .hits
        .iter()
        .map(|h| serde_json::to_value(h).map_err(|e| Error::Internal(e.to_string())))
        .collect::<Result<_, _>>()?;
    let page = Page {
        notes,
        s,
        json: out.json(),
        stats: out.stats(),
        snapshot_id,
        list: &list,
        hits: &hits,
        fts_available,
        reason: reason.as_deref(),
    };
    // --max-output-bytes bounds the bytes printed: the result is rendered
    // for a number of matches, and the largest number that fits is kept.
    // Below the full list the output grows with every match (the flag
    // `truncated` stays true), so a binary search finds it.
    let all = list.hits.len();
    let mut kept = all;
    let mut bytes = page.bytes(all)?;
    if bytes.len() as u64 > s.max_output_bytes && all > 0 {
        let (mut lo, mut hi) = (0usize, all - 1);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if page.bytes(mid)?.len() as u64 <= s.max_output_bytes {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        kept = lo;
        // With not even the envelope within the bound, the result without
        // matches is printed anyway: it says what happened.
        bytes = page.bytes(kept)?;
        out.warn(
            "PC-FND-004",
            &format!(
                "output limit reached (--max-output-bytes {}); {kept} of {all} matches shown",
                s.max_output_bytes
            ),
        );
    }
    let truncated = page.truncated(kept);
    let summary = format!(
        "{kept} match{}{}",
        if kept == 1 { "" } else { "es" },
        if truncated {
            format!(" (truncated; {} in total)", list.total)
        } else {
            String::new()
        }
    );
    out.info(&summary);
    out.info(&format!("truncated: {truncated}"));
    if let Some(h) = page.hint(kept) {
        out.info(&format!("hint: {h}"));
    }
    out.write_bytes(&bytes)?;
    if !fts_available {
        // Never a silent zero: the result says so, and the exit status too.
        out.error_line(
            "PC-FND-003",
            &format!(
                "full-text search unavailable: {}",
                reason.as_deref().unwrap_or("unknown reason")
            ),
        );
        return Ok(ExitStatus::Error);
    }
    Ok(if list.total == 0 {
        ExitStatus::NothingFound
    } else {
        ExitStatus::Success
    })
}

/// Everything the printed result is made of, rendered for a number of the
/// matches.
struct Page<'a> {
    notes: &'a [String],
    s: &'a FindSettings,
    json: bool,
    /// Add the `stats` object (`--stats`).
    stats: bool,
    snapshot_id: &'a str,
    list: &'a HitList,
    hits: &'a [Value],
    fts_available: bool,
    reason: Option<&'a str>,
}

impl Page<'_> {
    /// Whether the first `n` matches are fewer than were found.
    fn truncated(&self, n: usize) -> bool {
        self.list.total > n as u64
    }

    /// Identity lookups without --source: several Sources mean several
    /// candidates.
    fn hint(&self, n: usize) -> Option<String> {
        let mut sources: Vec<&str> = self.list.hits[..n]
            .iter()
            .map(|h| h.source_path.as_str())
            .collect();
        sources.dedup();
        let s = self.s;
        (s.identity.source.is_none() && s.identity.has_id() && sources.len() > 1).then(|| {
            format!(
                "these ids occur in {} Sources; add --source PATH (one of the source_path values) to pick one",
                sources.len()
            )
        })
    }

    /// The exact bytes printed on stdout with the first `n` matches.
    fn bytes(&self, n: usize) -> Result<Vec<u8>, Error> {
        let s = self.s;
        let truncated = self.truncated(n);
        if self.json {
            let mut search = json!({
                "mode": s.mode.name(),
                "scope": s.scope.name(),
                "fts_available": self.fts_available,
                "tokenizer": TOKENIZER_NAME,
            });
            if let Some(r) = self.reason {
                search["fts_unavailable_reason"] = json!(r);
            }
            if !self.notes.is_empty() {
                search["notes"] = json!(self.notes);
            }
            let mut doc = json!({
                "dataset_uri": s.dataset.to_string(),
                "snapshot_id": self.snapshot_id,
                "query": {
                    "matches": s.matches,
                    "expression": s.expr.as_ref().map(std::string::ToString::to_string),
                },
                "search": search,
                "truncated": truncated,
                "matches": &self.hits[..n],
            });
            if let Some(h) = self.hint(n) {
                doc["hint"] = json!(h);
            }
            if self.stats {
                doc["stats"] = crate::cli::out::stats_json();
            }
            return json_bytes(&doc);
        }
        let steps = s.scope == Scope::Steps;
        // Stores hold the documents of many files: say which one.
        let origins = self.list.hits[..n]
            .iter()
            .any(|h| h.origin_path != h.source_path);
        let mut headers = vec![("Source", Align::Left)];
        if origins {
            headers.push(("Origin", Align::Left));
        }
        headers.extend([
            ("Document ID", Align::Left),
            ("Run ID", Align::Left),
            ("Session ID", Align::Left),
        ]);
        if steps {
            headers.extend([
                ("Step ID", Align::Right),
                ("Step Source", Align::Left),
                ("Kind", Align::Left),
                ("Timestamp", Align::Left),
            ]);
        }
        headers.push(("Preview", Align::Left));
        let mut t = Grid::new(&headers);
        let last = headers.len() - 1;
        t.limit(last, 80);
        for h in &self.list.hits[..n] {
            let o = |v: &Option<String>| v.clone().unwrap_or_default();
            let mut row = vec![h.source_path.clone()];
            if origins {
                row.push(h.origin_path.clone());
            }
            row.extend([h.document_id.clone(), o(&h.run_id), o(&h.session_id)]);
            if steps {
                row.extend([
                    h.step_id.map(|v| v.to_string()).unwrap_or_default(),
                    o(&h.step_source),
                    o(&h.effective_kind),
                    o(&h.timestamp),
                ]);
            }
            row.push(h.preview.clone());
            t.row(row);
        }
        // An index that could not be used is named: an empty table is then
        // not "no match".
        let mut footer = Vec::new();
        if truncated {
            footer.push("truncated".to_string());
        }
        if !self.fts_available {
            footer.push(format!(
                "full-text index unavailable: {}",
                crate::util::text::escape_control(self.reason.unwrap_or("unknown reason"))
            ));
        } else if n == 0 && !truncated {
            footer.push("0 matches".to_string());
        }
        if !footer.is_empty() {
            t.footer(format!("({})", footer.join("; ")));
        }
        let mut text = t.render();
        for note in self.notes {
            text.push_str(&format!(
                "note: {}\n",
                crate::util::text::escape_control(note)
            ));
        }
        Ok(text.into_bytes())
    }
}
