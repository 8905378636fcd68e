//! What every server records of every request, once, for `serve` and `proxy` alike: its row
//! in `/metrics` (the operation, the status, the latency until the answer's head, the bytes)
//! and, when asked, its line in the access log.
//!
//! A layer over a connection's service, which answers each request with the name of its
//! operation beside it ([`Named`]: Azure's, for the dialects; the method, for the proxy), or
//! none (`Unknown`).

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Method, Request, Response};
use http_body::Body;
use ifmatch_azure::{Named, OperationName, REQUEST_ID};
use pin_project_lite::pin_project;

use crate::metrics::{self, Metrics, Seen};

/// What an operator sees of a running server (`serve` and `proxy` alike): its command line's
/// options.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ObserveOptions {
    /// Answer GET /metrics (Prometheus text) on this address, a listener of its own, off the
    /// data path: requests by operation and status, latency histograms, bytes, lease
    /// actions, compare-and-swap retries, open connections.
    #[arg(long, env = "IFMATCH_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Log one line per request (target `ifmatch::access`, at INFO): client, method, path,
    /// operation, status, microseconds, bytes in and out, request id.
    #[arg(long, env = "IFMATCH_ACCESS_LOG")]
    pub access_log: bool,
}

/// Records each request of the services it wraps in `metrics`, and logs it when
/// `access_log`.
#[derive(Debug, Clone)]
pub(crate) struct ObserveLayer {
    metrics: Arc<Metrics>,
    access_log: bool,
}

impl ObserveLayer {
    pub(crate) fn new(metrics: Arc<Metrics>, access_log: bool) -> Self {
        Self {
            metrics,
            access_log,
        }
    }

    /// The service of a connection from `client`: each request answered by `answer` (with
    /// its operation's name beside the answer), and observed.
    pub(crate) fn layer<F>(&self, answer: F, client: IpAddr) -> Observe<F> {
        Observe {
            answer,
            layer: self.clone(),
            client,
        }
    }
}

/// A connection's service, observed (see [`ObserveLayer`]).
#[derive(Debug, Clone)]
pub(crate) struct Observe<F> {
    answer: F,
    layer: ObserveLayer,
    client: IpAddr,
}

impl<F, A, B, ReqBody> hyper::service::Service<Request<ReqBody>> for Observe<F>
where
    F: Fn(Request<ReqBody>) -> A,
    A: Future<Output = Named<Response<B>>>,
    B: Body,
{
    type Response = Response<B>;
    type Error = Infallible;
    type Future = Observed<A>;

    fn call(&self, request: Request<ReqBody>) -> Self::Future {
        let headers = request.headers();
        let seen = Pending {
            layer: self.layer.clone(),
            client: self.client,
            start: Instant::now(),
            method: request.method().clone(),
            path: (self.layer.access_log).then(|| request.uri().path().to_owned()),
            lease_action: metrics::lease_action(request.method(), headers),
            bytes_in: metrics::declared_length(headers),
        };
        Observed {
            future: (self.answer)(request),
            seen: Some(seen),
        }
    }
}

/// What is known of a request before its answer.
#[derive(Debug)]
struct Pending {
    layer: ObserveLayer,
    client: IpAddr,
    start: Instant,
    method: Method,
    path: Option<String>,
    lease_action: Option<&'static str>,
    bytes_in: u64,
}

impl Pending {
    fn record<B: Body>(self, answer: &Response<B>, operation: Option<OperationName>) {
        let operation = operation.map(|o| o.0);
        let seen = Seen {
            client: self.client,
            method: &self.method,
            path: self.path.as_deref().unwrap_or(""),
            operation: operation.unwrap_or("Unknown"),
            lease_action: (self.lease_action)
                .filter(|_| operation.is_some_and(|o| o.starts_with("Lease"))),
            status: answer.status(),
            latency: self.start.elapsed(),
            bytes_in: self.bytes_in,
            bytes_out: answer.body().size_hint().exact().unwrap_or(0),
            // Looked up for the log alone: a header's lookup hashes its name.
            request_id: (self.layer.access_log)
                .then(|| answer.headers().get(REQUEST_ID)?.to_str().ok())
                .flatten(),
        };
        self.layer.metrics.record(&seen, self.layer.access_log);
    }
}

pin_project! {
    /// The future of an observed request: the inner service's, recorded when its answer's
    /// head is ready. Not boxed: every request goes through it.
    pub(crate) struct Observed<F> {
        #[pin]
        future: F,
        seen: Option<Pending>,
    }
}

impl<F, B> Future for Observed<F>
where
    F: Future<Output = Named<Response<B>>>,
    B: Body,
{
    type Output = Result<Response<B>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let (answer, operation) = std::task::ready!(this.future.poll(cx));
        if let Some(seen) = this.seen.take() {
            seen.record(&answer, operation);
        }
        Poll::Ready(Ok(answer))
    }
}
