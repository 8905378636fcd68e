//! A body of no declared length (chunked, or ended by the connection's close), passed on to
//! its client as it comes and stored once it has ended whole.
//!
//! A body of declared length is stored from its first byte (see `fill`): the memory tier
//! weighs an entry when it takes it, and followers read it while it arrives. One of no declared
//! length says its size only at its end, so it is kept beside its client's copy, up to the
//! store's largest object, and handed to the store when it ends whole; one that grows past
//! that, fails, or whose client leaves first is not stored. Requests of its key that come
//! meanwhile go to the inner service themselves.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, SizeHint};

use ifmatch_core::FramePoll;

/// What is done with a kept body once it ended whole: stores it.
pub(crate) type Keep = Box<dyn FnOnce(Bytes) + Send>;

pin_project_lite::pin_project! {
    /// An inner service's body on its way out of the cache: passed on as it is, and kept
    /// when it is one the store takes once it ended (see the [module](self)).
    pub struct Tee<B> {
        #[pin]
        inner: B,
        // Boxed: every answer that passes carries the field, moved from layer to layer.
        keeping: Option<Box<Keeping>>,
    }
}

struct Keeping {
    chunks: Vec<Bytes>,
    len: u64,
    limit: u64,
    keep: Keep,
}

impl<B: std::fmt::Debug> std::fmt::Debug for Tee<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tee")
            .field("inner", &self.inner)
            .field("keeping", &self.keeping.as_ref().map(|k| k.len))
            .finish()
    }
}

impl<B> Tee<B> {
    /// `inner`, passed on as it is.
    pub(crate) fn passing(inner: B) -> Self {
        Self {
            inner,
            keeping: None,
        }
    }

    /// Whether it still keeps what passes (it has not ended, grown past its limit or failed).
    pub(crate) fn is_keeping(&self) -> bool {
        self.keeping.is_some()
    }

    /// `inner`, passed on, and handed to `keep` once it ended whole within `limit` bytes.
    pub(crate) fn keeping(inner: B, limit: u64, keep: Keep) -> Self {
        let keeping = Keeping {
            chunks: Vec::new(),
            len: 0,
            limit,
            keep,
        };
        Self {
            inner,
            keeping: Some(Box::new(keeping)),
        }
    }
}

impl Keeping {
    /// All of it, in one allocation of its own size (the chunks may be slices of a
    /// connection's read buffer, which they would keep alive; see `owned`), to be kept.
    fn keep(self) {
        let mut whole = BytesMut::with_capacity(usize::try_from(self.len).unwrap_or(0));
        for chunk in &self.chunks {
            whole.extend_from_slice(chunk);
        }
        (self.keep)(whole.freeze());
    }
}

impl<B> Body for Tee<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<B::Error> {
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        let Some(keeping) = this.keeping.as_mut() else {
            return polled;
        };
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    keeping.len += data.len() as u64;
                    if keeping.len > keeping.limit {
                        *this.keeping = None;
                        return polled;
                    }
                    keeping.chunks.push(data.clone());
                }
                // Its end may be known without another poll (hyper then polls no more).
                if this.inner.is_end_stream()
                    && let Some(keeping) = this.keeping.take()
                {
                    (*keeping).keep();
                }
            }
            Poll::Ready(None) => {
                if let Some(keeping) = this.keeping.take() {
                    (*keeping).keep();
                }
            }
            Poll::Ready(Some(Err(_))) => *this.keeping = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Frame;
    use http_body_util::{BodyExt, StreamBody};
    use std::sync::{Arc, Mutex};

    use ifmatch_core::BoxError;

    fn body(
        parts: &[Result<&'static str, &'static str>],
    ) -> impl Body<Data = Bytes, Error = BoxError> + Send + Unpin + use<> {
        let frames: Vec<Result<Frame<Bytes>, BoxError>> = parts
            .iter()
            .map(|part| match part {
                Ok(data) => Ok(Frame::data(Bytes::from_static(data.as_bytes()))),
                Err(error) => Err((*error).into()),
            })
            .collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    /// What the tee kept of `parts` within `limit`, and what its client was sent.
    async fn tee(
        parts: &[Result<&'static str, &'static str>],
        limit: u64,
    ) -> (Option<Bytes>, Result<Bytes, String>) {
        let kept = Arc::new(Mutex::new(None));
        let into = kept.clone();
        let tee = Tee::keeping(
            body(parts),
            limit,
            Box::new(move |bytes| *into.lock().unwrap() = Some(bytes)),
        );
        let sent = tee.collect().await.map(|c| c.to_bytes());
        let kept = kept.lock().unwrap().take();
        (kept, sent.map_err(|e| e.to_string()))
    }

    #[tokio::test]
    async fn a_body_that_ends_whole_within_the_limit_is_kept_as_its_client_was_sent_it() {
        let (kept, sent) = tee(&[Ok("ab"), Ok(""), Ok("cde")], 5).await;
        assert_eq!(sent.unwrap(), "abcde");
        assert_eq!(kept.unwrap(), "abcde");
        let (kept, sent) = tee(&[], 5).await;
        assert_eq!((kept.unwrap(), sent.unwrap()), (Bytes::new(), Bytes::new()));
    }

    #[tokio::test]
    async fn a_body_past_the_limit_or_failed_is_passed_on_and_not_kept() {
        let (kept, sent) = tee(&[Ok("ab"), Ok("cd"), Ok("ef")], 5).await;
        assert_eq!(sent.unwrap(), "abcdef", "its client gets all of it");
        assert!(kept.is_none());
        let mut past = Tee::keeping(body(&[Ok("abc"), Ok("def"), Ok("g")]), 5, Box::new(|_| {}));
        past.frame().await.unwrap().unwrap();
        assert!(past.is_keeping());
        past.frame().await.unwrap().unwrap();
        assert!(!past.is_keeping(), "no longer once past its limit");
        let (kept, sent) = tee(&[Ok("ab"), Err("reset")], 5).await;
        assert!(sent.is_err());
        assert!(kept.is_none());
    }

    #[tokio::test]
    async fn a_body_whose_client_left_before_its_end_is_not_kept() {
        let kept = Arc::new(Mutex::new(None));
        let into = kept.clone();
        let mut tee = Tee::keeping(
            body(&[Ok("ab"), Ok("cd")]),
            10,
            Box::new(move |bytes| *into.lock().unwrap() = Some(bytes)),
        );
        let first = tee.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, "ab");
        drop(tee);
        assert!(kept.lock().unwrap().is_none());
    }

    #[tokio::test]
    async fn a_passing_tee_keeps_nothing_and_changes_nothing() {
        let tee = Tee::passing(body(&[Ok("ab"), Ok("cd")]));
        assert!(tee.keeping.is_none());
        assert_eq!(tee.collect().await.unwrap().to_bytes(), "abcd");
    }
}
