//! Lance tables on S3, through the same client and outbound policy as every
//! other S3 request.
//!
//! Lance reaches storage through `object_store`. This module implements that
//! interface over [`Client`] (one bucket per store) and registers it with a
//! Lance session as the provider of `s3://` URLs, so Lance's reads, listings
//! and conditional commits (`If-None-Match: *` on manifests) all go through
//! the policy-checked transport. Multipart uploads are gathered in memory and
//! sent as one PUT on completion (one object is at most 5 GiB on S3).

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt as _};
use lance::session::Session;
use lance_io::object_store::providers::{ObjectStoreProvider, ObjectStoreRegistry};
use lance_io::object_store::{ObjectStoreParams, DEFAULT_CLOUD_IO_PARALLELISM};
use object_store::path::Path;
use object_store::{
    Attributes, CopyMode, CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload,
    ListResult, MultipartUpload, ObjectMeta, PutMode as OsPutMode, PutMultipartOptions, PutOptions,
    PutPayload, PutResult, UploadPart,
};

use super::client::{GetRequest, Response};
use super::{Client, PutMode, S3Error};

const STORE: &str = "pchronicle-s3";

/// A Lance session whose `s3://` URLs go through the process's S3 client.
pub fn session() -> Result<Arc<Session>, S3Error> {
    static SESSION: OnceLock<Result<Arc<Session>, S3Error>> = OnceLock::new();
    SESSION
        .get_or_init(|| {
            let client = super::client()?;
            let registry = ObjectStoreRegistry::default();
            registry.insert("s3", Arc::new(BucketStores { client }));
            Ok(Arc::new(Session::new(0, 64 << 20, Arc::new(registry))))
        })
        .clone()
}

#[derive(Debug)]
struct BucketStores {
    client: Arc<Client>,
}

#[async_trait::async_trait]
impl ObjectStoreProvider for BucketStores {
    async fn new_store(
        &self,
        base_path: url::Url,
        params: &ObjectStoreParams,
    ) -> lance_core::Result<lance_io::object_store::ObjectStore> {
        let bucket = base_path.host_str().unwrap_or_default().to_string();
        let inner = Arc::new(BucketStore {
            client: self.client.clone(),
            bucket,
        });
        Ok(lance_io::object_store::ObjectStore::new(
            inner,
            base_path,
            params.block_size,
            None,
            false,
            true,
            DEFAULT_CLOUD_IO_PARALLELISM,
            3,
            params.storage_options(),
        ))
    }
}

/// One bucket as an `object_store::ObjectStore`.
#[derive(Debug)]
struct BucketStore {
    client: Arc<Client>,
    bucket: String,
}

impl fmt::Display for BucketStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "S3({})", self.bucket)
    }
}

fn os_error(e: S3Error, path: &Path) -> object_store::Error {
    let path = path.to_string();
    match e {
        S3Error::Gone { .. } => object_store::Error::NotFound {
            path,
            source: Box::new(e),
        },
        S3Error::Conflict { .. } => object_store::Error::AlreadyExists {
            path,
            source: Box::new(e),
        },
        S3Error::Changed { .. } => object_store::Error::Precondition {
            path,
            source: Box::new(e),
        },
        other => object_store::Error::Generic {
            store: STORE,
            source: Box::new(other),
        },
    }
}

fn parse_time(text: Option<&str>) -> chrono::DateTime<chrono::Utc> {
    let Some(t) = text else {
        return chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    };
    chrono::DateTime::parse_from_rfc3339(t)
        .or_else(|_| chrono::DateTime::parse_from_rfc2822(t))
        .map_or(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH, |d| {
            d.with_timezone(&chrono::Utc)
        })
}

/// `bytes a-b/total` → (a..b+1, total).
fn content_range(r: &Response) -> Option<(Range<u64>, u64)> {
    let text = r.content_range.as_deref()?.strip_prefix("bytes ")?;
    let (span, total) = text.split_once('/')?;
    let (a, b) = span.split_once('-')?;
    let (a, b): (u64, u64) = (a.parse().ok()?, b.parse().ok()?);
    Some((a..b.checked_add(1)?, total.parse().ok()?))
}

