//! Snapshot references and the Catalog Snapshot digest.
//!
//! A [`SnapshotRef`] pins one Source: a local file by its fingerprint, a Lance
//! store by its table versions. `Display` and `FromStr` round-trip, so a
//! reference printed in JSON output can be parsed back.

use std::fmt;
use std::str::FromStr;

/// How a Source's snapshot is guaranteed while it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadConsistency {
    /// The format pins versions itself (Lance).
    Native,
    /// Reads are conditional on an object version or ETag (S3).
    Conditional,
    /// A file fingerprint is checked before and after reading.
    Fingerprint,
}

impl fmt::Display for ReadConsistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReadConsistency::Native => "native",
            ReadConsistency::Conditional => "conditional",
            ReadConsistency::Fingerprint => "fingerprint",
        })
    }
}

/// The pinned version of one Source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SnapshotRef {
    /// A plain file: size, modification time (ns since the epoch) and inode.
    File {
        /// Size in bytes.
        size: u64,
        /// Modification time, nanoseconds since the Unix epoch.
        mtime_ns: i64,
        /// Inode number.
        ino: u64,
    },
    /// A multi-table Lance store pinned through its `CURRENT` pointer.
    Store {
        /// The store's logical snapshot id from `CURRENT`.
        snapshot: String,
        /// `(table, version)` pairs in table-name order.
        tables: Vec<(String, u64)>,
    },
    /// A single Lance dataset pinned at one version.
    Lance {
        /// The Lance manifest version.
        version: u64,
    },
    /// An S3 object: its ETag, size and, on a versioned bucket, version id.
    Object {
        /// The ETag, without quotes.
        etag: String,
        /// Size in bytes.
        size: u64,
        /// The version id, on versioned buckets.
        version: Option<String>,
    },
}

impl fmt::Display for SnapshotRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotRef::File {
                size,
                mtime_ns,
                ino,
            } => {
                write!(f, "file:size={size},mtime={mtime_ns},ino={ino}")
            }
            SnapshotRef::Store { snapshot, tables } => {
                write!(f, "store:{snapshot}")?;
                for (name, v) in tables {
                    write!(f, ",{name}={v}")?;
                }
                Ok(())
            }
            SnapshotRef::Lance { version } => write!(f, "lance:version={version}"),
            SnapshotRef::Object {
                etag,
                size,
                version,
            } => {
                write!(f, "s3:etag={},size={size}", escape_value(etag))?;
                if let Some(v) = version {
                    write!(f, ",version={}", escape_value(v))?;
                }
                Ok(())
            }
        }
    }
}

/// A snapshot reference that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid snapshot reference `{0}`")]
pub struct ParseSnapshotRefError(pub String);

impl FromStr for SnapshotRef {
    type Err = ParseSnapshotRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseSnapshotRefError(crate::util::text::escape_control(s).into_owned());
        let (kind, rest) = s.split_once(':').ok_or_else(bad)?;
        match kind {
            "file" => {
                let mut size = None;
                let mut mtime = None;
                let mut ino = None;
                for part in rest.split(',') {
                    let (k, v) = part.split_once('=').ok_or_else(bad)?;
                    match k {
                        "size" if size.is_none() => size = Some(v.parse().map_err(|_| bad())?),
                        "mtime" if mtime.is_none() => mtime = Some(v.parse().map_err(|_| bad())?),
                        "ino" if ino.is_none() => ino = Some(v.parse().map_err(|_| bad())?),
                        _ => return Err(bad()),
                    }
                }
                Ok(SnapshotRef::File {
                    size: size.ok_or_else(bad)?,
                    mtime_ns: mtime.ok_or_else(bad)?,
                    ino: ino.ok_or_else(bad)?,
                })
            }
            "store" => {
                let mut parts = rest.split(',');
                let snapshot = parts.next().ok_or_else(bad)?;
                if snapshot.is_empty() || snapshot.contains('=') {
                    return Err(bad());
                }
                let mut tables: Vec<(String, u64)> = Vec::new();
                for part in parts {
                    let (k, v) = part.split_once('=').ok_or_else(bad)?;
                    if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                        return Err(bad());
                    }
                    if tables.last().is_some_and(|(prev, _)| prev.as_str() >= k) {
                        return Err(bad());
                    }
                    tables.push((k.to_string(), v.parse().map_err(|_| bad())?));
                }
                Ok(SnapshotRef::Store {
                    snapshot: snapshot.to_string(),
                    tables,
                })
            }
            "s3" => {
                let (mut etag, mut size, mut version) = (None, None, None);
                for part in rest.split(',') {
                    let (k, v) = part.split_once('=').ok_or_else(bad)?;
                    let v = crate::util::text::percent_decode(v).ok_or_else(bad)?;
                    match k {
                        "etag" if etag.is_none() => etag = Some(v),
                        "size" if size.is_none() => size = Some(v.parse().map_err(|_| bad())?),
                        "version" if version.is_none() && !v.is_empty() => version = Some(v),
                        _ => return Err(bad()),
                    }
                }
                Ok(SnapshotRef::Object {
                    etag: etag.ok_or_else(bad)?,
                    size: size.ok_or_else(bad)?,
                    version,
                })
            }
            "lance" => {
                let v = rest.strip_prefix("version=").ok_or_else(bad)?;
                Ok(SnapshotRef::Lance {
                    version: v.parse().map_err(|_| bad())?,
                })
            }
            _ => Err(bad()),
        }
    }
}

