//! The S3 operations pChronicle uses — list, get (ranged, conditional),
//! put (conditional), copy and delete — and the types they take and return.
//!
//! Each operation has one async implementation over [`Client::send`]. The
//! blocking methods that synchronous callers use run it on the process's
//! runtime through [`blocking`], and add nothing else.

use std::future::Future;

use bytes::Bytes;

use crate::util::rt::runtime;

use super::error::{check_status, error_code, http_error, xml_text, S3Error};
use super::transport::{quote, unquote, Client, Request, Response};

/// One object from a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    /// The full key.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// ETag without quotes.
    pub etag: String,
    /// Last modification, as the listing gives it (RFC 3339).
    pub last_modified: String,
}

/// What a conditional read is pinned to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectPin {
    /// ETag without quotes (sent as `If-Match`).
    pub etag: String,
    /// Version id, on versioned buckets.
    pub version: Option<String>,
}

/// A ranged read's result.
#[derive(Debug, Clone)]
pub struct RangeRead {
    /// The bytes.
    pub bytes: Bytes,
    /// The version id the server reported, if any.
    pub version: Option<String>,
}

/// How a write is conditioned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutMode {
    /// Only if no object exists at the key (`If-None-Match: *`).
    Create,
    /// Only if the object still has this ETag (`If-Match`).
    Replace(String),
    /// Unconditionally.
    Overwrite,
}

/// What a GET asks for.
#[derive(Debug, Clone, Default)]
pub struct GetRequest {
    /// A `Range` header value (`bytes=a-b`, `bytes=a-`, `bytes=-n`).
    pub range: Option<String>,
    /// ETag the object must still have.
    pub if_match: Option<String>,
    /// The version to read.
    pub version: Option<String>,
    /// HEAD instead of GET.
    pub head: bool,
}

/// One page of a listing.
#[derive(Debug, Clone, Default)]
pub struct ListPage {
    /// Objects.
    pub objects: Vec<ListedObject>,
    /// Common prefixes (with a delimiter).
    pub prefixes: Vec<String>,
    /// The continuation token of the next page.
    pub next: Option<String>,
}

/// Run an async operation to completion for a synchronous caller, on the
/// process's runtime. Only synchronous code calls the blocking methods
/// (Rayon workers and the main thread; never a runtime worker, where
/// `block_on` would panic), so this neither nests runtimes nor deadlocks.
fn blocking<F: Future>(operation: F) -> F::Output {
    runtime().block_on(operation)
}

impl Client {
    /// List every object under `prefix` (ListObjectsV2, all pages), at most
    /// `max` of them (more is an error the caller reports).
    pub fn list(&self, bucket: &str, prefix: &str, max: u64) -> Result<Vec<ListedObject>, S3Error> {
        blocking(self.list_all(bucket, prefix, None, max)).map(|l| l.objects)
    }

