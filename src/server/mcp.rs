//! The Model Context Protocol over streamable HTTP: `/v1/sessions/{id}/mcp` (operator token)
//! and `/v1/mcp` (session token) serve the session's tools as `trove mcp` does on stdio. One
//! MCP service per (session, caller), kept while the session lives; calls run on the server's
//! blocking pool like every tool call.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::error::ApiError;
use super::extract::P;
use super::fileapi::TokenSession;
use super::state::{AppState, McpService};
use crate::base::id::SessionId;
use crate::tools::fileapi::Sandbox;
use crate::tools::mcp::{McpTools, Runner};

/// The service of `session` for `actor`, made on first use.
fn service(st: &Arc<AppState>, session: &SessionId, actor: &str) -> McpService {
    st.mcp.get_or_make(session, actor, || make(st, session, actor))
}

fn make(st: &Arc<AppState>, session: &SessionId, actor: &str) -> McpService {
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
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    StreamableHttpService::new(move || Ok(tools.clone()), Default::default(), config)
}

async fn serve(st: Arc<AppState>, session: SessionId, req: Request) -> Response {
    let check = session.clone();
    // Ended sessions too: their tools read from the latest snapshot and refuse writes.
    let live = st.blocking(move |_, repo| repo.session(&check).map(|_| ())).await;
    if let Err(e) = live {
        return ApiError::from(e).into_response();
    }
    let service = service(&st, &session, &super::request::actor());
    st.touch(&session);
    service.handle(req).await.map(axum::body::Body::new).into_response()
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
