//! What a request carries into the work it starts: its id, its deadline and its actor, as
//! task-locals set by the guard and the auth middleware and read below them.

use std::time::Instant;

tokio::task_local! {
    /// The request being served: its id and deadline, read by the work it starts.
    pub(crate) static REQUEST: RequestInfo;
}

#[derive(Debug, Clone)]
pub(crate) struct RequestInfo {
    pub id: String,
    pub deadline: Instant,
}

/// The id and deadline of the request this task serves, if it serves one.
pub(crate) fn current() -> Option<RequestInfo> {
    REQUEST.try_with(Clone::clone).ok()
}

tokio::task_local! {
    /// The id of the token that authenticated the request being served.
    pub(crate) static ACTOR: String;
}

/// Who is acting for the request being served: the id of its token (`tok_…`, or `env` for
/// `TROVE_API_TOKEN`).
pub(crate) fn actor() -> String {
    ACTOR.try_with(Clone::clone).unwrap_or_else(|_| "api".to_string())
}

/// A fresh request id: `req_` and 12 hex digits.
pub(crate) fn new_request_id() -> String {
    let mut bytes = [0u8; 6];
    // Without randomness the id is still unique enough to find a log line: fall back to time.
    if crate::base::random::fill_random(&mut bytes).is_err() {
        bytes.copy_from_slice(&crate::base::time::now_ns().to_le_bytes()[..6]);
    }
    format!("req_{}", hex::encode(bytes))
}
