//! Blob bytes in R2.

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use http_body::{Body, Frame};
use ifmatch_blob::{BoxError, HashingBody, Objects, Staged, StoreError};
use ifmatch_blob::{Incoming, Span};
use ifmatch_core::EntityTag;
use ifmatch_core::FramePoll;
use worker::send::{SendFuture, SendWrapper};
use worker::{Bucket, ByteStream, FixedLengthStream};

/// Blob bytes in an R2 bucket: every upload is a new object under a random name, so R2 never
/// has to take a conditional write; which object is current is the record's business.
///
/// The SHA-256 ETag is computed while the upload streams and kept in the blob's record (the
/// only place clients' tags come from): R2 takes custom metadata before the body, when the
/// digest is not known yet, and R2's own MD5 tag is never shown.
pub struct R2Objects {
    bucket: SendWrapper<Bucket>,
}

impl R2Objects {
    /// Bytes in `bucket`.
    pub fn new(bucket: Bucket) -> Self {
        Self {
            bucket: SendWrapper::new(bucket),
        }
    }
}

fn unavailable(error: worker::Error) -> StoreError {
    StoreError::Unavailable(error.to_string().into())
}

/// What the upload stream learned, read once R2 has taken the whole body.
#[derive(Default)]
struct Outcome {
    digest: Option<(EntityTag, u64)>,
    failure: Option<StoreError>,
}

/// The request body as R2 wants it (chunks of bytes), hashed on the way.
struct Upload<B> {
    body: Pin<Box<HashingBody<B>>>,
    outcome: Rc<RefCell<Outcome>>,
}

impl<B> Stream for Upload<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Item = worker::Result<Vec<u8>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            return match self.body.as_mut().poll_frame(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(chunk) => Poll::Ready(Some(Ok(chunk.to_vec()))),
                    Err(_) => continue,
                },
                Poll::Ready(Some(Err(error))) => {
                    let message = error.to_string();
                    self.outcome.borrow_mut().failure = Some(error);
                    Poll::Ready(Some(Err(worker::Error::RustError(message))))
                }
                Poll::Ready(None) => {
                    let digest = self.body.as_mut().finish();
                    self.outcome.borrow_mut().digest = Some(digest);
                    Poll::Ready(None)
                }
            };
        }
    }
}

impl Objects for R2Objects {
    type Reader = R2Reader;

    fn stage(
        &self,
        body: impl Incoming,
        limit: u64,
    ) -> impl Future<Output = Result<Staged, StoreError>> + Send {
        SendFuture::new(async move {
            let length = body.size_hint().exact().ok_or(StoreError::LengthRequired)?;
            if length > limit {
                return Err(StoreError::TooLarge { limit });
            }
            let object = format!("blobs/{}", crate::env::random_uuid());
            let outcome = Rc::new(RefCell::new(Outcome::default()));
            let upload = Upload {
                body: Box::pin(HashingBody::new(body, limit)),
                outcome: outcome.clone(),
            };
            let put = self
                .bucket
                .put(&object, FixedLengthStream::wrap(upload, length))
                .execute()
                .await;
            let outcome = outcome.take();
            match (put, outcome.failure, outcome.digest) {
                (Ok(_), None, Some((etag, len))) => Ok(Staged { object, etag, len }),
                (_, Some(failure), _) => Err(failure),
                // The client sent fewer bytes than it announced: R2 refused the object.
                (Err(error), None, _) => Err(StoreError::Body(error.to_string().into())),
                (Ok(_), None, None) => Err(StoreError::Body("the body ended early".into())),
            }
        })
    }

    fn read(
        &self,
        object: &str,
        len: u64,
        range: Span,
    ) -> impl Future<Output = Result<R2Reader, StoreError>> + Send {
        SendFuture::new(async move {
            let mut get = self.bucket.get(object);
            if let Some(range) = range.clone() {
                get = get.range(worker::Range::OffsetWithLength {
                    offset: range.start,
                    length: range.end - range.start,
                });
            }
            let found = get.execute().await.map_err(unavailable)?;
            let found =
                found.ok_or_else(|| StoreError::not_found(format_args!("object {object}")))?;
            // R2 tells the whole object's size with any read, ranged or not.
            ifmatch_blob::check_len(object, found.size(), len)?;
            let stream = match found.body() {
                Some(body) => Some(body.stream().map_err(unavailable)?),
                None => None,
            };
            Ok(R2Reader(SendWrapper::new(stream)))
        })
    }

    fn discard(&self, object: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        SendFuture::new(async move { self.bucket.delete(object).await.map_err(unavailable) })
    }
}

/// The next frame of a JavaScript byte stream (none once it is gone), its error as `error`
/// makes it.
pub(crate) fn poll_stream<E>(
    stream: Option<&mut ByteStream>,
    cx: &mut Context<'_>,
    error: impl FnOnce(worker::Error) -> E,
) -> FramePoll<E> {
    let Some(stream) = stream else {
        return Poll::Ready(None);
    };
    let next = std::task::ready!(Pin::new(stream).poll_next(cx));
    Poll::Ready(next.map(|chunk| {
        chunk
            .map(|bytes| Frame::data(Bytes::from(bytes)))
            .map_err(error)
    }))
}

/// An R2 object's bytes as an HTTP body.
pub struct R2Reader(SendWrapper<Option<ByteStream>>);

impl Body for R2Reader {
    type Data = Bytes;
    type Error = StoreError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        poll_stream(self.0.as_mut(), cx, unavailable)
    }
}
