//! Copies whose source another server holds (Put Blob From URL, Copy Blob, Put Block From URL,
//! Append Block From URL naming a URL of any HTTP origin): the reads the host makes for the
//! front, for the origins its operator lets it reach ([`Allowed`]: `--copy-from` natively,
//! `COPY_FROM` in the Worker; a server that fetches any URL a client names reaches what only it
//! may, the cloud's metadata address among them). A front given none refuses such copies with
//! `CannotVerifyCopySource`.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;

use bytes::Bytes;
use http::{HeaderMap, Response, Uri};
use http_body::{Body, SizeHint};

use crate::store_error::StoreError;
use ifmatch_core::FramePoll;

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

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<StoreError> {
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

/// The origins copies may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// Any.
    Any,
    /// These `host` or `host:port` (a host alone: any of its ports), as a URL names them.
    Hosts(Vec<String>),
}

impl Allowed {
    /// Reads `--copy-from`: `*`, or hosts (`host` or `host:port`) separated by commas.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim() == "*" {
            return Ok(Self::Any);
        }
        let hosts: Vec<String> = (text.split(','))
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        match hosts.iter().find(|h| h.contains('/') || h.contains('*')) {
            Some(bad) => Err(format!("{bad:?} is not a host or host:port")),
            None if hosts.is_empty() => Err("no host given".to_owned()),
            None => Ok(Self::Hosts(hosts)),
        }
    }

    /// Whether a copy may read `url`.
    pub fn allows(&self, url: &Uri) -> bool {
        let Some(authority) = url.authority() else {
            return false;
        };
        match self {
            Self::Any => true,
            Self::Hosts(hosts) => hosts.iter().any(|h| {
                h.eq_ignore_ascii_case(authority.as_str())
                    || h.eq_ignore_ascii_case(authority.host())
            }),
        }
    }
}

/// The name of the container of an account's copy jobs (`front/pending_copies.rs`), among
/// its containers (no container's name has a `$`).
pub const COPY_JOBS: &str = "$copies";

/// Whether the stored container `container` holds an account's copy jobs: records of the
/// front's own, with no bytes.
pub fn holds_copy_jobs(container: &str) -> bool {
    container.rsplit('~').next() == Some(COPY_JOBS)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_origins_named_are_read() {
        let hosts = Allowed::parse("Example.com, 127.0.0.1:9000").unwrap();
        for (url, allowed) in [
            ("http://example.com/c/b", true),
            ("https://example.com:8443/c/b", true),
            ("http://127.0.0.1:9000/c/b", true),
            ("http://127.0.0.1:9001/c/b", false),
            ("http://169.254.169.254/latest/meta-data", false),
            ("http://example.com.evil/c/b", false),
        ] {
            assert_eq!(hosts.allows(&url.parse().unwrap()), allowed, "{url}");
        }
        assert_eq!(Allowed::parse(" * "), Ok(Allowed::Any));
        assert!(Allowed::parse("").is_err());
        assert!(Allowed::parse("http://example.com/").is_err());
    }
}
