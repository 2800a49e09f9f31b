//! Instants as pChronicle reads and writes them: RFC 3339 text or Unix
//! epoch seconds in, epoch nanoseconds (UTC) inside, RFC 3339 with `Z` out.

use serde_json::Value;

/// Parse a Storyline timestamp (RFC 3339 text or Unix epoch seconds) to
/// nanoseconds since the epoch, UTC.
pub fn parse_timestamp(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => parse_rfc3339(s),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                return i.checked_mul(1_000_000_000);
            }
            if let Some(ns) = decimal_seconds_to_nanos(&n.to_string()) {
                return Some(ns);
            }
            let f = n.as_f64()?;
            let ns = (f * 1e9).round();
            (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64)
        }
        _ => None,
    }
}

/// Epoch seconds written as a plain decimal (`1785329601.25`) to
/// nanoseconds, exactly: the digits are read as text, so no precision is
/// lost to a float (digits beyond nanoseconds are rounded half up).
fn decimal_seconds_to_nanos(text: &str) -> Option<i64> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let secs: i64 = int.parse().ok()?;
    let mut nanos: i64 = 0;
    for b in frac.bytes().chain(std::iter::repeat(b'0')).take(9) {
        nanos = nanos * 10 + i64::from(b - b'0');
    }
    if frac.as_bytes().get(9).is_some_and(|b| *b >= b'5') {
        nanos += 1;
    }
    let total = secs.checked_mul(1_000_000_000)?.checked_add(nanos)?;
    Some(if neg { -total } else { total })
}

/// Parse RFC 3339 (also with a space instead of `T`) to epoch nanoseconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let dt = chrono::DateTime::parse_from_rfc3339(s.trim()).ok()?;
    dt.timestamp_nanos_opt()
}

/// Format epoch nanoseconds as RFC 3339 UTC with `Z`.
pub fn format_rfc3339(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let sub = ns.rem_euclid(1_000_000_000) as u32;
    match chrono::DateTime::from_timestamp(secs, sub) {
        Some(dt) => dt.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        None => String::new(),
    }
}
