//! Uploads of the sandbox file API (`multipart/form-data`: a `file` part and a `path` part, in
//! either order). The file's bytes go to a temporary in the session's live tree as they
//! arrive (hashed on the way), a bounded channel of chunks feeding the blocking thread that
//! writes them, so memory stays flat whatever the size; once the parts end and the destination
//! is known, the journal renames the temporary into place, keeping and auditing what it
//! replaces as a tool write does. The new content is not copied into the store: the pre-image
//! is what must be kept, and the file itself is the content. The temporary is recorded before
//! it is made (`ops::staging`), so a snapshot leaves it out and a crash's is removed later.
//!
//! The body is paced rather than timed: a client may take as long as a big file needs, but not
//! send slower than [`MIN_RATE`] on average after [`GRACE`], nor pause for [`BODY_IDLE`] (408,
//! and the connection closes). The request's deadline then applies to the write alone. A
//! session that is not live is refused before a byte is received.

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::multipart::MultipartRejection;
use axum::extract::Multipart;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::state::AppState;
use crate::base::error::{Error, ErrorKind};
use crate::base::id::SessionId;
use crate::fs::workdir::WorkDir;
use crate::ops::journal::NewContent;
use crate::tools::fileapi::ops::WriteData;
use crate::tools::fileapi::{FileReply, Sandbox};

/// Chunks in flight between the request and the thread storing them.
const IN_FLIGHT: usize = 8;

/// A `Read` over the chunks the request sends, ending when the sender is dropped.
struct Chunks {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl std::io::Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(b) => self.current = b,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}

/// How long a body may send nothing at all.
pub const BODY_IDLE: Duration = Duration::from_secs(10);
/// The average pace a body must keep, in bytes a second, once [`GRACE`] has passed.
pub const MIN_RATE: u64 = 1024;
/// How long a body may take before its pace is held against [`MIN_RATE`].
pub const GRACE: Duration = Duration::from_secs(10);

/// How much of an upload is written between two flushes started behind it.
const FLUSH_EVERY: u64 = 64 << 20;

/// The pace of a body: when it began and what arrived.
struct Pace {
    started: Instant,
    received: u64,
}

impl Pace {
    /// When the body is too slow if nothing more arrives: after [`BODY_IDLE`] from now, or
    /// when what arrived stops covering [`MIN_RATE`] since the start, whichever comes first.
    fn until(&self) -> Instant {
        let earned = GRACE + Duration::from_secs_f64(self.received as f64 / MIN_RATE as f64);
        (Instant::now() + BODY_IDLE).min(self.started + earned)
    }

    /// Awaits `next` within the pace: `None` when the body fell behind.
    async fn within<T>(&self, next: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::time::timeout_at(self.until().into(), next).await.ok()
    }
}

fn too_slow() -> (StatusCode, Error) {
    let e = Error::new(
        ErrorKind::Timeout,
        format!(
            "the upload arrived too slowly (a pause of {} s, or under {MIN_RATE} bytes a second after its first {} s): \
             nothing was written; send it again",
            BODY_IDLE.as_secs(),
            GRACE.as_secs()
        ),
    )
    .with_detail("changed", false);
    (StatusCode::REQUEST_TIMEOUT, e)
}

/// Streams the upload into the recorded temporary `from` at the workspace root, hashing it on
/// the way, and syncs it. A helper thread flushes what was written every 64 MiB while the rest
/// arrives, so the disk works alongside the network and the final sync has only the tail left.
fn stage_in_tree(wd: &WorkDir, from: &[u8], chunks: &mut Chunks) -> crate::base::error::Result<(NewContent, u64)> {
    let written = write_flushing(wd, from, chunks);
    let (sha256, size) = match written {
        Ok(w) => w,
        Err(e) => {
            let _ = wd.remove_file(from);
            return Err(e);
        }
    };
    let meta = wd.stat(from)?.ok_or_else(|| Error::not_found("an upload's temporary vanished as it was written"))?;
    let seen = (meta.inode, meta.size, meta.mtime_ns);
    Ok((NewContent::Staged { from: from.to_vec(), sha256, seen }, size))
}

