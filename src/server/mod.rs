//! The HTTP server (`trove serve`): the Files API, the sessions API and the snapshots endpoints
//! over axum, calling the same library functions as the CLI.
//!
//! Shape of a request: auth (bearer token, `auth.rs`) -> timeout -> a handler that parses its
//! input, then runs the library call on a blocking thread with a pooled `Repo` (SQLite
//! connections are not shared between threads) -> JSON, or an error body from `error.rs`.
//! Session activity is kept in memory and written by the reaper once per tick, so a read never
//! waits on a manifest commit; the reaper also ends sessions whose ttl or idle time ran out.

mod audit;
mod auth;
mod connections;
mod cors;
mod error;
mod extract;
mod fileapi;
mod files;
mod fleet;
mod guard;
mod held;
mod mcp;
mod mcp_sessions;
pub mod openapi;
mod options;
mod public;
mod refusals;
mod request;
mod review;
mod sessions;
mod snapshots;
mod state;
mod stream;
mod tools;
mod trash;
mod ui;
mod upload;
mod watch;

use std::future::Future;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::middleware;
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::{Json, Router};

pub use error::{status_of, ApiError};
pub use options::ServeOptions;
use public::{Health, PUBLIC};
use state::AppState;

use crate::base::error::{Error, ErrorKind, Result};

type Routes = Vec<(&'static str, &'static str, MethodRouter<Arc<AppState>>)>;

/// One route whose method string is the one it answers to, so the list cannot mislabel it.
fn route<H, T>(
    method: &'static str,
    path: &'static str,
    handler: H,
) -> (&'static str, &'static str, MethodRouter<Arc<AppState>>)
where
    H: Handler<T, Arc<AppState>>,
    T: 'static,
{
    let filter = match method {
        "POST" => MethodFilter::POST,
        "DELETE" => MethodFilter::DELETE,
        "PUT" => MethodFilter::PUT,
        _ => MethodFilter::GET,
    };
    (method, path, on(filter, handler))
}

