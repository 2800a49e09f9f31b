//! The projection of stored events onto trajectories (see the module
//! above): events grouped by session, calls paired by `call_id` and taken
//! in `seq` order, each record parsed only when its call is folded in.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::super::model::{Origin, Storyline, Turn};
use super::super::openai::{attach_result, convert_calls, reasoning_of, role_src};
use super::super::DecodeCtx;
use super::{request_messages, response_reply, Protocol, SOURCE};

fn is_request(kind: &str) -> bool {
    matches!(kind, "http.request" | "llm.request")
}

fn is_response(kind: &str) -> bool {
    matches!(
        kind,
        "http.response" | "http.response.stream" | "llm.response" | "llm.response.stream"
    )
}

/// `payload.http.<key>`, or the flat compatibility key.
fn http_field<'a>(payload: &'a Value, key: &str, flat: &str) -> Option<&'a Value> {
    payload
        .get("http")
        .and_then(|h| h.get(key))
        .or_else(|| payload.get(flat))
}

fn rfc3339(ms: i64) -> Value {
    chrono::DateTime::from_timestamp_millis(ms).map_or(Value::Null, |t| {
        Value::String(t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    })
}

/// One stored event as the projection first sees it: the envelope columns
/// it is grouped and ordered by (which hold what the record says, see
/// `store::events::events_batch`) and where its record is. The record's
/// JSON text is read only when its call is projected, a few calls at a
/// time, so that a projection never holds every record's text.
#[derive(Debug, Clone, Copy)]
pub struct StoredEvent<'a> {
    /// Producer sequence number (`0` when the record has none).
    pub seq: i64,
    /// `session_id` (`""` when absent).
    pub session_id: &'a str,
    /// `call_id` (`""` when absent).
    pub call_id: &'a str,
    /// `kind` (`""` when absent).
    pub kind: &'a str,
    /// How many further copies of the event were stored.
    pub duplicates: i64,
    /// Where the record is, for [`RecordTexts::texts`].
    pub row: u64,
    /// The row of the event's last copy (`row` when it has none): a
    /// session's place among the others is that of its last stored row.
    pub last: u64,
}

/// The events of one session, in `seq` order, with where the session's
/// rows are in the table.
#[derive(Debug)]
pub struct Session<'a> {
    /// `session_id` (`""` when absent).
    pub id: &'a str,
    /// Its events, in `seq` order.
    pub events: Vec<&'a StoredEvent<'a>>,
    /// The row of its first event.
    pub first_row: u64,
    /// The last row it has in the table, copies included: sessions are
    /// projected in this order.
    pub last_row: u64,
}

/// The sessions of `events`, in order of the last row each has in the
/// table. A session that gets no new rows keeps its place when rows are
/// appended, and every session that does moves after all that do not, so
/// the projection of an appended table is that of the table before, less
/// the sessions that changed, followed by those sessions and new ones
/// (which lets `catalog::projection` extend a projection rather than
/// project every session again).
pub fn sessions<'a>(events: &'a [StoredEvent<'a>]) -> Vec<Session<'a>> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut out: Vec<Session<'a>> = Vec::new();
    for e in events {
        let i = *index.entry(e.session_id).or_insert_with(|| {
            out.push(Session {
                id: e.session_id,
                events: Vec::new(),
                first_row: e.row,
                last_row: 0,
            });
            out.len() - 1
        });
        let s = &mut out[i];
        s.events.push(e);
        s.first_row = s.first_row.min(e.row);
        s.last_row = s.last_row.max(e.last.max(e.row));
    }
    for s in &mut out {
        s.events.sort_by_key(|e| e.seq);
    }
    out.sort_by_key(|s| s.last_row);
    out
}

/// Where the projection reads the events' record texts.
pub trait RecordTexts: Sync {
    /// The JSON texts of the records at `rows` (the events' `row`s), in
    /// that order.
    ///
    /// # Errors
    /// When the records cannot be read; the message says why.
    fn texts(&self, rows: &[u64]) -> Result<Box<dyn TextList + '_>, String>;
}

