//! The connections of `trove serve`: accepted one by one under a limit, each watched so that a
//! client that never finishes sending its request headers, or sits idle between requests,
//! cannot hold a file descriptor forever; and shut down gracefully.
//!
//! At the limit, a new connection makes room by closing the connection idle the longest (no
//! request in flight); when every connection is busy, the new one is taken into a small
//! reserve that serves only priority requests (an operator's, `/healthz`), and past that gets
//! `503` at once and is closed. So a normal request is answered promptly however many idle
//! sockets a client opened, and an operator's however many busy ones sessions hold. The limit
//! is also kept under the open-file limit, with descriptors to spare for the server's files,
//! and an `accept` that fails for want of descriptors closes an idle connection to make room.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tower_service::Service;

/// Whether a request may use a reserved connection.
pub type Priority = Arc<dyn Fn(&hyper::Request<Incoming>) -> bool + Send + Sync>;

/// How connections are bounded.
#[derive(Clone)]
pub struct Limits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections beyond `max_connections` for priority requests only.
    pub reserved: usize,
    /// Which requests are priority requests.
    pub priority: Priority,
    /// The longest a client may take to send a request's headers once it started.
    pub header_timeout: Duration,
    /// The longest a connection may sit idle, with no request in flight and no bytes moving.
    pub keepalive_timeout: Duration,
}

/// What is known of one connection: whether it is serving a request, and when bytes last moved.
struct Conn {
    in_flight: AtomicUsize,
    /// Milliseconds since `epoch` of the last byte read or written.
    last_active: AtomicU64,
    /// Milliseconds since `epoch` when the first byte of a request's head arrived (0: none).
    head_started: AtomicU64,
    close: tokio::sync::Notify,
    /// Taken into the reserve: it serves priority requests only.
    reserve: bool,
}

