//! Bearer-token auth, the middleware: a request without a live token is refused (401,
//! audited); a request with one runs with the token's id as its actor. The tokens themselves
//! (hashing, constant-time comparison, the manifest's table) are `ops::tokens`.
//!
//! The server reads the token table again whenever the manifest changed (`PRAGMA
//! data_version` on a connection of its own, a cheap check), so a token created or revoked by
//! `trove token` takes effect at once, in a running server too. Every refusal is audited, and
//! over HTTP the audit actor is the id of the token that called.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::request::ACTOR;
use super::state::AppState;
use crate::base::error::ErrorKind;
use crate::base::time::now_ns;
use crate::model::audit::AuditRecord;

/// Middleware: refuses a request without a live bearer token (401, audited), and makes the
/// token's id the actor of what the request does.
/// The bearer token a request presents (`Authorization: Bearer <token>`), if any.
pub(super) fn bearer(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
        .map(str::to_string)
}

pub(super) async fn require_token(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let presented = bearer(req.headers());
    let (method, route) = (req.method().to_string(), req.uri().path().to_string());
    let Some(token) = presented else {
        let message = "missing bearer token: send 'Authorization: Bearer <token>' (see `trove serve --help`)";
        return refuse(&state, "missing token", message, method, route).await;
    };
    match state.tokens.check(&token) {
        Ok(Some(id)) => ACTOR.scope(id.to_string(), next.run(req)).await,
        Ok(None) => refuse(&state, "unknown or revoked token", "unknown token", method, route).await,
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Answers 401, after auditing the refusal: with no token material, group-committed, so a
/// flood of bad requests costs one fsync per burst rather than one each.
async fn refuse(state: &Arc<AppState>, why: &'static str, message: &str, method: String, route: String) -> Response {
    let audited = state
        .blocking(move |st, _| {
            let mut rec = AuditRecord::ok(now_ns(), "anonymous", "auth");
            rec.outcome = ErrorKind::Unauthorized.as_str().to_string();
            rec.details = serde_json::json!({"reason": why, "method": method, "route": route});
            st.audit.append(rec)
        })
        .await;
    if let Err(e) = audited {
        tracing::warn!(error = %e, "an authentication failure could not be audited");
    }
    ApiError::new(ErrorKind::Unauthorized, message).into_response()
}
