//! The response body of the layer.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use ifmatch_core::BoxError;
use ifmatch_core::FramePoll;
use pin_project_lite::pin_project;

pin_project! {
    /// The body of a response that went through the layer: the inner body untouched, the
    /// inner body buffered for hashing, a buffered prefix followed by the rest of a body that
    /// was larger than the hashing limit, or nothing (304, 412, 428, HEAD). A body that failed
    /// while being buffered fails the same way after what was read of it.
    #[derive(Debug)]
    pub struct ConditionalBody<B> {
        #[pin]
        inner: Inner<B>,
    }
}

pin_project! {
    #[project = Projection]
    #[derive(Debug)]
    enum Inner<B> {
        Empty,
        // Trailers are rare: boxed, so that the usual body is small to move.
        Full { data: Option<Bytes>, trailers: Option<Box<HeaderMap>> },
        Body { prefix: Option<Bytes>, #[pin] rest: B },
        Failed { prefix: Option<Bytes>, error: Option<BoxError> },
    }
}

impl<B> ConditionalBody<B> {
    pub(crate) fn empty() -> Self {
        Self {
            inner: Inner::Empty,
        }
    }

    pub(crate) fn full(data: Bytes, trailers: Option<Box<HeaderMap>>) -> Self {
        Self {
            inner: Inner::Full {
                data: (!data.is_empty()).then_some(data),
                trailers,
            },
        }
    }

    pub(crate) fn failed(prefix: Bytes, error: BoxError) -> Self {
        Self {
            inner: Inner::Failed {
                prefix: (!prefix.is_empty()).then_some(prefix),
                error: Some(error),
            },
        }
    }

    pub(crate) fn new(body: B) -> Self {
        Self {
            inner: Inner::Body {
                prefix: None,
                rest: body,
            },
        }
    }

    pub(crate) fn prefixed(prefix: Bytes, rest: B) -> Self {
        Self {
            inner: Inner::Body {
                prefix: (!prefix.is_empty()).then_some(prefix),
                rest,
            },
        }
    }
}

impl<B: Body<Data = Bytes, Error: Into<BoxError>>> Body for ConditionalBody<B> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        match self.project().inner.project() {
            Projection::Empty => Poll::Ready(None),
            Projection::Full { data, trailers } => Poll::Ready(match data.take() {
                Some(data) => Some(Ok(Frame::data(data))),
                None => trailers.take().map(|t| Ok(Frame::trailers(*t))),
            }),
            Projection::Body { prefix, rest } => match prefix.take() {
                Some(prefix) => Poll::Ready(Some(Ok(Frame::data(prefix)))),
                None => rest.poll_frame(cx).map_err(Into::into),
            },
            Projection::Failed { prefix, error } => Poll::Ready(match prefix.take() {
                Some(prefix) => Some(Ok(Frame::data(prefix))),
                None => error.take().map(Err),
            }),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Empty => true,
            Inner::Full { data, trailers } => data.is_none() && trailers.is_none(),
            Inner::Body { prefix, rest } => prefix.is_none() && rest.is_end_stream(),
            Inner::Failed { prefix, error } => prefix.is_none() && error.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Empty => SizeHint::with_exact(0),
            Inner::Full { data, .. } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            Inner::Failed { .. } => SizeHint::new(),
            Inner::Body { prefix, rest } => {
                let extra = prefix.as_ref().map_or(0, |p| p.len() as u64);
                let hint = rest.size_hint();
                let mut out = SizeHint::new();
                out.set_lower(hint.lower() + extra);
                if let Some(upper) = hint.upper() {
                    out.set_upper(upper + extra);
                }
                out
            }
        }
    }
}
