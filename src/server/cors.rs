//! Cross-origin requests from browser clients (`--cors-origin`): an allowed origin gets the
//! CORS headers on every answer, and its preflight (`OPTIONS` with
//! `Access-Control-Request-Method`) is answered 204 before any token is asked for, as browsers
//! send preflights without credentials. Origins not configured get no CORS headers, so the
//! browser refuses the answer; nothing else changes for them.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::state::AppState;

/// Methods the API answers.
const METHODS: &str = "GET, POST, PUT, DELETE, OPTIONS";
/// Headers a browser client may send.
const HEADERS: &str = "authorization, content-type, if-match, if-none-match, last-event-id, \
                       mcp-session-id, mcp-protocol-version, x-request-id";
/// Headers a browser client may read.
const EXPOSED: &str = "etag, x-request-id, mcp-session-id, content-length, x-trove-source, x-trove-snapshot";
/// How long a browser may keep a preflight's answer, in seconds.
const MAX_AGE: &str = "600";

/// The origin to allow, if the request's is allowed: itself, or `*` when any is.
fn allowed(st: &AppState, origin: &HeaderValue) -> Option<HeaderValue> {
    let given = origin.to_str().ok()?.trim_end_matches('/');
    st.opts.cors_origins.iter().find_map(|o| match o.as_str() {
        "*" => Some(HeaderValue::from_static("*")),
        o if o.trim_end_matches('/').eq_ignore_ascii_case(given) => Some(origin.clone()),
        _ => None,
    })
}

pub(super) async fn cors(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let origin = req.headers().get(header::ORIGIN).cloned();
    let Some(allow) = origin.as_ref().and_then(|o| allowed(&st, o)) else {
        return next.run(req).await;
    };
    let preflight =
        req.method() == Method::OPTIONS && req.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut resp = if preflight { StatusCode::NO_CONTENT.into_response() } else { next.run(req).await };
    let h = resp.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
    h.append(header::VARY, HeaderValue::from_static("Origin"));
    if preflight {
        h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(METHODS));
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(HEADERS));
        h.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE));
    } else {
        h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED));
    }
    resp
}
