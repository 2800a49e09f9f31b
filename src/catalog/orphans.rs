//! What interrupted imports leave beside their targets.
//!
//! `import` works in hidden entries beside its target and removes them when
//! it ends, even on Ctrl-C; a process killed outright (`kill -9`, a crash,
//! a lost machine) cannot, and an S3 import leaves its lock object on any
//! interruption. Discovery never reads hidden entries, so without this they
//! would only show as `hidden` in `ls --physical`. They are recognised by
//! name and reported, never deleted: an import may still be using them, and
//! removing files is left to ordinary tools.
//!
//! The names (`NAME` is the target's file name):
//! - `.NAME.pchronicle-staging-PID-NANOS`: the store being built;
//! - `.NAME.pchronicle-input-PID-NANOS`: standard input spooled to a file;
//! - `.NAME.pchronicle-import.lock`: the lock that serialises imports of
//!   `NAME` (locally an empty file under an advisory lock, on S3 an object).

use std::path::Path;
use std::time::SystemTime;

/// What an orphan is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OrphanKind {
    /// A store being built.
    Staging,
    /// Spooled standard input.
    Input,
    /// An import lock.
    Lock,
}

impl OrphanKind {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            OrphanKind::Staging => "staging",
            OrphanKind::Input => "input",
            OrphanKind::Lock => "lock",
        }
    }
}

/// One entry left by an import.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Orphan {
    /// Dataset-relative path (for S3, the key below the prefix; a prefix
    /// ends in `/`).
    pub path: String,
    /// What it is.
    pub kind: OrphanKind,
    /// Dataset-relative path of the target the import was creating.
    pub target: String,
    /// Bytes in its files (objects).
    pub bytes: u64,
    /// Files (objects) in it; 1 for a lock.
    pub files: u64,
    /// Seconds since anything in it last changed.
    pub age_seconds: Option<u64>,
    /// The process that made it, when its name says.
    pub pid: Option<u32>,
    /// True while a live import holds the target's lock (this process's
    /// lock for staging and input); null when that cannot be known here
    /// (S3, or no lock table to read).
    pub held: Option<bool>,
}

/// The kind, target name and process id of a hidden entry named `name`, if
/// an import made it.
pub fn parse_name(name: &str) -> Option<(OrphanKind, &str, Option<u32>)> {
    let rest = name.strip_prefix('.')?;
    let at = rest.rfind(".pchronicle-")?;
    let (target, tail) = (&rest[..at], &rest[at + ".pchronicle-".len()..]);
    if target.is_empty() {
        return None;
    }
    if tail == "import.lock" {
        return Some((OrphanKind::Lock, target, None));
    }
    let (kind, ids) = if let Some(ids) = tail.strip_prefix("staging-") {
        (OrphanKind::Staging, ids)
    } else {
        (OrphanKind::Input, tail.strip_prefix("input-")?)
    };
    let (pid, nanos) = ids.split_once('-')?;
    if nanos.is_empty() || !nanos.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((kind, target, Some(pid.parse().ok()?)))
}

/// The sibling path of a target named `target` in the directory of `rel`.
fn target_path(rel: &str, target: &str) -> String {
    match rel.trim_end_matches('/').rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{target}"),
        None => target.to_string(),
    }
}

/// The orphan at local entry `abs` (Dataset-relative `rel`, file name
/// `name`), or `None` when an import did not make it.
pub(crate) fn local(abs: &Path, rel: &str, name: &str) -> Option<Orphan> {
    let (kind, target, pid) = parse_name(name)?;
    let (mut bytes, mut files, mut newest) = (0u64, 0u64, None);
    tally(abs, &mut bytes, &mut files, &mut newest);
    let now = SystemTime::now();
    let age_seconds = newest.and_then(|t| now.duration_since(t).ok().map(|d| d.as_secs()));
    let lock = abs.with_file_name(format!(".{target}.pchronicle-import.lock"));
    let holder = lock_holders().map(|h| file_id(&lock).and_then(|id| h.get(&id).copied()));
    let held = holder.map(|h| match kind {
        OrphanKind::Lock => h.is_some(),
        _ => h.is_some() && h == pid,
    });
    Some(Orphan {
        path: rel.to_string(),
        kind,
        target: target_path(rel, target),
        bytes,
        files,
        age_seconds,
        pid: if kind == OrphanKind::Lock {
            holder.flatten()
        } else {
            pid
        },
        held,
    })
}

/// Add up the files under `p` (symbolic links are not followed): bytes,
/// count and newest modification time, the entries themselves included.
fn tally(p: &Path, bytes: &mut u64, files: &mut u64, newest: &mut Option<SystemTime>) {
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return;
    };
    if let Ok(t) = m.modified() {
        *newest = Some(newest.map_or(t, |n| n.max(t)));
    }
    if m.is_dir() {
        if let Ok(rd) = std::fs::read_dir(p) {
            for e in rd.flatten() {
                tally(&e.path(), bytes, files, newest);
            }
        }
    } else {
        *files += 1;
        *bytes += m.len();
    }
}

