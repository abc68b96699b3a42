//! Response bodies that stream: a blocking task writes into a bounded channel of 64 KiB pieces
//! that is the body, so memory stays a few pieces whatever the size; an error ends the body
//! without its final chunk, so a client cannot take a cut body for a whole one. Exports and
//! downloads use it.

use crate::base::id::NodeName;
use std::io::{self, Write};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use super::state::{AppState, Views};
use super::ApiError;
use crate::base::error::{Error, ErrorKind};
use crate::fs::live::ChangePolicy;
use crate::object::Sha256;
use crate::ops::source::{stream_hashed, Opened, Origin};
use crate::repo::Repo;

/// The size of one piece of a streamed body.
pub(super) const PIECE: usize = 64 << 10;

/// Sends what is written to the response body in pieces. A client that goes away closes the
/// channel, and the next write fails, which stops the work.
pub(super) struct ChannelWriter {
    tx: mpsc::Sender<io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= PIECE {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let piece = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(PIECE)));
        self.tx.blocking_send(Ok(piece)).map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "client went away"))
    }
}

/// A body fed by `work`, run on the blocking pool with a pooled `Repo` once the response has
/// started; an error it returns cuts the body short (and is logged).
pub(super) fn body<F>(st: &Arc<AppState>, work: F) -> Body
where
    F: FnOnce(&AppState, &Repo, &mut ChannelWriter) -> Result<(), Error> + Send + 'static,
{
    body_on(st, None, work)
}

/// [`body`] written on node `node`'s handle (None: this node's), in a fleet.
pub(super) fn body_on<F>(st: &Arc<AppState>, node: Option<NodeName>, work: F) -> Body
where
    F: FnOnce(&AppState, &Repo, &mut ChannelWriter) -> Result<(), Error> + Send + 'static,
{
    fed_by(st, move |state, mut out| async move {
        state
            .blocking_on(node, move |st, repo| {
                work(st, repo, &mut out)?;
                out.flush().map_err(crate::base::error::from_io)
            })
            .await
    })
}

/// [`body`] written with every node's handle (this node's first), in a fleet.
pub(super) fn body_fleet<F>(st: &Arc<AppState>, work: F) -> Body
where
    F: FnOnce(&AppState, &Views<'_>, &mut ChannelWriter) -> Result<(), Error> + Send + 'static,
{
    fed_by(st, move |state, mut out| async move {
        state
            .blocking_fleet(move |st, views| {
                work(st, views, &mut out)?;
                out.flush().map_err(crate::base::error::from_io)
            })
            .await
    })
}

/// A body that the task `feed` makes fills through the writer it is given; an error it returns
/// cuts the body short (and is logged).
fn fed_by<F, Fut>(st: &Arc<AppState>, feed: F) -> Body
where
    F: FnOnce(Arc<AppState>, ChannelWriter) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(8);
    let state = st.clone();
    tokio::spawn(async move {
        let failed = tx.clone();
        let done = feed(state, ChannelWriter { tx, buf: Vec::with_capacity(PIECE) }).await;
        if let Err(e) = done {
            tracing::warn!(error = %e, "a streamed response was cut short");
            let _ = failed.send(Err(io::Error::other(e.message().to_string()))).await;
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|piece| (piece, rx)) });
    Body::from_stream(stream)
}

/// Whether `If-None-Match` names `tag` (or `*`).
fn matches(headers: &HeaderMap, tag: &str) -> bool {
    headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(',').any(|t| {
            let t = t.trim();
            t == "*" || t == tag || t.strip_prefix("W/") == Some(tag)
        })
    })
}

/// What the first look at a file to download found.
struct Found {
    sha256: crate::object::Sha256,
    size: u64,
    origin: Origin,
}

/// Reads `opened` to its end, hashing it; `None` if a live file changed meanwhile.
fn hash_all(opened: &mut Opened<'_>) -> Result<Option<crate::object::Sha256>, Error> {
    let sha = stream_hashed(opened, |_| Ok(()))?;
    Ok(opened.unchanged()?.then_some(sha))
}

