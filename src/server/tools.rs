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
    if tool == crate::tools::files::NAME {
        return files(st, id, params, actor).await;
    }
    let call = ToolCall::parse(&tool, params)?;
    let _busy = st.mark_busy(&id);
    let sid = id.clone();
    let result = st
        .blocking(move |_, repo| {
            let s = session_of(repo, &sid)?;
            match crate::tools::run(repo, &s, call, &actor) {
                // Out of time is the request's fate, not the tool's answer: a status, saying
                // nothing changed.
                Err(e) if e.kind() == ErrorKind::Timeout => Err(ApiError::from(e)),
                result => Ok::<_, ApiError>(tool_envelope(result)),
            }
        })
        .await?;
    st.touch(&id);
    Ok(axum::Json(result).into_response())
}

/// `POST /v1/sessions/{id}/tools/files`: the unified `files` tool, `{"params": {"command": ...}}`.
async fn files(st: Arc<AppState>, id: SessionId, params: Value, actor: String) -> Result<Response, ApiError> {
    let call: crate::tools::files::FilesCall = serde_json::from_value(params)
        .map_err(|e| Error::invalid_argument(format!("bad parameters for files: {e}")))?;
    let _busy = st.mark_busy(&id);
    let sid = id.clone();
    let result = st
        .blocking(move |st, repo| {
            let s = session_of(repo, &sid)?;
            let sandbox = crate::tools::fileapi::Sandbox::new(repo, &s, &actor, &st.opts.sandbox_root);
            match crate::tools::files::files(&sandbox, &call) {
                Err(e) if e.kind() == ErrorKind::Timeout => Err(ApiError::from(e)),
                result => Ok::<_, ApiError>(tool_envelope(result)),
            }
        })
        .await?;
    st.touch(&id);
    Ok(axum::Json(result).into_response())
}

/// What `If-Match` may hold: `*`, an entity tag (`"..."`, weak or not: the file's ETag is its
/// sha256 in quotes), or a bare sha256. An empty value is no precondition, as if it were absent.
pub(super) const IF_MATCH_PATTERN: &str = r#"^\s*(\*|(W/)?"[\x21\x23-\x7e]*"|[0-9a-fA-F]{64})?\s*$"#;

/// What `If-None-Match` may hold on a write: `*` (create only), or nothing.
pub(super) const IF_NONE_MATCH_PATTERN: &str = r"^\s*\*?\s*$";

/// A precondition header, `None` when absent or empty.
fn precondition(headers: &HeaderMap, name: header::HeaderName) -> Option<&HeaderValue> {
    headers.get(name).filter(|v| !v.as_bytes().trim_ascii().is_empty())
}

/// The entity tag (lowercased: a sha256 in hex is what matches) or `*` an `If-Match` header
/// names. A well-formed tag that is not the file's fails the precondition (412) as HTTP says;
/// a malformed header is refused (400), never taken for a mismatch.
fn etag(v: &HeaderValue) -> Result<String, ApiError> {
    let refused =
        || Error::invalid_argument("If-Match must be '*' or an entity tag: the file's ETag, its sha256 in quotes");
    let s = v.to_str().map_err(|_| refused())?.trim();
    if s == "*" {
        return Ok(s.to_string());
    }
    let quoted = s.strip_prefix("W/").unwrap_or(s).strip_prefix('"').and_then(|t| t.strip_suffix('"'));
    let tag = match quoted {
        Some(inner) if inner.bytes().all(|b| b == 0x21 || (0x23..=0x7e).contains(&b)) => inner,
        None if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => s,
        _ => return Err(refused().into()),
    };
    Ok(tag.to_ascii_lowercase())
}

