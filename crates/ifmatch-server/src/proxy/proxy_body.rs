//! The body of a request the proxy sends to the origin.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use ifmatch_core::BoxError;
use ifmatch_core::FramePoll;

use crate::guards::accept::RequestBody;

/// The body of a request on its way to the origin: the client's, or none for the layer's own
/// probe GETs. (A named type rather than a boxed body: no allocation, and no trait object whose
/// lifetime the compiler's `Send` check for async blocks trips over.)
/// The client's body is boxed because hyper's client needs an `Unpin` body, and the body
/// timeout's timer is not.
#[derive(Default)]
pub struct ProxyBody(pub(super) Option<Pin<Box<RequestBody>>>);

impl std::fmt::Debug for ProxyBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ProxyBody").field(&self.0.is_some()).finish()
    }
}

impl http_body::Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        match &mut self.0 {
            Some(body) => body.as_mut().poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.0.as_ref().map_or_else(
            || http_body::SizeHint::with_exact(0),
            http_body::Body::size_hint,
        )
    }
}
