//! The sandbox file API over HTTP (`sandbox-file-operations.md`): `POST /v1/file/{op}` for a
//! client written against the seed, authenticated by its session token, and the same
//! operations at `/v1/sessions/{id}/file/{op}` for an operator. Expected failures answer 200
//! with `success: false` and the seed's error data; a malformed request answers 400 and an
//! unknown session 404, in the same wrapper. Downloads stream (`GET .../file/download`), and
//! uploads (`POST .../file/upload`, multipart) are stored as they arrive.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{P, Q};
use super::request::ACTOR;
use super::state::AppState;
use crate::base::error::{Error, ErrorKind, Result};
use crate::base::id::SessionId;
use crate::fs::live::ChangePolicy;
use crate::tools::fileapi::ops::{
    FindRequest, GlobRequest, GrepRequest, ListRequest, ReadRequest, ReplaceRequest, SearchRequest, WriteRequest,
};
use crate::tools::fileapi::{FileReply, Sandbox};

/// The session a session token stands for, set by [`require_session_token`].
#[derive(Debug, Clone)]
pub(super) struct TokenSession(pub SessionId);

/// Middleware of the bare `/v1/file/*` routes: the bearer must be a live session token; its
/// session is what the request reaches, and `session:<id>` is its actor.
pub(super) async fn require_session_token(State(st): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let presented = super::auth::bearer(req.headers());
    // The wrapped operations answer in their wrapper; download and watch, as the seed says, in
    // plain HTTP errors.
    let p = req.uri().path();
    let wrapped = p.starts_with("/v1/file/") && !(p.ends_with("/download") || p.starts_with("/v1/file/watch"));
    let refused = |message: &str| {
        let e = Error::new(ErrorKind::Unauthorized, message);
        if wrapped {
            (StatusCode::UNAUTHORIZED, Json(FileReply::<()>::err("authenticate", "", &e))).into_response()
        } else {
            ApiError::from(e).into_response()
        }
    };
    let Some(token) = presented else {
        super::auth::audit_refusal(&st, &req, "missing token", "session").await;
        return refused(
            "missing bearer token: send 'Authorization: Bearer <session token>' (returned when the session was created)",
        );
    };
    match st.tokens.check_session(&token) {
        Ok(Some(id)) => {
            let Some(slot) = st.session_slot(&id) else {
                let e = Error::new(
                    ErrorKind::Busy,
                    format!(
                        "session {id} has {} requests in flight already (--session-requests): wait for one to finish",
                        st.opts.session_requests
                    ),
                );
                return ApiError::from(e).into_response();
            };
            let actor = format!("session:{id}");
            req.extensions_mut().insert(TokenSession(id));
            let resp = ACTOR.scope(actor, next.run(req)).await;
            super::held::Held::response(resp, slot)
        }
        Ok(None) => {
            super::auth::audit_refusal(&st, &req, "unknown or revoked token", "session").await;
            refused(
                "unknown or revoked session token: a session's token stops working when it ends; \
                 operators use /v1/sessions/{id}/file/... with their own token",
            )
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// A request that names the path its failure reports.
trait Named {
    fn named(&self) -> &str;
}

macro_rules! named {
    ($($t:ty => $f:ident),* $(,)?) => {
        $(impl Named for $t { fn named(&self) -> &str { &self.$f } })*
    };
}
named!(
    ReadRequest => file, WriteRequest => file, ReplaceRequest => file, SearchRequest => file,
    FindRequest => path, GrepRequest => path, GlobRequest => path, ListRequest => path,
);

/// The path a malformed body named, for its error.
fn named_in(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    ["file", "path"].iter().find_map(|k| v.get(k).and_then(|p| p.as_str())).unwrap_or("").to_string()
}

/// An answer with its status.
fn answer<T: Serialize>(status: StatusCode, reply: FileReply<T>) -> Response {
    (status, Json(reply)).into_response()
}

/// Runs one JSON operation on session `id`: parse, carry out on the blocking pool with the
/// session's sandbox, answer in the wrapper.
async fn run<Req, Data>(
    st: Arc<AppState>,
    id: SessionId,
    op: &'static str,
    ok: &'static str,
    body: std::result::Result<Bytes, BytesRejection>,
    f: fn(&Sandbox<'_>, &Req) -> Result<Data>,
) -> Response
where
    Req: DeserializeOwned + Named + Send + 'static,
    Data: Serialize + Send + 'static,
{
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            let err = Error::new(ErrorKind::TooLarge, format!("the request body was refused: {}", e.body_text()));
            return answer(e.status(), FileReply::<()>::err(op, "", &err));
        }
    };
    let req: Req = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            let err = Error::invalid_argument(format!("the {op} request is not valid: {e}"));
            return answer(StatusCode::BAD_REQUEST, FileReply::<()>::err(op, &named_in(&body), &err));
        }
    };
    let actor = super::request::actor();
    let _busy = st.mark_busy(&id);
    let sid = id.clone();
    // In a fleet, another node's session is that node's sandbox, on its host.
    if let Err(e) = st.sandbox_here(&id).await {
        return answer(super::error::status_of(e.kind()), FileReply::<()>::err(op, req.named(), &e));
    }
    let done = st
        .blocking(move |st, repo| -> std::result::Result<(StatusCode, FileReply<Data>), Error> {
            let s = match repo.session(&sid) {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    return Ok((StatusCode::NOT_FOUND, FileReply::err(op, req.named(), &e)));
                }
                Err(e) => return Err(e),
            };
            let sandbox = Sandbox::new(repo, &s, &actor, &st.opts.sandbox_root);
            match f(&sandbox, &req) {
                // Out of time is the request's fate: a status, saying nothing changed.
                Err(e) if e.kind() == ErrorKind::Timeout => Err(e),
                r => Ok((StatusCode::OK, FileReply::of(op, req.named(), ok, r))),
            }
        })
        .await;
    st.touch(&id);
    match done {
        Ok((status, reply)) => answer(status, reply),
        Err(e) => ApiError::from(e).into_response(),
    }
}

