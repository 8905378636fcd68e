//! The response future: early answers, pass-through, the read state machine, and writes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Response};
use http_body::Body;
use pin_project_lite::pin_project;

use crate::BoxError;
use crate::body::ConditionalBody;
use crate::read_answer::{Hashing, ReadContext, Shape, finish_read, shape, tag};

/// Whether an answer to a HEAD (sent to the inner service as a GET) came from a HEAD handler
/// all the same: no content, but a `Content-Length` that says there would be some. Its empty
/// body is not the representation, so it is not hashed.
fn answered_as_head<B: http_body::Body>(response: &Response<B>) -> bool {
    response.body().is_end_stream()
        && response
            .headers()
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
            // A body of one frame (the usual case) is kept as it came, without a copy.
            first: Option<Bytes>,
            buffer: BytesMut,
            trailers: Option<HeaderMap>,
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
    pub(crate) fn ready(response: Response<ConditionalBody<B>>) -> Self {
        Self {
            state: State::Ready {
                response: Some(response),
            },
        }
    }

    pub(crate) fn passthrough(future: F) -> Self {
        Self {
            state: State::Passthrough { future },
        }
    }

    pub(crate) fn read(future: F, context: ReadContext) -> Self {
        Self {
            state: State::Read {
                future,
                context: Some(context),
            },
        }
    }

    /// Writes, and reads that teach the version backend: they await the backend's futures.
    pub(crate) fn boxed(future: BoxedFuture<B, E>) -> Self {
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
                    if hashing == Hashing::No || (context.head && answered_as_head(&response)) {
                        let (parts, body) = response.into_parts();
                        return Poll::Ready(Ok(finish_read(
                            &context,
                            parts,
                            ConditionalBody::new(body),
                            None,
                        )));
                    }
                    let (parts, body) = response.into_parts();
                    state.set(State::Buffering {
                        parts: Some(parts),
                        body: Some(body),
                        first: None,
                        buffer: BytesMut::new(),
                        trailers: None,
                        context: Some(context),
                        if_ready: hashing == Hashing::IfReady,
                        coded,
                    });
                }
                StateProjection::Buffering {
                    parts,
                    body,
                    first,
                    buffer,
                    trailers,
                    context,
                    if_ready,
                    coded,
                } => {
                    let limit = context
                        .as_ref()
                        .expect("polled after completion")
                        .hash_limit;
                    let polled = match Pin::new(body.as_mut().expect("polled after completion"))
                        .poll_frame(cx)
                    {
                        Poll::Ready(polled) => polled,
                        Poll::Pending if *if_ready => {
                            // It streams: what came goes now, the rest as it comes, untagged.
                            let prefix = take_all(first, buffer);
                            let context = context.take().expect("polled after completion");
                            let parts = parts.take().expect("polled after completion");
                            let rest = body.take().expect("polled after completion");
                            let body = ConditionalBody::prefixed(prefix, rest);
                            return Poll::Ready(Ok(finish_read(&context, parts, body, None)));
                        }
                        Poll::Pending => return Poll::Pending,
                    };
                    let frame = match polled {
                        Some(Ok(frame)) => frame,
                        Some(Err(error)) => {
                            // Fail the client's body the way the inner body failed, after what came.
                            let body =
                                ConditionalBody::failed(take_all(first, buffer), error.into());
                            let context = context.take().expect("polled after completion");
                            let parts = parts.take().expect("polled after completion");
                            return Poll::Ready(Ok(finish_read(&context, parts, body, None)));
                        }
                        None => {
                            let bytes = take_all(first, buffer);
                            let context = context.take().expect("polled after completion");
                            let mut parts = parts.take().expect("polled after completion");
                            let body = ConditionalBody::full(bytes.clone(), trailers.take());
                            let tagged = tag(&context, &mut parts, bytes, *coded);
                            return Poll::Ready(Ok(finish_read(
                                &context,
                                parts,
                                body,
                                Some(tagged),
                            )));
                        }
                    };
                    let read = first.as_ref().map_or(0, Bytes::len) + buffer.len();
                    match frame.into_data() {
                        Ok(data) if read + data.len() > limit => {
                            // Too large to hash: the rest streams through, untagged.
                            let mut prefix = BytesMut::from(take_all(first, buffer));
                            prefix.extend_from_slice(&data);
                            let context = context.take().expect("polled after completion");
                            let parts = parts.take().expect("polled after completion");
                            let rest = body.take().expect("polled after completion");
                            let body = ConditionalBody::prefixed(prefix.freeze(), rest);
                            return Poll::Ready(Ok(finish_read(&context, parts, body, None)));
                        }
                        Ok(data) if read == 0 => *first = Some(data),
                        Ok(data) => {
                            if let Some(only) = first.take() {
                                buffer.extend_from_slice(&only);
                            }
                            buffer.extend_from_slice(&data);
                        }
                        Err(frame) => {
                            if let Ok(more) = frame.into_trailers() {
                                trailers.get_or_insert_with(HeaderMap::new).extend(more);
                            }
                        }
                    }
                }
            }
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
