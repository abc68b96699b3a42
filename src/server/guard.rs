//! Every request's guard, the outermost layer: it gives the request an id (returned as
//! `x-request-id`), a deadline the library work it starts inherits, and contains a panic, so
//! whatever a handler does, the client gets an error body without internals and the server
//! stays up.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;

use super::request::{new_request_id, RequestInfo, REQUEST};
use super::state::AppState;
use super::ApiError;
use crate::base::error::{Error, ErrorKind};

/// How long past its deadline a handler may still run before its answer is given up on. The
/// library stops its own work at the deadline; this only catches what does not check it.
const GRACE: Duration = Duration::from_secs(30);

/// The text of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

pub(crate) async fn guard(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let info = RequestInfo { id: new_request_id(), deadline: Instant::now() + st.opts.request_timeout };
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let started = Instant::now();
    let work = REQUEST.scope(info.clone(), AssertUnwindSafe(next.run(req)).catch_unwind());
    // An upload's body is paced instead (a big file takes what it takes, a stalled one is cut
    // off: `upload.rs`), and its write keeps the deadline; anything else is given up on here.
    let outcome = if path.ends_with("/file/upload") {
        Ok(work.await)
    } else {
        tokio::time::timeout(st.opts.request_timeout + GRACE, work).await
    };
    let mut resp = match outcome {
        Ok(Ok(resp)) => resp,
        Ok(Err(panic)) => {
            tracing::error!(request = %info.id, %method, %path, panic = %panic_message(&*panic), "a request handler panicked");
            let e = Error::new(ErrorKind::Internal, "a request handler panicked");
            REQUEST.sync_scope(info.clone(), || ApiError::from(e).into_response())
        }
        Err(_) => {
            tracing::error!(request = %info.id, %method, %path, "a request ran past its deadline and was abandoned");
            let e = Error::new(
                ErrorKind::Timeout,
                "the request ran out of time and was abandoned; whether it changed anything is unknown: check the audit log",
            )
            .with_detail("changed", serde_json::Value::Null);
            REQUEST.sync_scope(info.clone(), || ApiError::from(e).into_response())
        }
    };
    if let Ok(v) = HeaderValue::from_str(&info.id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    let status = resp.status().as_u16();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if status >= 500 {
        tracing::warn!(request = %info.id, %method, %path, status, ms, "request failed");
    } else {
        tracing::debug!(request = %info.id, %method, %path, status, ms, "request");
    }
    resp
}