/// Percent-encode `%`, `,`, `=` and control characters so an ETag or
/// version id cannot break the `k=v,…` layout.
fn escape_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if matches!(c, '%' | ',' | '=') || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Accumulates the inputs of a `snapshot_id`: Dataset URI, every Source path
/// with its snapshot_ref, and every discovery error, in a canonical order.
#[derive(Debug, Default)]
pub struct SnapshotDigest {
    entries: Vec<(String, String)>,
}

impl SnapshotDigest {
    /// Record a Source (`kind` = `source`) or a discovery error (`kind` = `error`).
    pub fn add(&mut self, kind: &str, path: &str, value: &str) {
        self.entries
            .push((format!("{kind}\u{0}{path}"), value.to_string()));
    }

    /// The digest: 32 lowercase hex characters, independent of insertion order.
    pub fn finish(mut self, dataset_uri: &str) -> String {
        self.entries.sort();
        let mut h = blake3::Hasher::new();
        h.update(b"pchronicle.snapshot.v1\0");
        h.update(&(dataset_uri.len() as u64).to_le_bytes());
        h.update(dataset_uri.as_bytes());
        for (k, v) in &self.entries {
            for part in [k, v] {
                h.update(&(part.len() as u64).to_le_bytes());
                h.update(part.as_bytes());
            }
        }
        let hex = h.finalize().to_hex();
        hex[..32].to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn display_round_trips() {
        for s in [
            "file:size=10,mtime=-5,ino=7",
            "store:abc123,runs=3,steps=4,tool_calls=4",
            "lance:version=12",
            "s3:etag=9b2cf535f27731c974343645a3985328,size=10",
            "s3:etag=abc-2,size=0,version=3HL4kqtJlcpXroDTDmJ%2C%3D",
        ] {
            let r: SnapshotRef = s.parse().unwrap();
            assert_eq!(r.to_string(), s);
        }
        for bad in [
            "",
            "file:size=1",
            "store:,runs=1",
            "store:x,steps=1,runs=2",
            "lance:v=1",
            "nope:1",
        ] {
            assert!(bad.parse::<SnapshotRef>().is_err(), "{bad}");
        }
    }

    fn arb_ref() -> impl Strategy<Value = SnapshotRef> {
        prop_oneof![
            (any::<u64>(), any::<i64>(), any::<u64>()).prop_map(|(size, mtime_ns, ino)| {
                SnapshotRef::File {
                    size,
                    mtime_ns,
                    ino,
                }
            }),
            (
                "[a-z0-9]{1,16}",
                proptest::collection::btree_map("[a-z_]{1,8}", any::<u64>(), 0..4)
            )
                .prop_map(|(snapshot, t)| SnapshotRef::Store {
                    snapshot,
                    tables: t.into_iter().collect()
                }),
            any::<u64>().prop_map(|version| SnapshotRef::Lance { version }),
            (".{0,12}", any::<u64>(), proptest::option::of(".{1,12}")).prop_map(
                |(etag, size, version)| SnapshotRef::Object {
                    etag,
                    size,
                    version
                }
            ),
        ]
    }

    proptest! {
        #[test]
        fn snapshot_ref_round_trip(r in arb_ref()) {
            let s = r.to_string();
            prop_assert_eq!(s.parse::<SnapshotRef>().unwrap(), r);
        }

        #[test]
        fn digest_is_order_independent(mut items in proptest::collection::vec(("[a-z/]{1,12}", "[a-z0-9=:,]{1,12}"), 0..8)) {
            let mut a = SnapshotDigest::default();
            for (p, v) in &items { a.add("source", p, v); }
            items.reverse();
            let mut b = SnapshotDigest::default();
            for (p, v) in &items { b.add("source", p, v); }
            prop_assert_eq!(a.finish("/d"), b.finish("/d"));
        }

        #[test]
        fn digest_changes_with_any_input(p in "[a-z]{1,8}", v in "[a-z0-9]{1,8}", v2 in "[a-z0-9]{1,8}") {
            prop_assume!(v != v2);
            let mut a = SnapshotDigest::default();
            a.add("source", &p, &v);
            let mut b = SnapshotDigest::default();
            b.add("source", &p, &v2);
            prop_assert_ne!(a.finish("/d"), b.finish("/d"));
            let mut c = SnapshotDigest::default();
            c.add("source", &p, &v);
            prop_assert_ne!(c.finish("/d"), {
                let mut d = SnapshotDigest::default();
                d.add("source", &p, &v);
                d.finish("/e")
            });
        }
    }
}
