//! A body adapter that hashes and counts what passes through it: every backend stages
//! uploads through it, so the ETag and the size limit are enforced in one place.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, SizeHint};
use ifmatch_core::{EntityTag, EtagHasher};
use pin_project_lite::pin_project;

use crate::store::BoxError;
use crate::store::StoreError;
use ifmatch_core::FramePoll;

pin_project! {
    /// Passes a body's frames through unchanged while hashing their data with the project's
    /// ETag hasher; fails with [`StoreError::TooLarge`] as soon as more than `limit` bytes have
    /// come, and with [`StoreError::Body`] when the body itself fails.
    #[derive(Debug)]
    pub struct HashingBody<B> {
        #[pin]
        body: B,
        hasher: EtagHasher,
        limit: u64,
    }
}

impl<B> HashingBody<B> {
    /// Hashes `body`, allowing at most `limit` bytes.
    pub fn new(body: B, limit: u64) -> Self {
        Self {
            body,
            hasher: EtagHasher::new(),
            limit,
        }
    }

    /// The ETag and length of everything that passed; call once the body has ended.
    pub fn finish(self: Pin<&mut Self>) -> (EntityTag, u64) {
        let hasher = std::mem::take(self.project().hasher);
        let len = hasher.len();
        (hasher.finish(), len)
    }
}

impl<B: Body<Data = Bytes, Error: Into<BoxError>>> Body for HashingBody<B> {
    type Data = Bytes;
    type Error = StoreError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        let this = self.project();
        let frame = match this.body.poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(StoreError::Body(e.into())))),
            Poll::Ready(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref() {
            if this.hasher.len() + data.len() as u64 > *this.limit {
                return Poll::Ready(Some(Err(StoreError::TooLarge { limit: *this.limit })));
            }
            this.hasher.update(data);
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
