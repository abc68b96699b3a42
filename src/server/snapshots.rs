//! Snapshots over HTTP: take one of a session's live tree, list them, list and read the files of
//! one, and export one (or a path in it) as a tar stream.

use std::io::{self, Write};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::extract::FileTarget;
use super::extract::{P, Q};
use super::files::{listing, ok, read_response, wants_download, DOWNLOAD_LIMIT};
use super::state::AppState;
use super::ApiError;
use crate::error::{Error, ErrorKind};
use crate::live::{ChangePolicy, READ_LIMIT};
use crate::manifest::snapshots::SnapshotInfo;
use crate::progress::NoProgress;
use crate::repo::Repo;
use crate::source::{Source, WorkspaceView};
use crate::view::from_io;

fn info_json(s: &SnapshotInfo) -> Value {
    let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
    if let Some(obj) = v.as_object_mut() {
        obj.insert("created_at".into(), json!(s.created_ns as f64 / 1e9));
    }
    v
}

/// `POST /v1/sessions/{id}/snapshots`: 201 with the new snapshot.
pub(super) async fn take(State(st): State<Arc<AppState>>, P(id): P<String>) -> Result<Response, ApiError> {
    let actor = super::auth::actor();
    let _busy = st.mark_busy(&id);
    let info = st
        .blocking(move |_, repo| {
            let s = repo.active_session(&id)?;
            repo.snapshot_session(&s, "manual", &actor)?.ok_or_else(|| {
                Error::not_found(format!(
                    "session '{id}' has no live directory at {} to snapshot",
                    s.live_dir.display()
                ))
            })
        })
        .await?;
    Ok((StatusCode::CREATED, axum::Json(info_json(&info))).into_response())
}

/// `GET /v1/sessions/{id}/snapshots`: the snapshots of the session's workspace, oldest first.
pub(super) async fn of_session(State(st): State<Arc<AppState>>, P(id): P<String>) -> Result<Response, ApiError> {
    let list = st
        .blocking(move |_, repo| {
            let s = repo.session(&id)?;
            repo.snapshots(Some(&s.workspace))
        })
        .await?;
    Ok(ok(json!(list.iter().map(info_json).collect::<Vec<_>>())))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    workspace: Option<String>,
}

/// `GET /v1/snapshots?workspace=NAME`
pub(super) async fn list(State(st): State<Arc<AppState>>, Q(q): Q<ListQuery>) -> Result<Response, ApiError> {
    let list = st.blocking(move |_, repo| repo.snapshots(q.workspace.as_deref())).await?;
    Ok(ok(json!(list.iter().map(info_json).collect::<Vec<_>>())))
}

