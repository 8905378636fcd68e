//! The inner service of the proxy: sends a request to the origin on a pooled connection,
//! bodies streaming both ways, and makes the origin's answer the proxy's (hop-by-hop fields
//! gone, `Via`, the proxy's own HTTP version).

use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::{Method, Request, Response, StatusCode, Uri, Version};
use http_body_util::{Either, Full};
use pin_project_lite::pin_project;
use std::convert::Infallible;
use tower::Service;

use super::forwarded_headers::{Peer, append};
use super::metrics::ProxyMetrics;
use super::options::{ProxyError, ProxyOptions};
use super::origin::{OriginBody, OriginReply, Pool};
use super::proxy_body::ProxyBody;
use super::tls::Tls;
use crate::guards::interim::InterimSender;

/// What the origin answered, or what the proxy says instead (502, 504).
pub type ForwardBody = Either<OriginBody, Full<Bytes>>;

/// Marks a `304` that came from the origin (the layer's own carry no mark), for the count of
/// those the cache answered. Only a `304` is marked: the mark is the answer's first extension,
/// and the map made for it costs two allocations (its box and its table; the mark, of no size,
/// none).
#[derive(Debug, Clone, Copy)]
pub(super) struct FromOrigin;

#[derive(Debug)]
struct Upstream {
    /// Its scheme, authority and path prefix: `https://host:port/prefix`.
    base: String,
    /// The upstream's path prefix, without a trailing `/`.
    prefix: String,
    authority: HeaderValue,
    timeout: Duration,
    preserve_host: bool,
}

/// The inner service: sends a request to the origin and streams its answer back.
#[derive(Debug, Clone)]
pub struct Forward {
    origin: Arc<Pool>,
    upstream: Arc<Upstream>,
    metrics: Arc<ProxyMetrics>,
    /// The client connection the request came from, for `X-Forwarded-For` and `Forwarded`:
    /// set on the clone that answers it (see [`Forward::set_peer`]), not carried in the
    /// request's extensions (a boxed entry of a map, made and freed on every request).
    peer: Option<Arc<Peer>>,
}

impl Forward {
    pub(super) fn new(
        options: &ProxyOptions,
        metrics: Arc<ProxyMetrics>,
    ) -> Result<Self, ProxyError> {
        let uri = &options.upstream;
        let bad = || ProxyError::BadUpstream(uri.to_string());
        let authority = uri.authority().ok_or_else(bad)?;
        let tls = match uri.scheme_str() {
            Some("http") => None,
            Some("https") => Some(Tls::new(authority.host(), options.upstream_ca.as_deref())?),
            _ => return Err(bad()),
        };
        let prefix = uri.path().trim_end_matches('/').to_owned();
        let upstream = Upstream {
            base: format!(
                "{}://{authority}{prefix}",
                uri.scheme_str().unwrap_or("http")
            ),
            prefix,
            authority: HeaderValue::from_str(authority.as_str()).map_err(|_| bad())?,
            timeout: options.timeout,
            preserve_host: options.preserve_host,
        };
        Ok(Self {
            origin: Pool::new(authority, tls),
            upstream: Arc::new(upstream),
            metrics,
            peer: None,
        })
    }

    /// Forwards the requests of the client connection `peer`.
    pub(super) fn set_peer(&mut self, peer: &Arc<Peer>) {
        self.peer = Some(peer.clone());
    }

    /// This service with a pool of origin connections of its own.
    pub(super) fn with_own_pool(&self) -> Self {
        Self {
            origin: self.origin.empty_copy(),
            ..self.clone()
        }
    }