/// Every authenticated route. `openapi.rs` documents exactly these (a test checks).
fn routes() -> Routes {
    vec![
        route("GET", "/api/sessions/{id}/files", files::list),
        route("GET", "/api/sessions/{id}/files/", files::missing_path),
        route("GET", "/api/sessions/{id}/files/{*path}", files::read),
        route("GET", "/v1/sessions/{id}/files", files::list),
        route("GET", "/v1/sessions/{id}/files/", files::missing_path),
        route("GET", "/v1/sessions/{id}/files/{*path}", files::read),
        route("PUT", "/v1/sessions/{id}/files/{*path}", tools::put),
        route("DELETE", "/v1/sessions/{id}/files/{*path}", tools::delete),
        route("POST", "/v1/sessions/{id}/tools/{tool}", tools::call),
        route("POST", "/v1/sessions", sessions::create),
        route("GET", "/v1/sessions", sessions::list),
        route("DELETE", "/v1/sessions", sessions::bulk_delete),
        route("GET", "/v1/sessions/{id}", sessions::get),
        route("DELETE", "/v1/sessions/{id}", sessions::delete),
        route("POST", "/v1/sessions/{id}/pause", sessions::pause),
        route("POST", "/v1/sessions/{id}/resume", sessions::resume),
        route("POST", "/v1/sessions/{id}/snapshots", snapshots::take),
        route("GET", "/v1/sessions/{id}/snapshots", snapshots::of_session),
        route("GET", "/v1/snapshots", snapshots::list),
        route("GET", "/v1/snapshots/{snap}", snapshots::show),
        route("GET", "/v1/snapshots/{snap}/files", snapshots::files),
        route("GET", "/v1/snapshots/{snap}/files/{*path}", snapshots::read),
        route("GET", "/v1/snapshots/{snap}/export", snapshots::export),
        route("GET", "/v1/snapshots/{snap}/diff/{other}", review::snapshots),
        route("GET", "/v1/snapshots/{snap}/search", review::search),
        route("GET", "/v1/sessions/{id}/diff", review::session),
        route("GET", "/v1/sessions/{id}/changes", review::changes),
        route("GET", "/v1/log", review::log),
        route("GET", "/v1/find", review::find),
        route("GET", "/v1/audit", audit::query),
        route("GET", "/v1/audit/stream", audit::stream),
        route("GET", "/v1/audit/history", audit::history),
        route("GET", "/v1/audit/checkpoint", audit::checkpoint),
        route("GET", "/v1/audit/proof/{seq}", audit::proof),
        route("GET", "/v1/audit/consistency", audit::consistency),
        route("GET", "/v1/trash", trash::list),
        route("GET", "/v1/trash/export", trash::export),
        route("POST", "/v1/trash/restore", trash::restore),
        route("GET", "/v1/trash/{trash}", trash::show),
        route("GET", "/v1/sessions/{id}/trash", trash::session_list),
        route("POST", "/v1/sessions/{id}/trash/restore", trash::session_restore),
        route("POST", "/v1/sessions/{id}/file/read", fileapi::read),
        route("POST", "/v1/sessions/{id}/file/write", fileapi::write),
        route("POST", "/v1/sessions/{id}/file/replace", fileapi::replace),
        route("POST", "/v1/sessions/{id}/file/search", fileapi::search),
        route("POST", "/v1/sessions/{id}/file/find", fileapi::find),
        route("POST", "/v1/sessions/{id}/file/grep", fileapi::grep),
        route("POST", "/v1/sessions/{id}/file/glob", fileapi::glob),
        route("POST", "/v1/sessions/{id}/file/list", fileapi::list),
        unlimited(route("POST", "/v1/sessions/{id}/file/upload", fileapi::upload)),
        route("GET", "/v1/sessions/{id}/file/download", fileapi::download),
        route("POST", "/v1/sessions/{id}/mcp", mcp::operator),
        route("GET", "/v1/sessions/{id}/mcp", mcp::operator),
        route("DELETE", "/v1/sessions/{id}/mcp", mcp::operator),
        route("POST", "/v1/sessions/{id}/file/watch", watch::op_create),
        route("POST", "/v1/sessions/{id}/file/watch/wait", watch::op_wait),
        route("POST", "/v1/sessions/{id}/file/watch/{watcher_id}/poll", watch::op_poll),
        route("GET", "/v1/sessions/{id}/file/watch/{watcher_id}/events", watch::op_events),
        route("DELETE", "/v1/sessions/{id}/file/watch/{watcher_id}", watch::op_delete),
    ]
}

/// The routes a session token reaches (`/v1/file/*`): the sandbox file API of its session.
fn session_routes() -> Routes {
    vec![
        route("POST", "/v1/file/read", fileapi::bare_read),
        route("POST", "/v1/file/write", fileapi::bare_write),
        route("POST", "/v1/file/replace", fileapi::bare_replace),
        route("POST", "/v1/file/search", fileapi::bare_search),
        route("POST", "/v1/file/find", fileapi::bare_find),
        route("POST", "/v1/file/grep", fileapi::bare_grep),
        route("POST", "/v1/file/glob", fileapi::bare_glob),
        route("POST", "/v1/file/list", fileapi::bare_list),
        unlimited(route("POST", "/v1/file/upload", fileapi::bare_upload)),
        route("GET", "/v1/file/download", fileapi::bare_download),
        route("POST", "/v1/mcp", mcp::bare),
        route("GET", "/v1/mcp", mcp::bare),
        route("DELETE", "/v1/mcp", mcp::bare),
        route("POST", "/v1/file/watch", watch::bare_create),
        route("POST", "/v1/file/watch/wait", watch::bare_wait),
        route("POST", "/v1/file/watch/{watcher_id}/poll", watch::bare_poll),
        route("GET", "/v1/file/watch/{watcher_id}/events", watch::bare_events),
        route("DELETE", "/v1/file/watch/{watcher_id}", watch::bare_delete),
    ]
}

/// A route whose body is not held whole (an upload streams, under its own limit).
fn unlimited(
    (method, path, router): (&'static str, &'static str, MethodRouter<Arc<AppState>>),
) -> (&'static str, &'static str, MethodRouter<Arc<AppState>>) {
    (method, path, router.layer(DefaultBodyLimit::disable()))
}