/// Texts by position, held however their reader keeps them (a reader of
/// a table hands out its column buffers instead of a copy of each text).
pub trait TextList: Sync {
    /// How many texts.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The `i`-th text.
    fn get(&self, i: usize) -> &str;
}

impl TextList for Vec<&str> {
    fn len(&self) -> usize {
        <[&str]>::len(self)
    }
    fn get(&self, i: usize) -> &str {
        self[i]
    }
}

/// Records held in memory: row `i` is the `i`-th text.
impl<S: AsRef<str> + Sync> RecordTexts for Vec<S> {
    fn texts(&self, rows: &[u64]) -> Result<Box<dyn TextList + '_>, String> {
        let texts = rows
            .iter()
            .map(|&r| {
                usize::try_from(r)
                    .ok()
                    .and_then(|r| self.get(r))
                    .map(AsRef::as_ref)
                    .ok_or_else(|| format!("no record {r}"))
            })
            .collect::<Result<Vec<&str>, String>>()?;
        Ok(Box::new(texts))
    }
}

/// The texts of a group of small sessions, read at once (one read serves
/// many sessions) and lent to each session's projection.
struct Prefetched<'r> {
    /// Rows read, ascending.
    rows: Vec<u64>,
    texts: Box<dyn TextList + 'r>,
}

impl<'r> Prefetched<'r> {
    fn read(records: &'r dyn RecordTexts, mut rows: Vec<u64>) -> Result<Self, String> {
        rows.sort_unstable();
        rows.dedup();
        let texts = records.texts(&rows)?;
        Ok(Prefetched { rows, texts })
    }
}

impl RecordTexts for Prefetched<'_> {
    fn texts(&self, rows: &[u64]) -> Result<Box<dyn TextList + '_>, String> {
        let texts = rows
            .iter()
            .map(|r| match self.rows.binary_search(r) {
                Ok(i) => Ok(self.texts.get(i)),
                Err(_) => Err(format!("record {r} was not read")),
            })
            .collect::<Result<Vec<&str>, String>>()?;
        Ok(Box::new(texts))
    }
}

/// A stored record that is not JSON.
#[derive(Debug)]
pub struct BadRecord {
    /// The event's `seq`.
    pub seq: i64,
    /// What the parser said.
    pub message: String,
}

/// Why events were not projected.
#[derive(Debug)]
pub enum ProjectError {
    /// A record is not JSON.
    Record(BadRecord),
    /// Records could not be read (what the reader said).
    Read(String),
}

impl From<BadRecord> for ProjectError {
    fn from(b: BadRecord) -> Self {
        ProjectError::Record(b)
    }
}

/// The members of the record `text` of `e` that the projection reads.
fn parse(e: &StoredEvent<'_>, text: &str) -> Result<Value, BadRecord> {
    super::pruned::parse_record(text).map_err(|err| BadRecord {
        seq: e.seq,
        message: err.to_string(),
    })
}

/// Calls whose events are parsed together, in parallel, before they are
/// folded in order: enough to keep the cores busy, few enough that the
/// parsed records of a session never pile up.
const PARSE_CHUNK: usize = 256;

/// Calls whose records are read together, in one request to the reader,
/// for a session whose records are not read with its group's.
const READ_CHUNK: usize = 1024;

/// Sessions are projected a group at a time, in parallel within a group,
/// and handed on before the next group starts: a group holds the
/// trajectories of about this many events (or of one session a thread).
const EVENTS_PER_GROUP: usize = 8192;

/// A group of at most this many events has its records read at once;
/// the sessions of a larger one (a few long sessions) read theirs a
/// [`READ_CHUNK`] of calls at a time.
const PREFETCH_EVENTS: usize = 2 * EVENTS_PER_GROUP;

