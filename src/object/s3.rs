//! The backend in an S3-compatible bucket, through Apache Arrow's `object_store` crate: its S3
//! client configured from the standard AWS environment variables, its retries (transient
//! errors, 5xx answers, timeouts and dropped connections, with backoff and a bound), and puts
//! as conditional creates (`If-None-Match: *`). A create refused because the key exists is
//! settled by reading the key back: the same bytes are our own earlier try whose answer was
//! lost, other bytes another writer's.
//!
//! A staged value is spooled to an unnamed local temporary file and uploaded at commit: whole,
//! as one conditional create, up to `SINGLE_PUT` bytes; past that in parts of `PART` bytes,
//! after checking that the key is free. S3 completes a multipart upload unconditionally here, so
//! two writers of one key over 32 MiB could replace one another (sealed, their bytes differ even
//! for the same content). Packs stay under it (they seal at 16 MiB plus one blob of at most 4
//! MiB, and are named by a hash of their content, so two writers of one name write one
//! content); a copy of a replica may pass it, and two hosts writing the copy at one log
//! position write the same rows, so either one stands. Memory stays at most one such buffer
//! per upload.
//!
//! The library is synchronous; this backend owns a small tokio runtime and waits on it for
//! each call, from whatever thread makes it (a server's blocking pool included: nothing here
//! blocks inside another runtime's task, and dropping it never waits).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as StorePath;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, RetryConfig,
};

use crate::base::error::{Error, ErrorKind, Result};
use crate::object::backend::{other_bytes, Staged};
use crate::object::Backend;

/// Largest staged value uploaded as one conditional create.
const SINGLE_PUT: u64 = 32 << 20;
/// Tries of a create that failed without landing, the client's own retries aside.
const CREATE_TRIES: u32 = 3;
/// The part size of a larger value's upload.
const PART: usize = 8 << 20;

/// How an [`S3Backend`] reaches its bucket, beyond what the AWS environment variables say.
#[derive(Debug, Clone)]
pub struct S3Settings {
    /// `object_store` configuration keys and values (`aws_endpoint`, `aws_access_key_id`,
    /// `aws_allow_http`, ...) applied over the environment's.
    pub config: Vec<(String, String)>,
    /// Most retries of one request that failed in a way worth retrying.
    pub retries: usize,
    /// Longest time from a request's first try after which it is not retried again.
    pub retry_timeout: Duration,
    /// Longest time one try of a request may take.
    pub request_timeout: Duration,
}

impl Default for S3Settings {
    fn default() -> Self {
        S3Settings {
            config: Vec::new(),
            retries: 8,
            retry_timeout: Duration::from_secs(600),
            // Whole bodies: a 32 MiB create must finish in it at 1 Mbit/s.
            request_timeout: Duration::from_secs(300),
        }
    }
}