    fn outbound(&self, mut request: Request<ProxyBody>) -> Request<ProxyBody> {
        let upstream = &self.upstream;
        // The host the client named, when it is text (the forwarding fields carry it): its
        // target's authority (an HTTP/2 request's, which sends no `Host`; RFC 9113 8.3.1), else
        // its `Host`.
        let host = match request.uri().authority() {
            Some(authority) => HeaderValue::from_str(authority.as_str()).ok(),
            None => (request.headers().get(header::HOST))
                .filter(|h| h.to_str().is_ok())
                .cloned(),
        };
        let path = request.uri().path_and_query();
        let path = match (upstream.prefix.as_str(), path) {
            // The usual case: the path as it came, no string built.
            ("", Some(path)) => Some(path.clone()),
            (prefix, path) => {
                let path = path.map_or("/", PathAndQuery::as_str);
                PathAndQuery::try_from(format!("{prefix}{path}")).ok()
            }
        };
        // In origin form: the connection is the origin's already.
        *request.uri_mut() = Uri::from(path.unwrap_or_else(|| PathAndQuery::from_static("/")));
        let version = request.version();
        // Only writes read a copy source.
        let write = request.method() == Method::PUT;
        let headers = request.headers_mut();
        remove_hop_by_hop(headers);
        match &host {
            Some(host) if upstream.preserve_host => {
                headers.insert(header::HOST, host.clone());
            }
            _ => {
                headers.insert(header::HOST, upstream.authority.clone());
                if let (true, Some(client_host)) = (write, named_host(&host)) {
                    super::dialect::retarget_copy_source(headers, client_host, &upstream.base);
                }
            }
        }
        append_via(headers, version);
        if let Some(peer) = &self.peer {
            peer.forward(headers, host.as_ref());
        }
        // The client speaks to the origin in HTTP/1.1 whatever the client spoke to us.
        *request.version_mut() = Version::HTTP_11;
        // The origin's interim responses go on to a client that can take them (RFC 9110 15.2).
        if let Some(sender) = request.extensions_mut().remove::<InterimSender>() {
            hyper::ext::on_informational(&mut request, move |interim| {
                let mut fields = interim.headers().clone();
                remove_hop_by_hop(&mut fields);
                sender.send(interim.status(), &fields);
            });
        }
        request
    }
}

impl Service<Request<ProxyBody>> for Forward {
    type Response = Response<ForwardBody>;
    type Error = Infallible;
    type Future = ForwardFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<ProxyBody>) -> ForwardFuture {
        let version = request.version();
        let request = self.outbound(request);
        let timeout = self.upstream.timeout;
        (self.metrics.upstream_requests).fetch_add(1, Ordering::Relaxed);
        // One reading of the clock for the deadline and the latency.
        let start = Instant::now();
        let deadline = tokio::time::Instant::from_std(start) + timeout;
        ForwardFuture {
            answer: tokio::time::timeout_at(deadline, self.origin.send(request)),
            version,
            start,
            timeout,
            metrics: self.metrics.clone(),
        }
    }
}

pin_project! {
    /// The origin's answer to a forwarded request within the timeout, made the proxy's; or
    /// the proxy's 502 or 504 in its place. Not boxed: every miss goes through it.
    pub struct ForwardFuture {
        #[pin]
        answer: tokio::time::Timeout<OriginReply>,
        // The client's HTTP version, which the answer is given.
        version: Version,
        start: Instant,
        timeout: Duration,
        metrics: Arc<ProxyMetrics>,
    }
}

impl Future for ForwardFuture {
    type Output = Result<Response<ForwardBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let answer = std::task::ready!(this.answer.poll(cx));
        let metrics = &this.metrics;
        metrics.observe(this.start.elapsed());
        let mut response = match answer {
            Ok(Ok(response)) => response.map(Either::Left),
            Ok(Err(error)) => {
                metrics.upstream_errors.fetch_add(1, Ordering::Relaxed);
                // The detail (addresses, OS errors) is for the operator's log only.
                tracing::warn!(error = %chain(error.as_ref()), "origin unreachable");
                let why = "ifmatch proxy: origin unreachable\n".to_owned();
                return Poll::Ready(Ok(plain(StatusCode::BAD_GATEWAY, why)));
            }
            Err(_) => {
                metrics.upstream_timeouts.fetch_add(1, Ordering::Relaxed);
                let why = format!(
                    "ifmatch proxy: the origin did not answer within {} s\n",
                    this.timeout.as_secs_f64()
                );
                return Poll::Ready(Ok(plain(StatusCode::GATEWAY_TIMEOUT, why)));
            }
        };
        if ifmatch_cache::is_part_as_whole(response.status(), response.headers()) {
            // A part sent as the whole, by a broken or hostile origin: a client that asked for
            // all of it must not take it for all of it, any more than a body cut short.
            metrics.upstream_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("the origin sent a 200 with a Content-Range of part of it");
            let why = "ifmatch proxy: the origin sent part of the resource as all of it\n";
            return Poll::Ready(Ok(plain(StatusCode::BAD_GATEWAY, why.to_owned())));
        }
        remove_hop_by_hop(response.headers_mut());
        append_via(response.headers_mut(), *this.version);
        // The proxy answers in its own version, whatever the origin spoke (RFC 9110 7.6).
        *response.version_mut() = *this.version;
        if response.status() == StatusCode::NOT_MODIFIED {
            response.extensions_mut().insert(FromOrigin);
        }
        Poll::Ready(Ok(response))
    }
}