/// Of `sessions` (in projection order), how many lead the projection of
/// the table's first `rows` rows unchanged, and how many sessions those rows
/// held. A session with a row at or past `rows` moved after every session
/// without one; the sessions whose last row comes before the last earlier
/// row of every session that moved are in the same places in both.
pub fn unchanged_sessions(sessions: &[Session<'_>], rows: u64) -> (usize, u64) {
    let earlier = sessions.iter().filter(|s| s.first_row < rows).count() as u64;
    // The last row before `rows` of a session that moved, or a row before
    // it: an event whose copies straddle `rows` counts its first.
    let last_before = |s: &Session<'_>| {
        s.events
            .iter()
            .filter(|e| e.row < rows)
            .map(|e| if e.last < rows { e.last } else { e.row })
            .max()
    };
    let moved = sessions
        .iter()
        .filter(|s| s.last_row >= rows)
        .filter_map(last_before)
        .min()
        .unwrap_or(rows);
    (sessions.partition_point(|s| s.last_row < moved), earlier)
}

/// Project deduplicated events onto one Storyline per session, in the
/// order of [`sessions`] (see [`project_each`]).
///
/// # Errors
/// See [`project_each`].
pub fn project(
    events: &[StoredEvent<'_>],
    records: &dyn RecordTexts,
    source_path: &str,
) -> Result<Vec<Storyline>, ProjectError> {
    let mut out = Vec::new();
    project_each(&sessions(events), records, source_path, &mut |d| {
        out.push(d);
    })?;
    Ok(out)
}

/// Project sessions (from [`sessions`]) onto one Storyline each and pass
/// each to `sink`, in the order given. Sessions are
/// projected in parallel a group at a time, and a session's records are
/// read from `records` and parsed a chunk of calls at a time, so memory
/// holds the events' envelopes, one group's record texts (or a chunk's
/// for each session of a group of long sessions) and one group's
/// trajectories, never every record or every trajectory. On a record that
/// is not JSON, or records that cannot be read, the sessions before its
/// group have been passed on.
///
/// # Errors
/// A record that is not JSON, or records the reader could not read.
pub fn project_each(
    sessions: &[Session<'_>],
    records: &dyn RecordTexts,
    source_path: &str,
    sink: &mut dyn FnMut(Storyline),
) -> Result<(), ProjectError> {
    use rayon::prelude::*;
    // A group has a session for every thread at least, so that a few long
    // sessions are still projected side by side.
    let threads = rayon::current_num_threads();
    let mut rest = sessions;
    while !rest.is_empty() {
        let mut events = 0;
        let take = rest
            .iter()
            .enumerate()
            .take_while(|(i, s)| {
                let more = events < EVENTS_PER_GROUP || *i < threads;
                events += s.events.len();
                more
            })
            .count();
        let (now, later) = rest.split_at(take);
        rest = later;
        let in_group: usize = now.iter().map(|s| s.events.len()).sum();
        let prefetched = if in_group <= PREFETCH_EVENTS {
            let rows = now.iter().flat_map(|s| s.events.iter().map(|e| e.row));
            Some(Prefetched::read(records, rows.collect()).map_err(ProjectError::Read)?)
        } else {
            None
        };
        let source: &dyn RecordTexts = match &prefetched {
            Some(p) => p,
            None => records,
        };
        let docs: Vec<Result<Storyline, ProjectError>> = now
            .par_iter()
            .map(|s| {
                // Diagnostics of a projection are not reported: each
                // session gets its own context.
                project_session(s.id, &s.events, source, &mut DecodeCtx::new(source_path))
            })
            .collect();
        drop(prefetched);
        for d in docs {
            sink(d?);
        }
    }
    Ok(())
}

/// [`project`] over parsed records (each with its duplicate count), keyed
/// by the fields the store keeps beside each record.
pub fn project_records(events: &[(&Value, i64)], source_path: &str) -> Vec<Storyline> {
    let field = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let keys: Vec<[String; 3]> = events
        .iter()
        .map(|(e, _)| {
            [
                field(e, "session_id"),
                field(e, "call_id"),
                field(e, "kind"),
            ]
        })
        .collect();
    let texts: Vec<String> = events.iter().map(|(e, _)| e.to_string()).collect();
    let stored: Vec<StoredEvent<'_>> = events
        .iter()
        .zip(&keys)
        .zip(0u64..)
        .map(|(((e, d), [s, c, k]), row)| StoredEvent {
            seq: e.get("seq").and_then(Value::as_i64).unwrap_or(0),
            session_id: s,
            call_id: c,
            kind: k,
            duplicates: *d,
            row,
            last: row,
        })
        .collect();
    // The records were JSON before they were text again, and are in memory.
    project(&stored, &texts, source_path).unwrap_or_default()
}

/// The texts of `rows`, or why they could not be read.
fn read<'r>(
    records: &'r dyn RecordTexts,
    rows: &[u64],
) -> Result<Box<dyn TextList + 'r>, ProjectError> {
    let texts = records.texts(rows).map_err(ProjectError::Read)?;
    if texts.len() == rows.len() {
        Ok(texts)
    } else {
        Err(ProjectError::Read(format!(
            "{} records read of {}",
            texts.len(),
            rows.len()
        )))
    }
}