/// Values under a prefix of an S3 bucket.
#[derive(Debug)]
pub struct S3Backend {
    client: Arc<AmazonS3>,
    bucket: String,
    /// Without slashes at either end; empty for the bucket's root.
    prefix: String,
    /// The endpoint set (`AWS_ENDPOINT_URL`), empty for AWS's own.
    endpoint: String,
    /// Taken only by `drop`, which shuts it down without waiting (safe inside another runtime).
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for S3Backend {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl S3Backend {
    /// Removes the objects of clock readings (`clock/<seconds>-<random>`) named more than an hour
    /// before `now_ns` (a host's clock may be off by less): what collections killed between
    /// writing and deleting one left. Each failure is logged; they are empty and harmless.
    fn remove_stale_clocks(&self, now_ns: i64) {
        let keys = match self.list("clock/") {
            Ok(keys) => keys,
            Err(e) => {
                tracing::warn!(error = %e, "the store's old clock readings were not listed; left for the next collection");
                return;
            }
        };
        let before = now_ns / 1_000_000_000 - 3600;
        for key in keys {
            let named =
                key.strip_prefix("clock/").and_then(|n| n.split_once('-')).and_then(|(t, _)| t.parse::<i64>().ok());
            if named.is_some_and(|t| t < before) {
                match self.delete(&key) {
                    Ok(()) => tracing::info!(key, "removed a clock reading a stopped collection left"),
                    Err(e) => {
                        tracing::warn!(key, error = %e, "could not remove an old clock reading; left for the next collection")
                    }
                }
            }
        }
    }
    /// The backend at `s3://bucket/prefix`, configured from the AWS environment variables
    /// (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
    /// `AWS_ALLOW_HTTP`, ...) and then `settings`. Nothing is sent until the first call.
    pub fn open(bucket: &str, prefix: &str, settings: &S3Settings) -> Result<S3Backend> {
        // The timeout first: client options set later one by one (`aws_allow_http` among
        // them) change these in place, where setting them whole would drop those.
        let mut builder = AmazonS3Builder::new()
            .with_client_options(ClientOptions::new().with_timeout(settings.request_timeout))
            .with_bucket_name(bucket);
        // The environment's settings as `AmazonS3Builder::from_env` reads them, then ours.
        let from_env = std::env::vars_os().filter_map(|(k, v)| {
            let (k, v) = (k.to_str()?.to_ascii_lowercase(), v.to_str()?.to_owned());
            k.starts_with("aws_").then_some((k, v))
        });
        for (k, v) in from_env {
            if let Ok(key) = k.parse() {
                builder = builder.with_config(key, v);
            }
        }
        for (k, v) in &settings.config {
            let key = k.parse().map_err(|e| {
                Error::with_source(ErrorKind::InvalidArgument, format!("{k:?} is not an S3 setting"), e)
            })?;
            builder = builder.with_config(key, v);
        }
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
                base: 2.0,
            },
            max_retries: settings.retries,
            retry_timeout: settings.retry_timeout,
        };
        let endpoint = builder.get_config_value(&object_store::aws::AmazonS3ConfigKey::Endpoint).unwrap_or_default();
        let client = builder.with_retry(retry).build().map_err(|e| {
            Error::with_source(
                ErrorKind::InvalidArgument,
                format!("cannot reach bucket {bucket}: {e} (set AWS_ENDPOINT_URL, AWS_REGION and the credentials)"),
                e,
            )
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("trove-s3")
            .enable_all()
            .build()
            .map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot start the S3 client's runtime: {e}"), e))?;
        let prefix = prefix.trim_matches('/').to_owned();
        Ok(S3Backend { client: Arc::new(client), bucket: bucket.to_owned(), prefix, endpoint, runtime: Some(runtime) })
    }

    fn path(&self, key: &str) -> StorePath {
        if self.prefix.is_empty() {
            StorePath::from(key)
        } else {
            StorePath::from(format!("{}/{key}", self.prefix))
        }
    }

    /// Where the backend is, for messages: `s3://bucket/prefix`.
    pub fn describe(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }

    /// What tells this store from any other: its endpoint and `s3://bucket/prefix` (one bucket
    /// name may be used by two S3 services).
    pub fn identity(&self) -> String {
        format!("{} {}", self.endpoint, self.describe())
    }

    /// Writes `bytes` under `key` whether a value is there or not: only for the one kind of
    /// value meant to change in place (a log's published checkpoint, which C2SP readers find at
    /// a fixed path), never for content, which [`Backend::put`] creates once.
    pub fn replace(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let payload = object_store::PutPayload::from(bytes.to_vec());
        let (client, path) = (self.client.clone(), self.path(key));
        self.run(async move { client.put_opts(&path, payload, PutOptions::default()).await })
            .map(|_| ())
            .map_err(|e| self.error("write", key, e))
    }

    /// The keys under `prefix`, sorted, each with the time the store dated it (its
    /// `Last-Modified`, ns since the epoch): the age of a value by the store's clock, which
    /// every host shares (a fleet's leases).
    pub fn list_dated(&self, prefix: &str) -> Result<Vec<(String, i64)>> {
        // The listing is by whole segments: list the directory the prefix ends in and keep the
        // keys that start with it.
        let dir = prefix.rsplit_once('/').map_or("", |(d, _)| d);
        let under = match (self.prefix.is_empty(), dir.is_empty()) {
            (true, true) => None,
            (true, false) => Some(StorePath::from(dir)),
            (false, true) => Some(StorePath::from(self.prefix.as_str())),
            (false, false) => Some(StorePath::from(format!("{}/{dir}", self.prefix))),
        };
        let client = self.client.clone();
        let found = self.run(async move {
            let mut out = Vec::new();
            let mut listing = client.list(under.as_ref());
            while let Some(meta) = listing.next().await {
                let meta = meta?;
                out.push((meta.location.to_string(), meta.last_modified.timestamp_nanos_opt().unwrap_or(i64::MAX)));
            }
            Ok(out)
        });
        let found = found.map_err(|e| {
            Error::with_source(ErrorKind::Io, format!("cannot list {prefix:?} in {}: {e}", self.describe()), e)
        })?;
        let strip = if self.prefix.is_empty() { String::new() } else { format!("{}/", self.prefix) };
        let mut keys: Vec<(String, i64)> = found
            .into_iter()
            .filter_map(|(location, at)| location.strip_prefix(strip.as_str()).map(|k| (k.to_owned(), at)))
            .filter(|(key, _)| key.starts_with(prefix))
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// Runs `work` on the store's runtime and waits for it.
    fn run<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = object_store::Result<T>> + Send + 'static,
    ) -> object_store::Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        let Some(runtime) = &self.runtime else {
            return Err(object_store::Error::Generic {
                store: "S3",
                source: "the S3 client's runtime is shut down".into(),
            });
        };
        runtime.spawn(async move {
            // The receiver waits below; it is gone only if the caller's thread is.
            let _ = tx.send(work.await);
        });
        rx.recv().unwrap_or_else(|_| {
            Err(object_store::Error::Generic {
                store: "S3",
                source: "the S3 client's runtime stopped before answering".into(),
            })
        })
    }

    /// The error for `verb` on `key`, its kind decided here once.
    fn error(&self, verb: &str, key: &str, e: object_store::Error) -> Error {
        match e {
            object_store::Error::NotFound { .. } => Error::not_found(format!("{key} is not in {}", self.describe())),
            e => Error::with_source(ErrorKind::Io, format!("cannot {verb} {key} in {}: {e}", self.describe()), e),
        }
    }

    /// Settles a create refused because `key` exists, or whose answer was lost: `None` if the
    /// key is absent after all (S3 answers 409 to a create overlapping another create of the
    /// key, which may then fail), success if it holds exactly `bytes`, else `already_exists`.
    fn settle(&self, key: &str, bytes: &[u8]) -> Result<Option<()>> {
        let size = match self.size(key) {
            Ok(size) => size,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if size == bytes.len() as u64 && self.get_range(key, 0, size)? == bytes {
            return Ok(Some(()));
        }
        Err(other_bytes(&self.describe(), key))
    }

    /// Uploads the spooled `file` of `size` bytes under `key` in parts, once the key is
    /// checked free (see the module docs).
    fn upload_parts(&self, key: &str, file: &std::fs::File, size: u64) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let (client, path) = (self.client.clone(), self.path(key));
        let mut upload =
            self.run(async move { client.put_multipart(&path).await }).map_err(|e| self.error("upload", key, e))?;
        let mut at = 0u64;
        let result = (|| {
            while at < size {
                let n = PART.min((size - at) as usize);
                let mut part = vec![0u8; n];
                file.read_exact_at(&mut part, at)
                    .map_err(|e| Error::io("read the spooled upload of", std::path::Path::new(key), e))?;
                let sent = upload.put_part(object_store::PutPayload::from(part));
                self.run(sent).map_err(|e| self.error("upload", key, e))?;
                at += n as u64;
            }
            Ok(())
        })();
        match result {
            Ok(()) => match self.run(async move { upload.complete().await }) {
                Ok(_) => Ok(()),
                // A completion whose answer was lost may have landed: the key's length tells.
                Err(e) => match self.size(key) {
                    Ok(there) if there == size => Ok(()),
                    _ => Err(self.error("upload", key, e)),
                },
            },
            Err(e) => {
                if let Err(abort) = self.run(async move { upload.abort().await }) {
                    tracing::warn!(key, error = %abort, "an abandoned upload's parts were not removed; the bucket's lifecycle rule for incomplete uploads reclaims them");
                }
                Err(e)
            }
        }
    }
}

impl Backend for S3Backend {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        // Copied once: each try shares it.
        let payload = object_store::PutPayload::from(bytes.to_vec());
        let mut tries = 0;
        loop {
            tries += 1;
            let (client, path, payload) = (self.client.clone(), self.path(key), payload.clone());
            let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
            let failed = match self.run(async move { client.put_opts(&path, payload, opts).await }) {
                Ok(_) => return Ok(()),
                // Refused because the key exists (maybe by a retry of our own create whose
                // first answer was lost, so the bytes there decide), or in conflict with
                // another create of it.
                Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => None,
                // Failed, perhaps after it landed: the client does not retry a create whose
                // answer was lost (the connection dropped or timed out once it was sent).
                Err(e) => Some(e),
            };
            if self.settle(key, bytes)?.is_some() {
                return Ok(());
            }
            if tries >= CREATE_TRIES {
                return Err(match failed {
                    Some(e) => self.error("create", key, e),
                    None => Error::new(
                        ErrorKind::Conflict,
                        format!(
                            "{key} in {}: every create of it conflicted with another writer's; try again",
                            self.describe()
                        ),
                    ),
                });
            }
            tracing::info!(key, error = ?failed, "a create of a key still absent failed; trying again");
        }
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let past_end = |size: u64| {
            Error::corrupt(format!(
                "{key} in {} has {size} bytes: a read of {len} bytes at {offset} runs past its end; run `trove check`",
                self.describe()
            ))
        };
        let Some(end) = offset.checked_add(len) else {
            return Err(Error::corrupt(format!(
                "a read of {len} bytes at {offset} of {key}: past any value's end; run `trove check`"
            )));
        };
        if len == 0 {
            // S3 has no empty range; the value must still be there and long enough.
            let size = self.size(key)?;
            return if size < end { Err(past_end(size)) } else { Ok(Vec::new()) };
        }
        let (client, path) = (self.client.clone(), self.path(key));
        let got = self.run(async move {
            let opts = GetOptions { range: Some(GetRange::Bounded(offset..end)), ..Default::default() };
            let result = client.get_opts(&path, opts).await?;
            if result.range != (offset..end) {
                return Ok(Err(result.meta.size));
            }
            // Grown as the body arrives: the length is the caller's, not yet the body's.
            let mut out = Vec::with_capacity(len.min(8 << 20) as usize);
            let mut body = result.into_stream();
            while let Some(chunk) = body.next().await {
                let chunk = chunk?;
                if out.len() as u64 + chunk.len() as u64 > len {
                    return Ok(Err(offset + out.len() as u64 + chunk.len() as u64));
                }
                out.extend_from_slice(&chunk);
            }
            Ok(Ok(out))
        });
        match got {
            Ok(Ok(bytes)) if bytes.len() as u64 == len => Ok(bytes),
            Ok(Ok(bytes)) => Err(past_end(offset + bytes.len() as u64)),
            Ok(Err(size)) => Err(past_end(size)),
            Err(e @ object_store::Error::NotFound { .. }) => Err(self.error("read", key, e)),
            // A range starting past the end is answered 416, a request error: the value's
            // length tells it from a failure.
            Err(e) => match self.size(key) {
                Ok(size) if size < end => Err(past_end(size)),
                _ => Err(self.error("read", key, e)),
            },
        }
    }

