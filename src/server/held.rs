//! A response body that holds something until the body is finished or dropped: a session's
//! request slot stays taken while a download or an event stream is still being sent, not only
//! until the handler returned the response's head.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};

/// `inner`, holding `guard` for as long as it lives.
pub(crate) struct Held<G> {
    inner: Body,
    _guard: G,
}

impl<G: Send + Unpin + 'static> Held<G> {
    /// The response `resp` with its body holding `guard`.
    pub fn response(resp: axum::response::Response, guard: G) -> axum::response::Response {
        resp.map(|inner| Body::new(Held { inner, _guard: guard }))
    }
}

impl<G: Unpin> HttpBody for Held<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
