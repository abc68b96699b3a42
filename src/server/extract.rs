//! Request extractors whose rejections are trove errors, so a malformed path segment or query
//! answers with the REST error body like every other failure.

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::ApiError;
use crate::base::error::ErrorKind;
use crate::base::id::SessionId;

/// Path parameters, percent-decoded; one that is not UTF-8 is `invalid_path`.
pub(crate) struct P<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for P<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| P(v))
            .map_err(|e| ApiError::new(ErrorKind::InvalidPath, format!("bad path in the URL: {}", e.body_text())))
    }
}

/// Query parameters; a malformed one is `invalid_argument`.
pub(crate) struct Q<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| Q(v))
            .map_err(|e| ApiError::new(ErrorKind::InvalidArgument, format!("bad query: {}", e.body_text())))
    }
}

/// A request body, or the refusal of one (over the body limit: 413 `too_large`) as an error body.
pub(crate) fn body_of(
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<axum::body::Bytes, ApiError> {
    body.map_err(|e| {
        ApiError::new(ErrorKind::TooLarge, format!("the request body was refused: {}", e.body_text()))
            .with_status(e.status())
    })
}

/// A JSON object body of `what` as `T`: an array of the fields in order (which serde would
/// take) or anything else is refused, naming what was wrong.
pub(crate) fn json_object<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, ApiError> {
    let invalid = |e: &dyn std::fmt::Display| {
        ApiError::new(ErrorKind::InvalidArgument, format!("the {what} body is not valid: {e}"))
    };
    match serde_json::from_slice::<serde_json::Value>(body).map_err(|e| invalid(&e))? {
        v @ serde_json::Value::Object(_) => serde_json::from_value(v).map_err(|e| invalid(&e)),
        _ => Err(invalid(&"give the fields as a JSON object")),
    }
}

/// The owner (session or snapshot) and the file of a `/…/{owner}/files/{*path}` route, read from
/// the raw request target with `path::from_url`: the file path is decoded to bytes (a name that
/// is not UTF-8 can be asked for), and a backslash or a malformed escape is refused, in one
/// place, before any handler runs.
pub(crate) struct FileTarget<O = String> {
    pub owner: O,
    pub path: Vec<u8>,
}

/// What names the owner of a file route: a session's id (parsed here, so a malformed one is
/// refused before any handler runs) or a snapshot reference (an id or a prefix, resolved later).
pub(crate) trait Owner: Sized {
    fn parse(text: String) -> Result<Self, ApiError>;
}

impl Owner for String {
    fn parse(text: String) -> Result<String, ApiError> {
        Ok(text)
    }
}

impl Owner for SessionId {
    fn parse(text: String) -> Result<SessionId, ApiError> {
        Ok(SessionId::parse(&text)?)
    }
}

impl<O: Owner, S: Send + Sync> FromRequestParts<S> for FileTarget<O> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        // "", "api" or "v1", "sessions" or "snapshots", the owner, "files", the file.
        let mut segments = parts.uri.path().splitn(6, '/');
        let (owner, files, tail) = (segments.nth(3), segments.next(), segments.next());
        let (Some(owner), Some("files"), Some(tail)) = (owner, files, tail) else {
            return Err(ApiError::new(ErrorKind::InvalidPath, "missing file path: give one after /files/"));
        };
        let owner = String::from_utf8(crate::base::path::percent_decode(owner)?)
            .map_err(|_| ApiError::new(ErrorKind::InvalidArgument, "the id in the URL is not UTF-8"))?;
        Ok(FileTarget { owner: O::parse(owner)?, path: crate::base::path::from_url(tail)? })
    }
}
