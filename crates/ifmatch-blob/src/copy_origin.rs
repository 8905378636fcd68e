//! Copies whose source another server holds (Put Blob From URL, Copy Blob, Put Block From URL,
//! Append Block From URL naming a URL of any HTTP origin): the reads the host makes for the
//! front. The native server makes them with an HTTP client, for the origins its operator lets
//! it reach (`--copy-from`: a server that fetches any URL a client names reaches what only it
//! may, the cloud's metadata address among them); a front with none, the Worker's, refuses
//! such copies with `CannotVerifyCopySource`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Response, Uri};
use http_body::{Body, Frame, SizeHint};

use crate::store_error::StoreError;

/// Why an origin could not be read, or stopped answering.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OriginError(pub String);

/// The body of an origin's answer: read as a blob's body is, its failures the store's.
pub struct OriginBody(Pin<Box<dyn Body<Data = Bytes, Error = OriginError> + Send>>);

impl OriginBody {
    /// `body` as the front reads it.
    pub fn new(body: impl Body<Data = Bytes, Error = OriginError> + Send + 'static) -> Self {
        Self(Box::pin(body))
    }
}

impl std::fmt::Debug for OriginBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OriginBody")
    }
}

impl Body for OriginBody {
    type Data = Bytes;
    type Error = StoreError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, StoreError>>> {
        self.0
            .as_mut()
            .poll_frame(cx)
            .map_err(|e| StoreError::generic("copy source", e))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

/// An origin's answer to a GET, or why there is none (it could not be reached).
pub type OriginReply =
    Pin<Box<dyn Future<Output = Result<Response<OriginBody>, OriginError>> + Send>>;

/// The reads of copy sources on other servers.
pub trait CopyOrigins: Send + Sync + 'static {
    /// Whether a copy may read `url` (an absolute `http` or `https` URL).
    fn allows(&self, url: &Uri) -> bool;

    /// A GET of `url` with `headers` (a range, the source's conditions as `If-*`); the answer
    /// whatever its status.
    fn get(&self, url: &Uri, headers: HeaderMap) -> OriginReply;
}

/// The origins a front reads copy sources from, if its host gave it any.
#[derive(Clone)]
pub(crate) struct Origins(pub(crate) std::sync::Arc<dyn CopyOrigins>);

impl std::fmt::Debug for Origins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Origins")
    }
}