#[async_trait::async_trait]
impl object_store::ObjectStore for BucketStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let mode = match opts.mode {
            OsPutMode::Overwrite => PutMode::Overwrite,
            OsPutMode::Create => PutMode::Create,
            OsPutMode::Update(v) => match v.e_tag {
                Some(e) => PutMode::Replace(e),
                None => {
                    return Err(object_store::Error::NotImplemented {
                        operation: "conditional update without an ETag".into(),
                        implementer: STORE.into(),
                    })
                }
            },
        };
        let replace = matches!(mode, PutMode::Replace(_));
        let body = Bytes::from(payload);
        let (etag, version) = self
            .client
            .put_async(&self.bucket, location.as_ref(), body, &mode)
            .await
            .map_err(|e| match e {
                // A lost compare-and-swap is a failed precondition, not an
                // existing object.
                S3Error::Conflict { .. } if replace => object_store::Error::Precondition {
                    path: location.to_string(),
                    source: Box::new(e),
                },
                e => os_error(e, location),
            })?;
        Ok(PutResult {
            e_tag: Some(etag),
            version,
            extensions: object_store::Extensions::default(),
        })
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let _ = opts;
        Ok(Box::new(Gathered {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            location: location.clone(),
            parts: Arc::new(Mutex::new(Vec::new())),
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let range = options.range.as_ref().map(|r| match r {
            GetRange::Bounded(r) => format!("bytes={}-{}", r.start, r.end.saturating_sub(1)),
            GetRange::Offset(o) => format!("bytes={o}-"),
            GetRange::Suffix(n) => format!("bytes=-{n}"),
        });
        if matches!(&options.range, Some(GetRange::Bounded(r)) if r.is_empty()) {
            return Err(object_store::Error::Generic {
                store: STORE,
                source: "an empty range was requested".into(),
            });
        }
        let req = GetRequest {
            range,
            if_match: options.if_match.clone(),
            version: options.version.clone(),
            head: options.head,
        };
        let resp = self
            .client
            .get(&self.bucket, location.as_ref(), &req)
            .await
            .map_err(|e| os_error(e, location))?;
        let (range, size) = match content_range(&resp) {
            Some((r, total)) => (r, total),
            None => {
                let len = resp.content_length.unwrap_or(resp.body.len() as u64);
                (0..len, len)
            }
        };
        let range = if options.head { 0..size } else { range };
        let meta = ObjectMeta {
            location: location.clone(),
            last_modified: parse_time(resp.last_modified.as_deref()),
            size,
            e_tag: resp.etag.clone(),
            version: resp.version.clone(),
        };
        let body = resp.body;
        let stream = futures::stream::once(async move { Ok(body) }).boxed();
        Ok(GetResult {
            payload: GetResultPayload::Stream(stream),
            meta,
            range,
            attributes: Attributes::default(),
            extensions: object_store::Extensions::default(),
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let client = self.client.clone();
        let bucket = self.bucket.clone();
        locations
            .map(move |p| {
                let client = client.clone();
                let bucket = bucket.clone();
                async move {
                    let p = p?;
                    client
                        .delete_async(&bucket, p.as_ref())
                        .await
                        .map_err(|e| os_error(e, &p))?;
                    Ok(p)
                }
            })
            .buffered(8)
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let client = self.client.clone();
        let bucket = self.bucket.clone();
        let prefix = prefix.map(|p| format!("{p}/")).unwrap_or_default();
        futures::stream::once(async move {
            client
                .list_all(&bucket, &prefix, None, u64::MAX)
                .await
                .map_err(|e| os_error(e, &Path::from(prefix.as_str())))
        })
        .map(|r| match r {
            Ok(l) => futures::stream::iter(l.objects.into_iter().map(|o| Ok(meta_of(o)))).boxed(),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        })
        .flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let prefix = prefix.map(|p| format!("{p}/")).unwrap_or_default();
        let l = self
            .client
            .list_all(&self.bucket, &prefix, Some("/"), u64::MAX)
            .await
            .map_err(|e| os_error(e, &Path::from(prefix.as_str())))?;
        Ok(ListResult {
            common_prefixes: l
                .prefixes
                .iter()
                .map(|p| Path::from(p.trim_end_matches('/')))
                .collect(),
            objects: l.objects.into_iter().map(meta_of).collect(),
            extensions: object_store::Extensions::default(),
        })
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        if options.mode == CopyMode::Create {
            return Err(object_store::Error::NotImplemented {
                operation: "copy without overwrite".into(),
                implementer: STORE.into(),
            });
        }
        self.client
            .copy_async(&self.bucket, from.as_ref(), to.as_ref())
            .await
            .map_err(|e| os_error(e, from))
    }
}

fn meta_of(o: super::ListedObject) -> ObjectMeta {
    ObjectMeta {
        location: Path::from(o.key.as_str()),
        last_modified: parse_time(Some(&o.last_modified)),
        size: o.size,
        e_tag: Some(o.etag),
        version: None,
    }
}

/// A multipart upload gathered in memory and sent as one PUT.
#[derive(Debug)]
struct Gathered {
    client: Arc<Client>,
    bucket: String,
    location: Path,
    parts: Arc<Mutex<Vec<PutPayload>>>,
}

#[async_trait::async_trait]
impl MultipartUpload for Gathered {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        if let Ok(mut p) = self.parts.lock() {
            p.push(data);
        }
        Box::pin(futures::future::ready(Ok(())))
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        let parts =
            std::mem::take(
                &mut *self
                    .parts
                    .lock()
                    .map_err(|_| object_store::Error::Generic {
                        store: STORE,
                        source: "a part writer panicked".into(),
                    })?,
            );
        let mut body = Vec::with_capacity(parts.iter().map(PutPayload::content_length).sum());
        for p in &parts {
            for chunk in p {
                body.extend_from_slice(chunk);
            }
        }
        let (etag, version) = self
            .client
            .put_async(
                &self.bucket,
                self.location.as_ref(),
                body.into(),
                &PutMode::Overwrite,
            )
            .await
            .map_err(|e| os_error(e, &self.location))?;
        Ok(PutResult {
            e_tag: Some(etag),
            version,
            extensions: object_store::Extensions::default(),
        })
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        if let Ok(mut p) = self.parts.lock() {
            p.clear();
        }
        Ok(())
    }
}
