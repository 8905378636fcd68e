//! The response future: early answers, pass-through, the read state machine, and writes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Response};
use http_body::Body;
use pin_project_lite::pin_project;

use crate::body::ConditionalBody;
use crate::read_answer::{Hashing, ReadContext, Shape, finish_read, shape, tag};
use ifmatch_core::BoxError;

/// Whether an answer to a HEAD (sent to the inner service as a GET) came from a HEAD handler
/// all the same: no content, but a `Content-Length` that says there would be some. Its empty
/// body is not the representation, so it is not hashed.
fn answered_as_head<B: http_body::Body>(parts: &http::response::Parts, body: &B) -> bool {
    body.is_end_stream()
        && parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .is_some_and(|len| len != "0")
}

type BoxedFuture<B, E> =
    Pin<Box<dyn Future<Output = Result<Response<ConditionalBody<B>>, E>> + Send>>;

pin_project! {
    /// The future of [`Conditional`](crate::Conditional): 304s from the cache and the other
    /// early answers are a variant of their own, and reads of known keys are an unboxed state
    /// machine. Writes, and the first read of a key after it changed, await the version
    /// backend's futures and are boxed.
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        state: State<F, B, E>,
    }
}

pin_project! {
    #[project = StateProjection]
    enum State<F, B, E> {
        Ready { response: Option<Response<ConditionalBody<B>>> },
        Passthrough { #[pin] future: F },
        Read { #[pin] future: F, context: Option<ReadContext> },
        Buffering {
            parts: Option<http::response::Parts>,
            body: Option<B>,
            taken: Taken,
            context: Option<ReadContext>,
            // Hashed only if the whole body is ready without a wait.
            if_ready: bool,
            // Whether it has a `Content-Encoding`.
            coded: bool,
        },
        Boxed { future: BoxedFuture<B, E> },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    #[inline(always)]
    pub(crate) fn ready(response: Response<ConditionalBody<B>>) -> Self {
        Self {
            state: State::Ready {
                response: Some(response),
            },
        }
    }

    #[inline(always)]
    pub(crate) fn passthrough(future: F) -> Self {
        Self {
            state: State::Passthrough { future },
        }
    }

    #[inline(always)]
    pub(crate) fn read(future: F, context: ReadContext) -> Self {
        Self {
            state: State::Read {
                future,
                context: Some(context),
            },
        }
    }

    /// Writes, and reads that teach the version backend: they await the backend's futures,
    /// boxed. `make` builds the future here, in a frame of its own: built in the caller's, it
    /// would be taken on the stack (and probed, page by page, when it passes 4 KiB) by every
    /// request the caller serves, reads of known keys included.
    #[inline(never)]
    pub(crate) fn boxed<Fut>(make: impl FnOnce() -> Fut) -> Self
    where
        Fut: Future<Output = Result<Response<ConditionalBody<B>>, E>> + Send + 'static,
    {
        let future: BoxedFuture<B, E> = Box::pin(make());
        Self {
            state: State::Boxed { future },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Output = Result<Response<ConditionalBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProjection::Ready { response } => {
                    return Poll::Ready(Ok(response.take().expect("polled after completion")));
                }
                StateProjection::Passthrough { future } => {
                    return future.poll(cx).map_ok(|r| r.map(ConditionalBody::new));
                }
                StateProjection::Boxed { future } => return future.as_mut().poll(cx),
                StateProjection::Read { future, context } => {
                    let response = ready!(future.poll(cx))?;
                    let context = context.take().expect("polled after completion");
                    let Shape { hashing, coded } = shape(&response, context.hash_limit);
                    let (parts, mut body) = response.into_parts();
                    if hashing == Hashing::No || (context.head && answered_as_head(&parts, &body)) {
                        let body = ConditionalBody::new(body);
                        return Poll::Ready(Ok(finish_read(&context, parts, body, None)));
                    }
                    // The usual body, all of it ready now, is read here: no state to move into.
                    let mut taken = Taken::default();
                    let if_ready = hashing == Hashing::IfReady;
                    if let Poll::Ready(buffered) =
                        taken.poll(cx, &mut body, context.hash_limit, if_ready)
                    {
                        return Poll::Ready(Ok(finish_buffered(
                            &context, parts, body, buffered, coded,
                        )));
                    }
                    state.set(State::Buffering {
                        parts: Some(parts),
                        body: Some(body),
                        taken,
                        context: Some(context),
                        if_ready,
                        coded,
                    });
                }
                StateProjection::Buffering {
                    parts,
                    body,
                    taken,
                    context,
                    if_ready,
                    coded,
                } => {
                    let limit = context
                        .as_ref()
                        .expect("polled after completion")
                        .hash_limit;
                    let inner = body.as_mut().expect("polled after completion");
                    let buffered = ready!(taken.poll(cx, inner, limit, *if_ready));
                    let context = context.take().expect("polled after completion");
                    let parts = parts.take().expect("polled after completion");
                    let body = body.take().expect("polled after completion");
                    return Poll::Ready(Ok(finish_buffered(
                        &context, parts, body, buffered, *coded,
                    )));
                }
            }
        }
    }
}

/// What a body came to, once read for hashing.
enum Buffered {
    /// All of it, with its trailers.
    Whole(Bytes, Option<Box<HeaderMap>>),
    /// What came before it turned out too large, or had to wait: the rest streams through.
    Prefix(Bytes),
    /// What came before it failed, and how.
    Failed(Bytes, BoxError),
}

/// What came of a body so far.
#[derive(Default)]
struct Taken {
    // A body of one frame (the usual case) is kept as it came, without a copy.
    first: Option<Bytes>,
    buffer: BytesMut,
    trailers: Option<Box<HeaderMap>>,
}

impl Taken {
    /// Reads `body` on until it ends, fails, turns out larger than `limit`, or (when
    /// `if_ready`: only a body ready at once is hashed) has to wait.
    fn poll<B>(
        &mut self,
        cx: &mut Context<'_>,
        body: &mut B,
        limit: usize,
        if_ready: bool,
    ) -> Poll<Buffered>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        loop {
            let frame = match Pin::new(&mut *body).poll_frame(cx) {
                Poll::Pending if if_ready => return Poll::Ready(Buffered::Prefix(self.all())),
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    return Poll::Ready(Buffered::Whole(self.all(), self.trailers.take()));
                }
                Poll::Ready(Some(Err(error))) => {
                    return Poll::Ready(Buffered::Failed(self.all(), error.into()));
                }
                Poll::Ready(Some(Ok(frame))) => frame,
            };
            let read = self.first.as_ref().map_or(0, Bytes::len) + self.buffer.len();
            match frame.into_data() {
                Ok(data) if read + data.len() > limit => {
                    let mut prefix = BytesMut::from(self.all());
                    prefix.extend_from_slice(&data);
                    return Poll::Ready(Buffered::Prefix(prefix.freeze()));
                }
                // One frame, and the end: the usual body, without waiting for another poll.
                Ok(data) if read == 0 && body.is_end_stream() => {
                    return Poll::Ready(Buffered::Whole(data, None));
                }
                Ok(data) if read == 0 => self.first = Some(data),
                Ok(data) => {
                    if let Some(only) = self.first.take() {
                        self.buffer.extend_from_slice(&only);
                    }
                    self.buffer.extend_from_slice(&data);
                }
                Err(frame) => {
                    if let Ok(more) = frame.into_trailers() {
                        self.trailers.get_or_insert_with(Box::default).extend(more);
                    }
                }
            }
        }
    }

    /// Everything taken so far, as one piece.
    fn all(&mut self) -> Bytes {
        take_all(&mut self.first, &mut self.buffer)
    }
}

