//! The agent file tools over HTTP: `POST /v1/sessions/{id}/tools/{tool}` with the tool's JSON
//! parameters (answered 200 with the tool result envelope), and conditional writes on the
//! Files API path: `PUT` with `If-Match: <sha256>` or `If-None-Match: *`, and `DELETE`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{json, Value};

use super::error::tool_envelope;
use super::error::ApiError;
use super::extract::FileTarget;
use super::extract::{body_of, P};
use super::files::session_of;
use super::state::AppState;
use crate::base::error::{Error, ErrorKind};
use crate::base::id::SessionId;
use crate::tools::{mutate, ToolCall};

/// `POST /v1/sessions/{id}/tools/{tool}`: request-level problems (unknown session or tool, a
/// body that is not the tool's parameters) answer with their status; everything the tool
/// itself decides answers 200 with `{"ok": false, "error": ...}`.
pub(super) async fn call(
    State(st): State<Arc<AppState>>,
    P((id, tool)): P<(SessionId, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let actor = super::request::actor();
    let body = body_of(body)?;
    let params: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| Error::invalid_argument(format!("the body is not JSON parameters for {tool}: {e}")))?
    };
    let call = ToolCall::parse(&tool, params)?;
    let _busy = st.mark_busy(&id);
    let sid = id.clone();
    let result = st
        .blocking(move |_, repo| {
            let s = session_of(repo, &sid)?;
            match repo.run_tool(&s, call, &actor) {
                // Out of time is the request's fate, not the tool's answer: a status, saying
                // nothing changed.
                Err(e) if e.kind() == ErrorKind::Timeout => Err(ApiError::from(e)),
                result => Ok::<_, ApiError>(tool_envelope(&result)),
            }
        })
        .await?;
    st.touch(&id);
    Ok(axum::Json(result).into_response())
}

/// The tools name paths in JSON strings: a write to a name that is not UTF-8 is refused.
fn utf8_path(path: Vec<u8>) -> Result<String, ApiError> {
    String::from_utf8(path).map_err(|e| {
        ApiError::new(
            ErrorKind::InvalidPath,
            format!("'{}' is not UTF-8: files are written by UTF-8 names", String::from_utf8_lossy(e.as_bytes())),
        )
    })
}

/// An entity tag as sent: quotes and a weak prefix are dropped.
fn etag(v: &HeaderValue) -> Result<String, ApiError> {
    let s = v.to_str().map_err(|_| Error::invalid_argument("If-Match is not ASCII"))?.trim();
    Ok(s.trim_start_matches("W/").trim_matches('"').to_ascii_lowercase())
}

/// `If-Match: *` (RFC 9110: any current representation matches) as the sha256 the file has
/// now; nothing there fails the precondition (412) as HTTP says.
fn any_current(
    s: &crate::model::session::Session,
    path: &str,
    expected: Option<String>,
) -> Result<Option<String>, ApiError> {
    if expected.as_deref() != Some("*") {
        return Ok(expected);
    }
    let rel = crate::base::path::normalize_nonempty(path.as_bytes())?;
    // The scope first: the answer must not tell what lies outside it.
    s.scope()?.check_write(&rel)?;
    let cur = crate::fs::workdir::WorkDir::open(&s.live_dir)?.current(&rel)?;
    match cur {
        Some(c) => Ok(Some(hex::encode(c.sha256))),
        None => Err(ApiError::from(crate::journal::stale(&rel, None, Some("*")))),
    }
}

/// `PUT /v1/sessions/{id}/files/{*path}`: the body becomes the file. `If-Match: <sha256>`
/// overwrites only that content (412 otherwise); `If-None-Match: *` creates only (412 if
/// anything is there, as HTTP specifies). Without either the write is refused 412: a blind
/// overwrite is what the stale-file protocol exists to prevent.
pub(super) async fn put(
    State(st): State<Arc<AppState>>,
    FileTarget { owner: id, path }: FileTarget<SessionId>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let actor = super::request::actor();
    let path = utf8_path(path)?;
    let body = body_of(body)?;
    let create = headers.get(header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes() == b"*");
    let expected = headers.get(header::IF_MATCH).map(etag).transpose()?;
    let content = base64::engine::general_purpose::STANDARD.encode(&body);
    let _busy = st.mark_busy(&id);
    let sid = id.clone();
    let data = st
        .blocking(move |_, repo| {
            let s = session_of(repo, &sid)?;
            let call = if create {
                ToolCall::CreateFile(mutate::CreateFile { path, content, encoding: Some("base64".into()) })
            } else {
                let expected_sha256 = any_current(&s, &path, expected)?;
                ToolCall::WriteFile(mutate::WriteFile {
                    path,
                    content,
                    encoding: Some("base64".into()),
                    expected_sha256,
                })
            };
            repo.run_tool(&s, call, &actor).map_err(|e| {
                let conditional = create && e.kind() == ErrorKind::AlreadyExists;
                let api = ApiError::from(e);
                if conditional {
                    api.with_status(StatusCode::PRECONDITION_FAILED)
                } else {
                    api
                }
            })
        })
        .await?;
    st.touch(&id);
    let status = if create { StatusCode::CREATED } else { StatusCode::OK };
    let mut resp = (status, axum::Json(&data)).into_response();
    if let Some(tag) = data["sha256"].as_str().and_then(|s| HeaderValue::from_str(&format!("\"{s}\"")).ok()) {
        resp.headers_mut().insert(header::ETAG, tag);
    }
    Ok(resp)
}

/// `DELETE /v1/sessions/{id}/files/{*path}`: into the trash; `If-Match` makes it conditional.
pub(super) async fn delete(
    State(st): State<Arc<AppState>>,
    FileTarget { owner: id, path }: FileTarget<SessionId>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let actor = super::request::actor();
    let path = utf8_path(path)?;
    let expected = headers.get(header::IF_MATCH).map(etag).transpose()?;
    let _busy = st.mark_busy(&id);
    let sid = id.clone();
    let data = st
        .blocking(move |_, repo| {
            let s = session_of(repo, &sid)?;
            let expected_sha256 = any_current(&s, &path, expected)?;
            let call = ToolCall::DeleteFile(mutate::DeleteFile { path, expected_sha256 });
            repo.run_tool(&s, call, &actor).map_err(ApiError::from)
        })
        .await?;
    st.touch(&id);
    Ok(axum::Json(data).into_response())
}
