//! Errors over HTTP: the one mapping from `ErrorKind` to a status code, and the REST error body
//! `{"error": "<message>", "kind": "<kind>", "statusCode": N}` of DESIGN.md.
//!
//! Where a seed fixes the `error` string ("Forbidden", "File not found", "Session not found"),
//! that string is `error` and trove's own sentence, naming the path or id, goes in `message`.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::base::error::{Error, ErrorKind};

/// The HTTP status of each error kind: the only place it is decided.
pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::InvalidPath
        | ErrorKind::InvalidArgument
        | ErrorKind::TooDeep
        | ErrorKind::NameTooLong
        | ErrorKind::TooLarge
        | ErrorKind::IsDirectory
        | ErrorKind::NotText => StatusCode::BAD_REQUEST,
        ErrorKind::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::AlreadyExists | ErrorKind::Conflict | ErrorKind::ReadOnly => StatusCode::CONFLICT,
        ErrorKind::StaleFile => StatusCode::PRECONDITION_FAILED,
        ErrorKind::PatchFailed => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorKind::Timeout | ErrorKind::Busy => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Corrupt | ErrorKind::Io | ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// An error on its way to becoming a response.
#[derive(Debug)]
pub struct ApiError {
    kind: ErrorKind,
    /// The `error` field: the seed's fixed string, or the message itself.
    error: String,
    /// trove's sentence when `error` is a fixed string.
    message: Option<String>,
    status: StatusCode,
    /// The error's structured details (`currentSha256`...), merged into the body.
    details: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ApiError {
    /// An error answer of `kind`, with the status the kind maps to.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError { kind, error: message.into(), message: None, status: status_of(kind), details: None }
    }

    /// Puts the seed's fixed `label` in `error`, keeping the sentence as `message`.
    pub fn labelled(mut self, label: &str) -> ApiError {
        let sentence = std::mem::replace(&mut self.error, label.to_string());
        self.message = Some(sentence);
        self
    }

    /// For answers no error kind describes (405).
    pub fn with_status(mut self, status: StatusCode) -> ApiError {
        self.status = status;
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The sentence for people (the fixed seed string's `message`, or `error` itself).
    pub fn message(&self) -> &str {
        self.message.as_deref().unwrap_or(&self.error)
    }
}

/// A failure to find a session as the seed answers it: "Session not found".
pub(super) fn session_missing(e: Error) -> ApiError {
    match e.kind() {
        ErrorKind::NotFound => ApiError::from(e).labelled("Session not found"),
        _ => e.into(),
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        let mut api = ApiError::new(e.kind(), e.message());
        api.details = e.details().cloned();
        // The scope seed fixes the body of a denial.
        if e.kind() == ErrorKind::PermissionDenied {
            return api.labelled("Forbidden");
        }
        api
    }
}

/// Absolute paths of this server (the repository, the workspaces directory) that no answer may
/// show: set once when the server starts.
static SERVER_PATHS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Records the server's own paths, as given and canonicalized, for `redact`.
pub(crate) fn hide_paths(paths: &[&std::path::Path]) {
    let mut all: Vec<String> = Vec::new();
    for p in paths {
        let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        for q in [p.to_path_buf(), abs.clone(), std::fs::canonicalize(&abs).unwrap_or(abs)] {
            let text = q.to_string_lossy().trim_end_matches('/').to_string();
            if text.len() > 1 && !all.contains(&text) {
                all.push(text);
            }
        }
    }
    // Longest first, so a path is replaced whole before a prefix of it is.
    all.sort_by_key(|p| std::cmp::Reverse(p.len()));
    let _ = SERVER_PATHS.set(all);
}

/// A tool's result as the tools endpoint answers it (`tools::envelope`), with the same care
/// as error bodies: a failure of the server itself is named by the request's id, its details
/// logged; no server path is shown.
pub(crate) fn tool_envelope<T>(result: crate::base::error::Result<T>) -> crate::tools::ToolReply<T> {
    let mut reply = crate::tools::envelope(result);
    if let Some(err) = &mut reply.error {
        if matches!(err.kind, ErrorKind::Io | ErrorKind::Internal) {
            let id = super::request::current().map(|r| r.id).unwrap_or_default();
            tracing::error!(request = %id, kind = %err.kind, error = %err.message, "tool failed");
            err.message = format!("{} error: the server logged the details under request id {id}", err.kind);
            err.request_id = Some(id);
        } else {
            err.message = redact(&err.message);
        }
    }
    reply
}

/// `text` with every server path replaced by a placeholder.
fn redact(text: &str) -> String {
    let mut out = text.to_string();
    for p in SERVER_PATHS.get().into_iter().flatten() {
        out = out.replace(p.as_str(), "<server path>");
    }
    out
}

/// The body of every error answer (`files-api.md`'s `error` and `statusCode`, plus trove's
/// `kind`, and the error's structured details such as `currentSha256`).
#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ErrorBody {
    /// What went wrong, for people (`files-api.md`'s `error`).
    error: String,
    /// What went wrong, for programs.
    kind: ErrorKind,
    /// The HTTP status, repeated.
    status_code: u16,
    /// More for people, when there is more.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    /// A failure of the server: the id its log names the details under.
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
    /// The error's structured details (`currentSha256`, `path`...).
    #[serde(flatten)]
    details: serde_json::Map<String, serde_json::Value>,
}

impl ApiError {
    /// The status, and the sentence a client may read: a failure of the server itself says
    /// nothing of its internals (the details, paths, sources and panic text, go to the log
    /// under the request's id), and paths of the server's own are redacted.
    pub(super) fn public(&self) -> (StatusCode, String) {
        let text = self.logged_if_internal().unwrap_or_else(|| redact(self.message()));
        (self.status, text)
    }

    /// For a failure of the server itself: logs it under the request's id, and the sentence
    /// that says only that; None for any other error.
    fn logged_if_internal(&self) -> Option<String> {
        if !matches!(self.kind, ErrorKind::Io | ErrorKind::Internal) {
            return None;
        }
        let id = super::request::current().map(|r| r.id).unwrap_or_default();
        tracing::error!(request = %id, kind = %self.kind, error = %self.error, "request failed");
        Some(format!("{} error: the server logged the details under request id {id}", self.kind))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let request = super::request::current().map(|r| r.id);
        // A failure of the server itself says nothing of its internals: the details (paths,
        // sources, panic text) go to the log under the request's id.
        let internal = matches!(self.kind, ErrorKind::Io | ErrorKind::Internal);
        let error = self.logged_if_internal().unwrap_or_else(|| redact(&self.error));
        // Details never override the body's own fields, and their text is redacted too.
        let own = ["error", "kind", "statusCode", "message", "requestId"];
        let details = self
            .details
            .into_iter()
            .flatten()
            .filter(|(k, _)| !own.contains(&k.as_str()))
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => (k, serde_json::Value::String(redact(&s))),
                other => (k, other),
            })
            .collect();
        let body = ErrorBody {
            error,
            kind: self.kind,
            status_code: self.status.as_u16(),
            message: self.message.filter(|_| !internal).map(|m| redact(&m)),
            request_id: request.filter(|_| self.status.is_server_error()),
            details,
        };
        let mut resp = (self.status, axum::Json(body)).into_response();
        if self.kind == ErrorKind::Unauthorized {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        }
        // A limit reached now is free again shortly: clients that honour this retry by themselves.
        if self.kind == ErrorKind::Busy {
            resp.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        resp
    }
}