/// The answer made of a body read for hashing: tagged when whole; otherwise what came, then
/// the rest of `body` untagged, or its failure.
fn finish_buffered<B>(
    context: &ReadContext,
    mut parts: http::response::Parts,
    body: B,
    buffered: Buffered,
    coded: bool,
) -> Response<ConditionalBody<B>>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    match buffered {
        Buffered::Whole(bytes, trailers) => {
            let tagged = tag(context, &mut parts, &bytes, coded);
            let full = ConditionalBody::full(bytes, trailers);
            finish_read(context, parts, full, Some(tagged))
        }
        Buffered::Prefix(prefix) => finish_read(
            context,
            parts,
            ConditionalBody::prefixed(prefix, body),
            None,
        ),
        Buffered::Failed(prefix, error) => {
            finish_read(context, parts, ConditionalBody::failed(prefix, error), None)
        }
    }
}

/// Everything buffered so far, as one piece.
fn take_all(first: &mut Option<Bytes>, buffer: &mut BytesMut) -> Bytes {
    match first.take() {
        Some(only) if buffer.is_empty() => only,
        Some(only) => {
            let mut all = BytesMut::with_capacity(only.len() + buffer.len());
            all.extend_from_slice(&only);
            all.extend_from_slice(buffer);
            all.freeze()
        }
        None => buffer.split().freeze(),
    }
}