/// Removes the connection-specific fields of RFC 9110 section 7.6.1: `Connection`, the fields
/// it names, and the usual hop-by-hop ones; and the proxy's own credentials
/// (`Proxy-Authorization`, `Proxy-Authenticate`: RFC 9110 11.7), which are for the proxy and
/// must never reach the origin.
fn remove_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the names present (a handful) instead of a lookup of each hop-by-hop name.
    let hop_by_hop = |name: &HeaderName| {
        [
            header::CONNECTION,
            header::TE,
            header::TRAILER,
            header::TRANSFER_ENCODING,
            header::UPGRADE,
            header::PROXY_AUTHORIZATION,
            header::PROXY_AUTHENTICATE,
        ]
        .contains(name)
            || name == "keep-alive"
            || name == "proxy-connection"
    };
    let mut present: Vec<HeaderName> = headers.keys().filter(|n| hop_by_hop(n)).cloned().collect();
    if present.is_empty() {
        return;
    }
    present.extend(
        ifmatch_core::header_list(headers, header::CONNECTION)
            .filter_map(|name| HeaderName::try_from(name).ok()),
    );
    for name in present {
        headers.remove(name);
    }
}

/// The client's `Host`, as text.
fn named_host(host: &Option<HeaderValue>) -> Option<&str> {
    host.as_ref().and_then(|h| h.to_str().ok())
}

fn append_via(headers: &mut HeaderMap, version: Version) {
    let via = match version {
        Version::HTTP_09 => "0.9 ifmatch",
        Version::HTTP_10 => "1.0 ifmatch",
        Version::HTTP_2 => "2 ifmatch",
        Version::HTTP_3 => "3 ifmatch",
        _ => "1.1 ifmatch",
    };
    append(headers, header::VIA, HeaderValue::from_static(via));
}

fn plain(status: StatusCode, text: String) -> Response<ForwardBody> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(text))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// An error and its sources, on one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let _ = write!(out, ": {cause}");
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_fields_and_those_connection_names_are_removed() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, "keep-alive, X-Secret".parse().unwrap());
        headers.insert("x-secret", "1".parse().unwrap());
        headers.insert("keep-alive", "timeout=5".parse().unwrap());
        headers.insert(header::TE, "trailers".parse().unwrap());
        headers.insert(header::IF_MATCH, "\"a\"".parse().unwrap());
        headers.insert(
            header::PROXY_AUTHORIZATION,
            "Basic cHJveHk6cw==".parse().unwrap(),
        );
        remove_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1);
        assert!(headers.contains_key(header::IF_MATCH));
    }

    #[test]
    fn only_http_and_https_upstreams_are_accepted() {
        let metrics = Arc::new(ProxyMetrics::default());
        for good in ["http://example.com", "https://example.com:8443/prefix"] {
            let options = ProxyOptions::new(good.parse().unwrap());
            assert!(Forward::new(&options, metrics.clone()).is_ok(), "{good}");
        }
        for bad in ["/relative", "ftp://x"] {
            let options = ProxyOptions::new(bad.parse().unwrap());
            assert!(Forward::new(&options, metrics.clone()).is_err(), "{bad}");
        }
    }
}