fn project_session(
    sid: &str,
    events: &[&StoredEvent<'_>],
    records: &dyn RecordTexts,
    ctx: &mut DecodeCtx,
) -> Result<Storyline, ProjectError> {
    use rayon::prelude::*;
    // The first record names the agent, the run and the start; the last
    // the end.
    let ends = match events {
        [] => Vec::new(),
        [only] => vec![parse(only, read(records, &[only.row])?.get(0))?],
        [first, .., last] => {
            let texts = read(records, &[first.row, last.row])?;
            vec![parse(first, texts.get(0))?, parse(last, texts.get(1))?]
        }
    };
    let first = ends.first();
    let agent = first
        .and_then(|e| e.get("agent_id"))
        .and_then(Value::as_str)
        .unwrap_or("gateway");
    let session = if sid.is_empty() { "unknown" } else { sid };
    let mut doc = Storyline::new(session, agent);
    doc.origin = Some(Origin {
        format: SOURCE.into(),
        schema_version: None,
        document_id: Some(session.to_string()),
    });
    doc.run = first
        .and_then(|e| e.get("run_id"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let ts = |e: &Value| e.get("timestamp_unix_ms").and_then(Value::as_i64);
    doc.started_at = first.and_then(ts).map(rfc3339);
    doc.finished_at = ends.last().and_then(ts).map(rfc3339);

    // Each call's (request, response) event, by position in `events`.
    let mut calls: Vec<(&str, Option<usize>, Option<usize>)> = Vec::new();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    let mut duplicates = 0i64;
    for (i, e) in events.iter().enumerate() {
        duplicates += e.duplicates;
        let slot = *by_id.entry(e.call_id).or_insert_with(|| {
            calls.push((e.call_id, None, None));
            calls.len() - 1
        });
        if is_request(e.kind) {
            calls[slot].1.get_or_insert(i);
        } else if is_response(e.kind) {
            calls[slot].2 = Some(i);
        }
    }

    let mut owner: HashMap<String, usize> = HashMap::new();
    let mut prev_len: Option<usize> = None;
    let mut prev_replied = false;
    let mut failed = 0i64;
    let mut answered = 0i64;
    let mut unrecorded = 0i64;
    for calls in calls.chunks(READ_CHUNK) {
        // A call with no request is not projected: its answer is not read
        // either.
        let rows: Vec<u64> = calls
            .iter()
            .filter_map(|&(_, req, resp)| {
                Some([Some(events[req?].row), resp.map(|r| events[r].row)])
            })
            .flatten()
            .flatten()
            .collect();
        let texts = read(records, &rows)?;
        let mut texts = (0..texts.len()).map(|k| texts.get(k));
        let located: Vec<(Option<(usize, &str)>, Option<(usize, &str)>)> = calls
            .iter()
            .map(|&(_, req, resp)| {
                let Some(req) = req else { return (None, None) };
                let req = texts.next().map(|t| (req, t));
                let resp = resp.and_then(|r| texts.next().map(|t| (r, t)));
                (req, resp)
            })
            .collect();
        for (chunk, located) in calls.chunks(PARSE_CHUNK).zip(located.chunks(PARSE_CHUNK)) {
            let parsed = located
                .par_iter()
                .map(|&(req, resp)| {
                    let one = |(i, t): (usize, &str)| parse(events[i], t);
                    Ok((req.map(one).transpose()?, resp.map(one).transpose()?))
                })
                .collect::<Result<Vec<_>, BadRecord>>()?;
            for (&(cid, _, _), (req, resp)) in chunk.iter().zip(&parsed) {
                let Some(req) = req else { continue };
                let payload = req.get("payload").unwrap_or(&Value::Null);
                let protocol = payload
                    .get("protocol")
                    .and_then(Value::as_str)
                    .and_then(Protocol::from_name)
                    .or_else(|| {
                        http_field(payload, "path", "path")
                            .and_then(Value::as_str)
                            .and_then(Protocol::from_path)
                    })
                    .unwrap_or(Protocol::ChatCompletions);
                let body = http_field(payload, "request_body", "body").unwrap_or(&Value::Null);
                let msgs = request_messages(protocol, body);
                let start = match prev_len {
                    None => 0,
                    Some(p) => {
                        let s = p + usize::from(prev_replied);
                        if s <= msgs.len() {
                            s
                        } else {
                            // The history was rewritten: take what follows the last reply.
                            msgs.iter()
                                .rposition(|m| {
                                    m.get("role").and_then(Value::as_str) == Some("assistant")
                                })
                                .map_or(0, |i| i + 1)
                        }
                    }
                };
                if doc.agent.tools.is_none() {
                    doc.agent.tools = body.get("tools").cloned();
                }
                let req_ts = ts(req);
                for m in &msgs[start.min(msgs.len())..] {
                    push_message(&mut doc, m, &mut owner, ctx, req_ts);
                }
                prev_len = Some(msgs.len());
                prev_replied = false;
                let Some(resp) = resp else { continue };
                let rp = resp.get("payload").unwrap_or(&Value::Null);
                let status = http_field(rp, "status", "status")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let rbody = rp
                    .get("assembled")
                    .or_else(|| http_field(rp, "response_body", "body"))
                    .unwrap_or(&Value::Null);
                let reply = response_reply(protocol, rbody);
                if !(200..300).contains(&status) {
                    failed += 1;
                    continue;
                }
                let Some(message) = reply.message else {
                    // Answered, but the body was not kept (summary capture).
                    unrecorded += 1;
                    prev_replied = true;
                    continue;
                };
                answered += 1;
                let id = doc.turns.len() as i64 + 1;
                let Value::Object(mo) = &message else {
                    continue;
                };
                let mut turn = Turn::new(
                    id,
                    "agent",
                    mo.get("content").cloned().unwrap_or(Value::Null),
                );
                turn.reason = reasoning_of(mo);
                turn.model = reply
                    .model
                    .clone()
                    .or_else(|| rp.get("model").and_then(Value::as_str).map(str::to_string));
                turn.ts = ts(resp).map(rfc3339);
                let timing = rp.get("timing");
                turn.latency_ms = timing
                    .and_then(|t| t.get("duration_ms"))
                    .and_then(Value::as_f64)
                    .map(|v| v as i64);
                turn.ttft_ms = timing
                    .and_then(|t| t.get("ttft_ms"))
                    .and_then(Value::as_f64)
                    .map(|v| v as i64);
                turn.metrics.clone_from(&reply.usage);
                turn.extra = Some(json!({ "call_id": cid }));
                if let Some(Value::Array(tcs)) = mo.get("tool_calls") {
                    let c = convert_calls(tcs, id, ctx, &format!("call {cid}"));
                    for call in &c {
                        owner.insert(call.tcid.clone(), doc.turns.len());
                    }
                    if !c.is_empty() {
                        turn.tool_calls = Some(c);
                    }
                }
                if turn.model.is_some() {
                    doc.agent.model.clone_from(&turn.model);
                }
                doc.turns.push(turn);
                prev_replied = true;
            }
        }
    }
    doc.extra = Some(json!({
        "gateway": {
            "calls": calls.len(),
            "answered_calls": answered,
            "failed_calls": failed,
            "answers_not_captured": unrecorded,
            "duplicate_events": duplicates,
        }
    }));
    Ok(doc)
}

fn push_message(
    doc: &mut Storyline,
    m: &Value,
    owner: &mut HashMap<String, usize>,
    ctx: &mut DecodeCtx,
    ts: Option<i64>,
) {
    let Some(mo) = m.as_object() else { return };
    let role = mo.get("role").and_then(Value::as_str).unwrap_or("");
    if role == "tool" || role == "function" {
        let tcid = mo.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
        let content = mo.get("content").cloned().unwrap_or(Value::Null);
        let fallback = doc.turns.len().checked_sub(1);
        attach_result(&mut doc.turns, owner, fallback, tcid, content);
        return;
    }
    let id = doc.turns.len() as i64 + 1;
    let mut turn = Turn::new(
        id,
        role_src(role),
        mo.get("content").cloned().unwrap_or(Value::Null),
    );
    turn.reason = reasoning_of(mo);
    turn.ts = ts.map(rfc3339);
    if let Some(Value::Array(calls)) = mo.get("tool_calls") {
        let c = convert_calls(calls, id, ctx, "history");
        for call in &c {
            owner.insert(call.tcid.clone(), doc.turns.len());
        }
        if !c.is_empty() {
            turn.tool_calls = Some(c);
        }
    }
    doc.turns.push(turn);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stored events of raw rows `(event, session)`, deduplicated as the
    /// store does (first copy kept, later copies counted).
    fn deduplicated(raw: &[(u8, String)]) -> Vec<StoredEvent<'_>> {
        let mut out: Vec<StoredEvent<'_>> = Vec::new();
        let mut at: HashMap<u8, usize> = HashMap::new();
        for (row, (id, sid)) in (0u64..).zip(raw) {
            if let Some(&k) = at.get(id) {
                out[k].duplicates += 1;
                out[k].last = row;
                continue;
            }
            at.insert(*id, out.len());
            out.push(StoredEvent {
                seq: i64::from(*id),
                session_id: sid,
                call_id: "",
                kind: "http.request",
                duplicates: 0,
                row,
                last: row,
            });
        }
        out
    }

    proptest::proptest! {
        /// The sessions `unchanged_sessions` keeps are those the table's
        /// first rows project first, with the same events.
        #[test]
        fn an_append_keeps_the_leading_sessions_it_does_not_touch(
            ids in proptest::collection::vec(0u8..24, 0..40),
            cut in 0usize..41,
        ) {
            // An event belongs to one session, whichever copy is stored.
            let raw: Vec<(u8, String)> =
                ids.iter().map(|&i| (i, format!("s{}", i % 5))).collect();
            let rows = cut.min(raw.len());
            let all = deduplicated(&raw);
            let before = deduplicated(&raw[..rows]);
            let (full, earlier) = (sessions(&all), sessions(&before));
            let (kept, held) = unchanged_sessions(&full, rows as u64);
            proptest::prop_assert_eq!(held, earlier.len() as u64);
            proptest::prop_assert!(kept <= earlier.len());
            let key = |s: &Session<'_>| {
                (s.id.to_string(), s.events.iter().map(|e| (e.seq, e.duplicates)).collect::<Vec<_>>())
            };
            for (a, b) in full[..kept].iter().zip(&earlier[..kept]) {
                proptest::prop_assert_eq!(key(a), key(b));
            }
        }
    }

    fn project(events: &[(&Value, i64)], source_path: &str) -> Vec<Storyline> {
        project_records(events, source_path)
    }

    #[test]
    fn sessions_project_new_messages_once() {
        let req1 = json!({"seq": 1, "session_id": "s", "call_id": "a", "kind": "http.request",
            "timestamp_unix_ms": 1000,
            "payload": {"protocol": "chat.completions", "http": {"request_body": {"model": "m",
              "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "q1"}]}}}});
        let resp1 = json!({"seq": 2, "session_id": "s", "call_id": "a", "kind": "http.response",
            "timestamp_unix_ms": 1500,
            "payload": {"http": {"status": 200, "response_body": {"model": "m", "choices": [{"message":
              {"role": "assistant", "content": "", "tool_calls": [{"id": "t", "function": {"name": "ls", "arguments": "{}"}}]}}],
              "usage": {"prompt_tokens": 4, "completion_tokens": 1}}}}});
        let req2 = json!({"seq": 3, "session_id": "s", "call_id": "b", "kind": "http.request",
            "timestamp_unix_ms": 2000,
            "payload": {"protocol": "chat.completions", "http": {"request_body": {"model": "m",
              "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "q1"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "t", "function": {"name": "ls", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "t", "content": "a.txt"}]}}}});
        let resp2 = json!({"seq": 4, "session_id": "s", "call_id": "b", "kind": "http.response",
            "timestamp_unix_ms": 2500,
            "payload": {"http": {"status": 200, "response_body": {"choices": [{"message":
              {"role": "assistant", "content": "done"}}]}}}});
        let evs = [(&req1, 0), (&resp1, 1), (&req2, 0), (&resp2, 0)];
        let docs = project(&evs, "events.lance");
        assert_eq!(docs.len(), 1);
        let d = &docs[0];
        let srcs: Vec<&str> = d.turns.iter().map(|t| t.src.as_str()).collect();
        assert_eq!(srcs, ["system", "user", "agent", "agent"]);
        assert_eq!(d.turns[2].tool_calls.as_ref().unwrap()[0].tcid, "t");
        assert!(d.turns[2].observation.is_some());
        assert_eq!(d.turns[3].msg, "done");
        assert_eq!(d.extra.as_ref().unwrap()["gateway"]["duplicate_events"], 1);
    }

    #[test]
    fn tool_results_keep_media_as_placeholders() {
        // An Anthropic tool result with a screenshot: the text and a
        // labelled placeholder, as every other format decodes it.
        let req = json!({"seq": 1, "session_id": "s", "call_id": "a", "kind": "http.request",
            "timestamp_unix_ms": 1000,
            "payload": {"protocol": "anthropic.messages", "http": {"request_body": {"model": "m",
              "messages": [{"role": "user", "content": "look"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "tu", "name": "shot", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu", "content": [
                  {"type": "text", "text": "saved\tscreen.png"},
                  {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}]}]}]}}}});
        let docs = project(&[(&req, 0)], "events.lance");
        let obs = docs[0]
            .turns
            .iter()
            .find_map(|t| t.observation.as_ref())
            .expect("the tool result is an observation");
        assert_eq!(
            crate::formats::text::observation_text(obs).as_deref(),
            Some("saved\tscreen.png\n[image: image/png]")
        );
    }

    /// Sessions of more events than one group holds come out whole, in the
    /// order of their first event, as a sink receives them one at a time;
    /// a record that is not JSON stops the projection after the groups
    /// before its own.
    #[test]
    fn sessions_come_out_in_order_a_group_at_a_time() {
        let sessions = 40usize;
        let calls = EVENTS_PER_GROUP / 20;
        let mut records = Vec::new();
        let mut seq = 0;
        // Interleaved sessions: session i starts after session i - 1.
        for c in 0..calls {
            for i in 0..sessions.min(c + 1) {
                for kind in ["http.request", "http.response"] {
                    seq += 1;
                    let body = if kind == "http.request" {
                        json!({"http": {"request_body": {"model": "m",
                            "messages": [{"role": "user", "content": format!("q{c}")}]}},
                            "protocol": "chat.completions"})
                    } else {
                        json!({"http": {"status": 200, "response_body": {"choices":
                            [{"message": {"role": "assistant", "content": format!("a{c}")}}]}}})
                    };
                    let session = format!("s{i:02}");
                    let call = format!("{session}-{c}");
                    records.push((
                        seq,
                        session,
                        call,
                        kind,
                        json!({"seq": seq, "timestamp_unix_ms": seq, "payload": body}).to_string(),
                    ));
                }
            }
        }
        assert!(records.len() > 2 * EVENTS_PER_GROUP, "{}", records.len());
        fn stored<'a>(
            rs: &'a [(i64, String, String, &'static str, String)],
        ) -> (Vec<StoredEvent<'a>>, Vec<&'a str>) {
            let events = stored_events(rs.iter().map(|(seq, s, c, k, _)| (*seq, &**s, &**c, *k)));
            (events, rs.iter().map(|r| r.4.as_str()).collect())
        }
        let mut seen = Vec::new();
        let (events, texts) = stored(&records);
        project_each(
            &super::sessions(&events),
            &texts,
            "events.lance",
            &mut |d| {
                seen.push((d.session.clone(), d.turns.len()));
            },
        )
        .unwrap();
        let want: Vec<(String, usize)> = (0..sessions)
            .map(|i| (format!("s{i:02}"), 2 * (calls - i)))
            .collect();
        assert_eq!(seen, want);
        // A broken record in the last session: the earlier groups are out.
        let last = records.iter().rposition(|r| r.1 == "s39").unwrap();
        records[last].4 = "{not json".into();
        let mut out = 0;
        let (events, texts) = stored(&records);
        let err = project_each(
            &super::sessions(&events),
            &texts,
            "events.lance",
            &mut |_| out += 1,
        )
        .unwrap_err();
        let ProjectError::Record(err) = err else {
            panic!("{err:?}")
        };
        assert_eq!(err.seq, records[last].0);
        assert!(out > 0 && out < sessions, "{out}");
    }

    /// Events of (seq, session, call, kind), their records at rows 0, 1, ….
    fn stored_events<'a>(
        keys: impl Iterator<Item = (i64, &'a str, &'a str, &'a str)>,
    ) -> Vec<StoredEvent<'a>> {
        keys.zip(0u64..)
            .map(|((seq, session_id, call_id, kind), row)| StoredEvent {
                seq,
                session_id,
                call_id,
                kind,
                duplicates: 0,
                row,
                last: row,
            })
            .collect()
    }

    /// Records held by a reader that counts what it is asked for.
    struct Counting<'a> {
        texts: &'a Vec<String>,
        largest: std::sync::atomic::AtomicUsize,
        total: std::sync::atomic::AtomicUsize,
    }

    impl RecordTexts for Counting<'_> {
        fn texts(&self, rows: &[u64]) -> Result<Box<dyn TextList + '_>, String> {
            use std::sync::atomic::Ordering::Relaxed;
            self.largest.fetch_max(rows.len(), Relaxed);
            self.total.fetch_add(rows.len(), Relaxed);
            self.texts.texts(rows)
        }
    }

    /// Long sessions, too many events for one read: each reads its records
    /// a chunk of calls at a time, each record once (the first and last
    /// twice), and projects the same turns as records held in memory.
    #[test]
    fn long_sessions_read_their_records_a_chunk_at_a_time() {
        use std::sync::atomic::Ordering::Relaxed;
        let calls = PREFETCH_EVENTS / 2 + READ_CHUNK;
        let mut keys = Vec::new();
        let mut texts = Vec::new();
        for c in 0..calls {
            for s in ["a", "b"] {
                for kind in ["http.request", "http.response"] {
                    let seq = texts.len() as i64 + 1;
                    let payload = if kind == "http.request" {
                        json!({"protocol": "chat.completions", "http": {"request_body":
                            {"messages": [{"role": "user", "content": format!("q{c}")}]}}})
                    } else {
                        json!({"http": {"status": 200, "response_body": {"choices":
                            [{"message": {"role": "assistant", "content": format!("a{c}")}}]}}})
                    };
                    keys.push((seq, s, format!("{s}{c}"), kind));
                    texts.push(
                        json!({"seq": seq, "timestamp_unix_ms": seq, "payload": payload})
                            .to_string(),
                    );
                }
            }
        }
        let events = stored_events(keys.iter().map(|(seq, s, c, k)| (*seq, *s, &**c, *k)));
        let reader = Counting {
            texts: &texts,
            largest: 0.into(),
            total: 0.into(),
        };
        let docs = super::project(&events, &reader, "events.lance").unwrap();
        assert_eq!(docs.len(), 2);
        for d in &docs {
            assert_eq!(d.turns.len(), 2 * calls);
            assert_eq!(d.turns[2 * calls - 1].msg, format!("a{}", calls - 1));
        }
        assert_eq!(reader.largest.load(Relaxed), 2 * READ_CHUNK);
        assert_eq!(reader.total.load(Relaxed), texts.len() + 4);
        // Held in memory, the same documents.
        let whole = super::project(&events, &texts, "events.lance").unwrap();
        let json = |d: &[Storyline]| serde_json::to_string(d).unwrap();
        assert_eq!(json(&docs), json(&whole));
    }
}
