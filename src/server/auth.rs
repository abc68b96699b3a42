//! Bearer-token auth. Tokens are stored as SHA-256 hashes (the manifest's `api_tokens`, or the
//! hash of `TROVE_API_TOKEN` held in memory); a presented token is hashed and compared with every
//! known hash in constant time, so neither a stored secret nor response timing gives one away.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::state::AppState;
use super::ApiError;
use crate::error::{ErrorKind, Result};
use crate::manifest::sessions as rows;
use crate::repo::{now_ns, Repo};
use crate::session::fill_random;

pub fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Whether `token` hashes to one of `known`. Every hash is compared, whatever matched.
pub fn token_matches(token: &str, known: &[[u8; 32]]) -> bool {
    let presented = hash_token(token);
    known.iter().fold(subtle::Choice::from(0), |acc, h| acc | h.ct_eq(&presented)).into()
}

/// Creates a token, stores its hash under `label`, and returns the token: the only time it is
/// ever seen in the clear.
pub fn create_token(repo: &Repo, label: &str) -> Result<String> {
    let mut bytes = [0u8; 24];
    fill_random(&mut bytes)?;
    let token = format!("trove_{}", hex::encode(bytes));
    let hash = hash_token(&token);
    repo.manifest().write(|tx| rows::add_token(tx, &hash, label, now_ns()))?;
    Ok(token)
}

/// The hashes of the tokens stored in the repository.
pub fn stored_tokens(repo: &Repo) -> Result<Vec<[u8; 32]>> {
    rows::token_hashes(repo.manifest().conn())
}

/// Middleware: refuses a request without a known bearer token (401).
pub(super) async fn require_token(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    match presented {
        None => ApiError::new(
            ErrorKind::Unauthorized,
            "missing bearer token: send 'Authorization: Bearer <token>' (see `trove serve --help`)",
        )
        .into_response(),
        Some(t) if token_matches(t, &state.opts.token_hashes) => next.run(req).await,
        Some(_) => ApiError::new(ErrorKind::Unauthorized, "unknown token").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_known_token_matches() {
        let known = [hash_token("a"), hash_token("secret")];
        assert!(token_matches("secret", &known));
        assert!(!token_matches("secreT", &known));
        assert!(!token_matches("", &known));
        assert!(!token_matches("secret", &[]));
    }
}
