//! Snapshots over HTTP: take one of a session's live tree, list them, list and read the files of
//! one, and export one (or a path in it) as a tar stream.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::extract::FileTarget;
use super::extract::{P, Q};
use super::files::{listing, read_response, wants_download};
use super::state::AppState;
use super::ApiError;
use crate::base::error::Error;
use crate::base::id::SessionId;
use crate::base::progress::NoProgress;
use crate::fs::live::{ChangePolicy, READ_LIMIT};
use crate::model::snapshot::{SnapshotInfo, SnapshotRecord};
use crate::ops::source::{Source, WorkspaceView};

fn records(list: &[SnapshotInfo]) -> Vec<SnapshotRecord<'_>> {
    list.iter().map(SnapshotInfo::record).collect()
}

/// `POST /v1/sessions/{id}/snapshots`: 201 with the new snapshot.
pub(super) async fn take(State(st): State<Arc<AppState>>, P(id): P<SessionId>) -> Result<Response, ApiError> {
    let actor = super::request::actor();
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
    Ok((StatusCode::CREATED, axum::Json(info.record())).into_response())
}

/// `GET /v1/sessions/{id}/snapshots`: the snapshots of the session's workspace, oldest first.
pub(super) async fn of_session(State(st): State<Arc<AppState>>, P(id): P<SessionId>) -> Result<Response, ApiError> {
    // In a fleet, another node's session's snapshots are that node's.
    let node = st.session_node(id.clone()).await?;
    let list = st
        .blocking_on(node, move |_, repo| {
            let s = repo.session(&id)?;
            repo.snapshots(Some(&s.workspace))
        })
        .await?;
    Ok(axum::Json(records(&list)).into_response())
}

/// The query of `GET /v1/snapshots`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    /// Only this workspace's snapshots.
    workspace: Option<String>,
}

/// `GET /v1/snapshots?workspace=NAME`
/// In a fleet, every node's, oldest first, each with its `node`.
pub(super) async fn list(State(st): State<Arc<AppState>>, Q(q): Q<ListQuery>) -> Result<Response, ApiError> {
    let list = st
        .blocking_fleet(move |_, views| {
            let mut all = Vec::new();
            for (node, repo) in views {
                all.extend(repo.snapshots(q.workspace.as_deref())?.into_iter().map(|s| (node.map(str::to_owned), s)));
            }
            all.sort_by_key(|(_, s)| s.created_ns);
            Ok::<_, Error>(all)
        })
        .await?;
    let records: Vec<_> = list.iter().map(|(node, s)| SnapshotRecord { node: node.clone(), ..s.record() }).collect();
    Ok(axum::Json(records).into_response())
}

/// `GET /v1/snapshots/{snap}` (an id, a unique prefix, or `latest`).
/// In a fleet, found on any node.
pub(super) async fn show(State(st): State<Arc<AppState>>, P(snap): P<String>) -> Result<Response, ApiError> {
    let unique = crate::ops::fleet::unique_snapshot(&snap);
    let (node, info) = st
        .blocking_found(
            (move |repo: &crate::repo::Repo| repo.resolve_snapshot(&snap, None), ApiError::from),
            (|s| s.created_ns, unique),
            |_, repo, info| Ok::<_, ApiError>((repo.node().map(str::to_owned), info)),
        )
        .await?;
    Ok(axum::Json(SnapshotRecord { node, ..info.record() }).into_response())
}

/// The query of `GET /v1/snapshots/{snap}/files`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct FilesQuery {
    /// Only files under this directory.
    #[serde(default)]
    #[schemars(schema_with = "crate::base::path::rooted_schema")]
    prefix: Option<String>,
}

/// `GET /v1/snapshots/{snap}/files`: every file, in the Files API's shape.
pub(super) async fn files(
    State(st): State<Arc<AppState>>,
    P(snap): P<String>,
    Q(q): Q<FilesQuery>,
) -> Result<Response, ApiError> {
    let unique = crate::ops::fleet::unique_snapshot(&snap);
    let (files, origin) = st
        .blocking_found(
            (move |repo: &crate::repo::Repo| repo.resolve_snapshot(&snap, None), ApiError::from),
            (|s| s.created_ns, unique),
            move |st, repo, info| {
                let view = WorkspaceView::of_snapshot(&info, &st.unused_excludes);
                let (mut files, origin) = repo.list_files(&view, &Source::Snapshot(info.id.to_string()))?;
                let prefix = q.prefix.as_deref().map(crate::base::path::from_text).transpose()?;
                if let Some(p) = prefix.filter(|p| !p.is_empty()) {
                    files.retain(|f| f.path.starts_with(&p) && f.path.get(p.len()).is_none_or(|&c| c == b'/'));
                }
                Ok::<_, ApiError>((files, origin))
            },
        )
        .await?;
    Ok(listing(&files, &origin))
}

