//! The MCP sessions one MCP service keeps (`/v1/mcp`, `/v1/sessions/{id}/mcp`), bounded: every
//! `initialize` makes an MCP session with a worker task and buffers (about 50 KB), and a client
//! may send as many as it likes. A service keeps at most [`PER_SERVICE`]; the next `initialize`
//! closes the one used longest ago (clients that never send `DELETE` are the common case, and a
//! closed session's client simply initializes again). The whole server keeps at most [`TOTAL`];
//! past that a service with none to give up is refused (503). An MCP session idle for [`IDLE`]
//! is closed by its worker, and a trove session's end cancels every one of its services'.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

/// MCP sessions one service (one trove session and caller) keeps at once.
pub const PER_SERVICE: usize = 8;
/// MCP sessions the whole server keeps at once (about 50 KB each).
pub const TOTAL: usize = 1024;
/// An MCP session without a request for this long is closed.
pub const IDLE: Duration = Duration::from_secs(300);

/// The count of MCP sessions open in the whole server, shared by every service.
#[derive(Debug, Default)]
pub(crate) struct OpenCount(AtomicUsize);

impl OpenCount {
    /// MCP sessions open now.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// A [`LocalSessionManager`] that keeps at most [`PER_SERVICE`] sessions, closing the least
/// recently used to make room, and counts them in the server's [`OpenCount`].
pub(crate) struct BoundedSessions {
    inner: LocalSessionManager,
    /// Open MCP session id -> when a request last named it.
    used: Mutex<HashMap<SessionId, Instant>>,
    open: Arc<OpenCount>,
}

/// Why an MCP session could not be made or reached.
#[derive(Debug)]
pub(crate) enum BoundedError {
    /// The session manager's own error.
    Inner(LocalSessionManagerError),
    /// The server keeps [`TOTAL`] MCP sessions already.
    Full,
}

impl std::fmt::Display for BoundedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BoundedError::Inner(e) => e.fmt(f),
            BoundedError::Full => write!(f, "the server keeps {TOTAL} MCP sessions already"),
        }
    }
}

impl std::error::Error for BoundedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BoundedError::Inner(e) => Some(e),
            BoundedError::Full => None,
        }
    }
}

impl From<LocalSessionManagerError> for BoundedError {
    fn from(e: LocalSessionManagerError) -> BoundedError {
        BoundedError::Inner(e)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Single inserts and removes: a panic elsewhere leaves the map sound.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl BoundedSessions {
    /// A manager counting its sessions in `open`.
    pub fn new(open: Arc<OpenCount>) -> BoundedSessions {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(IDLE);
        BoundedSessions { inner, used: Mutex::new(HashMap::new()), open }
    }

    /// Sessions this manager holds open.
    pub fn len(&self) -> usize {
        lock(&self.used).len()
    }

    fn touch(&self, id: &SessionId) {
        if let Some(t) = lock(&self.used).get_mut(id) {
            *t = Instant::now();
        }
    }

    /// Forgets `id` (closed, by the client, by eviction or by its worker); whether it was open.
    fn forget(&self, id: &SessionId) -> bool {
        let was = lock(&self.used).remove(id).is_some();
        if was {
            self.open.0.fetch_sub(1, Ordering::Relaxed);
        }
        was
    }

    /// The session used longest ago, if there are [`PER_SERVICE`] already.
    fn to_evict(&self) -> Option<SessionId> {
        let used = lock(&self.used);
        if used.len() < PER_SERVICE {
            return None;
        }
        used.iter().min_by_key(|(_, t)| **t).map(|(id, _)| id.clone())
    }
}

impl SessionManager for BoundedSessions {
    type Error = BoundedError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        if let Some(old) = self.to_evict() {
            tracing::debug!(mcp_session = %old, "closed the least recently used MCP session to make room");
            self.close_session(&old).await?;
        }
        // Counted before it exists, so two creations at once cannot both pass the limit.
        if self.open.0.fetch_add(1, Ordering::Relaxed) >= TOTAL {
            self.open.0.fetch_sub(1, Ordering::Relaxed);
            return Err(BoundedError::Full);
        }
        match self.inner.create_session().await {
            Ok((id, transport)) => {
                lock(&self.used).insert(id.clone(), Instant::now());
                Ok((id, transport))
            }
            Err(e) => {
                self.open.0.fetch_sub(1, Ordering::Relaxed);
                Err(e.into())
            }
        }
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.forget(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<
        impl futures_util::Stream<Item = rmcp::transport::streamable_http_server::session::ServerSseMessage>
            + Send
            + Sync
            + 'static,
        Self::Error,
    > {
        self.touch(id);
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.touch(id);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<
        impl futures_util::Stream<Item = rmcp::transport::streamable_http_server::session::ServerSseMessage>
            + Send
            + Sync
            + 'static,
        Self::Error,
    > {
        self.touch(id);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<
        impl futures_util::Stream<Item = rmcp::transport::streamable_http_server::session::ServerSseMessage>
            + Send
            + Sync
            + 'static,
        Self::Error,
    > {
        self.touch(id);
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}