    /// Every page of a listing, merged; stops once more than `max` objects
    /// are in. A server that repeats a continuation token is an error, not
    /// an endless loop.
    pub async fn list_all(
        &self,
        bucket: &str,
        prefix: &str,
        delimiter: Option<&str>,
        max: u64,
    ) -> Result<ListPage, S3Error> {
        let mut out = ListPage::default();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .list_page(bucket, prefix, delimiter, token.as_deref())
                .await?;
            out.objects.extend(page.objects);
            out.prefixes.extend(page.prefixes);
            if out.objects.len() as u64 > max {
                return Ok(out);
            }
            match page.next {
                Some(t) if token.as_deref() == Some(t.as_str()) => {
                    return Err(S3Error::BadResponse {
                        what: format!("list s3://{bucket}/{prefix}"),
                        reason: "the server repeated a continuation token".into(),
                    })
                }
                Some(t) => token = Some(t),
                None => return Ok(out),
            }
        }
    }

    /// One page of a ListObjectsV2 listing, grouped by `delimiter` if given.
    pub async fn list_page(
        &self,
        bucket: &str,
        prefix: &str,
        delimiter: Option<&str>,
        token: Option<&str>,
    ) -> Result<ListPage, S3Error> {
        let what = format!("list s3://{bucket}/{prefix}");
        let mut query = vec![
            ("list-type".to_string(), "2".to_string()),
            ("prefix".to_string(), prefix.to_string()),
        ];
        if let Some(d) = delimiter {
            query.push(("delimiter".to_string(), d.to_string()));
        }
        if let Some(t) = token {
            query.push(("continuation-token".to_string(), t.to_string()));
        }
        let resp = self
            .send(&Request {
                method: reqwest::Method::GET,
                bucket,
                key: "",
                query,
                headers: Vec::new(),
                body: Bytes::new(),
                what: &what,
            })
            .await?;
        if resp.status == 404 {
            return Err(S3Error::NoSuchBucket {
                bucket: bucket.to_string(),
            });
        }
        check_status(&resp, &what, bucket, "")?;
        let text = std::str::from_utf8(&resp.body).map_err(|_| S3Error::BadResponse {
            what: what.clone(),
            reason: "the listing is not UTF-8".into(),
        })?;
        let page: s3::serde_types::ListBucketResult =
            quick_xml::de::from_str(text).map_err(|e| S3Error::BadResponse {
                what: what.clone(),
                reason: format!("the listing is not a ListBucketResult: {e}"),
            })?;
        Ok(ListPage {
            objects: page
                .contents
                .into_iter()
                .map(|o| ListedObject {
                    key: o.key,
                    size: o.size,
                    etag: o.e_tag.map(|e| unquote(&e)).unwrap_or_default(),
                    last_modified: o.last_modified,
                })
                .collect(),
            prefixes: page
                .common_prefixes
                .unwrap_or_default()
                .into_iter()
                .map(|p| p.prefix)
                .collect(),
            next: page
                .next_continuation_token
                .filter(|t| page.is_truncated && !t.is_empty()),
        })
    }

    /// Read `range` of an object, conditional on `pin`. A changed object is
    /// [`S3Error::Changed`], a deleted one [`S3Error::Gone`].
    pub fn get_range(
        &self,
        bucket: &str,
        key: &str,
        pin: &ObjectPin,
        range: std::ops::Range<u64>,
    ) -> Result<RangeRead, S3Error> {
        let resp = blocking(self.get(
            bucket,
            key,
            &GetRequest {
                range: Some(format!(
                    "bytes={}-{}",
                    range.start,
                    range.end.saturating_sub(1)
                )),
                if_match: (!pin.etag.is_empty()).then(|| pin.etag.clone()),
                version: pin.version.clone(),
                head: false,
            },
        ))?;
        let expected = range.end - range.start;
        // A 200 is the whole object (the server ignored `Range`): cut the
        // range out of it. Either way exactly `expected` bytes are used; a
        // shorter answer means the object is not the one pinned.
        let body = if resp.status == 200 {
            if (resp.body.len() as u64) < range.end {
                return Err(S3Error::Changed { key: key.into() });
            }
            resp.body.slice(range.start as usize..range.end as usize)
        } else {
            if (resp.body.len() as u64) < expected {
                return Err(S3Error::Changed { key: key.into() });
            }
            resp.body.slice(..expected as usize)
        };
        Ok(RangeRead {
            bytes: body,
            version: resp.version,
        })
    }

    /// The first `limit` bytes of an object (or `None` when there is none),
    /// with its ETag.
    pub fn get_object(
        &self,
        bucket: &str,
        key: &str,
        limit: u64,
    ) -> Result<Option<(Bytes, String)>, S3Error> {
        let req = GetRequest {
            range: Some(format!("bytes=0-{}", limit.saturating_sub(1))),
            ..GetRequest::default()
        };
        match blocking(self.get(bucket, key, &req)) {
            // An empty object has no byte 0.
            Err(S3Error::Http { status: 416, .. }) => Ok(Some((Bytes::new(), String::new()))),
            Ok(r) => Ok(Some((r.body, r.etag.unwrap_or_default()))),
            Err(S3Error::Gone { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// GET (or HEAD) an object. 404 is [`S3Error::Gone`], 412
    /// [`S3Error::Changed`]; the response carries its headers.
    pub async fn get(&self, bucket: &str, key: &str, g: &GetRequest) -> Result<Response, S3Error> {
        let what = format!("read s3://{bucket}/{key}");
        let mut query = Vec::new();
        if let Some(v) = &g.version {
            query.push(("versionId".to_string(), v.clone()));
        }
        let mut headers = Vec::new();
        if let Some(r) = &g.range {
            headers.push(("range".to_string(), r.clone()));
        }
        if let Some(e) = &g.if_match {
            headers.push(("if-match".to_string(), quote(e)));
        }
        let resp = self
            .send(&Request {
                method: if g.head {
                    reqwest::Method::HEAD
                } else {
                    reqwest::Method::GET
                },
                bucket,
                key,
                query,
                headers,
                body: Bytes::new(),
                what: &what,
            })
            .await?;
        match resp.status {
            200 | 206 => Ok(resp),
            412 => Err(S3Error::Changed { key: key.into() }),
            404 if g.head => Err(S3Error::Gone { key: key.into() }),
            _ => check_status(&resp, &what, bucket, key).map(|()| resp),
        }
    }

    /// Write an object under `mode`; returns its new ETag.
    pub fn put(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        mode: &PutMode,
    ) -> Result<String, S3Error> {
        blocking(self.put_async(bucket, key, body, mode)).map(|(etag, _)| etag)
    }

    /// Write an object under `mode`; returns its new ETag and version.
    pub async fn put_async(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        mode: &PutMode,
    ) -> Result<(String, Option<String>), S3Error> {
        let what = format!("write s3://{bucket}/{key}");
        let mut headers = Vec::new();
        match mode {
            PutMode::Create => headers.push(("if-none-match".to_string(), "*".to_string())),
            PutMode::Replace(etag) => headers.push(("if-match".to_string(), quote(etag))),
            PutMode::Overwrite => {}
        }
        let resp = self
            .send(&Request {
                method: reqwest::Method::PUT,
                bucket,
                key,
                query: Vec::new(),
                headers,
                body,
                what: &what,
            })
            .await?;
        match resp.status {
            200 | 201 => Ok((resp.etag.unwrap_or_default(), resp.version)),
            412 | 409 => Err(S3Error::Conflict { key: key.into() }),
            _ => {
                check_status(&resp, &what, bucket, key)?;
                Ok((resp.etag.unwrap_or_default(), resp.version))
            }
        }
    }

    /// Server-side copy of `from` to `to` in one bucket.
    pub async fn copy_async(&self, bucket: &str, from: &str, to: &str) -> Result<(), S3Error> {
        let what = format!("copy s3://{bucket}/{from}");
        let source = format!("/{bucket}/{}", s3::signing::uri_encode(from, false));
        let resp = self
            .send(&Request {
                method: reqwest::Method::PUT,
                bucket,
                key: to,
                query: Vec::new(),
                headers: vec![("x-amz-copy-source".to_string(), source)],
                body: Bytes::new(),
                what: &what,
            })
            .await?;
        if resp.status == 404 {
            return Err(S3Error::Gone { key: from.into() });
        }
        check_status(&resp, &what, bucket, to)?;
        // A copy can fail after the 200 status line: the error is in the body.
        if xml_text(&resp.body, "Code").is_some() {
            return Err(http_error(&resp, &what));
        }
        Ok(())
    }

    /// Server-side copy of `from` to `to` in one bucket.
    pub fn copy(&self, bucket: &str, from: &str, to: &str) -> Result<(), S3Error> {
        blocking(self.copy_async(bucket, from, to))
    }

    /// Delete an object (missing is fine).
    pub fn delete(&self, bucket: &str, key: &str) -> Result<(), S3Error> {
        blocking(self.delete_async(bucket, key))
    }

    /// Delete an object (missing is fine).
    pub async fn delete_async(&self, bucket: &str, key: &str) -> Result<(), S3Error> {
        let what = format!("delete s3://{bucket}/{key}");
        let resp = self
            .send(&Request {
                method: reqwest::Method::DELETE,
                bucket,
                key,
                query: Vec::new(),
                headers: Vec::new(),
                body: Bytes::new(),
                what: &what,
            })
            .await?;
        if resp.status == 404 && error_code(&resp.body) != "NoSuchBucket" {
            return Ok(());
        }
        check_status(&resp, &what, bucket, key)
    }
}