/// `If-Match: *` (RFC 9110: any current representation matches) as the sha256 the file has
/// now; nothing there fails the precondition (412) as HTTP says.
fn any_current(
    s: &crate::model::session::Session,
    path: &[u8],
    expected: Option<String>,
) -> Result<Option<String>, ApiError> {
    if expected.as_deref() != Some("*") {
        return Ok(expected);
    }
    let rel = crate::base::path::normalize_nonempty(path)?;
    // The scope first: the answer must not tell what lies outside it.
    s.scope()?.check_write(&rel)?;
    let cur = crate::fs::workdir::WorkDir::open(&s.live_dir)?.current(&rel)?;
    match cur {
        Some(c) => Ok(Some(hex::encode(c.sha256))),
        None => Err(ApiError::from(crate::ops::journal::stale(&rel, None, Some("*")))),
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
    let body = body_of(body)?;
    let create = match precondition(&headers, header::IF_NONE_MATCH) {
        None => false,
        Some(v) if v.as_bytes().trim_ascii() == b"*" => true,
        Some(_) => {
            return Err(Error::invalid_argument(
                "If-None-Match on a write must be '*' (create only); use If-Match to overwrite a known content",
            )
            .into())
        }
    };
    let expected = precondition(&headers, header::IF_MATCH).map(etag).transpose()?;
    let content = base64::engine::general_purpose::STANDARD.encode(&body);
    let _busy = st.mark_busy(&id);
    let sid = id.clone();
    let data = st
        .blocking(move |_, repo| {
            let s = session_of(repo, &sid)?;
            let expected_sha256 = if create { None } else { any_current(&s, &path, expected)? };
            // The exact bytes go with a name that is not UTF-8.
            let (path, path_base64) = crate::base::path::for_json(&path);
            let call = if create {
                ToolCall::CreateFile(mutate::CreateFile { path, path_base64, content, encoding: Some("base64".into()) })
            } else {
                ToolCall::WriteFile(mutate::WriteFile {
                    path,
                    path_base64,
                    content,
                    encoding: Some("base64".into()),
                    expected_sha256,
                    blind: false,
                })
            };
            crate::tools::run(repo, &s, call, &actor).map_err(|e| {
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
    if let Some(tag) = data.sha256().and_then(|s| HeaderValue::from_str(&format!("\"{s}\"")).ok()) {
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
    let expected = precondition(&headers, header::IF_MATCH).map(etag).transpose()?;
    let _busy = st.mark_busy(&id);
    let sid = id.clone();
    let data = st
        .blocking(move |_, repo| {
            let s = session_of(repo, &sid)?;
            let expected_sha256 = any_current(&s, &path, expected)?;
            let (path, path_base64) = crate::base::path::for_json(&path);
            let call = ToolCall::DeleteFile(mutate::DeleteFile { path, path_base64, expected_sha256 });
            crate::tools::run(repo, &s, call, &actor).map_err(ApiError::from)
        })
        .await?;
    st.touch(&id);
    Ok(axum::Json(data).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_if_match_pattern_is_what_is_taken() {
        let pattern = regex::Regex::new(IF_MATCH_PATTERN).expect("pattern");
        let hex = "0123456789abcdef".repeat(4);
        let upper = hex.to_ascii_uppercase();
        let good = [
            String::new(),
            " ".to_string(),
            "*".to_string(),
            "\"0000\"".to_string(),
            "W/\"\"".to_string(),
            hex.clone(),
            format!("\"{hex}\""),
            format!("W/\"{upper}\""),
        ];
        let bad = [
            "**".to_string(),
            format!("W/{hex}"),
            format!("\"{hex}"),
            "\"".to_string(),
            "\"a b\"".to_string(),
            "0000".to_string(),
            hex[1..].to_string(),
            format!("{hex}0"),
            format!("\"\"{hex}\"\""),
            "g".repeat(64),
        ];
        for v in good.iter().chain(&bad) {
            let mut headers = HeaderMap::new();
            headers.insert(header::IF_MATCH, HeaderValue::from_str(v).expect("header"));
            let taken = precondition(&headers, header::IF_MATCH).map(etag).transpose().ok();
            assert_eq!(pattern.is_match(v), taken.is_some(), "{v:?}");
        }
        assert_eq!(etag(&HeaderValue::from_str(&format!("W/\"{upper}\"")).expect("h")).ok(), Some(hex));
    }
}
