//! A stored body as it arrives: the inner service's body is read once, into chunks any number
//! of clients read from, each at its own pace, from the first chunk on. The first client does
//! not wait for the last byte, and those that come while it arrives read the same bytes
//! instead of asking the inner service again.
//!
//! Whichever reader finds no chunk it has not read polls the inner body (under the lock, which
//! a poll never blocks on), appends what came and wakes the others; a reader that goes away
//! wakes them too, so that one of them polls in its place. No task is spawned.

use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use ifmatch_core::FramePoll;

use ifmatch_core::BoxError;

/// A body being stored, or stored.
#[derive(Debug)]
pub(crate) struct StoredBody {
    /// The length the inner service declared, which the body must have.
    len: u64,
    state: Mutex<State>,
}

struct State {
    /// What came so far (or all of it, in one chunk, once whole).
    chunks: Vec<Bytes>,
    received: u64,
    /// The inner body, while it is being read.
    source: Option<UnsyncBoxBody<Bytes, BoxError>>,
    failed: bool,
    /// The readers waiting for a chunk.
    waiting: Vec<Waker>,
    /// The readers there are.
    readers: usize,
    /// Held until all of it came or it failed (the gate of its key: see [`StoredBody::hold`]).
    held: Option<Box<dyn Send>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("received", &self.received)
            .field("reading", &self.source.is_some())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl StoredBody {
    /// `body`, which declared `len` bytes, to be read as it comes.
    pub(crate) fn reading<B>(body: B, len: u64) -> Arc<Self>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Arc::new(Self {
            len,
            state: Mutex::new(State {
                chunks: Vec::new(),
                received: 0,
                source: Some(body.map_err(Into::into).boxed_unsync()),
                failed: false,
                waiting: Vec::new(),
                readers: 0,
                held: None,
            }),
        })
    }

    /// A body that is whole already (read back from disk).
    pub(crate) fn whole(body: Bytes) -> Arc<Self> {
        Arc::new(Self {
            len: body.len() as u64,
            state: Mutex::new(State {
                received: body.len() as u64,
                chunks: vec![body],
                source: None,
                failed: false,
                waiting: Vec::new(),
                readers: 0,
                held: None,
            }),
        })
    }

    /// Keeps `held` until all of it has come or it failed: the collapsing gate of its key,
    /// so that the requests that come while it arrives read it rather than ask again.
    pub(crate) fn hold(&self, held: Box<dyn Send>) {
        let mut state = self.lock();
        if state.source.is_some() && !state.failed {
            state.held = Some(held);
        }
    }

    /// All of it, once it came whole (its readers may have stopped at its declared length,
    /// before the inner body said it ended).
    pub(crate) fn bytes(&self) -> Option<Bytes> {
        let mut state = self.lock();
        if state.failed || state.received != self.len {
            return None;
        }
        if state.source.is_some() {
            state.finish();
        }
        Some(state.chunks.first().cloned().unwrap_or_default())
    }

    /// Waits until all of it came (reading it if no client does), or it failed: all of it.
    pub(crate) async fn complete(self: &Arc<Self>) -> Option<Bytes> {
        let mut reader = self.reader();
        while let Some(frame) = reader.frame().await {
            frame.ok()?;
        }
        drop(reader);
        self.bytes()
    }

    /// Its length, as declared.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Whether the inner body failed or ended at another length than it declared: nothing
    /// more can be read from it, and it must not be served again.
    pub(crate) fn failed(&self) -> bool {
        self.lock().failed
    }

    /// A reader of all of it.
    pub(crate) fn reader(self: &Arc<Self>) -> Reader {
        self.part(0..self.len)
    }