/// Gives a closure that opens a file the signature `download` needs (the borrow of the `Repo`
/// flowing into the result), which a closure bound to a `let` would not infer.
pub(super) fn opener<F>(f: F) -> F
where
    F: for<'r> Fn(&AppState, &'r Repo) -> Result<(Opened<'r>, Origin), ApiError>,
{
    f
}

/// The first look at a file to download: its sha256 (stored for a snapshot file, hashed for a
/// live one), tried again while the file changes under the hashing, unless the policy aborts.
fn first_pass<F>(st: &AppState, repo: &Repo, open: &F, policy: ChangePolicy) -> Result<Found, ApiError>
where
    F: for<'r> Fn(&AppState, &'r Repo) -> Result<(Opened<'r>, Origin), ApiError>,
{
    let attempts = if policy == ChangePolicy::Abort { 1 } else { crate::fs::live::READ_ATTEMPTS };
    for _ in 0..attempts {
        let (mut opened, origin) = open(st, repo)?;
        let size = opened.size;
        let sha256 = match opened.sha256 {
            Some(s) => Some(s),
            None => hash_all(&mut opened)?,
        };
        if let Some(sha256) = sha256 {
            return Ok(Found { sha256, size, origin });
        }
    }
    Err(ApiError::from(Error::new(
        ErrorKind::Conflict,
        "the file changed while it was read: download it again when its writer is done",
    )))
}

/// Sends the first `size` bytes of `opened` to `out`, holding the last buffer back until the
/// whole was checked against `expected`: a file that changed makes the body short of its
/// Content-Length, which every client sees as an error, and a torn body never arrives complete.
fn send_verified(opened: &mut Opened<'_>, size: u64, expected: Sha256, out: &mut dyn Write) -> Result<(), Error> {
    let mut held: Vec<u8> = Vec::new();
    let whole = stream_hashed(&mut std::io::Read::take(&mut *opened, size), |bytes| {
        out.write_all(&held).map_err(crate::base::error::from_io)?;
        held.clear();
        held.extend_from_slice(bytes);
        Ok(())
    })?;
    if whole != expected || !opened.unchanged()? {
        return Err(Error::new(ErrorKind::Conflict, "the file changed during the download; the body was cut"));
    }
    out.write_all(&held).map_err(crate::base::error::from_io)
}

/// A file's raw bytes, streamed, any size: the sha256 as `ETag` (known for a snapshot file;
/// for a live one, from a first pass that also tells a file changing now, answered 409 with
/// `change_policy=abort` or tried again with `retry`), then the bytes, hashed again as they go:
/// if the file changed between the passes, the body is cut, never served torn. `open` opens
/// the file afresh (it is called for each pass, on a blocking thread).
pub(super) async fn download<F>(
    st: &Arc<AppState>,
    open: F,
    policy: ChangePolicy,
    headers: &HeaderMap,
) -> Result<Response, ApiError>
where
    F: for<'r> Fn(&AppState, &'r Repo) -> Result<(Opened<'r>, Origin), ApiError> + Clone + Send + Sync + 'static,
{
    download_on(st, None, open, policy, headers).await
}

/// [`download`] from node `node`'s handle (None: this node's), in a fleet.
pub(super) async fn download_on<F>(
    st: &Arc<AppState>,
    node: Option<NodeName>,
    open: F,
    policy: ChangePolicy,
    headers: &HeaderMap,
) -> Result<Response, ApiError>
where
    F: for<'r> Fn(&AppState, &'r Repo) -> Result<(Opened<'r>, Origin), ApiError> + Clone + Send + Sync + 'static,
{
    let first = open.clone();
    let found = st.blocking_on(node.clone(), move |st, repo| first_pass(st, repo, &first, policy)).await?;
    let tag = format!("\"{}\"", hex::encode(found.sha256));
    let mut resp = if matches(headers, &tag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let (expected, size) = (found.sha256, found.size);
        let body = body_on(st, node, move |st, repo, out| {
            let (mut opened, _) = open(st, repo).map_err(|e| Error::new(e.kind(), e.message()))?;
            send_verified(&mut opened, size, expected, out)
        });
        let mut r = body.into_response();
        let h = r.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(found.size));
        r
    };
    let h = resp.headers_mut();
    if let Ok(t) = HeaderValue::from_str(&tag) {
        h.insert(header::ETAG, t);
    }
    h.insert("x-trove-source", HeaderValue::from_static(found.origin.as_str()));
    if let Some(id) = found.origin.snapshot_id().and_then(|id| HeaderValue::from_str(id.as_str()).ok()) {
        h.insert("x-trove-snapshot", id);
    }
    Ok(resp)
}
