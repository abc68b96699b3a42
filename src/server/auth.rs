//! Bearer-token auth. Tokens are stored as SHA-256 hashes (the manifest's `api_tokens`, or the
//! hash of `TROVE_API_TOKEN` held in memory); a presented token is hashed and compared with every
//! known hash in constant time, so neither a stored secret nor response timing gives one away.
//!
//! The server reads the token table again whenever the manifest changed (`PRAGMA
//! data_version` on a connection of its own, a cheap check), so a token created or revoked by
//! `trove token` takes effect at once, in a running server too. Every refusal is audited, and
//! over HTTP the audit actor is the id of the token that called.

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rusqlite::Connection;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::state::AppState;
use super::ApiError;
use crate::audit::AuditRecord;
use crate::error::{Error, ErrorKind, Result};
use crate::manifest::sessions::{self as rows, TokenRow};
use crate::repo::{now_ns, Repo};
use crate::session::fill_random;

tokio::task_local! {
    /// The id of the token that authenticated the request being served.
    static ACTOR: String;
}

/// Who is acting for the request being served: the id of its token (`tok_…`, or `env` for
/// `TROVE_API_TOKEN`).
pub(crate) fn actor() -> String {
    ACTOR.try_with(Clone::clone).unwrap_or_else(|_| "api".to_string())
}

pub fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The id of the known token `token` hashes to, if any. Every hash is compared, whatever
/// matched, so the time taken says nothing of which.
pub fn token_matches(token: &str, known: &[([u8; 32], String)]) -> Option<String> {
    let presented = hash_token(token);
    let mut found = None;
    for (h, id) in known {
        if bool::from(h.ct_eq(&presented)) {
            found = Some(id.clone());
        }
    }
    found
}

/// Creates a token, stores its hash under `label` with an audit record, and returns the token
/// (the only time it is ever seen in the clear) and its id.
pub fn create_token(repo: &Repo, label: &str, actor: &str) -> Result<(String, String)> {
    let mut bytes = [0u8; 24];
    fill_random(&mut bytes)?;
    let token = format!("trove_{}", hex::encode(bytes));
    let hash = hash_token(&token);
    let id = repo.manifest().write(|tx| {
        let id = rows::add_token(tx, &hash, label, now_ns())?;
        let mut rec = AuditRecord::ok(now_ns(), actor, "token_create");
        rec.details = serde_json::json!({"id": id, "label": label});
        crate::manifest::audit::append(tx, &rec)?;
        Ok(id)
    })?;
    Ok((token, id))
}

/// Revokes token `id` (effective at once for running servers), with an audit record.
pub fn revoke_token(repo: &Repo, id: &str, actor: &str) -> Result<()> {
    repo.manifest().write(|tx| {
        if !rows::revoke_token(tx, id, now_ns())? {
            return Err(Error::not_found(format!("no live token '{id}': list them with `trove token list`")));
        }
        let mut rec = AuditRecord::ok(now_ns(), actor, "token_revoke");
        rec.details = serde_json::json!({"id": id});
        crate::manifest::audit::append(tx, &rec)
    })?;
    Ok(())
}

/// Every token of the repository, revoked ones included.
pub fn list_tokens(repo: &Repo) -> Result<Vec<TokenRow>> {
    rows::tokens(repo.manifest().conn())
}

/// The hashes and ids of the live tokens stored in the repository.
pub fn stored_tokens(repo: &Repo) -> Result<Vec<([u8; 32], String)>> {
    rows::token_hashes(repo.manifest().conn())
}

/// Token hashes and ids.
type Known = Vec<([u8; 32], String)>;

/// The tokens a server accepts: the manifest's, read again when it changed, and the ones it was
/// started with (`TROVE_API_TOKEN`).
pub(crate) struct Tokens {
    fixed: Known,
    /// A connection of its own, `data_version` of the last read, and the tokens read then.
    stored: Mutex<(Connection, i64, Known)>,
}

impl Tokens {
    pub fn new(repo: &Repo, fixed: Known) -> Result<Tokens> {
        let conn = repo.manifest().reader()?;
        Ok(Tokens { fixed, stored: Mutex::new((conn, -1, Vec::new())) })
    }

    /// The id of the token `presented` is, if it is a live one now.
    fn check(&self, presented: &str) -> Result<Option<String>> {
        let mut guard = self.stored.lock().unwrap_or_else(|p| p.into_inner());
        let (conn, seen, stored) = &mut *guard;
        let version: i64 = conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(|e| Error::db("checking for new tokens", e))?;
        if version != *seen {
            *stored = rows::token_hashes(conn)?;
            *seen = version;
        }
        let found = token_matches(presented, stored);
        Ok(found.or_else(|| token_matches(presented, &self.fixed)))
    }
}

/// Middleware: refuses a request without a live bearer token (401, audited), and makes the
/// token's id the actor of what the request does.
pub(super) async fn require_token(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
        .map(str::to_string);
    let (method, route) = (req.method().to_string(), req.uri().path().to_string());
    let Some(token) = presented else {
        let message = "missing bearer token: send 'Authorization: Bearer <token>' (see `trove serve --help`)";
        return refuse(&state, "missing token", message, method, route).await;
    };
    match state.tokens.check(&token) {
        Ok(Some(id)) => ACTOR.scope(id, next.run(req)).await,
        Ok(None) => refuse(&state, "unknown or revoked token", "unknown token", method, route).await,
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Answers 401, after auditing the refusal: with no token material, and relaxed, so a flood of
/// bad requests costs no fsync each.
async fn refuse(state: &Arc<AppState>, why: &'static str, message: &str, method: String, route: String) -> Response {
    let audited = state
        .blocking(move |_, repo| {
            let mut rec = AuditRecord::ok(now_ns(), "anonymous", "auth");
            rec.outcome = ErrorKind::Unauthorized.as_str().to_string();
            rec.details = serde_json::json!({"reason": why, "method": method, "route": route});
            repo.manifest().write_relaxed(|tx| crate::manifest::audit::append(tx, &rec))
        })
        .await;
    if let Err(e) = audited {
        tracing::warn!(error = %e, "an authentication failure could not be audited");
    }
    ApiError::new(ErrorKind::Unauthorized, message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_known_token_matches() {
        let known = [(hash_token("a"), "tok_a".to_string()), (hash_token("secret"), "tok_s".to_string())];
        assert_eq!(token_matches("secret", &known).as_deref(), Some("tok_s"));
        assert_eq!(token_matches("secreT", &known), None);
        assert_eq!(token_matches("", &known), None);
        assert_eq!(token_matches("secret", &[]), None);
    }
}
