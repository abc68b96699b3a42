//! Errors over HTTP: the one mapping from `ErrorKind` to a status code, and the REST error body
//! `{"error": "<message>", "kind": "<kind>", "statusCode": N}` of DESIGN.md.
//!
//! Where a seed fixes the `error` string ("Forbidden", "File not found", "Session not found"),
//! that string is `error` and trove's own sentence, naming the path or id, goes in `message`.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::{Error, ErrorKind};

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
        ErrorKind::Timeout => StatusCode::SERVICE_UNAVAILABLE,
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

    pub fn kind(&self) -> ErrorKind {
        self.kind
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({
            "error": self.error,
            "kind": self.kind.as_str(),
            "statusCode": self.status.as_u16(),
        });
        if let Some(obj) = body.as_object_mut() {
            if let Some(m) = self.message {
                obj.insert("message".into(), json!(m));
            }
            for (k, v) in self.details.into_iter().flatten() {
                obj.entry(k).or_insert(v);
            }
        }
        let mut resp = (self.status, axum::Json(body)).into_response();
        if self.kind == ErrorKind::Unauthorized {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        }
        resp
    }
}
