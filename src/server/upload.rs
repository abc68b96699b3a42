//! Uploads of the sandbox file API (`multipart/form-data`: a `file` part and a `path` part, in
//! either order). The file's bytes go to a temporary in the session's live tree as they
//! arrive (hashed on the way), a bounded channel of chunks feeding the blocking thread that
//! writes them, so memory stays flat whatever the size; once the parts end and the destination
//! is known, the journal renames the temporary into place, keeping and auditing what it
//! replaces as a tool write does. The new content is not copied into the store: the pre-image
//! is what must be kept, and the file itself is the content.

use std::io::Read;
use std::sync::Arc;

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
use crate::ops::journal::{NewContent, UPLOAD_PREFIX};
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

/// An upload's temporary left by a crash is removed by a later upload once it is this old.
const ORPHAN_AGE_NS: i64 = 3600 * 1_000_000_000;

/// How much of an upload is written between two flushes started behind it.
const FLUSH_EVERY: u64 = 64 << 20;

/// Streams the upload into a fresh temporary at the workspace root (`.trove-up-<hex>.tmp`),
/// hashing it on the way, and syncs it; first removes temporaries a crash left over an hour
/// ago. A helper thread flushes what was written every 64 MiB while the rest arrives, so the
/// disk works alongside the network and the final sync has only the tail left.
fn stage_in_tree(wd: &WorkDir, chunks: &mut Chunks) -> crate::base::error::Result<(NewContent, u64)> {
    let now = crate::base::time::now_ns();
    for (name, meta) in wd.list(b"")? {
        if name.starts_with(UPLOAD_PREFIX.as_bytes()) && now.saturating_sub(meta.mtime_ns) > ORPHAN_AGE_NS {
            if let Err(e) = wd.remove(&name) {
                tracing::warn!(error = %e, "an old upload temporary could not be removed");
            }
        }
    }
    let mut random = [0u8; 8];
    crate::base::random::fill_random(&mut random)?;
    let from = format!("{UPLOAD_PREFIX}{}.tmp", hex::encode(random)).into_bytes();
    let written = write_flushing(wd, &from, chunks);
    let (sha256, size) = match written {
        Ok(w) => w,
        Err(e) => {
            let _ = wd.remove(&from);
            return Err(e);
        }
    };
    let meta = wd.stat(&from)?.ok_or_else(|| Error::not_found("an upload's temporary vanished as it was written"))?;
    let seen = (meta.inode, meta.size, meta.mtime_ns);
    Ok((NewContent::Staged { from, sha256, seen }, size))
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
    (status, Json(FileReply::<()>::err("upload", path, e))).into_response()
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
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(IN_FLIGHT);
    let (path_tx, path_rx) = tokio::sync::oneshot::channel::<Option<String>>();
    // The storing side: the stream into the store, then (once the parts ended) the write.
    let sid = id.clone();
    let storing = st.blocking(move |st, repo| -> std::result::Result<(StatusCode, FileReply<WriteData>), Error> {
        let s = repo.session(&sid)?;
        // Held from before the first object is stored until the write that refers to them.
        let _lease = repo.lease("upload")?;
        let mut chunks = Chunks { rx, current: Bytes::new() };
        let live = s.serving_dir().map(WorkDir::open).transpose()?;
        let stored = match &live {
            // A live tree: the bytes go straight to a temporary in it, the way to disk they
            // would take anyway, and the journal renames it into place.
            Some(wd) => stage_in_tree(wd, &mut chunks),
            // Not live (the write will be refused as read-only): stored, as any content.
            None => repo.store_stream(&mut chunks).map(|(sha256, id, size)| (NewContent::Stored { id, sha256 }, size)),
        };
        let staged = match &stored {
            Ok((NewContent::Staged { from, .. }, _)) => Some(from.clone()),
            _ => None,
        };
        // Whatever did not become the file is removed: nothing of a refused upload stays.
        let discard = || {
            if let (Some(wd), Some(from)) = (&live, &staged) {
                if let Err(e) = wd.remove(from) {
                    tracing::warn!(error = %e, "an upload's temporary could not be removed");
                }
            }
        };
        let path = path_rx.blocking_recv().ok().flatten();
        let Some(path) = path else {
            discard();
            let e = Error::invalid_argument("the upload has no `path` part: say where the file goes");
            return Ok((StatusCode::BAD_REQUEST, FileReply::err("upload", "", &e)));
        };
        let stored = match stored {
            Ok(s) => s,
            Err(e) => return Ok((StatusCode::OK, FileReply::err("upload", &path, &e))),
        };
        let sandbox = Sandbox::new(repo, &s, &actor, &st.opts.sandbox_root);
        let r = sandbox.write_stored(&path, stored, None);
        if r.is_err() {
            discard();
        }
        Ok((StatusCode::OK, FileReply::of("upload", &path, "File uploaded successfully", r)))
    });
    let reading = async move {
        let (mut path, mut total, mut saw_file) = (None, 0u64, false);
        let mut problem: Option<(StatusCode, Error)> = None;
        loop {
            let field = match multipart.next_field().await {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    problem =
                        Some((StatusCode::BAD_REQUEST, Error::invalid_argument(format!("a malformed upload: {e}"))));
                    break;
                }
            };
            match field.name() {
                Some("path") => match field.text().await {
                    Ok(t) if t.len() <= 4096 => path = Some(t),
                    Ok(_) => {
                        problem =
                            Some((StatusCode::BAD_REQUEST, Error::invalid_argument("the path part is over 4 KiB")))
                    }
                    Err(e) => {
                        problem =
                            Some((StatusCode::BAD_REQUEST, Error::invalid_argument(format!("the path part: {e}"))))
                    }
                },
                Some("file") if !saw_file => {
                    saw_file = true;
                    let mut field = field;
                    loop {
                        match field.chunk().await {
                            Ok(Some(chunk)) => {
                                total += chunk.len() as u64;
                                if total > limit {
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