/// `GET /v1/snapshots/{snap}` (an id, a unique prefix, or `latest`).
pub(super) async fn show(State(st): State<Arc<AppState>>, P(snap): P<String>) -> Result<Response, ApiError> {
    let info = st.blocking(move |_, repo| repo.resolve_snapshot(&snap, None)).await?;
    Ok(ok(info_json(&info)))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FilesQuery {
    /// Only files under this directory.
    prefix: Option<String>,
}

/// `GET /v1/snapshots/{snap}/files`: every file, in the Files API's shape.
pub(super) async fn files(
    State(st): State<Arc<AppState>>,
    P(snap): P<String>,
    Q(q): Q<FilesQuery>,
) -> Result<Response, ApiError> {
    let (files, origin) = st
        .blocking(move |st, repo| {
            let info = repo.resolve_snapshot(&snap, None)?;
            let view = WorkspaceView {
                name: &info.workspace,
                session: None,
                live_dir: None,
                excludes: &st.unused_excludes,
                scope: None,
            };
            let (mut files, origin) = repo.list_files(&view, &Source::Snapshot(info.id.clone()))?;
            if let Some(p) = q.prefix.as_deref().map(str::as_bytes).filter(|p| !p.is_empty()) {
                let p = crate::path::normalize_nonempty(p)?;
                files.retain(|f| f.path.starts_with(&p) && f.path.get(p.len()).is_none_or(|&c| c == b'/'));
            }
            Ok::<_, Error>((files, origin))
        })
        .await?;
    Ok(listing(&files, &origin))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReadQuery {
    download: Option<String>,
}

/// `GET /v1/snapshots/{snap}/files/{*path}`: JSON, or the bytes with `?download=1`.
pub(super) async fn read(
    State(st): State<Arc<AppState>>,
    FileTarget { owner: snap, path }: FileTarget,
    Q(q): Q<ReadQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let download = wants_download(q.download.as_deref(), &headers);
    let limit = if download { DOWNLOAD_LIMIT } else { READ_LIMIT };
    let work = move |st: &AppState, repo: &Repo| {
        let info = repo.resolve_snapshot(&snap, None)?;
        let view = WorkspaceView {
            name: &info.workspace,
            session: None,
            live_dir: None,
            excludes: &st.unused_excludes,
            scope: None,
        };
        repo.read_file_from(&view, &Source::Snapshot(info.id.clone()), &path, limit, ChangePolicy::Retry)
    };
    let (read, origin) = if download { st.blocking(work).await? } else { st.inline(work)? };
    Ok(read_response(read, &origin, download, &headers))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExportQuery {
    /// A file or directory inside the snapshot; the whole snapshot when absent.
    path: Option<String>,
    /// `tar` (default) or `tar.zst`.
    format: Option<String>,
}

/// Sends what the exporter writes to the response body in 64 KiB pieces. A client that goes
/// away closes the channel, and the next write fails, which stops the export.
struct ChannelWriter {
    tx: mpsc::Sender<io::Result<Bytes>>,
    buf: Vec<u8>,
}

const PIECE: usize = 64 << 10;

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

/// `GET /v1/snapshots/{snap}/export?path=&format=tar|tar.zst`: a tar stream. A failure after
/// the headers are sent cuts the body short, so a client never takes a partial archive as whole.
pub(super) async fn export(
    State(st): State<Arc<AppState>>,
    P(snap): P<String>,
    Q(q): Q<ExportQuery>,
) -> Result<Response, ApiError> {
    let zstd = match q.format.as_deref() {
        None | Some("tar") => None,
        Some("tar.zst") => Some(3),
        Some(other) => {
            return Err(ApiError::new(
                ErrorKind::InvalidArgument,
                format!("format '{other}' is not one of: tar, tar.zst"),
            ))
        }
    };
    let path = q.path.unwrap_or_default();
    if path.contains('\\') {
        return Err(ApiError::new(
            ErrorKind::InvalidPath,
            "the path contains a backslash: separate components with '/'",
        ));
    }
    let rel = if path.is_empty() { Vec::new() } else { crate::path::normalize_nonempty(path.as_bytes())? };
    let (info, rel) = st
        .blocking(move |_, repo| {
            let info = repo.resolve_snapshot(&snap, None)?;
            if !rel.is_empty() {
                repo.lookup(&info, &rel)?;
            }
            Ok::<_, Error>((info, rel))
        })
        .await?;
    let safe: String =
        info.workspace.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    let name = format!("{safe}-{}.{}", &info.id[..12], if zstd.is_some() { "tar.zst" } else { "tar" });
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(8);
    let worker = st.clone();
    tokio::spawn(async move {
        let failed = tx.clone();
        let done: Result<(), Error> = worker
            .blocking(move |_, repo| {
                let mut out = ChannelWriter { tx, buf: Vec::with_capacity(PIECE) };
                repo.export(&info, &rel, &mut out, zstd, &NoProgress)?;
                out.flush().map_err(from_io)
            })
            .await;
        if let Err(e) = done {
            let _ = failed.send(Err(io::Error::other(e.message().to_string()))).await;
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|piece| (piece, rx)) });
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-tar"));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}
