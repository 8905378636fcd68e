//! The body of the front's responses: nothing, a small buffer, or a stored object streaming.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::StoreError;

pin_project! {
    /// A response body. No boxing: an enum over the three shapes a response takes.
    #[derive(Debug)]
    pub struct ResponseBody<R> {
        #[pin]
        inner: Inner<R>,
    }
}

pin_project! {
    #[project = Projection]
    #[derive(Debug)]
    enum Inner<R> {
        Empty,
        Full { data: Option<Bytes> },
        Stream { #[pin] reader: R },
    }
}

impl<R> ResponseBody<R> {
    /// No content (HEAD, 201, 202, 304).
    pub fn empty() -> Self {
        Self {
            inner: Inner::Empty,
        }
    }

    /// A small body built in memory (XML errors and listings).
    pub fn full(data: impl Into<Bytes>) -> Self {
        Self {
            inner: Inner::Full {
                data: Some(data.into()),
            },
        }
    }

    /// A blob's bytes, streaming from storage.
    pub fn stream(reader: R) -> Self {
        Self {
            inner: Inner::Stream { reader },
        }
    }
}

impl<R: Body<Data = Bytes, Error = StoreError>> Body for ResponseBody<R> {
    type Data = Bytes;
    type Error = StoreError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, StoreError>>> {
        match self.project().inner.project() {
            Projection::Empty => Poll::Ready(None),
            Projection::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Projection::Stream { reader } => reader.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Empty => true,
            Inner::Full { data } => data.is_none(),
            Inner::Stream { reader } => reader.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Empty => SizeHint::with_exact(0),
            Inner::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            Inner::Stream { reader } => reader.size_hint(),
        }
    }
}