/// The open connections and the time origin they count from.
struct Registry {
    epoch: Instant,
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Registry {
    fn now(&self) -> u64 {
        (self.epoch.elapsed().as_millis() as u64).max(1)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where a new connection goes (whether into the reserve): among the `max` ordinary ones
    /// if there is room or an idle ordinary one was told to close (and no longer counts, so the
    /// next arrival picks another), else into the reserve of `reserved` if it is not full or
    /// an idle reserved one was told to close. Room is made only on the side the new
    /// connection goes to: closing an idle reserved connection (an operator's, its answer sent
    /// and its close not yet seen) must not let an ordinary request past a full set of busy
    /// ordinary connections.
    fn make_room(&self, max: usize, reserved: usize) -> Option<bool> {
        let mut open = self.lock();
        let in_reserve = open.values().filter(|c| c.reserve).count();
        if open.len() - in_reserve < max || Registry::close_idle(&mut open, Some(false)) {
            return Some(false);
        }
        (in_reserve < reserved || Registry::close_idle(&mut open, Some(true))).then_some(true)
    }

    /// Tells the connection idle the longest to close, among the reserved ones
    /// (`Some(true)`), the ordinary ones (`Some(false)`) or all; whether there was one.
    fn close_idle(open: &mut HashMap<u64, Arc<Conn>>, reserve: Option<bool>) -> bool {
        let idle = open
            .iter()
            .filter(|(_, c)| c.in_flight.load(Ordering::Relaxed) == 0)
            .filter(|(_, c)| reserve.is_none_or(|r| c.reserve == r))
            .min_by_key(|(_, c)| c.last_active.load(Ordering::Relaxed))
            .map(|(id, _)| *id);
        match idle.and_then(|id| open.remove(&id)) {
            Some(c) => {
                c.close.notify_one();
                true
            }
            None => false,
        }
    }
}

/// A socket that tells its connection when bytes move, and when a request's head begins.
struct Tracked {
    inner: TcpStream,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
}

impl AsyncRead for Tracked {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            let now = self.registry.now();
            self.conn.last_active.store(now, Ordering::Relaxed);
            if self.conn.in_flight.load(Ordering::Relaxed) == 0 {
                let _ = self.conn.head_started.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            let now = self.registry.now();
            self.conn.last_active.store(now, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Counts a request in flight until dropped (its response produced, or the request abandoned).
struct InFlight(Arc<Conn>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Resolves when the connection broke a limit: its head took too long, or it sat idle.
async fn watchdog(conn: &Conn, registry: &Registry, limits: &Limits) {
    let tick = Duration::from_millis(200).min(limits.header_timeout).min(limits.keepalive_timeout);
    loop {
        tokio::time::sleep(tick).await;
        let now = registry.now();
        let started = conn.head_started.load(Ordering::Relaxed);
        if started != 0 && now.saturating_sub(started) > limits.header_timeout.as_millis() as u64 {
            tracing::debug!("closing a connection that did not send its request headers in time");
            return;
        }
        let idle = conn.in_flight.load(Ordering::Relaxed) == 0 && started == 0;
        let quiet = now.saturating_sub(conn.last_active.load(Ordering::Relaxed));
        if idle && quiet > limits.keepalive_timeout.as_millis() as u64 {
            return;
        }
    }
}

/// The body of a refusal at the connection limit, written on the socket before any HTTP
/// machinery runs (the shape `ApiError` gives every error).
const BUSY_BODY: &str =
    r#"{"error":"the server is at its connection limit: retry shortly","kind":"busy","statusCode":503}"#;

/// The answer to a request on a reserved connection that is not a priority request.
fn busy_response() -> axum::response::Response {
    use axum::response::IntoResponse;
    let e = crate::base::error::Error::new(
        crate::base::error::ErrorKind::Busy,
        "the server is at its connection limit (the rest is kept for operators and /healthz): retry shortly",
    );
    let mut resp = super::ApiError::from(e).into_response();
    resp.headers_mut().insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
    resp
}

/// The answer to a connection there is no room for: every other one is serving a request.
async fn refuse(mut stream: TcpStream) {
    let body = BUSY_BODY;
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), write).await;
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves, then stops accepting
/// and waits for the requests in flight (a streaming response included) to finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let registry =
        Arc::new(Registry { epoch: Instant::now(), next: AtomicU64::new(0), open: Mutex::new(HashMap::new()) });
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors: an idle connection gives its back (the limit may have
                // been lowered under us). A connection reset before it was taken: nothing to
                // do. Either way, wait a moment rather than spin.
                if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) {
                    let closed = Registry::close_idle(&mut registry.lock(), None);
                    tracing::warn!(error = %e, closed_an_idle_one = closed, "out of descriptors to accept a connection");
                } else {
                    tracing::debug!(error = %e, "cannot accept a connection");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let max = limits.max_connections.min(crate::base::descriptors::room_for_connections());
        let Some(reserve) = registry.make_room(max, limits.reserved) else {
            tokio::spawn(refuse(stream));
            continue;
        };
        tokio::spawn(connection(stream, &app, &registry, &graceful, limits.clone(), reserve));
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// One accepted connection, registered and served until it ends, is closed to make room, or
/// its watchdog stops it; the returned future runs it.
fn connection(
    stream: TcpStream,
    app: &Router,
    registry: &Arc<Registry>,
    graceful: &hyper_util::server::graceful::GracefulShutdown,
    limits: Limits,
    reserve: bool,
) -> impl Future<Output = ()> + Send + 'static {
    let id = registry.next.fetch_add(1, Ordering::Relaxed);
    let conn = Arc::new(Conn {
        in_flight: AtomicUsize::new(0),
        last_active: AtomicU64::new(registry.now()),
        head_started: AtomicU64::new(0),
        close: tokio::sync::Notify::new(),
        reserve,
    });
    registry.lock().insert(id, conn.clone());
    let io = TokioIo::new(Tracked { inner: stream, conn: conn.clone(), registry: registry.clone() });
    let (app, seen, priority) = (app.clone(), conn.clone(), limits.priority.clone());
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        seen.in_flight.fetch_add(1, Ordering::Relaxed);
        seen.head_started.store(0, Ordering::Relaxed);
        let in_flight = InFlight(seen.clone());
        let refused = seen.reserve && !priority(&req);
        let mut app = app.clone();
        async move {
            let resp = if refused { Ok(busy_response()) } else { app.call(req.map(axum::body::Body::new)).await };
            drop(in_flight);
            resp
        }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        // The watchdog times headers and idleness itself (hyper's header clock would also
        // start on an idle keep-alive connection).
        .header_read_timeout(None)
        .serve_connection(io, service);
    let served = graceful.watch(served);
    let registry = registry.clone();
    async move {
        tokio::select! {
            r = served => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "a connection ended with an error");
                }
            }
            () = conn.close.notified() => tracing::debug!("closed an idle connection to make room"),
            () = watchdog(&conn, &registry, &limits) => {}
        }
        registry.lock().remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(conns: &[(bool, usize)]) -> Registry {
        let registry = Registry { epoch: Instant::now(), next: AtomicU64::new(0), open: Mutex::new(HashMap::new()) };
        for (id, &(reserve, in_flight)) in conns.iter().enumerate() {
            let conn = Conn {
                in_flight: AtomicUsize::new(in_flight),
                last_active: AtomicU64::new(1),
                head_started: AtomicU64::new(0),
                close: tokio::sync::Notify::new(),
                reserve,
            };
            registry.lock().insert(id as u64, Arc::new(conn));
        }
        registry
    }

    #[test]
    fn an_idle_reserved_connection_makes_room_in_the_reserve_only() {
        // Two busy ordinary connections at a limit of two, one idle reserved one: the next
        // arrival closes the idle one and takes its place in the reserve, not among the
        // ordinary ones (where it would serve a request past the limit).
        let r = registry(&[(false, 1), (false, 1), (true, 0)]);
        assert_eq!(r.make_room(2, 1), Some(true));
        assert_eq!(r.lock().len(), 2, "the idle reserved connection was told to close");
        // An idle ordinary connection makes room among the ordinary ones.
        let r = registry(&[(false, 1), (false, 0), (true, 1)]);
        assert_eq!(r.make_room(2, 1), Some(false));
        // Every connection busy and the reserve full: no room.
        let r = registry(&[(false, 1), (false, 1), (true, 1)]);
        assert_eq!(r.make_room(2, 1), None);
    }
}
