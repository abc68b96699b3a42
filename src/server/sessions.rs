//! The sessions API (`sessions-and-file-access.md`): create, list, get, delete (one or in bulk),
//! pause and resume. Ending a session snapshots it; nothing is ever deleted.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::extract::{P, Q};
use super::state::AppState;
use super::ApiError;
use crate::base::error::{Error, ErrorKind};
use crate::base::id::SessionId;
use crate::base::time::now_ns;
use crate::model::session::{parse_age, EndReason, SessionRecord, SessionSpec};
use crate::ops::session::workspace_dir;

/// `POST /v1/sessions`: every field optional, an empty body included.
pub(super) async fn create(
    State(st): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let actor = super::request::actor();
    let body = super::extract::body_of(body)?;
    let spec: SessionSpec = if body.iter().all(u8::is_ascii_whitespace) {
        SessionSpec::default()
    } else {
        super::extract::json_object(&body, "session")?
    };
    let record = st
        .blocking(move |st, repo| {
            let root = st.opts.workspaces.clone();
            let (s, token) = repo.create_session_with_token(&spec, |name| workspace_dir(&root, name), &actor)?;
            let mut record = st.record(&s);
            record.session_token = Some(token);
            Ok::<_, Error>(record)
        })
        .await?;
    Ok((StatusCode::CREATED, axum::Json(record)).into_response())
}

/// The query of `GET /v1/sessions`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    /// `true` also lists ended sessions (their files stay readable).
    include_ended: Option<bool>,
}

/// `GET /v1/sessions`
pub(super) async fn list(State(st): State<Arc<AppState>>, Q(q): Q<ListQuery>) -> Result<Response, ApiError> {
    let all = q.include_ended.unwrap_or(false);
    // In a fleet, every node's, each with its `node`.
    let records = st
        .blocking_fleet(move |st, views| {
            let mut records = Vec::new();
            for (node, repo) in views {
                let node = node.map(str::to_owned);
                records
                    .extend(repo.sessions(all)?.iter().map(|s| SessionRecord { node: node.clone(), ..st.record(s) }));
            }
            Ok::<_, Error>(records)
        })
        .await?;
    Ok(axum::Json(records).into_response())
}

/// `GET /v1/sessions/{id}`: 404 once the session has ended.
pub(super) async fn get(State(st): State<Arc<AppState>>, P(id): P<SessionId>) -> Result<Response, ApiError> {
    // In a fleet, found on any node.
    let record = st
        .blocking_found(
            (move |repo: &crate::repo::Repo| repo.active_session(&id), super::error::session_missing),
            (|s| s.created_ns, None),
            |st, repo, s| Ok::<_, ApiError>(SessionRecord { node: repo.node().map(str::to_owned), ..st.record(&s) }),
        )
        .await?;
    Ok(axum::Json(record).into_response())
}

/// `DELETE /v1/sessions/{id}`: 204, then 404 for the ended session.
pub(super) async fn delete(State(st): State<Arc<AppState>>, P(id): P<SessionId>) -> Result<Response, ApiError> {
    let actor = super::request::actor();
    let sid = id.clone();
    st.blocking(move |_, repo| repo.end_session(&sid, EndReason::Deleted, &actor)).await?;
    st.session_ended(&id);
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The query of `DELETE /v1/sessions`: at least one filter, or `all=true`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BulkQuery {
    /// `idle`: only sessions with no request in flight.
    status: Option<BulkStatus>,
    /// Only sessions created longer ago than this: seconds, or a number with s, m or h
    /// (`2h`, `1h30m`).
    #[schemars(regex(pattern = r"^([0-9]{1,6}|([0-9]{1,6}[smh]){1,3})$"))]
    older_than: Option<String>,
    /// Only the sessions of this workspace.
    #[schemars(length(min = 1, max = 200))]
    workspace: Option<String>,
    /// `true`: with no other filter, end every session (a bare DELETE is refused).
    all: Option<bool>,
}

/// Which sessions a bulk delete ends, by state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum BulkStatus {
    /// Sessions with no request in flight.
    Idle,
}

/// `DELETE /v1/sessions?status=idle&older_than=1h30m`: `{"deleted": n}`.
pub(super) async fn bulk_delete(State(st): State<Arc<AppState>>, Q(q): Q<BulkQuery>) -> Result<Response, ApiError> {
    let actor = super::request::actor();
    let idle_only = q.status == Some(BulkStatus::Idle);
    if q.status.is_none() && q.older_than.is_none() && q.workspace.is_none() && q.all != Some(true) {
        return Err(ApiError::new(
            ErrorKind::InvalidArgument,
            "DELETE /v1/sessions with no filter would end every session: add status=idle, older_than=..., workspace=..., or all=true",
        ));
    }
    if let Some(w) = &q.workspace {
        crate::model::session::check_workspace_name(w).map_err(|_| {
            ApiError::new(
                ErrorKind::InvalidArgument,
                format!("workspace={w:?} is no workspace name: give 1-200 printable characters without '/'"),
            )
        })?;
    }
    let older_than = q.older_than.as_deref().map(parse_age).transpose()?;
    let deleted = st
        .blocking(move |st, repo| {
            let now = now_ns();
            let mut n = 0;
            for s in repo.sessions(false)? {
                if q.workspace.as_ref().is_some_and(|w| *w != s.workspace) {
                    continue;
                }
                if idle_only && st.is_busy(&s.id) {
                    continue;
                }
                if let Some(age) = older_than {
                    let idle_ns = now.saturating_sub(st.last_activity(&s));
                    if (idle_ns.max(0) as u128) < age.as_nanos() {
                        continue;
                    }
                }
                match repo.end_session(&s.id, EndReason::Deleted, &actor) {
                    Ok(_) => {
                        st.session_ended(&s.id);
                        n += 1
                    }
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(n)
        })
        .await?;
    Ok(axum::Json(BulkDeleted { deleted }).into_response())
}

/// `POST /v1/sessions/{id}/pause`: snapshot, then stop serving the live tree.
pub(super) async fn pause(State(st): State<Arc<AppState>>, P(id): P<SessionId>) -> Result<Response, ApiError> {
    let actor = super::request::actor();
    let busy = st.mark_busy(&id);
    let sid = id.clone();
    let session = st.blocking(move |_, repo| repo.pause_session(&sid, &actor)).await?;
    st.session_ended(&id);
    // The answer describes the session once paused: this request no longer works on it.
    drop(busy);
    Ok(axum::Json(st.record(&session)).into_response())
}

/// `POST /v1/sessions/{id}/resume`: serve the live tree again.
pub(super) async fn resume(State(st): State<Arc<AppState>>, P(id): P<SessionId>) -> Result<Response, ApiError> {
    let actor = super::request::actor();
    let record = st.blocking(move |st, repo| Ok::<_, Error>(st.record(&repo.resume_session(&id, &actor)?))).await?;
    Ok(axum::Json(record).into_response())
}

/// The answer to `DELETE /v1/sessions?...`: how many sessions ended.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub(super) struct BulkDeleted {
    /// How many sessions ended.
    deleted: usize,
}
