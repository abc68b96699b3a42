//! The Files API (`files-api.md`): a session's files listed and read from the live tree while it
//! is served, else from its latest snapshot, within the session's scope. Also the response
//! shapes the snapshots endpoints share: `{path, size, modifiedAt}` listings, JSON reads, and
//! binary downloads with the sha256 as `ETag`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use super::error::session_missing;
use super::extract::{FileTarget, P, Q};
use super::state::AppState;
use super::ApiError;
use crate::base::error::{Error, ErrorKind};
use crate::base::id::{NodeName, SessionId};
use crate::fs::live::{ChangePolicy, LiveFile, LiveRead, READ_LIMIT};
use crate::model::session::Session;
use crate::ops::source::{FileListing, Origin, Source, WorkspaceView};
use crate::repo::Repo;

/// The query of a session's file routes; its schema is the routes' documented parameters.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct FilesQuery {
    /// `live`, `latest` or a snapshot id (or a unique prefix of one); automatic when absent.
    #[schemars(regex(pattern = r"^(auto|live|sandbox|latest|snapshot|[0-9a-fA-F]{1,64})?$"))]
    source: Option<String>,
    /// `1` or `true`: the raw bytes instead of JSON.
    download: Option<Flag>,
    /// `retry` (default) or `abort`: what a change during the read does.
    change_policy: Option<ChangePolicy>,
}

/// A yes-or-no query value: `1` or `true`, `0` or `false`; anything else is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub(super) enum Flag {
    /// Yes.
    #[serde(rename = "1")]
    One,
    /// Yes.
    #[serde(rename = "true")]
    True,
    /// No.
    #[serde(rename = "0")]
    Zero,
    /// No.
    #[serde(rename = "false")]
    False,
}

impl Flag {
    /// Whether the value says yes.
    pub(super) fn on(self) -> bool {
        matches!(self, Flag::One | Flag::True)
    }
}

impl FilesQuery {
    fn source(&self) -> Source {
        Source::parse(self.source.as_deref().unwrap_or(""))
    }

    fn policy(&self) -> ChangePolicy {
        self.change_policy.unwrap_or_default()
    }
}

/// Whether a read asks for raw bytes: `?download=1|true`, or `Accept: application/octet-stream`.
pub(super) fn wants_download(download: Option<Flag>, headers: &HeaderMap) -> bool {
    download.is_some_and(Flag::on)
        || headers.get(header::ACCEPT).is_some_and(|a| a.as_bytes().starts_with(b"application/octet-stream"))
}

use crate::base::time::iso_time as iso;

/// A file read as JSON, in the Files API's shape (`files-api.md`).
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileRead<'a> {
    /// The file's workspace-relative path.
    path: String,
    /// The whole file, as UTF-8 text.
    content: String,
    /// Its size in bytes.
    size: usize,
    /// What answered.
    source: crate::ops::source::SourceKind,
    /// The snapshot that answered, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    snapshot: Option<&'a crate::base::id::SnapshotId>,
    /// The sha256 of the content (also the ETag).
    sha256: crate::object::Sha256,
    /// Its modification time, RFC 3339 UTC.
    modified_at: String,
}

/// `{"files": [...], "source": ..., "snapshot"?: id}`.
pub(super) fn listing(files: &[LiveFile], origin: &Origin) -> Response {
    Json(FileListing::of(files, origin)).into_response()
}

fn etag(read: &LiveRead) -> String {
    format!("\"{}\"", hex::encode(read.sha256))
}

/// A read as JSON (`content` must be UTF-8); downloads stream (`stream::download`).
pub(super) fn read_response(read: LiveRead, origin: &Origin) -> Response {
    let tag = etag(&read);
    let tag_value = HeaderValue::from_str(&tag).ok();
    let shown = String::from_utf8_lossy(&read.path).into_owned();
    let size = read.bytes.len();
    let content = match String::from_utf8(read.bytes) {
        Ok(s) => s,
        Err(_) => {
            return ApiError::new(
                ErrorKind::NotText,
                format!("'{shown}' is not UTF-8 text: download it with ?download=1"),
            )
            .into_response()
        }
    };
    let body = FileRead {
        path: shown,
        content,
        size,
        source: crate::ops::source::Answered::from(origin).source,
        snapshot: origin.snapshot_id(),
        sha256: read.sha256,
        modified_at: iso(read.mtime_ns),
    };
    let mut resp = Json(body).into_response();
    if let Some(t) = tag_value {
        resp.headers_mut().insert(header::ETAG, t);
    }
    resp
}

/// The session behind a Files API call; ended sessions stay readable from their snapshots.
pub(super) fn session_of(repo: &Repo, id: &SessionId) -> Result<Session, ApiError> {
    repo.session(id).map_err(session_missing)
}