macro_rules! operations {
    ($($op:ident, $bare:ident, $req:ty, $name:literal, $ok:literal, $method:ident);* $(;)?) => {
        $(
            /// The operation at `/v1/sessions/{id}/file/...` (operator token).
            pub(super) async fn $op(
                State(st): State<Arc<AppState>>,
                P(id): P<SessionId>,
                body: std::result::Result<Bytes, BytesRejection>,
            ) -> Response {
                run::<$req, _>(st, id, $name, $ok, body, |s, r| s.$method(r)).await
            }

            /// The operation at `/v1/file/...` (session token).
            pub(super) async fn $bare(
                State(st): State<Arc<AppState>>,
                Extension(TokenSession(id)): Extension<TokenSession>,
                body: std::result::Result<Bytes, BytesRejection>,
            ) -> Response {
                run::<$req, _>(st, id, $name, $ok, body, |s, r| s.$method(r)).await
            }
        )*
    };
}

operations!(
    read, bare_read, ReadRequest, "read", "File read successfully", read;
    write, bare_write, WriteRequest, "write", "File written successfully", write;
    replace, bare_replace, ReplaceRequest, "replace", "Text replaced successfully", replace;
    search, bare_search, SearchRequest, "search", "File searched successfully", search;
    find, bare_find, FindRequest, "find", "Files found successfully", find;
    grep, bare_grep, GrepRequest, "grep", "Files searched successfully", grep;
    glob, bare_glob, GlobRequest, "glob", "Files matched successfully", glob;
    list, bare_list, ListRequest, "list", "Directory listed successfully", list;
);

/// The query of `GET .../file/download`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DownloadQuery {
    /// The file: workspace-relative, or absolute under the sandbox root.
    #[schemars(schema_with = "crate::tools::fileapi::path_schema")]
    path: String,
    /// The file's exact workspace-relative path bytes in standard base64, for a name that is
    /// not UTF-8; given, it is the file, not `path`.
    path_base64: Option<String>,
    /// `retry` (default) or `abort`: with `abort`, a file that changes before or during the
    /// transfer answers 409 (or cuts the body short of its length).
    change_policy: Option<ChangePolicy>,
}

/// `GET /v1/sessions/{id}/file/download?path=...`
pub(super) async fn download(
    State(st): State<Arc<AppState>>,
    P(id): P<SessionId>,
    Q(q): Q<DownloadQuery>,
    headers: HeaderMap,
) -> std::result::Result<Response, ApiError> {
    download_from(st, id, q, headers).await
}

/// `GET /v1/file/download?path=...`
pub(super) async fn bare_download(
    State(st): State<Arc<AppState>>,
    Extension(TokenSession(id)): Extension<TokenSession>,
    Q(q): Q<DownloadQuery>,
    headers: HeaderMap,
) -> std::result::Result<Response, ApiError> {
    download_from(st, id, q, headers).await
}

async fn download_from(
    st: Arc<AppState>,
    id: SessionId,
    q: DownloadQuery,
    headers: HeaderMap,
) -> std::result::Result<Response, ApiError> {
    let _busy = st.mark_busy(&id);
    st.sandbox_here(&id).await?;
    let policy = q.change_policy.unwrap_or_default();
    let (sid, given, exact) = (id.clone(), q.path.clone(), q.path_base64.clone());
    let open = super::stream::opener(move |st, repo| {
        let s = super::files::session_of(repo, &sid)?;
        let sandbox = Sandbox::new(repo, &s, "", &st.opts.sandbox_root);
        let (rel, _) = sandbox.rel_exact(&given, exact.as_deref())?;
        let scope = s.scope()?;
        let view = crate::ops::source::WorkspaceView::of_session(&s, &st.unused_excludes, &scope);
        repo.open_file_from(&view, &crate::ops::source::Source::Auto, &rel).map_err(ApiError::from)
    });
    let resp = super::stream::download(&st, open, policy, &headers).await;
    st.touch(&id);
    resp
}

/// `POST /v1/sessions/{id}/file/upload` (multipart: `file`, then or before it `path`).
pub(super) async fn upload(
    State(st): State<Arc<AppState>>,
    P(id): P<SessionId>,
    multipart: std::result::Result<axum::extract::Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    super::upload::receive(st, id, multipart).await
}

/// `POST /v1/file/upload`
pub(super) async fn bare_upload(
    State(st): State<Arc<AppState>>,
    Extension(TokenSession(id)): Extension<TokenSession>,
    multipart: std::result::Result<axum::extract::Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    super::upload::receive(st, id, multipart).await
}
