//! The body of the front's responses: nothing, a small buffer, or stored objects streaming
//! (one, or the blocks of a blob committed from a block list, opened one after the other).

use std::collections::VecDeque;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use ifmatch_core::FramePoll;

use crate::store_error::StoreError;

/// A response body: an enum over the shapes a response takes. A store's reader and a list of
/// pieces are boxed, so that an answer (which every layer around the front moves) stays small
/// when it carries neither, as most do: the 304s, the errors, the XML.
#[derive(Debug)]
pub struct ResponseBody<R> {
    inner: Inner<R>,
}

#[derive(Debug)]
enum Inner<R> {
    Empty,
    Full { data: Option<Bytes> },
    Stream { reader: Pin<Box<R>>, remaining: u64 },
    Pieces { pieces: Box<Pieces<R>> },
}

/// A part of one object to read: its name, its length, the range of it; with no name, as many
/// zeros as the range is long (a page blob's pages that hold no bytes).
pub(crate) type Piece = (String, u64, Range<u64>);

/// What one frame of zeros holds at most.
const ZEROS: &[u8] = &[0; 64 << 10];

pub(crate) type Opening<R> = Pin<Box<dyn Future<Output = Result<R, StoreError>> + Send>>;

/// Several objects read one after the other, each opened when the one before has ended, so
/// that a blob of thousands of blocks holds one open object at a time.
pub(crate) struct Pieces<R> {
    open: Box<dyn Fn(Piece) -> Opening<R> + Send>,
    pending: VecDeque<Piece>,
    opening: Option<Opening<R>>,
    reading: Option<Pin<Box<R>>>,
    /// Zeros still to give before the next piece.
    zeros: u64,
    remaining: u64,
}

impl<R> std::fmt::Debug for Pieces<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pieces")
            .field("pending", &self.pending.len())
            .field("remaining", &self.remaining)
            .finish()
    }
}

impl<R: Body<Data = Bytes, Error = StoreError>> Pieces<R> {
    /// `first`, already open (if the pieces start with one), then `rest`, each opened by
    /// `open`.
    pub(crate) fn new(
        first: Option<R>,
        rest: Vec<Piece>,
        len: u64,
        open: impl Fn(Piece) -> Opening<R> + Send + 'static,
    ) -> Self {
        Self {
            open: Box::new(open),
            pending: rest.into(),
            opening: None,
            reading: first.map(Box::pin),
            zeros: 0,
            remaining: len,
        }
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> FramePoll<StoreError> {
        loop {
            if self.zeros > 0 {
                let n = self.zeros.min(ZEROS.len() as u64);
                self.zeros -= n;
                self.remaining = self.remaining.saturating_sub(n);
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                    &ZEROS[..n as usize],
                )))));
            }
            if let Some(reader) = &mut self.reading {
                match std::task::ready!(reader.as_mut().poll_frame(cx)) {
                    Some(Ok(frame)) => {
                        if let Some(data) = frame.data_ref() {
                            self.remaining = self.remaining.saturating_sub(data.len() as u64);
                        }
                        return Poll::Ready(Some(Ok(frame)));
                    }
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => self.reading = None,
                }
            }
            if let Some(opening) = &mut self.opening {
                let reader = std::task::ready!(opening.as_mut().poll(cx));
                self.opening = None;
                match reader {
                    Ok(reader) => self.reading = Some(Box::pin(reader)),
                    // A later block that cannot be read ends the body early: the client sees
                    // fewer bytes than Content-Length said, never other bytes.
                    Err(e) => return Poll::Ready(Some(Err(e))),
                }
                continue;
            }
            match self.pending.pop_front() {
                Some((object, _, range)) if object.is_empty() => {
                    self.zeros = range.end - range.start;
                }
                Some(piece) => self.opening = Some((self.open)(piece)),
                None => return Poll::Ready(None),
            }
        }
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

    /// A blob's `len` bytes, streaming from storage: the size it tells is exact, as a store
    /// that needs a length before it takes a body (R2) needs it when a copy stages them.
    pub fn stream(reader: R, len: u64) -> Self {
        Self {
            inner: Inner::Stream {
                reader: Box::pin(reader),
                remaining: len,
            },
        }
    }

    /// A blob's bytes from several objects in turn.
    pub(crate) fn pieces(pieces: Pieces<R>) -> Self {
        Self {
            inner: Inner::Pieces {
                pieces: Box::new(pieces),
            },
        }
    }
}

impl<R: Body<Data = Bytes, Error = StoreError>> Body for ResponseBody<R> {
    type Data = Bytes;
    type Error = StoreError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        match &mut self.get_mut().inner {
            Inner::Empty => Poll::Ready(None),
            Inner::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Inner::Stream { reader, remaining } => {
                let frame = ready!(reader.as_mut().poll_frame(cx));
                if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref)) {
                    let read = data.map_or(0, |d| d.len() as u64);
                    *remaining = remaining.saturating_sub(read);
                }
                Poll::Ready(frame)
            }
            Inner::Pieces { pieces } => pieces.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Empty => true,
            Inner::Full { data } => data.is_none(),
            Inner::Stream { reader, .. } => reader.is_end_stream(),
            Inner::Pieces { pieces } => {
                pieces.remaining == 0 && pieces.pending.is_empty() && pieces.opening.is_none()
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Empty => SizeHint::with_exact(0),
            Inner::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            Inner::Stream { remaining, .. } => SizeHint::with_exact(*remaining),
            Inner::Pieces { pieces } => SizeHint::with_exact(pieces.remaining),
        }
    }
}

/// A request's body as the front's handlers and `Objects::stage`
/// take it: bytes, sendable, failing with an error any failure can carry.
pub trait Incoming:
    Body<Data = Bytes, Error: Into<ifmatch_core::BoxError>> + Send + 'static
{
}

impl<B: Body<Data = Bytes, Error: Into<ifmatch_core::BoxError>> + Send + 'static> Incoming for B {}

/// The whole of `body` if it holds at most `max` bytes; `None` when it holds more, or breaks
/// off.
pub(crate) async fn read_at_most(body: impl Incoming, max: usize) -> Option<Bytes> {
    use http_body_util::BodyExt;
    let collected = http_body_util::Limited::new(body, max)
        .collect()
        .await
        .ok()?;
    Some(collected.to_bytes())
}
