//! Request extractors whose rejections are trove errors, so a malformed path segment or query
//! answers with the REST error body like every other failure.

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::ApiError;
use crate::error::ErrorKind;

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
