//! The Gateway's write-ahead log: captured events are made durable here
//! (written and `fdatasync`ed) before the client is answered, and moved into
//! `events.lance` later by the sink. Appends from many connections share one
//! sync (group commit).
//!
//! Layout under the state directory:
//!
//! ```text
//! wal/0000000001.log     segments, appended in order
//! checkpoint.json        the WAL position already in events.lance
//! gateway.lock           held while a Gateway uses the directory
//! ```
//!
//! A record is `PCW1`, the payload length (u32, little endian), the first 8
//! bytes of the payload's BLAKE3 hash, then the payload (one event as JSON).
//! After a crash, the log is read from the checkpoint to the first record
//! that is incomplete or fails its hash; that torn tail was never
//! acknowledged and is cut off.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use serde_json::Value;

use super::GatewayError;

const MAGIC: &[u8; 4] = b"PCW1";
const HEADER: usize = 16;
/// A segment is closed once it holds this many bytes.
const SEGMENT_BYTES: u64 = 64 << 20;
/// Largest record accepted.
pub const MAX_RECORD_BYTES: usize = 256 << 20;

/// A position in the log: a segment number and a byte offset in it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Position {
    /// Segment number (from 1).
    pub segment: u64,
    /// Byte offset in the segment.
    pub offset: u64,
}

fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:010}.log"))
}

/// The segment numbers present, ascending.
fn segments(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if let Some(n) = name
            .strip_suffix(".log")
            .and_then(|s| s.parse::<u64>().ok())
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Encode one record.
pub fn encode(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&blake3::hash(payload).as_bytes()[..8]);
    out.extend_from_slice(payload);
    out
}

/// Records of one segment from `offset` (at most `limit`): each payload
/// with the offset just after it, and the offset after the last intact
/// record. Stops at the end or at the first torn or corrupt record. An
/// intact record whose payload is not JSON (never written by this program)
/// is skipped, not treated as the end.
fn read_segment(
    path: &Path,
    offset: u64,
    end: Option<u64>,
    limit: usize,
) -> std::io::Result<(Vec<(Value, u64)>, u64)> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    match end {
        Some(e) => {
            f.take(e.saturating_sub(offset)).read_to_end(&mut bytes)?;
        }
        None => {
            f.read_to_end(&mut bytes)?;
        }
    }
    let mut out = Vec::new();
    let mut at = 0usize;
    while bytes.len() - at >= HEADER && out.len() < limit {
        if &bytes[at..at + 4] != MAGIC {
            break;
        }
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
        if len > MAX_RECORD_BYTES || bytes.len() - at - HEADER < len {
            break;
        }
        let payload = &bytes[at + HEADER..at + HEADER + len];
        if blake3::hash(payload).as_bytes()[..8] != bytes[at + 8..at + 16] {
            break;
        }
        at += HEADER + len;
        if let Ok(v) = serde_json::from_slice::<Value>(payload) {
            out.push((v, offset + at as u64));
        }
    }
    Ok((out, offset + at as u64))
}

/// Count the valid records after `from` without changing anything.
pub fn count_after(dir: &Path, from: Position) -> std::io::Result<u64> {
    let mut n = 0u64;
    for seg in segments(dir)?.into_iter().filter(|&s| s >= from.segment) {
        let start = if seg == from.segment { from.offset } else { 0 };
        n += read_segment(&segment_path(dir, seg), start, None, usize::MAX)?
            .0
            .len() as u64;
    }
    Ok(n)
}

/// The log.
pub struct Wal {
    dir: PathBuf,
    inner: Mutex<Inner>,
    wake_writer: Condvar,
    durable: Condvar,
}

struct Inner {
    pending: Vec<u8>,
    /// Tickets below this are durable.
    durable_ticket: u64,
    next_ticket: u64,
    failed: Option<String>,
    end: Position,
    stop: bool,
}

