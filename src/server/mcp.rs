//! The Model Context Protocol over streamable HTTP: `/v1/sessions/{id}/mcp` (operator token)
//! and `/v1/mcp` (session token) serve the session's tools as `trove mcp` does on stdio. One
//! MCP service per (session, caller), kept while the session lives; calls run on the server's
//! blocking pool like every tool call. How many MCP sessions a service and the server keep is
//! `mcp_sessions.rs`'s.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::error::ApiError;
use super::extract::P;
use super::fileapi::TokenSession;
use super::mcp_sessions::{BoundedSessions, PER_SERVICE, TOTAL};
use super::state::{AppState, KeptService};
use crate::base::id::SessionId;
use crate::tools::fileapi::Sandbox;
use crate::tools::mcp::{McpTools, Runner};

/// The service of `session` for `actor`, made on first use.
fn service(st: &Arc<AppState>, session: &SessionId, actor: &str) -> KeptService {
    st.mcp.get_or_make(session, actor, || make(st, session, actor))
}

fn make(st: &Arc<AppState>, session: &SessionId, actor: &str) -> KeptService {
    let (state, sid, who) = (st.clone(), session.clone(), actor.to_string());
    let run: Runner = Arc::new(move |name, params| {
        let (state, sid, who) = (state.clone(), sid.clone(), who.clone());
        Box::pin(async move {
            state
                .blocking(move |st, repo| {
                    let s = repo.session(&sid)?;
                    let sandbox = Sandbox::new(repo, &s, &who, &st.opts.sandbox_root);
                    crate::tools::catalog::call(&sandbox, &name, params)
                })
                .await
        })
    });
    let tools = McpTools::new(session.clone(), run);
    // The token, not the Host header, guards this server: it may listen on any address.
    // Cancelled when the trove session ends or the service is dropped: every MCP session's
    // worker stops then, not when its idle time runs out.
    let stop = tokio_util::sync::CancellationToken::new();
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts().with_cancellation_token(stop.clone());
    let sessions = Arc::new(BoundedSessions::new(st.mcp.open.clone()));
    let service = StreamableHttpService::new(move || Ok(tools.clone()), sessions.clone(), config);
    KeptService::new(service, sessions, stop)
}

/// Whether `req` would open a new MCP session: a POST naming none (an `initialize`).
fn opens_session(req: &Request) -> bool {
    req.method() == axum::http::Method::POST && !req.headers().contains_key("mcp-session-id")
}

async fn serve(st: Arc<AppState>, session: SessionId, req: Request) -> Response {
    let check = session.clone();
    // Ended sessions too: their tools read from the latest snapshot and refuse writes.
    let live = st.blocking(move |_, repo| repo.session(&check).map(|_| ())).await;
    if let Err(e) = live {
        return ApiError::from(e).into_response();
    }
    let kept = service(&st, &session, &super::request::actor());
    st.touch(&session);
    // A service at its own limit closes its oldest session to make room; one below it may
    // not take a session from other services once the server's total is reached.
    if opens_session(&req) && kept.sessions.len() < PER_SERVICE && st.mcp.open.get() >= TOTAL {
        let e = crate::base::error::Error::new(
            crate::base::error::ErrorKind::Busy,
            format!("the server keeps {TOTAL} MCP sessions already: close sessions you no longer use (DELETE with their Mcp-Session-Id) or retry later"),
        );
        return ApiError::from(e).into_response();
    }
    let closing = req.method() == axum::http::Method::DELETE;
    let mut answer = kept.service.handle(req).await.map(axum::body::Body::new).into_response();
    // A closed session is answered 202 by the MCP library; the official SDKs take anything
    // but 200 (or 405, "closing not supported") for a failure and log one on every close.
    if closing && answer.status() == axum::http::StatusCode::ACCEPTED {
        *answer.status_mut() = axum::http::StatusCode::OK;
    }
    refusal_as_json(answer).await
}

/// The MCP library's refusals are plain text without a content type, and a body that is no
/// JSON-RPC message is its 415: answered here as every route answers an error, trove's JSON
/// error body, and a malformed message as the 400 it is.
async fn refusal_as_json(answer: Response) -> Response {
    use crate::base::error::ErrorKind;
    use axum::http::{header, StatusCode};
    let status = answer.status();
    let json = answer
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return answer;
    }
    // The library's sentences are short; a longer body is cut, never held whole.
    let text = match axum::body::to_bytes(answer.into_body(), 4096).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_string(),
        Err(e) => {
            tracing::debug!(error = %e, "an MCP refusal's text was not read");
            String::new()
        }
    };
    let text = if text.is_empty() { "the MCP server refused the request".to_string() } else { text };
    let (kind, status) = match status {
        StatusCode::NOT_FOUND => (ErrorKind::NotFound, status),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (ErrorKind::InvalidArgument, StatusCode::BAD_REQUEST),
        s if s.is_server_error() => (ErrorKind::Internal, s),
        s => (ErrorKind::InvalidArgument, s),
    };
    ApiError::new(kind, format!("MCP: {text}")).with_status(status).into_response()
}

/// `POST|GET|DELETE /v1/sessions/{id}/mcp`
pub(super) async fn operator(State(st): State<Arc<AppState>>, P(id): P<SessionId>, req: Request) -> Response {
    serve(st, id, req).await
}

/// `POST|GET|DELETE /v1/mcp`
pub(super) async fn bare(
    State(st): State<Arc<AppState>>,
    Extension(TokenSession(id)): Extension<TokenSession>,
    req: Request,
) -> Response {
    serve(st, id, req).await
}
