//! A stored object's bytes on their way out.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use ifmatch_blob::StoreError;
use ifmatch_core::FramePoll;
use pin_project_lite::pin_project;

/// The read buffer of a streaming object read.
const READ_CHUNK: usize = 256 << 10;

pin_project! {
    /// A stored object's bytes on their way out: from the byte cache, or streaming from its
    /// file in chunks of at most 256 KiB.
    #[derive(Debug)]
    pub struct ObjectReader {
        #[pin]
        inner: Source,
    }
}

pin_project! {
    #[project = SourceProjection]
    #[derive(Debug)]
    enum Source {
        Memory { bytes: Option<Bytes> },
        File { #[pin] file: tokio::fs::File, buf: BytesMut, remaining: u64 },
    }
}

impl ObjectReader {
    pub(super) fn memory(bytes: Bytes) -> Self {
        let bytes = (!bytes.is_empty()).then_some(bytes);
        Self {
            inner: Source::Memory { bytes },
        }
    }

    pub(super) fn file(file: tokio::fs::File, remaining: u64) -> Self {
        Self {
            inner: Source::File {
                file,
                buf: BytesMut::new(),
                remaining,
            },
        }
    }
}

impl Body for ObjectReader {
    type Data = Bytes;
    type Error = StoreError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        let (file, buf, remaining) = match self.project().inner.project() {
            SourceProjection::Memory { bytes } => {
                return Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b))));
            }
            SourceProjection::File {
                file,
                buf,
                remaining,
            } => (file, buf, remaining),
        };
        if *remaining == 0 {
            return Poll::Ready(None);
        }
        let want = (*remaining).min(READ_CHUNK as u64) as usize;
        if buf.capacity() < want {
            buf.reserve(READ_CHUNK.max(want));
        }
        let mut limited = BufMut::limit(&mut *buf, want);
        match tokio_util::io::poll_read_buf(file, cx, &mut limited) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(Ok(0)) => {
                let e = io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "object shorter than its record",
                );
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(Ok(n)) => {
                *remaining -= n as u64;
                Poll::Ready(Some(Ok(Frame::data(buf.split().freeze()))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Source::Memory { bytes } => bytes.is_none(),
            Source::File { remaining, .. } => *remaining == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Source::Memory { bytes } => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            Source::File { remaining, .. } => SizeHint::with_exact(*remaining),
        }
    }
}
