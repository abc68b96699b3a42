//! File watch over HTTP (`sandbox-file-operations.md`, "File Watch"): create a watcher, long-poll
//! it with a cursor, wait for one event, follow it as Server-Sent Events, delete it; at
//! `/v1/file/watch...` with a session token and `/v1/sessions/{id}/file/watch...` with the
//! operator token. As the seed says, these answer resource-style JSON with HTTP statuses, not
//! the file API's wrapper. The watchers themselves live in `tools::fileapi::watch`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::extract::{body_of, json_object, P, Q};
use super::fileapi::TokenSession;
use super::state::AppState;
use crate::base::error::{Error, Result};
use crate::base::id::SessionId;
use crate::tools::fileapi::watch::{
    poll_params, FileEvent, PollRequest, WaitRequest, WatchInfo, WatchRequest, Watcher, MAX_POLL_LIMIT,
};
use crate::tools::fileapi::Sandbox;

/// A comment line sent on a quiet event stream, so proxies keep it open.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// `{"data": ...}`: the create and delete answers, as the seed's example reads them.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[schemars(rename = "Data_{T}")]
pub(super) struct Data<T> {
    data: T,
}

/// What a wait answers: the event, or `null` and `timed_out`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(super) struct WaitData {
    /// The event that ended the wait; `null` when the time ran out.
    event: Option<FileEvent>,
    /// Present and true when the time ran out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    timed_out: bool,
}

/// The query of the event stream.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EventsQuery {
    /// Start after this seq (default 0: every event still queued); a `Last-Event-ID` header
    /// (`{watcher_id}:{seq}`) takes precedence.
    // A query string's value is text: serde_urlencoded parses it as the integer (the body's
    // `count::de_u64` takes JSON numbers only).
    #[serde(default)]
    #[schemars(range(min = 0))]
    cursor: Option<u64>,
}

/// Parses a JSON body (an empty one is `{}`).
fn parse<T: serde::de::DeserializeOwned>(
    body: std::result::Result<Bytes, BytesRejection>,
    what: &str,
) -> std::result::Result<T, ApiError> {
    let body = body_of(body)?;
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) { b"{}" } else { &body };
    json_object(body, what)
}

async fn sandboxed<T: Send + 'static>(
    st: &Arc<AppState>,
    id: &SessionId,
    f: impl FnOnce(&AppState, &Sandbox<'_>) -> Result<T> + Send + 'static,
) -> std::result::Result<T, ApiError> {
    st.sandbox_here(id).await?;
    let sid = id.clone();
    let actor = super::request::actor();
    let out: std::result::Result<T, ApiError> = st
        .blocking(move |st, repo| {
            // An ended session is known (its files stay readable): watching it is a conflict
            // with its state, answered by the watchers (409), not a missing resource.
            let s = repo.session(&sid)?;
            let sandbox = Sandbox::new(repo, &s, &actor, &st.opts.sandbox_root);
            f(st, &sandbox).map_err(ApiError::from)
        })
        .await;
    st.touch(id);
    out
}

async fn create(st: Arc<AppState>, id: SessionId, body: std::result::Result<Bytes, BytesRejection>) -> Response {
    let go = async {
        let r: WatchRequest = parse(body, "watch")?;
        let w = sandboxed(&st, &id, move |st, sb| st.watchers.create(sb, &r)).await?;
        Ok::<_, ApiError>((StatusCode::CREATED, Json(Data { data: w.info() })).into_response())
    };
    go.await.unwrap_or_else(IntoResponse::into_response)
}

/// Waits until `w` has an event after `cursor` (or lost some), it stops, or `timeout` passes;
/// within a request, no longer than its deadline (`--request-timeout`), so the answer comes in
/// time.
async fn settle(w: &Watcher, cursor: u64, timeout: Duration) {
    let mut rx = w.subscribe();
    let mut deadline = tokio::time::Instant::now() + timeout;
    if let Some(r) = super::request::current() {
        deadline = deadline.min(tokio::time::Instant::from_std(r.deadline));
    }
    while *rx.borrow_and_update() <= cursor && !w.stopped() {
        if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
            return;
        }
    }
}

