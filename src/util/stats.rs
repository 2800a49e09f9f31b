//! What a command did, for `--stats`: counters the layers add to as they
//! work, time per phase, and the process's CPU time and peak memory.
//!
//! A CLI process runs one command, so the counters are process-wide. They
//! cost one relaxed atomic add per file, batch or segment, so they are
//! always on; `--stats` only decides whether they are printed.
//!
//! Phases are entered by the thread that drives the command and nest; time
//! goes to the innermost phase open, so the phases add up to the command's
//! wall time and CPU time (CPU time of the whole process, every thread,
//! while the phase was innermost).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// Sources whose contents were read (files, objects, stores).
    SourcesRead,
    /// Local files opened for their contents, and Lance fragments scanned.
    FilesOpened,
    /// Bytes read from local exchange files.
    LocalBytes,
    /// Rows that scans handed to the query engine, before its filters.
    RowsScanned,
    /// Rows of the result (query rows, find matches, exported documents).
    RowsProduced,
    /// Full-text index segments searched.
    Segments,
    /// Bytes written to spill files.
    SpillBytes,
    /// Spill files written.
    SpillFiles,
}

const COUNTERS: usize = 8;
static COUNTS: [AtomicU64; COUNTERS] = [const { AtomicU64::new(0) }; COUNTERS];

/// Add `n` to `c`.
pub fn add(c: Counter, n: u64) {
    COUNTS[c as usize].fetch_add(n, Ordering::Relaxed);
}

/// The current value of `c`.
pub fn get(c: Counter) -> u64 {
    COUNTS[c as usize].load(Ordering::Relaxed)
}

/// A phase of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Finding the Sources (the walk or the listing) and, where that is
    /// the same step, pinning them: a local file is pinned by the metadata
    /// the walk reads.
    Discover,
    /// Pinning that takes reads of its own: the first bytes of S3 objects
    /// (which report their version) and the `CURRENT` of S3 stores.
    Pin,
    /// Reading Sources outside the query engine (`status`, `export`, index
    /// building for `find`).
    Read,
    /// Everything else the command does: planning and running a query
    /// (whose scans read the Sources), searching.
    Execute,
    /// Writing the result.
    Write,
}

const PHASES: [&str; 5] = ["discover", "pin", "read", "execute", "write"];

struct Clock {
    /// The thread that drives the command: the first to open a phase.
    /// Phases opened by other threads (workers, concurrent requests of a
    /// server) are not tracked.
    driver: Option<std::thread::ThreadId>,
    stack: Vec<Phase>,
    mark: Option<(Instant, Duration)>,
    wall: [Duration; 5],
    cpu: [Duration; 5],
}

static CLOCK: Mutex<Clock> = Mutex::new(Clock::new());

impl Clock {
    const fn new() -> Clock {
        Clock {
            driver: None,
            stack: Vec::new(),
            mark: None,
            wall: [Duration::ZERO; 5],
            cpu: [Duration::ZERO; 5],
        }
    }

    /// Charge the time since the last mark to the innermost phase.
    fn charge(&mut self, now: (Instant, Duration)) {
        if let (Some((w, c)), Some(p)) = (self.mark, self.stack.last()) {
            self.wall[*p as usize] += now.0.saturating_duration_since(w);
            self.cpu[*p as usize] += now.1.saturating_sub(c);
        }
        self.mark = Some(now);
    }

    /// True on the driving thread (the first to ask).
    fn drives(&mut self) -> bool {
        let me = std::thread::current().id();
        *self.driver.get_or_insert(me) == me
    }

    /// Open `p` on the calling thread; false when it is not the driver.
    fn enter(&mut self, p: Phase, now: (Instant, Duration)) -> bool {
        if !self.drives() {
            return false;
        }
        self.charge(now);
        self.stack.push(p);
        true
    }

    fn exit(&mut self, now: (Instant, Duration)) {
        self.charge(now);
        self.stack.pop();
    }
}

fn now() -> (Instant, Duration) {
    (Instant::now(), cpu_time().unwrap_or_default())
}

/// An open phase; closed when dropped.
pub struct PhaseGuard(bool);

/// Open `p` until the guard is dropped.
pub fn phase(p: Phase) -> PhaseGuard {
    let mut c = CLOCK.lock().unwrap_or_else(PoisonError::into_inner);
    // Other threads (a server's request workers) read no clock.
    if !c.drives() {
        return PhaseGuard(false);
    }
    PhaseGuard(c.enter(p, now()))
}

impl Drop for PhaseGuard {
    fn drop(&mut self) {
        if self.0 {
            CLOCK
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .exit(now());
        }
    }
}

/// CPU time of the process so far (user and system, every thread), from
/// `/proc/self/stat`; `None` elsewhere.
pub fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: utime and stime are the 12th and 13th of these.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // `/proc` counts in USER_HZ, 100 per second on Linux.
    Some(Duration::from_millis(ticks * 10))
}