/// Writes `chunks` to the new temporary `from`, synced; its (sha256, size).
fn write_flushing(
    wd: &WorkDir,
    from: &[u8],
    chunks: &mut Chunks,
) -> crate::base::error::Result<(crate::object::Sha256, u64)> {
    use std::io::Write;
    let io =
        |what: &str, e: std::io::Error| Error::with_source(ErrorKind::Io, format!("cannot {what} an upload: {e}"), e);
    let mut file = wd.create_temp(from, from, 0o644, &mut Vec::new())?;
    let flusher_file = file.try_clone().map_err(|e| io("flush", e))?;
    let (written, flushed) = crate::base::flush::behind(
        || flusher_file.sync_data(),
        |kick| {
            let mut sha = <sha2::Sha256 as sha2::Digest>::new();
            let (mut size, mut since) = (0u64, 0u64);
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = match chunks.read(&mut buf) {
                    Ok(0) => break Ok((sha, size)),
                    Ok(n) => n,
                    Err(e) => break Err(io("read", e)),
                };
                sha2::Digest::update(&mut sha, &buf[..n]);
                if let Err(e) = file.write_all(&buf[..n]) {
                    break Err(io("write", e));
                }
                if size == 0 {
                    // A crash test's point: the temporary exists, part-written.
                    crate::base::failpoint::failpoint("upload:receiving");
                }
                size += n as u64;
                since += n as u64;
                if since >= FLUSH_EVERY {
                    kick.kick();
                    since = 0;
                }
            }
        },
    );
    let (sha, size) = written?;
    flushed.map_err(|e| io("flush", e))?;
    file.sync_all().map_err(|e| io("sync", e))?;
    Ok((sha2::Digest::finalize(sha).into(), size))
}

fn fail(status: StatusCode, path: &str, e: &Error) -> Response {
    let mut resp = (status, Json(FileReply::<()>::err("upload", path, e))).into_response();
    if status == StatusCode::REQUEST_TIMEOUT || status == StatusCode::PAYLOAD_TOO_LARGE {
        // The rest of the body is not read: the connection cannot carry another request.
        resp.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    }
    resp
}

