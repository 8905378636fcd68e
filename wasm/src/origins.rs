//! The Worker's reads of copy sources on other servers: `fetch`, for the origins its
//! `COPY_FROM` variable names (hosts, or `*`; none without it), redirects never followed. R2
//! takes an object's length before its bytes, so an origin must answer with `Content-Length`.

use std::pin::Pin;
use std::task::Context;

use bytes::Bytes;
use http::{HeaderMap, Uri};
use http_body::{Body, SizeHint};
use ifmatch_blob::copy_origin::{Allowed, CopyOrigins, OriginBody, OriginError, OriginReply};
use ifmatch_core::FramePoll;
use worker::send::{SendFuture, SendWrapper};
use worker::{ByteStream, Fetch, Headers, Method, Request, RequestInit, RequestRedirect};

/// Copy sources read with the runtime's `fetch`, for the origins allowed.
pub struct FetchOrigins {
    allowed: Allowed,
}

impl FetchOrigins {
    /// Reads of the origins `allowed`.
    pub fn new(allowed: Allowed) -> Self {
        Self { allowed }
    }
}

fn failed(error: impl std::fmt::Display) -> OriginError {
    OriginError(error.to_string())
}

impl CopyOrigins for FetchOrigins {
    fn allows(&self, url: &Uri) -> bool {
        self.allowed.allows(url)
    }

    fn get(&self, url: &Uri, headers: HeaderMap) -> OriginReply {
        let url = url.to_string();
        Box::pin(SendFuture::new(async move {
            let sent = Headers::new();
            for (name, value) in &headers {
                let value = value.to_str().map_err(failed)?;
                sent.set(name.as_str(), value).map_err(failed)?;
            }
            let mut init = RequestInit::new();
            init.with_method(Method::Get)
                .with_headers(sent)
                .with_redirect(RequestRedirect::Manual);
            let request = Request::new_with_init(&url, &init).map_err(failed)?;
            let mut answer = Fetch::Request(request).send().await.map_err(failed)?;
            let mut response = http::Response::builder().status(answer.status_code());
            for (name, value) in answer.headers().entries() {
                response = response.header(name, value);
            }
            let len = answer
                .headers()
                .get("content-length")
                .ok()
                .flatten()
                .and_then(|v| v.parse().ok());
            let stream = answer.stream().ok();
            let body = FetchBody {
                stream: SendWrapper::new(stream),
                len,
            };
            response.body(OriginBody::new(body)).map_err(failed)
        }))
    }
}

/// An origin's answer body, with the length its `Content-Length` gave.
struct FetchBody {
    stream: SendWrapper<Option<ByteStream>>,
    len: Option<u64>,
}

impl Body for FetchBody {
    type Data = Bytes;
    type Error = OriginError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        crate::objects::poll_stream(self.stream.as_mut(), cx, failed)
    }

    fn size_hint(&self) -> SizeHint {
        self.len
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}