    fn get_whole(&self, key: &str, limit: u64) -> Result<Vec<u8>> {
        let (client, path) = (self.client.clone(), self.path(key));
        let got = self.run(async move {
            let result = client.get_opts(&path, GetOptions::default()).await?;
            let size = result.meta.size;
            if size > limit {
                return Ok(Err(size));
            }
            let mut out = Vec::with_capacity(size as usize);
            let mut body = result.into_stream();
            while let Some(chunk) = body.next().await {
                let chunk = chunk?;
                if out.len() as u64 + chunk.len() as u64 > size {
                    return Ok(Err(out.len() as u64 + chunk.len() as u64));
                }
                out.extend_from_slice(&chunk);
            }
            Ok(Ok(out))
        });
        match got {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(size)) => Err(super::backend::too_long(key, size, limit)),
            Err(e) => Err(self.error("read", key, e)),
        }
    }

    fn copy_to(&self, key: &str, limit: u64, out: &mut dyn std::io::Write) -> Result<u64> {
        let Some(runtime) = &self.runtime else {
            return Err(Error::new(ErrorKind::Io, format!("cannot read {key}: the S3 client's runtime is shut down")));
        };
        let (client, path) = (self.client.clone(), self.path(key));
        // The body comes a few pieces at a time through a bounded channel: memory stays small
        // whatever the value's length, and the writing is done on the caller's thread.
        let (size_tx, size_rx) = mpsc::sync_channel(1);
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        runtime.spawn(async move {
            let result = match client.get_opts(&path, GetOptions::default()).await {
                Ok(result) => result,
                Err(e) => {
                    let _ = size_tx.send(Err(e));
                    return;
                }
            };
            let size = result.meta.size;
            let _ = size_tx.send(Ok(size));
            if size > limit {
                return;
            }
            let mut body = result.into_stream();
            while let Some(piece) = body.next().await {
                // The reader is gone (a write failed): stop.
                if tx.send(piece).await.is_err() {
                    return;
                }
            }
        });
        let size = match size_rx.recv() {
            Ok(Ok(size)) => size,
            Ok(Err(e)) => return Err(self.error("read", key, e)),
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!("cannot read {key}: the S3 client stopped before answering"),
                ))
            }
        };
        if size > limit {
            return Err(super::backend::too_long(key, size, limit));
        }
        let mut written = 0u64;
        // Each piece is waited for as every call here waits (`run`), never by blocking inside
        // the runtime; the receiver goes into the task and comes back with the piece.
        let mut rx = Some(rx);
        loop {
            let Some(mut r) = rx.take() else { break };
            let (r, piece) = self
                .run(async move {
                    let piece = r.recv().await;
                    Ok((r, piece))
                })
                .map_err(|e| self.error("read", key, e))?;
            rx = Some(r);
            let Some(piece) = piece else { break };
            let piece = piece.map_err(|e| self.error("read", key, e))?;
            written += piece.len() as u64;
            if written > size {
                return Err(Error::corrupt(format!(
                    "{key} in {} sent more bytes than its length, {size}",
                    self.describe()
                )));
            }
            out.write_all(&piece)
                .map_err(|e| Error::with_source(ErrorKind::Io, format!("cannot write the copy of {key}: {e}"), e))?;
        }
        if written != size {
            return Err(Error::new(
                ErrorKind::Io,
                format!("reading {key} from {} ended after {written} of its {size} bytes; try again", self.describe()),
            ));
        }
        Ok(written)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        Ok(self.list_dated(prefix)?.into_iter().map(|(key, _)| key).collect())
    }

    fn clock_ns(&self) -> Result<i64> {
        // The store dates what it stores: an empty object written now, its date read back, the
        // object removed. The date is to the second (HTTP dates), so half a second is added,
        // and the time since the write answered.
        // Named by this host's time, to the second: what a collection killed between the write
        // and the delete leaves is found by its name (below).
        let key =
            format!("clock/{:012}-{}", crate::base::time::now_ns() / 1_000_000_000, crate::base::random::random_hex()?);
        let (client, path) = (self.client.clone(), self.path(&key));
        let (put, put_path) = (client.clone(), path.clone());
        self.run(async move { put.put(&put_path, object_store::PutPayload::new()).await })
            .map_err(|e| self.error("create", &key, e))?;
        let written = std::time::Instant::now();
        let meta = self.run(async move { client.head(&path).await }).map_err(|e| self.error("look up", &key, e));
        if let Err(e) = self.delete(&key) {
            tracing::warn!(key, error = %e, "could not remove the object the store's clock was read from; it is empty and harmless");
        }
        let dated = meta?.last_modified;
        let since = i64::try_from(written.elapsed().as_nanos()).unwrap_or(i64::MAX);
        let now = dated.timestamp_nanos_opt().map(|t| t.saturating_add(500_000_000).saturating_add(since)).ok_or_else(
            || {
                Error::new(
                    ErrorKind::Corrupt,
                    format!("{} dated {key} {dated}, a time out of range: check the store's clock", self.describe()),
                )
            },
        )?;
        self.remove_stale_clocks(now);
        Ok(now)
    }

    fn size(&self, key: &str) -> Result<u64> {
        let (client, path) = (self.client.clone(), self.path(key));
        self.run(async move { client.head(&path).await })
            .map(|meta| meta.size)
            .map_err(|e| self.error("look up", key, e))
    }

    fn delete(&self, key: &str) -> Result<()> {
        let (client, path) = (self.client.clone(), self.path(key));
        match self.run(async move { client.delete(&path).await }) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error("delete", key, e)),
        }
    }

    fn stage(&self, _dir: &str) -> Result<Box<dyn Staged + '_>> {
        let spool = tempfile::tempfile().map_err(|e| Error::io("create a spool file in", &std::env::temp_dir(), e))?;
        Ok(Box::new(Spooled { backend: self, spool: std::io::BufWriter::new(spool), size: 0 }))
    }
}