/// Peak resident memory of the process in bytes (`VmHWM`); `None` where
/// `/proc` does not say.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Everything counted so far, as the `stats` object of JSON output. `s3` is
/// (requests, bytes received) of the S3 client.
pub fn snapshot(s3: (u64, u64)) -> serde_json::Value {
    let mut c = CLOCK.lock().unwrap_or_else(PoisonError::into_inner);
    c.charge(now());
    let phases: serde_json::Map<String, serde_json::Value> = PHASES
        .iter()
        .enumerate()
        .filter(|(i, _)| !c.wall[*i].is_zero())
        .map(|(i, name)| {
            (
                (*name).to_string(),
                serde_json::json!({
                    "wall_ms": millis(c.wall[i]),
                    "cpu_ms": millis(c.cpu[i]),
                }),
            )
        })
        .collect();
    let wall: Duration = c.wall.iter().sum();
    let cpu: Duration = c.cpu.iter().sum();
    let mut v = counters(get, s3);
    v.insert("wall_ms".into(), millis(wall).into());
    v.insert("cpu_ms".into(), millis(cpu).into());
    v.insert("phases".into(), phases.into());
    v.into()
}

/// The counter fields of a `stats` object: `count` gives each counter's
/// value, `s3` the (requests, bytes) of the S3 client.
fn counters(
    count: impl Fn(Counter) -> u64,
    s3: (u64, u64),
) -> serde_json::Map<String, serde_json::Value> {
    let serde_json::Value::Object(m) = serde_json::json!({
        "sources_read": count(Counter::SourcesRead),
        "files_opened": count(Counter::FilesOpened),
        "bytes_read_local": count(Counter::LocalBytes),
        "bytes_read_s3": s3.1,
        "s3_requests": s3.0,
        "rows_scanned": count(Counter::RowsScanned),
        "rows_produced": count(Counter::RowsProduced),
        "index_segments": count(Counter::Segments),
        "spill_bytes": count(Counter::SpillBytes),
        "spill_files": count(Counter::SpillFiles),
        "peak_rss_bytes": peak_rss(),
    }) else {
        unreachable!("a JSON object literal")
    };
    m
}

/// A point to measure one server request from.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    at: Instant,
    counts: [u64; COUNTERS],
    s3: (u64, u64),
}

impl Mark {
    /// Now; `s3` is (requests, bytes received) of the S3 client so far.
    pub fn now(s3: (u64, u64)) -> Mark {
        Mark {
            at: Instant::now(),
            counts: std::array::from_fn(|i| COUNTS[i].load(Ordering::Relaxed)),
            s3,
        }
    }

    /// What was counted since the mark, as a `stats` object (the counters of
    /// [`snapshot`], without CPU time and phases). The counters are the
    /// process's: when other requests ran meanwhile (`alone` false) they
    /// include those requests' work, and the object says so.
    pub fn since(&self, s3: (u64, u64), alone: bool) -> serde_json::Value {
        let d = |c: Counter| get(c) - self.counts[c as usize];
        let s3 = (
            s3.0.saturating_sub(self.s3.0),
            s3.1.saturating_sub(self.s3.1),
        );
        let mut v = counters(d, s3);
        v.insert("wall_ms".into(), millis(self.at.elapsed()).into());
        v.insert("overlapped".into(), (!alone).into());
        v.into()
    }
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e5).round() / 100.0
}

/// A `Read` that counts the bytes read from local files.
pub struct CountingReader<R>(pub R);

impl<R: std::io::Read> std::io::Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        add(Counter::LocalBytes, n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_phases_split_the_time_and_other_threads_are_ignored() {
        let t0 = Instant::now();
        let at = |ms: u64| {
            (
                t0 + Duration::from_millis(ms),
                Duration::from_millis(ms / 2),
            )
        };
        let mut c = Clock::new();
        assert!(c.enter(Phase::Execute, at(0)));
        assert!(c.enter(Phase::Write, at(20)));
        c.exit(at(50));
        // Another thread's phase is not tracked.
        let other = std::thread::scope(|s| s.spawn(|| c.enter(Phase::Read, at(60))).join());
        assert_eq!(other.ok(), Some(false));
        c.exit(at(70));
        assert_eq!(c.wall[Phase::Execute as usize], Duration::from_millis(40));
        assert_eq!(c.wall[Phase::Write as usize], Duration::from_millis(30));
        assert_eq!(c.wall[Phase::Read as usize], Duration::ZERO);
        assert_eq!(c.cpu[Phase::Write as usize], Duration::from_millis(15));
        assert!(c.stack.is_empty());
        assert!(cpu_time().is_some() && peak_rss().is_some_and(|b| b > 0));
    }
}