impl Wal {
    /// Open the log in `dir` (created if absent): find the valid end after
    /// `from`, cut a torn tail, and return the records after `from` with
    /// the position after each.
    pub fn open(
        dir: &Path,
        from: Position,
        on_record: &mut dyn FnMut(Value),
    ) -> Result<(Arc<Wal>, u64), GatewayError> {
        let io = |e: std::io::Error| GatewayError::State {
            path: dir.display().to_string(),
            reason: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let segs = segments(dir).map_err(io)?;
        let mut replayed = 0u64;
        let mut end = if from.segment == 0 {
            Position {
                segment: 1,
                offset: 0,
            }
        } else {
            from
        };
        let first = end.segment;
        for &n in segs.iter().filter(|&&n| n >= first) {
            let start = if n == from.segment { from.offset } else { 0 };
            let path = segment_path(dir, n);
            // One segment in memory at a time.
            let (recs, valid_end) = read_segment(&path, start, None, usize::MAX).map_err(io)?;
            for (v, _) in recs {
                replayed += 1;
                on_record(v);
            }
            end = Position {
                segment: n,
                offset: valid_end,
            };
            let len = std::fs::metadata(&path).map_err(io)?.len();
            if len > valid_end {
                // Torn tail: never acknowledged. Cut it so appends follow valid records.
                let f = OpenOptions::new().write(true).open(&path).map_err(io)?;
                f.set_len(valid_end).map_err(io)?;
                f.sync_all().map_err(io)?;
                // Later segments cannot hold acknowledged records either.
                for &later in segs.iter().filter(|&&m| m > n) {
                    let _ = std::fs::remove_file(segment_path(dir, later));
                }
                break;
            }
        }
        let have = std::fs::metadata(segment_path(dir, end.segment)).map_or(0, |m| m.len());
        if have < end.offset {
            // The checkpointed segment is gone (removed by hand): continue in a new one.
            end = Position {
                segment: end.segment + 1,
                offset: 0,
            };
        }
        let wal = Arc::new(Wal {
            dir: dir.to_path_buf(),
            inner: Mutex::new(Inner {
                pending: Vec::new(),
                durable_ticket: 0,
                next_ticket: 0,
                failed: None,
                end,
                stop: false,
            }),
            wake_writer: Condvar::new(),
            durable: Condvar::new(),
        });
        let w = Arc::clone(&wal);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(segment_path(dir, end.segment))
            .map_err(io)?;
        crate::store::current::sync_dir(dir);
        std::thread::Builder::new()
            .name("pchronicle-wal".into())
            .spawn(move || w.writer(file))
            .map_err(io)?;
        Ok((wal, replayed))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Append `payloads` (one event each) and return once they are durable.
    pub fn append(&self, payloads: &[Vec<u8>]) -> Result<(), GatewayError> {
        let mut g = self.lock();
        if let Some(f) = &g.failed {
            return Err(GatewayError::Capture { reason: f.clone() });
        }
        if g.stop {
            return Err(GatewayError::Capture {
                reason: "the gateway is stopping".into(),
            });
        }
        for p in payloads {
            if p.len() > MAX_RECORD_BYTES {
                return Err(GatewayError::Capture {
                    reason: format!("event of {} bytes exceeds the WAL record limit", p.len()),
                });
            }
            g.pending.extend_from_slice(&encode(p));
        }
        g.next_ticket += 1;
        let mine = g.next_ticket;
        self.wake_writer.notify_one();
        while g.durable_ticket < mine {
            if let Some(f) = &g.failed {
                return Err(GatewayError::Capture { reason: f.clone() });
            }
            g = self
                .durable
                .wait(g)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        Ok(())
    }

    /// The end of the durable log.
    pub fn end(&self) -> Position {
        self.lock().end
    }

    /// Records between `from` and `to` (both durable positions), at most
    /// `limit` (whole segments are read, one at a time).
    pub fn read(
        &self,
        from: Position,
        to: Position,
        limit: usize,
    ) -> Result<Vec<(Value, Position)>, GatewayError> {
        let io = |e: std::io::Error| GatewayError::State {
            path: self.dir.display().to_string(),
            reason: e.to_string(),
        };
        let mut out = Vec::new();
        let mut seg = from.segment.max(1);
        let mut offset = from.offset;
        while seg <= to.segment && out.len() < limit {
            let end = (seg == to.segment).then_some(to.offset);
            let path = segment_path(&self.dir, seg);
            if path.exists() {
                let left = limit - out.len();
                for (v, off) in read_segment(&path, offset, end, left).map_err(io)?.0 {
                    out.push((
                        v,
                        Position {
                            segment: seg,
                            offset: off,
                        },
                    ));
                }
            }
            seg += 1;
            offset = 0;
        }
        out.truncate(limit);
        Ok(out)
    }

    /// Remove segments wholly before `pos` (already in events.lance).
    pub fn release(&self, pos: Position) {
        if let Ok(segs) = segments(&self.dir) {
            for n in segs.into_iter().filter(|&n| n < pos.segment) {
                let _ = std::fs::remove_file(segment_path(&self.dir, n));
            }
        }
    }

    /// Stop the writer once pending records are durable.
    pub fn stop(&self) {
        let mut g = self.lock();
        g.stop = true;
        self.wake_writer.notify_one();
    }

    fn writer(self: Arc<Self>, mut file: File) {
        loop {
            let (batch, ticket, mut end) = {
                let mut g = self.lock();
                while g.pending.is_empty() && !g.stop {
                    g = self
                        .wake_writer
                        .wait(g)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                if g.pending.is_empty() && g.stop {
                    return;
                }
                (std::mem::take(&mut g.pending), g.next_ticket, g.end)
            };
            let mut result = Ok(());
            if end.offset >= SEGMENT_BYTES {
                let next = end.segment + 1;
                match OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(segment_path(&self.dir, next))
                {
                    Ok(f) => {
                        file = f;
                        crate::store::current::sync_dir(&self.dir);
                        end = Position {
                            segment: next,
                            offset: 0,
                        };
                    }
                    Err(e) => result = Err(e),
                }
            }
            if result.is_ok() {
                result = file.write_all(&batch).and_then(|()| file.sync_data());
            }
            let mut g = self.lock();
            match result {
                Ok(()) => {
                    g.end = Position {
                        segment: end.segment,
                        offset: end.offset + batch.len() as u64,
                    };
                    g.durable_ticket = ticket;
                }
                Err(e) => {
                    g.failed = Some(format!("cannot write the WAL: {e}"));
                }
            }
            self.durable.notify_all();
            if g.failed.is_some() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_tail_is_cut_and_appends_continue() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, replayed) = Wal::open(dir.path(), Position::default(), &mut |_| {}).unwrap();
        assert_eq!(replayed, 0);
        wal.append(&[b"{\"a\":1}".to_vec(), b"{\"a\":2}".to_vec()])
            .unwrap();
        let end = wal.end();
        wal.stop();
        // A half-written record after the valid ones.
        let mut f = OpenOptions::new()
            .append(true)
            .open(segment_path(dir.path(), 1))
            .unwrap();
        f.write_all(&encode(b"{\"a\":3}")[..10]).unwrap();
        drop(f);
        let mut seen = Vec::new();
        let (wal, replayed) =
            Wal::open(dir.path(), Position::default(), &mut |v| seen.push(v)).unwrap();
        assert_eq!(replayed, 2);
        assert_eq!(seen[1]["a"], 2);
        assert_eq!(wal.end(), end, "the torn record is cut");
        wal.append(&[b"{\"a\":4}".to_vec()]).unwrap();
        let all = wal
            .read(Position::default(), wal.end(), usize::MAX)
            .unwrap();
        let vals: Vec<i64> = all.iter().map(|(v, _)| v["a"].as_i64().unwrap()).collect();
        assert_eq!(vals, [1, 2, 4]);
        // Reading from a checkpoint returns only what follows it.
        let after = wal.read(end, wal.end(), usize::MAX).unwrap();
        assert_eq!(after.len(), 1);
    }
}
