//! Reading what is left of a refused upload, so its client reads the refusal.
//!
//! A request refused before its body is read (403, 404, 412, 413, ...) would otherwise end its
//! connection with the body still coming: the client's next write fails (EPIPE, a reset) and
//! most clients report that instead of the answer (Node's, and so the JS SDK, retry it as a
//! network error). The body is handed to the front wrapped in [`Kept`]; if the front drops it
//! unread, it comes back here, and what is left is read and discarded while the answer goes
//! (hyper writes a response while its request's body still comes), when it is small enough
//! ([`LIMIT`]) and arrives in time ([`TIME`]); then the connection serves its next request. A
//! larger remainder, or one that does not come, is left unread: the connection closes. The
//! answer never waits for it: a client that sends its head and waits for the answer before its
//! body gets the refusal at once.
//!
//! A client that sent `Expect: 100-continue` sends nothing before `100 Continue`, which hyper
//! sends when the body is first read: a body the front refused without reading it is then
//! left unread, so the refusal goes at once, without a `100 Continue`, and the client never
//! sends a byte (RFC 9110 10.1.1).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, SizeHint};
use http_body_util::BodyExt;
use ifmatch_core::FramePoll;

/// The most bytes read to let a refused client read its answer.
pub(crate) const LIMIT: u64 = 8 << 20;
/// The longest spent reading them.
pub(crate) const TIME: Duration = Duration::from_secs(5);

/// An unread body, how many bytes of it remain if the request said, and whether any read
/// asked for it.
type Slot<B> = Arc<Mutex<Option<(Pin<Box<B>>, Option<u64>, bool)>>>;

/// A request body that, dropped before its end, goes back to its [`Leftover`].
pub(crate) struct Kept<B> {
    body: Option<Pin<Box<B>>>,
    /// What is left to come: the declared length less what was read.
    left: Option<u64>,
    /// Whether it was ever polled (which sends a `100 Continue` the client waits for).
    asked: bool,
    slot: Slot<B>,
}

/// Where an unread body comes back to.
pub(crate) struct Leftover<B> {
    slot: Slot<B>,
    /// The request asked for `100 Continue` before its body.
    expects_continue: bool,
}

/// Wraps the body of a request whose head is `headers`; the [`Leftover`] gets it back if it
/// is dropped before its end.
pub(crate) fn keep<B: Body>(body: B, headers: &http::HeaderMap) -> (Kept<B>, Leftover<B>) {
    let declared =
        (headers.get(http::header::CONTENT_LENGTH)).and_then(|v| v.to_str().ok()?.parse().ok());
    let expects_continue = (headers.get(http::header::EXPECT))
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let slot = Arc::new(Mutex::new(None));
    let kept = Kept {
        body: Some(Box::pin(body)),
        left: declared,
        asked: false,
        slot: slot.clone(),
    };
    let leftover = Leftover {
        slot,
        expects_continue,
    };
    (kept, leftover)
}

impl<B: Body<Data = Bytes>> Body for Kept<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        let this = self.get_mut();
        let Some(body) = &mut this.body else {
            return Poll::Ready(None);
        };
        this.asked = true;
        let polled = body.as_mut().poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            this.left = this.left.map(|left| left.saturating_sub(data.len() as u64));
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), |b| b.size_hint())
    }
}

impl<B> Drop for Kept<B> {
    fn drop(&mut self) {
        if let Some(body) = self.body.take() {
            let unread = (body, self.left, self.asked);
            *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(unread);
        }
    }
}

impl<B: Body<Data = Bytes>> Leftover<B> {
    /// Reads and discards what is left of the body, if it was dropped unread and at most
    /// [`LIMIT`] bytes remain by its `Content-Length`, within [`TIME`]; not if its client
    /// waits for `100 Continue` before sending it.
    pub(crate) async fn drain(self) {
        let body = self.slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some((mut body, left, asked)) = body else {
            return;
        };
        if body.is_end_stream() || left.is_none_or(|left| left > LIMIT) {
            return;
        }
        // The client waits for a `100 Continue` that reading would send: it sends nothing.
        if self.expects_continue && !asked {
            return;
        }
        let _ = tokio::time::timeout(TIME, async {
            let mut read = 0;
            while let Some(Ok(frame)) = body.frame().await {
                read += frame.data_ref().map_or(0, |d| d.len() as u64);
                if read > LIMIT {
                    return;
                }
            }
        })
        .await;
    }
}