    /// A reader of the bytes `range` of it (within its length).
    pub(crate) fn part(self: &Arc<Self>, range: Range<u64>) -> Reader {
        self.lock().readers += 1;
        Reader {
            fill: self.clone(),
            range,
            next: 0,
            at: 0,
            drains: false,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl State {
    fn wake_all(&mut self) {
        for waker in self.waiting.drain(..) {
            waker.wake();
        }
    }

    fn fail(&mut self) {
        self.failed = true;
        self.source = None;
        self.held = None;
        self.chunks = Vec::new();
        self.wake_all();
    }

    /// Once all of it came: one chunk, so that a stored body is one allocation, of its own
    /// size (a body that came in one chunk is copied: the chunk may be a slice of a
    /// connection's read buffer, which it would keep alive; see `owned`).
    fn finish(&mut self) {
        self.source = None;
        self.held = None;
        if let [one] = self.chunks.as_slice() {
            self.chunks = vec![ifmatch_core::owned::bytes(one)];
        } else if self.chunks.len() > 1 {
            let mut whole = BytesMut::with_capacity(usize::try_from(self.received).unwrap_or(0));
            for chunk in &self.chunks {
                whole.extend_from_slice(chunk);
            }
            self.chunks = vec![whole.freeze()];
        }
        self.wake_all();
    }
}

/// A stored body, whole or still arriving, as one client reads it (all of it, or a part):
/// the body of an answer [`SharedCache`](crate::SharedCache) serves from its store.
#[derive(Debug)]
pub struct Reader {
    fill: Arc<StoredBody>,
    /// The bytes it sends.
    range: Range<u64>,
    /// The chunk it reads next, while the body arrives.
    next: usize,
    /// Where that chunk starts: the bytes it went past.
    at: u64,
    /// Whether it reads for no client, to the end, after the last one left.
    drains: bool,
}

impl Reader {
    /// The next piece it has not gone past, and where it starts, if there is one now.
    fn take(&mut self, state: &State) -> Option<(u64, Bytes)> {
        if state.source.is_some() {
            let chunk = state.chunks.get(self.next)?.clone();
            let at = self.at;
            self.next += 1;
            self.at += chunk.len() as u64;
            return Some((at, chunk));
        }
        // Whole, in one chunk: where this reader stopped is a byte offset, which the chunk it
        // read before the merge leaves unchanged.
        let whole = state.chunks.first()?;
        let from = self.at.max(self.range.start);
        let start = usize::try_from(from).ok()?;
        (start < whole.len()).then(|| {
            self.at = whole.len() as u64;
            (from, whole.slice(start..))
        })
    }

    /// What of `chunk`, which starts at `at`, is in its range.
    fn within(&self, at: u64, chunk: &Bytes) -> Option<Bytes> {
        let end = at + chunk.len() as u64;
        let (from, to) = (self.range.start.max(at), self.range.end.min(end));
        let slice = |x: u64| usize::try_from(x - at).unwrap_or(usize::MAX);
        (from < to).then(|| chunk.slice(slice(from)..slice(to)))
    }
}

impl Body for Reader {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        let this = self.get_mut();
        let fill = this.fill.clone();
        let mut state = fill.lock();
        loop {
            if state.failed {
                return Poll::Ready(Some(Err("the origin's body was cut short".into())));
            }
            if this.at >= this.range.end {
                return Poll::Ready(None);
            }
            if let Some((at, chunk)) = this.take(&state) {
                if let Some(part) = this.within(at, &chunk) {
                    return Poll::Ready(Some(Ok(Frame::data(part))));
                }
                continue;
            }
            let Some(source) = state.source.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(source).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    // Trailers are not stored.
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if data.is_empty() {
                        continue;
                    }
                    state.received += data.len() as u64;
                    if state.received > fill.len {
                        state.fail();
                        continue;
                    }
                    state.chunks.push(data);
                    if state.received == fill.len {
                        // All of it: whole now, without waiting for the inner body to say it
                        // ended (its framing says no byte can follow), which lets go of it.
                        state.finish();
                    } else {
                        state.wake_all();
                    }
                }
                Poll::Ready(Some(Err(error))) => {
                    tracing::debug!(%error, "the origin's body failed while stored");
                    state.fail();
                }
                Poll::Ready(None) if state.received == fill.len => state.finish(),
                Poll::Ready(None) => state.fail(),
                Poll::Pending => {
                    if !state.waiting.iter().any(|w| w.will_wake(cx.waker())) {
                        state.waiting.push(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.at >= self.range.end
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.range.end.saturating_sub(self.at.max(self.range.start)))
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let mut state = self.fill.lock();
        state.readers -= 1;
        if state.source.is_none() {
            return;
        }
        // It may have been the one the inner body wakes: another takes its place.
        state.wake_all();
        // The last one gone (its client left): the body is read to its end all the same, so
        // that the next client is served what is stored rather than a connection to the
        // origin that went idle meanwhile.
        if state.readers == 0
            && !self.drains
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            drop(state);
            let mut rest = self.fill.reader();
            rest.drains = true;
            runtime.spawn(async move {
                let _ = rest.collect().await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::StreamBody;

    fn chunks(parts: &[&'static str]) -> impl Body<Data = Bytes, Error = BoxError> + Send {
        let frames: Vec<Result<Frame<Bytes>, BoxError>> = parts
            .iter()
            .map(|p| Ok(Frame::data(Bytes::from_static(p.as_bytes()))))
            .collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn readers_started_at_any_time_read_every_byte_once() {
        let fill = StoredBody::reading(chunks(&["ab", "cd", "ef"]), 6);
        let mut first = fill.reader();
        let one = first.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(one, "ab");
        let second = fill.reader();
        let rest = first.collect().await.unwrap().to_bytes();
        assert_eq!(rest, "cdef");
        assert_eq!(second.collect().await.unwrap().to_bytes(), "abcdef");
        assert!(!fill.failed());
        assert_eq!(fill.reader().collect().await.unwrap().to_bytes(), "abcdef");
    }

    #[tokio::test]
    async fn a_body_shorter_or_longer_than_declared_fails_every_reader() {
        for declared in [5, 7] {
            let fill = StoredBody::reading(chunks(&["ab", "cd", "ef"]), declared);
            assert!(
                fill.reader().collect().await.is_err(),
                "declared {declared}"
            );
            assert!(fill.failed());
            assert!(fill.reader().collect().await.is_err());
        }
    }

    #[tokio::test]
    async fn a_reader_part_way_through_the_merge_goes_on_where_it_stopped() {
        let fill = StoredBody::reading(chunks(&["ab", "cd"]), 4);
        let mut early = fill.reader();
        let one = early.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(one, "ab");
        assert_eq!(fill.reader().collect().await.unwrap().to_bytes(), "abcd");
        assert_eq!(early.collect().await.unwrap().to_bytes(), "cd");
    }

    #[tokio::test]
    async fn a_part_is_read_across_chunks_arriving_or_whole() {
        let fill = StoredBody::reading(chunks(&["abc", "def", "ghi"]), 9);
        for (range, want) in [(2..7, "cdefg"), (3..6, "def"), (8..9, "i"), (0..0, "")] {
            let part = fill.part(range.clone());
            assert_eq!(part.size_hint().exact(), Some(range.end - range.start));
            assert_eq!(part.collect().await.unwrap().to_bytes(), want, "{range:?}");
        }
        // Now whole: the same parts.
        assert_eq!(fill.part(2..7).collect().await.unwrap().to_bytes(), "cdefg");
        assert_eq!(fill.part(8..9).collect().await.unwrap().to_bytes(), "i");
    }
}