/// A read or listing failure, with the seed's `error` strings: a source asked for by name that
/// is not there is the seed's "no workspace", its sentence (what to ask for instead) kept as
/// `message`.
fn file_error(e: Error) -> ApiError {
    const NO_WORKSPACE: &str = "No workspace available for this session";
    if e.kind() != ErrorKind::NotFound || e.message() == NO_WORKSPACE {
        return e.into();
    }
    if e.details().is_some_and(|d| d.contains_key("source")) {
        return ApiError::from(e).labelled(NO_WORKSPACE);
    }
    ApiError::from(e).labelled("File not found")
}

/// `GET /api/sessions/{id}/files`
pub(super) async fn list(
    State(st): State<Arc<AppState>>,
    P(id): P<SessionId>,
    Q(q): Q<FilesQuery>,
) -> Result<Response, ApiError> {
    let _busy = st.mark_busy(&id);
    let source = q.source();
    let sid = id.clone();
    // In a fleet, another node's session is read on its node (from its snapshots).
    let node = st.session_node(id.clone()).await?;
    let (files, origin) = st
        .blocking_on(node, move |st, repo| {
            crate::base::failpoint::panic_point("server:panic-blocking");
            let s = session_of(repo, &sid)?;
            let scope = s.scope()?;
            let ex = st.excludes(repo, &s.workspace)?;
            repo.list_files(&WorkspaceView::of_session(&s, &ex, &scope), &source).map_err(file_error)
        })
        .await?;
    st.touch(&id);
    Ok(listing(&files, &origin))
}

/// `GET /api/sessions/{id}/files/{*path}`
pub(super) async fn read(
    State(st): State<Arc<AppState>>,
    FileTarget { owner: id, path }: FileTarget<SessionId>,
    Q(q): Q<FilesQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let _busy = st.mark_busy(&id);
    let download = wants_download(q.download, &headers);
    let (source, policy) = (q.source(), q.policy());
    let sid = id.clone();
    let asked = path.clone();
    // In a fleet, another node's session is read on its node (from its snapshots).
    let node = st.session_node(id.clone()).await?;
    let read_on = node.clone();
    let outcome = if download {
        let open = super::stream::opener(move |st, repo| {
            let s = session_of(repo, &sid)?;
            let scope = s.scope()?;
            repo.open_file_from(&WorkspaceView::of_session(&s, &st.unused_excludes, &scope), &source, &path)
                .map_err(file_error)
        });
        super::stream::download_on(&st, node, open, policy, &headers).await
    } else {
        let work = move |st: &AppState, repo: &Repo| {
            crate::base::failpoint::panic_point("server:panic-inline");
            let s = session_of(repo, &sid)?;
            let scope = s.scope()?;
            let view = WorkspaceView::of_session(&s, &st.unused_excludes, &scope);
            repo.read_file_from(&view, &source, &path, READ_LIMIT, policy).map_err(file_error)
        };
        let read = match node {
            Some(node) => st.blocking_on(Some(node), work).await,
            None => st.inline(work),
        };
        read.map(|(read, origin)| read_response(read, &origin))
    };
    match outcome {
        Ok(resp) => {
            st.touch(&id);
            Ok(resp)
        }
        Err(e) => {
            if e.kind() == ErrorKind::PermissionDenied {
                audit_denial(&st, &id, read_on, &crate::base::path::display(&asked), e.message()).await;
            }
            Err(e)
        }
    }
}

/// Appends the audit record of a read refused for the session's scope (after the read's own
/// transaction, which a write may not nest in).
/// In a fleet, a read of another node's session (`node`) is refused here and recorded in this
/// node's log, naming the session's node.
async fn audit_denial(st: &Arc<AppState>, session: &SessionId, node: Option<NodeName>, path: &str, message: &str) {
    let (session, path, message, actor) =
        (session.clone(), path.to_string(), message.to_string(), super::request::actor());
    let workspace =
        st.blocking_on(node.clone(), move |_, repo| repo.session(&session).map(|s| (s.workspace, s.id))).await;
    let done = match workspace {
        Ok((workspace, session)) => {
            st.blocking(move |_, repo| {
                let mut rec = crate::model::audit::AuditRecord::ok(crate::base::time::now_ns(), &actor, "files_read");
                rec.outcome = ErrorKind::PermissionDenied.as_str().to_string();
                rec.workspace = Some(workspace);
                rec.session = Some(session);
                rec.path = Some(path.into_bytes());
                rec.details = match node {
                    Some(node) => serde_json::json!({ "message": message, "node": node.as_str() }),
                    None => serde_json::json!({ "message": message }),
                };
                repo.audit(rec)
            })
            .await
        }
        Err(e) => Err(e),
    };
    if let Err(e) = done {
        tracing::warn!(error = %e, "a scope denial could not be audited");
    }
}

/// `GET /api/sessions/{id}/files/`: the seed's "missing file path".
pub(super) async fn missing_path() -> ApiError {
    ApiError::new(ErrorKind::InvalidPath, "missing file path: give one after /files/")
}
