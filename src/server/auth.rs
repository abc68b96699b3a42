//! Bearer-token auth, the middleware: a request without a live token is refused (401,
//! audited); a request with one runs with the token's id as its actor. The tokens themselves
//! (hashing, constant-time comparison, the manifest's table) are `ops::tokens`.
//!
//! The server reads the token table again whenever the manifest changed (`PRAGMA
//! data_version` on a connection of its own, a cheap check), so a token created or revoked by
//! `trove token` takes effect at once, in a running server too. Every refusal is audited (a
//! flood of them as a few records and a summary: `refusals.rs`), and over HTTP the audit actor
//! is the id of the token that called.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::refusals::{append_all, Refused};
use super::request::ACTOR;
use super::state::AppState;
use crate::base::error::ErrorKind;

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
    let Some(token) = presented else {
        let message = "missing bearer token: send 'Authorization: Bearer <token>' (see `trove serve --help`)";
        audit_refusal(&state, &req, "missing token", "operator").await;
        return ApiError::new(ErrorKind::Unauthorized, message).into_response();
    };
    match state.tokens.check(&token) {
        Ok(Some(id)) => ACTOR.scope(id.to_string(), next.run(req)).await,
        Ok(None) => {
            audit_refusal(&state, &req, "unknown or revoked token", "operator").await;
            ApiError::new(ErrorKind::Unauthorized, "unknown token").into_response()
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Audits a refused login on `req`'s route (`token`: the kind expected), through the
/// refusals' summaries (`refusals.rs`), group-committed and with no token material: a flood of
/// bad requests costs a few records and one fsync per burst.
pub(super) fn audit_refusal(
    state: &Arc<AppState>,
    req: &Request,
    why: &'static str,
    token: &'static str,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    // Counted now, appended by the future: the request (not `Sync`) is not held across an await.
    let records = refusal_records(state, req, why, token);
    let state = state.clone();
    async move { append_later(&state, records).await }
}

/// The records `req`'s refusal adds now (see [`audit_refusal`]).
fn refusal_records(
    state: &AppState,
    req: &Request,
    why: &'static str,
    token: &'static str,
) -> Vec<crate::model::audit::AuditRecord> {
    let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_default();
    state.refusals.count(Refused { reason: why, method: req.method().to_string(), route, token })
}

/// [`audit_refusal`] of a request already taken apart (a login form's, whose body was read to
/// find the token): its method and route named.
pub(super) fn audit_refusal_of(
    state: &Arc<AppState>,
    method: &str,
    route: &str,
    why: &'static str,
    token: &'static str,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let refused = Refused { reason: why, method: method.to_string(), route: route.to_string(), token };
    let records = state.refusals.count(refused);
    let state = state.clone();
    async move { append_later(&state, records).await }
}

async fn append_later(state: &Arc<AppState>, records: Vec<crate::model::audit::AuditRecord>) {
    if records.is_empty() {
        return;
    }
    let audited = state
        .blocking(move |st, _| {
            append_all(records, |r| st.audit.append(r));
            Ok::<_, crate::base::error::Error>(())
        })
        .await;
    if let Err(e) = audited {
        tracing::warn!(error = %e, "an authentication failure could not be audited");
    }
}
