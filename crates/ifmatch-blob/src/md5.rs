//! `Content-MD5`: the digest of an upload, computed while it streams to the object store, so
//! that a digest the client sent is verified (400 `Md5Mismatch`) and the blob's is served.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use md5::{Digest, Md5};
use pin_project_lite::pin_project;

pin_project! {
    /// Passes a body through unchanged; at its end, leaves the MD5 of its data in the cell
    /// [`Md5Body::new`] handed out.
    pub(crate) struct Md5Body<B> {
        #[pin]
        body: B,
        hasher: Option<Md5>,
        digest: Arc<Mutex<Option<String>>>,
    }
}

impl<B> Md5Body<B> {
    /// `body`, and the cell that holds its MD5 (base64) once it has ended.
    pub(crate) fn new(body: B) -> (Self, Arc<Mutex<Option<String>>>) {
        let digest = Arc::new(Mutex::new(None));
        let body = Self {
            body,
            hasher: Some(Md5::new()),
            digest: digest.clone(),
        };
        (body, digest)
    }
}

impl<B: Body<Data = Bytes>> Body for Md5Body<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let polled = this.body.poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(hasher), Some(data)) = (this.hasher.as_mut(), frame.data_ref()) {
                    hasher.update(data);
                }
            }
            Poll::Ready(None) => {
                if let Some(hasher) = this.hasher.take() {
                    let digest = STANDARD.encode(hasher.finalize());
                    *this.digest.lock().unwrap_or_else(PoisonError::into_inner) = Some(digest);
                }
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        // Polled to its end, so that the digest is taken even of an empty body.
        self.hasher.is_none() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The digest of an empty body: what a stage that never polled its body stored.
pub(crate) fn of_empty() -> String {
    of(&[])
}

/// The MD5 of `bytes`, base64.
pub(crate) fn of(bytes: &[u8]) -> String {
    STANDARD.encode(Md5::digest(bytes))
}