/// The query of `GET /v1/snapshots/{snap}/files/{path}`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReadQuery {
    /// `1` or `true`: the raw bytes instead of JSON.
    download: Option<super::files::Flag>,
}

/// `GET /v1/snapshots/{snap}/files/{*path}`: JSON, or the bytes with `?download=1`.
pub(super) async fn read(
    State(st): State<Arc<AppState>>,
    FileTarget { owner: snap, path }: FileTarget,
    Q(q): Q<ReadQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let download = wants_download(q.download, &headers);
    // In a fleet, read on the node holding the snapshot.
    let node = st.snapshot_node(snap.clone()).await?;
    if download {
        let open = super::stream::opener(move |st, repo| {
            let info = repo.resolve_snapshot(&snap, None)?;
            let view = WorkspaceView::of_snapshot(&info, &st.unused_excludes);
            repo.open_file_from(&view, &Source::Snapshot(info.id.to_string()), &path).map_err(ApiError::from)
        });
        return super::stream::download_on(&st, node, open, ChangePolicy::Retry, &headers).await;
    }
    let read_json = move |st: &AppState, repo: &crate::repo::Repo| {
        let info = repo.resolve_snapshot(&snap, None)?;
        let view = WorkspaceView::of_snapshot(&info, &st.unused_excludes);
        repo.read_file_from(&view, &Source::Snapshot(info.id.to_string()), &path, READ_LIMIT, ChangePolicy::Retry)
            .map_err(ApiError::from)
    };
    let (read, origin) = match node {
        Some(node) => st.blocking_on(Some(node), read_json).await?,
        None => st.inline(read_json)?,
    };
    Ok(read_response(read, &origin))
}

/// The query of `GET /v1/snapshots/{snap}/export`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ExportQuery {
    /// A file or directory inside the snapshot; the whole snapshot when absent.
    #[serde(default)]
    #[schemars(schema_with = "crate::base::path::rooted_schema")]
    path: Option<String>,
    /// `tar` (default) or `tar.zst`.
    format: Option<ExportFormat>,
}

/// The archive an export writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub(super) enum ExportFormat {
    /// A plain tar stream.
    #[serde(rename = "tar")]
    Tar,
    /// A tar stream in one zstd frame.
    #[serde(rename = "tar.zst")]
    TarZst,
}

/// `GET /v1/snapshots/{snap}/export?path=&format=tar|tar.zst`: a tar stream. A failure after
/// the headers are sent cuts the body short, so a client never takes a partial archive as whole.
pub(super) async fn export(
    State(st): State<Arc<AppState>>,
    P(snap): P<String>,
    Q(q): Q<ExportQuery>,
) -> Result<Response, ApiError> {
    let zstd = match q.format {
        None | Some(ExportFormat::Tar) => None,
        Some(ExportFormat::TarZst) => Some(3),
    };
    let rel = crate::base::path::from_text(q.path.as_deref().unwrap_or_default())?;
    let node = st.snapshot_node(snap.clone()).await?;
    let (info, rel) = st
        .blocking_on(node.clone(), move |_, repo| {
            let info = repo.resolve_snapshot(&snap, None)?;
            if !rel.is_empty() {
                repo.lookup(&info, &rel)?;
            }
            Ok::<_, Error>((info, rel))
        })
        .await?;
    let safe: String =
        info.workspace.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    let name = format!("{safe}-{}.{}", &info.id.as_str()[..12], if zstd.is_some() { "tar.zst" } else { "tar" });
    let body = super::stream::body_on(&st, node, move |_, repo, out| {
        repo.export(&info, &rel, out, zstd, &NoProgress).map(|_| ())
    });
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    let media = if zstd.is_some() { "application/zstd" } else { "application/x-tar" };
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}