/// A value being staged for the bucket: spooled to an unnamed local file (see the module docs).
struct Spooled<'a> {
    backend: &'a S3Backend,
    spool: std::io::BufWriter<std::fs::File>,
    size: u64,
}

impl Staged for Spooled<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        use std::io::Write;
        self.spool.write_all(bytes).map_err(|e| Error::io("write the spool file in", &std::env::temp_dir(), e))?;
        self.size += bytes.len() as u64;
        Ok(())
    }

    fn commit(self: Box<Self>, key: &str) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let spooled = |e: std::io::Error| {
            Error::io(&format!("read back the spooled upload of {key} in"), &std::env::temp_dir(), e)
        };
        let file = self.spool.into_inner().map_err(|e| spooled(e.into_error()))?;
        if self.size <= SINGLE_PUT {
            // At most SINGLE_PUT bytes.
            let mut bytes = vec![0u8; self.size as usize];
            file.read_exact_at(&mut bytes, 0).map_err(spooled)?;
            return self.backend.put(key, &bytes);
        }
        match self.backend.size(key) {
            Ok(size) if size == self.size => {
                // Compared a part at a time: memory stays one part on each side.
                let mut at = 0;
                while at < size {
                    let n = (PART as u64).min(size - at);
                    let mut ours = vec![0u8; n as usize];
                    file.read_exact_at(&mut ours, at).map_err(spooled)?;
                    if self.backend.get_range(key, at, n)? != ours {
                        return Err(other_bytes(&self.backend.describe(), key));
                    }
                    at += n;
                }
                Ok(())
            }
            Ok(_) => Err(other_bytes(&self.backend.describe(), key)),
            Err(e) if e.kind() == ErrorKind::NotFound => self.backend.upload_parts(key, &file, self.size),
            Err(e) => Err(e),
        }
    }
}