/// (device, inode) of a file.
#[cfg(unix)]
fn file_id(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(p).ok()?;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_id(_: &Path) -> Option<(u64, u64)> {
    None
}

/// The holders of advisory locks, by (device, inode), from the kernel's
/// table; `None` when there is no table to read (not Linux). Reading it
/// takes no lock, so a report never gets in an import's way.
fn lock_holders() -> Option<std::collections::HashMap<(u64, u64), u32>> {
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    Some(table.lines().filter_map(parse_lock_line).collect())
}

/// One line of `/proc/locks`, such as `1: FLOCK  ADVISORY  WRITE 4242
/// 08:01:5316755 0 EOF`: the device is `MAJOR:MINOR` in hex, the inode in
/// decimal. A line for a waiter (`->`) names no holder.
fn parse_lock_line(line: &str) -> Option<((u64, u64), u32)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.get(1) == Some(&"->") {
        return None;
    }
    let pid: u32 = f.get(4)?.parse().ok()?;
    let mut id = f.get(5)?.split(':');
    let major = u64::from_str_radix(id.next()?, 16).ok()?;
    let minor = u64::from_str_radix(id.next()?, 16).ok()?;
    let inode: u64 = id.next()?.parse().ok()?;
    // The encoding of `st_dev` on Linux (glibc's `makedev`).
    let dev = ((major & 0xfff) << 8)
        | ((major & !0xfff) << 32)
        | (minor & 0xff)
        | ((minor & !0xff) << 12);
    Some(((dev, inode), pid))
}

/// Orphans among the hidden keys of an S3 listing: `(rel, size,
/// last_modified)` with `rel` below the Dataset prefix. Keys under the same
/// hidden staging or input prefix make one orphan; `held` is unknown.
pub(crate) fn remote<'a>(keys: impl Iterator<Item = (&'a str, u64, &'a str)>) -> Vec<Orphan> {
    let mut out: Vec<Orphan> = Vec::new();
    let now = chrono::Utc::now();
    for (rel, size, modified) in keys {
        // The first hidden segment names what the key belongs to.
        let mut end = 0;
        let mut found = None;
        for seg in rel.split('/') {
            end += seg.len();
            if seg.starts_with('.') {
                found = parse_name(seg).map(|p| (p, end));
                break;
            }
            end += 1;
        }
        let Some(((kind, target, pid), end)) = found else {
            continue;
        };
        let path = if end < rel.len() {
            format!("{}/", &rel[..end])
        } else {
            rel.to_string()
        };
        let age = chrono::DateTime::parse_from_rfc3339(modified)
            .ok()
            .map(|t| (now - t.with_timezone(&chrono::Utc)).num_seconds().max(0) as u64);
        match out.iter_mut().find(|o| o.path == path) {
            Some(o) => {
                o.bytes += size;
                o.files += 1;
                o.age_seconds = match (o.age_seconds, age) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            None => out.push(Orphan {
                target: target_path(&path, target),
                path,
                kind,
                bytes: size,
                files: 1,
                age_seconds: age,
                pid,
                held: None,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_made_by_import() {
        assert_eq!(
            parse_name(".t1.pchronicle-staging-4242-1796007561013032422"),
            Some((OrphanKind::Staging, "t1", Some(4242)))
        );
        assert_eq!(
            parse_name(".my.store.pchronicle-input-7-1"),
            Some((OrphanKind::Input, "my.store", Some(7)))
        );
        assert_eq!(
            parse_name(".a.pchronicle-import.lock"),
            Some((OrphanKind::Lock, "a", None))
        );
        for other in [
            ".git",
            ".pchronicle-import.lock",
            ".a.pchronicle-staging-x-1",
            ".a.pchronicle-staging-1-",
            ".a.pchronicle-other",
            "a.pchronicle-import.lock",
        ] {
            assert_eq!(parse_name(other), None, "{other}");
        }
    }

    #[test]
    fn lock_table_lines() {
        let l = "1: FLOCK  ADVISORY  WRITE 4242 08:01:5316755 0 EOF";
        assert_eq!(parse_lock_line(l), Some(((0x801, 5_316_755), 4242)));
        let big = "2: FLOCK  ADVISORY  WRITE 9 103:2:77 0 EOF";
        let dev = (0x103u64 << 8) | 2;
        assert_eq!(parse_lock_line(big), Some(((dev, 77), 9)));
        assert_eq!(
            parse_lock_line("1: -> FLOCK  ADVISORY  WRITE 4243 08:01:5316755 0 EOF"),
            None
        );
    }

    #[test]
    fn remote_keys_group_by_staging_prefix() {
        let keys = [
            (
                "a/.t.pchronicle-staging-5-9/CURRENT",
                10,
                "2026-01-01T00:00:00Z",
            ),
            (
                "a/.t.pchronicle-staging-5-9/runs.lance/x",
                20,
                "2026-01-01T00:00:10Z",
            ),
            ("a/.t.pchronicle-import.lock", 30, "2026-01-01T00:00:00Z"),
            ("a/.cache/x", 1, "2026-01-01T00:00:00Z"),
        ];
        let o = remote(keys.into_iter());
        assert_eq!(o.len(), 2);
        assert_eq!(o[0].path, "a/.t.pchronicle-staging-5-9/");
        assert_eq!((o[0].bytes, o[0].files, o[0].pid), (30, 2, Some(5)));
        assert_eq!(o[0].target, "a/t");
        assert_eq!((o[1].kind, o[1].target.as_str()), (OrphanKind::Lock, "a/t"));
    }
}
