//! The ranged object reader: [`ObjectReader`] turns one pinned object into a
//! `std::io::Read`, fetching growing ranges conditional on the pin, and
//! carries an S3 failure through `std::io::Error` so callers can recover it.
//!
//! Format sniffing and decoding read through `std::io`, so this is the one
//! bridge between them and S3.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use super::error::S3Error;
use super::ops::ObjectPin;
use super::transport::Client;

/// A `std::io::Read` over one pinned object, fetched in growing ranges
/// (64 KiB first, doubling to 8 MiB) so a sniff reads little and a full
/// decode makes few requests. Every range is conditional on the pin.
pub struct ObjectReader {
    client: Arc<Client>,
    bucket: String,
    key: String,
    pin: ObjectPin,
    size: u64,
    pos: u64,
    chunk: u64,
    buf: Bytes,
    /// The version the server reported for the first range.
    pub version: Option<String>,
    /// The S3 failure that ended the read, if one did.
    pub failure: Option<S3Error>,
}

impl ObjectReader {
    /// A reader of `size` bytes of `bucket/key` pinned to `pin`.
    pub fn new(client: Arc<Client>, bucket: &str, key: &str, pin: ObjectPin, size: u64) -> Self {
        ObjectReader {
            client,
            bucket: bucket.to_string(),
            key: key.to_string(),
            pin,
            size,
            pos: 0,
            chunk: 64 << 10,
            buf: Bytes::new(),
            version: None,
            failure: None,
        }
    }
}

impl std::io::Read for ObjectReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.buf.is_empty() {
            if self.pos >= self.size || out.is_empty() {
                return Ok(0);
            }
            let want = self.chunk.max(out.len() as u64);
            let end = (self.pos + want).min(self.size);
            let r = self
                .client
                .get_range(&self.bucket, &self.key, &self.pin, self.pos..end)
                .map_err(|e| {
                    self.failure = Some(e.clone());
                    std::io::Error::other(ObjectReadError(e))
                })?;
            if self.version.is_none() {
                self.version.clone_from(&r.version);
                if self.pin.version.is_none() {
                    self.pin.version.clone_from(&r.version);
                }
            }
            self.pos = end;
            self.buf = r.bytes;
            self.chunk = (self.chunk * 2).min(8 << 20);
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf = self.buf.slice(n..);
        Ok(n)
    }
}

/// An S3 failure carried through `std::io::Error` by [`ObjectReader`].
#[derive(Debug)]
pub struct ObjectReadError(pub S3Error);

impl fmt::Display for ObjectReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.0.code(), self.0)
    }
}

impl std::error::Error for ObjectReadError {}

/// The S3 failure inside an I/O error from an [`ObjectReader`], if any.
pub fn s3_error_of(e: &std::io::Error) -> Option<&S3Error> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<ObjectReadError>())
        .map(|o| &o.0)
}