/// (method, path) of every authenticated route, as registered.
pub fn route_list() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<_> = routes().into_iter().chain(session_routes()).map(|(m, p, _)| (m, p)).collect();
    out.extend(PUBLIC.iter().copied());
    out
}

fn app(state: Arc<AppState>) -> Router {
    let mut api: Router<Arc<AppState>> = Router::new();
    for (_, path, handler) in routes() {
        api = api.route(path, handler);
    }
    // Layers run outside in: the token is checked first, then a read is recorded (with
    // `--audit-reads`) once the handler answered.
    let api = api
        .route_layer(middleware::from_fn_with_state(state.clone(), audit::record_reads))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::require_token));
    let mut by_session: Router<Arc<AppState>> = Router::new();
    for (_, path, handler) in session_routes() {
        by_session = by_session.route(path, handler);
    }
    let by_session = by_session
        .route_layer(middleware::from_fn_with_state(state.clone(), audit::record_reads))
        .route_layer(middleware::from_fn_with_state(state.clone(), fileapi::require_session_token));
    let api = api.merge(by_session);
    let public = Router::new()
        .route("/healthz", on(MethodFilter::GET, || async { Json(Health { ok: true }) }))
        .route("/openapi.json", on(MethodFilter::GET, || async { Json(openapi::document()) }))
        .route("/v1/tools", on(MethodFilter::GET, || async { Json(public::tool_list()) }));
    api.merge(public)
        .merge(ui::router())
        .fallback(|| async { ApiError::from(Error::not_found("no such route: see /openapi.json")) })
        .method_not_allowed_fallback(|| async {
            ApiError::new(ErrorKind::InvalidArgument, "method not allowed on this route: see /openapi.json")
                .with_status(axum::http::StatusCode::METHOD_NOT_ALLOWED)
        })
        .layer(DefaultBodyLimit::max(state.opts.body_limit))
        .layer(middleware::from_fn_with_state(state.clone(), guard::guard))
        // Outermost: a browser's preflight carries no token, and every answer (a refusal too)
        // needs the CORS headers for the page to read it.
        .layer(middleware::from_fn_with_state(state.clone(), cors::cors))
        .with_state(state)
}

/// The whole app over `opts` as `serve` runs it (without its reaper and maintenance tasks), for
/// the fuzzers to call in process.
#[cfg(feature = "testing")]
pub fn app_for_tests(opts: ServeOptions) -> Result<Router> {
    Ok(app(Arc::new(AppState::new(opts)?)))
}

/// Serves on `listener` until `shutdown` resolves, then stops accepting, lets in-flight
/// requests finish, records pending session activity and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    error::hide_paths(&[&opts.repo, &opts.workspaces]);
    let state = Arc::new(AppState::new(opts)?);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let maintainer = tokio::spawn(state::maintain(state.clone(), stop_rx.clone()));
    let reaper = tokio::spawn(state::reap(state.clone(), stop_rx));
    let for_priority = state.clone();
    let limits = connections::Limits {
        max_connections: state.opts.max_connections.max(1),
        reserved: state.opts.reserved_connections,
        priority: Arc::new(move |req| {
            req.uri().path() == "/healthz"
                || auth::bearer(req.headers()).is_some_and(|t| matches!(for_priority.tokens.check(&t), Ok(Some(_))))
        }),
        header_timeout: state.opts.header_timeout,
        keepalive_timeout: state.opts.keepalive_timeout,
    };
    let served = connections::serve(listener, app(state.clone()), limits, shutdown).await;
    // Stopping the reaper writes the activity gathered since its last tick.
    let _ = stop_tx.send(true);
    let reaped = reaper.await.map_err(|e| Error::internal(format!("the session reaper failed: {e}")))?;
    maintainer.await.map_err(|e| Error::internal(format!("the maintenance task failed: {e}")))?;
    served.map_err(|e| Error::with_source(ErrorKind::Io, "serving HTTP", e))?;
    reaped
}

/// Resolves on SIGINT or SIGTERM: what `trove serve` waits for before shutting down.
pub async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