async fn poll(
    st: Arc<AppState>,
    id: SessionId,
    wid: String,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Response {
    let go = async {
        let r: PollRequest = parse(body, "poll")?;
        let (cursor, limit, timeout) = poll_params(&r)?;
        let w = st.watchers.get(&id, &wid)?;
        w.valid_cursor(cursor)?;
        settle(&w, cursor, timeout).await;
        st.touch(&id);
        Ok::<_, ApiError>(Json(w.poll(cursor, limit)?).into_response())
    };
    go.await.unwrap_or_else(IntoResponse::into_response)
}

async fn wait(st: Arc<AppState>, id: SessionId, body: std::result::Result<Bytes, BytesRejection>) -> Response {
    let go = async {
        let r: WaitRequest = parse(body, "wait")?;
        let (w, timeout) = sandboxed(&st, &id, move |st, sb| st.watchers.wait(sb, &r)).await?;
        settle(&w, 0, timeout).await;
        let got = w.poll(0, 1);
        st.watchers.drop_watcher(&w);
        st.touch(&id);
        let event = got?.events.into_iter().next();
        let timed_out = event.is_none();
        Ok::<_, ApiError>(Json(WaitData { event, timed_out }).into_response())
    };
    go.await.unwrap_or_else(IntoResponse::into_response)
}

async fn remove(st: Arc<AppState>, id: SessionId, wid: String) -> Response {
    match st.watchers.remove(&id, &wid) {
        Ok(stopped) => Json(Data { data: stopped }).into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// One Server-Sent Event.
fn sse(event: &str, id: Option<String>, data: &impl Serialize) -> String {
    let data = serde_json::to_string(data).unwrap_or_default();
    match id {
        Some(id) => format!("id: {id}\nevent: {event}\ndata: {data}\n\n"),
        None => format!("event: {event}\ndata: {data}\n\n"),
    }
}

async fn events(st: Arc<AppState>, id: SessionId, wid: String, q: EventsQuery, headers: HeaderMap) -> Response {
    let w = match st.watchers.get(&id, &wid) {
        Ok(w) => w,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).map(|v| {
        v.trim()
            .rsplit_once(':')
            .filter(|(of, _)| *of == wid)
            .and_then(|(_, seq)| seq.parse::<u64>().ok())
            .ok_or_else(|| Error::invalid_argument(format!("Last-Event-ID '{v}' is not '{wid}:<seq>'")))
    });
    let mut cursor = match resume.transpose() {
        Ok(r) => r.or(q.cursor).unwrap_or(0),
        Err(e) => return ApiError::from(e).into_response(),
    };
    if let Err(e) = w.valid_cursor(cursor) {
        return ApiError::from(e).into_response();
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
    tokio::spawn(async move {
        let started: WatchInfo = w.info();
        if tx.send(Ok(Bytes::from(sse("watch_started", None, &started)))).await.is_err() {
            return;
        }
        loop {
            let got = match w.poll(cursor, MAX_POLL_LIMIT) {
                Ok(g) => g,
                Err(e) => {
                    tracing::warn!(watcher = %wid, error = %e, "a watcher's event stream stopped");
                    return;
                }
            };
            let mut text = String::new();
            if got.overflow {
                text.push_str(&sse("overflow", None, &serde_json::json!({ "cursor": got.cursor })));
            }
            for e in &got.events {
                text.push_str(&sse("file_change", Some(format!("{wid}:{}", e.seq)), e));
            }
            cursor = got.cursor;
            if !text.is_empty() && tx.send(Ok(Bytes::from(text))).await.is_err() {
                return;
            }
            if w.stopped() {
                return;
            }
            if got.events.len() < MAX_POLL_LIMIT {
                let before = tokio::time::Instant::now();
                settle(&w, cursor, KEEPALIVE).await;
                if before.elapsed() >= KEEPALIVE && tx.send(Ok(Bytes::from_static(b": still here\n\n"))).await.is_err()
                {
                    return;
                }
            }
        }
    });
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|piece| (piece, rx))
    }));
    let mut resp = body.into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

type RawBody = std::result::Result<Bytes, BytesRejection>;

/// `POST /v1/sessions/{id}/file/watch`
pub(super) async fn op_create(State(st): State<Arc<AppState>>, P(id): P<SessionId>, body: RawBody) -> Response {
    create(st, id, body).await
}

/// `POST /v1/file/watch`
pub(super) async fn bare_create(
    State(st): State<Arc<AppState>>,
    Extension(TokenSession(id)): Extension<TokenSession>,
    body: RawBody,
) -> Response {
    create(st, id, body).await
}

/// `POST /v1/sessions/{id}/file/watch/{watcher_id}/poll`
pub(super) async fn op_poll(
    State(st): State<Arc<AppState>>,
    P((id, wid)): P<(SessionId, String)>,
    body: RawBody,
) -> Response {
    poll(st, id, wid, body).await
}

/// `POST /v1/file/watch/{watcher_id}/poll`
pub(super) async fn bare_poll(
    State(st): State<Arc<AppState>>,
    Extension(TokenSession(id)): Extension<TokenSession>,
    P(wid): P<String>,
    body: RawBody,
) -> Response {
    poll(st, id, wid, body).await
}

/// `POST /v1/sessions/{id}/file/watch/wait`
pub(super) async fn op_wait(State(st): State<Arc<AppState>>, P(id): P<SessionId>, body: RawBody) -> Response {
    wait(st, id, body).await
}

/// `POST /v1/file/watch/wait`
pub(super) async fn bare_wait(
    State(st): State<Arc<AppState>>,
    Extension(TokenSession(id)): Extension<TokenSession>,
    body: RawBody,
) -> Response {
    wait(st, id, body).await
}

/// `GET /v1/sessions/{id}/file/watch/{watcher_id}/events`
pub(super) async fn op_events(
    State(st): State<Arc<AppState>>,
    P((id, wid)): P<(SessionId, String)>,
    Q(q): Q<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    events(st, id, wid, q, headers).await
}

/// `GET /v1/file/watch/{watcher_id}/events`
pub(super) async fn bare_events(
    State(st): State<Arc<AppState>>,
    Extension(TokenSession(id)): Extension<TokenSession>,
    P(wid): P<String>,
    Q(q): Q<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    events(st, id, wid, q, headers).await
}

/// `DELETE /v1/sessions/{id}/file/watch/{watcher_id}`
pub(super) async fn op_delete(State(st): State<Arc<AppState>>, P((id, wid)): P<(SessionId, String)>) -> Response {
    remove(st, id, wid).await
}

/// `DELETE /v1/file/watch/{watcher_id}`
pub(super) async fn bare_delete(
    State(st): State<Arc<AppState>>,
    Extension(TokenSession(id)): Extension<TokenSession>,
    P(wid): P<String>,
) -> Response {
    remove(st, id, wid).await
}