/// Receives an upload for session `id` (see the module docs).
pub(super) async fn receive(
    st: Arc<AppState>,
    id: SessionId,
    multipart: std::result::Result<Multipart, MultipartRejection>,
) -> Response {
    let mut multipart = match multipart {
        Ok(m) => m,
        Err(e) => {
            let err = Error::invalid_argument(format!("an upload is multipart/form-data: {}", e.body_text()));
            return fail(StatusCode::BAD_REQUEST, "", &err);
        }
    };
    let actor = super::request::actor();
    let limit = st.opts.upload_limit;
    let _busy = st.mark_busy(&id);
    if let Err(e) = st.sandbox_here(&id).await {
        return fail(super::error::status_of(e.kind()), "", &e);
    }
    tracing::debug!(session = %id, "an upload is being received");
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(IN_FLIGHT);
    let (path_tx, path_rx) = tokio::sync::oneshot::channel::<Option<String>>();
    // The storing side: the stream into the tree, then (once the parts ended) the write.
    let sid = id.clone();
    let storing = st.blocking(move |st, repo| -> std::result::Result<(StatusCode, FileReply<WriteData>), Error> {
        let s = repo.session(&sid)?;
        let mut chunks = Chunks { rx, current: Bytes::new() };
        let no_path = || {
            let e = Error::invalid_argument("the upload has no `path` part: say where the file goes");
            Ok((StatusCode::BAD_REQUEST, FileReply::err("upload", "", &e)))
        };
        let sandbox = Sandbox::new(repo, &s, &actor, &st.opts.sandbox_root);
        let Some(dir) = s.serving_dir() else {
            // Not live: the write would be refused as read-only, so nothing is received (the
            // reading side sees the channel closed and stops taking the file part).
            drop(chunks);
            let Some(path) = path_rx.blocking_recv().ok().flatten() else { return no_path() };
            let e = match repo.lock_writable(&s) {
                Err(e) => e,
                Ok(_) => Error::new(
                    ErrorKind::Conflict,
                    format!("session {sid} was resumed while the upload began: send it again"),
                ),
            };
            return Ok((StatusCode::OK, FileReply::of("upload", &path, "", sandbox.refuse_upload(&path, e))));
        };
        // Held from before the first object is stored until the write that refers to them.
        let _lease = repo.lease("upload")?;
        let wd = WorkDir::open(dir)?;
        // Recorded before the file exists, forgotten (when dropped) after it was placed or
        // removed: the only temporaries trove may remove are the ones it recorded.
        let staging = repo.stage_upload(dir)?;
        let stored = stage_in_tree(&wd, staging.name(), &mut chunks);
        // Whatever did not become the file is removed: nothing of a refused upload stays.
        let discard = || {
            if let Err(e) = wd.remove_file(staging.name()) {
                tracing::warn!(error = %e, "an upload's temporary could not be removed");
            }
        };
        let Some(path) = path_rx.blocking_recv().ok().flatten() else {
            discard();
            return no_path();
        };
        let stored = match stored {
            Ok(s) => s,
            Err(e) => return Ok((StatusCode::OK, FileReply::err("upload", &path, &e))),
        };
        // The body was paced, not timed: the request's deadline applies to the write from here.
        repo.set_deadline(Some(Instant::now() + st.opts.request_timeout));
        let r = sandbox.write_stored(&path, stored, None);
        if r.is_err() {
            discard();
        }
        Ok((StatusCode::OK, FileReply::of("upload", &path, "File uploaded successfully", r)))
    });
    let reading = async move {
        let (mut path, mut saw_file) = (None, false);
        let mut pace = Pace { started: Instant::now(), received: 0 };
        let mut problem: Option<(StatusCode, Error)> = None;
        loop {
            let Some(next) = pace.within(multipart.next_field()).await else {
                problem = Some(too_slow());
                break;
            };
            let field = match next {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    problem =
                        Some((StatusCode::BAD_REQUEST, Error::invalid_argument(format!("a malformed upload: {e}"))));
                    break;
                }
            };
            match field.name() {
                Some("path") => match pace.within(field.text()).await {
                    None => problem = Some(too_slow()),
                    Some(Ok(t)) if t.len() <= 4096 => path = Some(t),
                    Some(Ok(_)) => {
                        problem =
                            Some((StatusCode::BAD_REQUEST, Error::invalid_argument("the path part is over 4 KiB")))
                    }
                    Some(Err(e)) => {
                        problem =
                            Some((StatusCode::BAD_REQUEST, Error::invalid_argument(format!("the path part: {e}"))))
                    }
                },
                Some("file") if !saw_file => {
                    saw_file = true;
                    let mut field = field;
                    loop {
                        let Some(next) = pace.within(field.chunk()).await else {
                            problem = Some(too_slow());
                            break;
                        };
                        match next {
                            Ok(Some(chunk)) => {
                                pace.received += chunk.len() as u64;
                                if pace.received > limit {
                                    let e = Error::new(
                                        ErrorKind::TooLarge,
                                        format!(
                                            "the upload is over the server's limit of {limit} bytes (--upload-limit)"
                                        ),
                                    );
                                    problem = Some((StatusCode::PAYLOAD_TOO_LARGE, e));
                                    break;
                                }
                                if tx.send(chunk).await.is_err() {
                                    break;
                                }
                            }
                            Ok(None) => break,
                            Err(e) => {
                                problem = Some((
                                    StatusCode::BAD_REQUEST,
                                    Error::invalid_argument(format!("the file part: {e}")),
                                ));
                                break;
                            }
                        }
                    }
                }
                // A second file or an unknown part is refused, as an unknown JSON field is: a
                // misspelt `path` must not leave the file somewhere unintended.
                other => {
                    let what = match other {
                        Some("file") => "a second `file` part: upload one file per request".to_string(),
                        Some(name) => {
                            format!("an unknown part '{}': an upload has `file` and `path`", name.escape_debug())
                        }
                        None => "a part without a name: an upload has `file` and `path`".to_string(),
                    };
                    problem = Some((StatusCode::BAD_REQUEST, Error::invalid_argument(what)));
                }
            }
            if problem.is_some() {
                break;
            }
        }
        drop(tx);
        if !saw_file && problem.is_none() {
            problem = Some((StatusCode::BAD_REQUEST, Error::invalid_argument("the upload has no `file` part")));
        }
        // A problem stops the write: no path, so the stored bytes are only garbage.
        let _ = path_tx.send(if problem.is_some() { None } else { path.clone() });
        (problem, path)
    };
    let ((problem, path), stored) = tokio::join!(reading, storing);
    st.touch(&id);
    if let Some((status, e)) = problem {
        return fail(status, path.as_deref().unwrap_or(""), &e);
    }
    match stored {
        Ok((status, reply)) => (status, Json(reply)).into_response(),
        Err(e) if e.kind() == ErrorKind::NotFound => fail(StatusCode::NOT_FOUND, path.as_deref().unwrap_or(""), &e),
        Err(e) => super::error::ApiError::from(e).into_response(),
    }
}
