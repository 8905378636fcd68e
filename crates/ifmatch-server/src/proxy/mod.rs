//! `ifmatch proxy`: the Tower layer of `ifmatch-tower` in front of any HTTP origin.
//!
//! Every request goes through [`ConditionalLayer`] to a [`Forward`] service, which sends it to
//! the origin on a pooled hyper client, bodies streaming both ways. The origin gains strong
//! ETags, 304s answered from the layer's cache without reaching it, and atomic `If-Match` /
//! `If-Unmodified-Since` / `If-None-Match` on writes, without a line changed in it.

mod admin;

use std::convert::Infallible;
use std::fmt::Write as _;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::{Authority, PathAndQuery};
use http::{Request, Response, StatusCode, Uri, Version};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use ifmatch_tower::{
    CacheReport, CachedBody, Conditional, ConditionalLayer, MemoryVersions, SharedCache,
    SharedCacheHandle, SharedCacheLayer, VersionStore,
};
use tokio::net::TcpListener;
use tower::{Layer, Service, ServiceExt};

use crate::accept::RequestBody;
use crate::metrics::{self, Histogram, Metrics, Seen};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of a request on its way to the origin: the client's, or none for the layer's own
/// probe GETs. (A named type rather than a boxed body: no allocation, and no trait object whose
/// lifetime the compiler's `Send` check for async blocks trips over.)
/// The client's body is boxed because hyper's client needs an `Unpin` body, and the body
/// timeout's timer is not.
#[derive(Default)]
pub struct ProxyBody(Option<Pin<Box<RequestBody>>>);

impl std::fmt::Debug for ProxyBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ProxyBody").field(&self.0.is_some()).finish()
    }
}

impl http_body::Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        match &mut self.0 {
            Some(body) => body.as_mut().poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.0.as_ref().map_or_else(
            || http_body::SizeHint::with_exact(0),
            http_body::Body::size_hint,
        )
    }
}

/// What the origin answered, or what the proxy says instead (502, 504).
pub type ForwardBody = Either<Incoming, Full<Bytes>>;

/// What the proxy answers: through the layer, or `/metrics`.
pub type ProxyResponseBody =
    Either<ifmatch_tower::ConditionalBody<CachedBody<ForwardBody>>, Full<Bytes>>;

/// What `ifmatch proxy` can be told.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProxyOptions {
    /// The origin: `http://host:port`, optionally with a path prefix.
    pub upstream: Uri,
    /// How long the origin may take to answer (to connect, and then to send its head).
    pub timeout: Duration,
    /// Sends the client's `Host` to the origin instead of the origin's own authority.
    pub preserve_host: bool,
    /// Bodies up to this many bytes are hashed to tag them; larger ones stream through.
    pub hash_limit: usize,
    /// How many resources the 304 cache remembers.
    pub cache_capacity: u64,
    /// The bytes the shared cache's stored responses may take.
    pub cache_memory: u64,
    /// The largest response the shared cache stores; larger ones stream through.
    pub cache_max_object: u64,
    /// How long a miss waits for a request of the same key already on its way to the origin.
    pub cache_collapse_wait: Duration,
    /// The shared cache's disk tier, if any: its directory.
    pub cache_dir: Option<std::path::PathBuf>,
    /// The bytes the disk tier's files may take.
    pub cache_disk_size: u64,
    /// How long the 304 cache trusts what it remembers.
    pub cache_ttl: Option<Duration>,
    /// Answers 428 to writes without a precondition.
    pub require_precondition: bool,
    /// Request headers whose values are part of the cache key, with the path and query.
    pub key_headers: Vec<HeaderName>,
    /// Answers `GET /metrics` itself instead of forwarding it.
    pub metrics: bool,
    /// Where to answer `GET /metrics` on a listener of its own, off the data path.
    pub metrics_listen: Option<SocketAddr>,
    /// Where to answer purges of the shared cache (`POST /purge`), off the data path.
    pub admin_listen: Option<SocketAddr>,
    /// Whether to log a line per request (target `ifmatch::access`, at INFO).
    pub access_log: bool,
    /// Sends each write's fencing token to the origin in this header (with a version backend
    /// whose locks expire: Redis).
    pub fencing_header: Option<HeaderName>,
}

impl ProxyOptions {
    /// The defaults for `upstream`: 30 s timeout, the origin's `Host`, a 1 MiB hashing limit,
    /// 10,000 resources, no expiry, no 428, path-and-query keys, no metrics.
    pub fn new(upstream: Uri) -> Self {
        Self {
            upstream,
            timeout: Duration::from_secs(30),
            preserve_host: false,
            hash_limit: 1 << 20,
            cache_capacity: 10_000,
            cache_memory: 256 << 20,
            cache_max_object: 16 << 20,
            cache_collapse_wait: Duration::from_secs(5),
            cache_dir: None,
            cache_disk_size: 1 << 30,
            cache_ttl: None,
            require_precondition: false,
            key_headers: Vec::new(),
            metrics: false,
            metrics_listen: None,
            admin_listen: None,
            access_log: false,
            fencing_header: None,
        }
    }
}

/// Why a proxy cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// A malformed `--upstream`.
    #[error("the upstream must be an http:// URL with a host (https is not spoken: {0})")]
    BadUpstream(String),
    /// A cache directory that cannot be made or read.
    #[error("the cache directory {0} cannot be used: {1}")]
    CacheDir(std::path::PathBuf, #[source] std::io::Error),
}

/// The shared cache's lines of `/metrics`.
fn render_cache(out: &mut String, report: &CacheReport) {
    let counters = [
        (
            "ifmatch_cache_hits_total",
            "Answers served from the shared cache while fresh.",
            report.hits,
        ),
        (
            "ifmatch_cache_misses_total",
            "Requests the shared cache asked the origin for.",
            report.misses,
        ),
        (
            "ifmatch_cache_stale_served_total",
            "Stale answers served (while revalidating, or in place of a failure).",
            report.stale_served,
        ),
        (
            "ifmatch_cache_collapsed_total",
            "Requests that waited for another of their URL and were served what it stored.",
            report.collapsed,
        ),
        (
            "ifmatch_cache_bytes_from_cache_total",
            "Body bytes served from the shared cache.",
            report.bytes_from_cache,
        ),
        (
            "ifmatch_cache_bytes_from_origin_total",
            "Body bytes the origin declared for what it answered through the cache.",
            report.bytes_from_origin,
        ),
        (
            "ifmatch_cache_evictions_total",
            "Entries evicted from the memory tier for room.",
            report.evictions,
        ),
        (
            "ifmatch_cache_disk_hits_total",
            "Answers read back from the disk tier into memory.",
            report.disk_hits,
        ),
        (
            "ifmatch_cache_disk_writes_total",
            "Answers written to the disk tier.",
            report.disk_writes,
        ),
        (
            "ifmatch_cache_disk_errors_total",
            "Writes to and reads from the disk tier that failed (a full disk, a torn file).",
            report.disk_errors,
        ),
    ];
    for (name, help, value) in counters {
        metrics::counter(out, name, help, value);
    }
    let name = "ifmatch_cache_revalidations_total";
    metrics::family(
        out,
        name,
        "counter",
        "Revalidations with the origin, by outcome.",
    );
    for (outcome, value) in [
        ("not_modified", report.revalidated_not_modified),
        ("modified", report.revalidated_modified),
        ("failed", report.revalidation_failed),
    ] {
        let _ = writeln!(out, "{name}{{outcome=\"{outcome}\"}} {value}");
    }
    for (name, help, memory, disk) in [
        (
            "ifmatch_cache_entries",
            "What each tier holds: URLs in memory, answers on disk.",
            report.entries,
            report.disk_entries,
        ),
        (
            "ifmatch_cache_bytes",
            "Bytes each tier's entries take.",
            report.bytes,
            report.disk_bytes,
        ),
    ] {
        metrics::family(out, name, "gauge", help);
        let _ = writeln!(out, "{name}{{tier=\"memory\"}} {memory}");
        let _ = writeln!(out, "{name}{{tier=\"disk\"}} {disk}");
    }
}

/// What the proxy counts, for `/metrics`: what every server counts (requests by method and
/// status, latency, bytes, connections), and the origin's side.
#[derive(Debug, Default)]
pub struct ProxyMetrics {
    served: Arc<Metrics>,
    not_modified_from_cache: AtomicU64,
    upstream_requests: AtomicU64,
    upstream_errors: AtomicU64,
    upstream_timeouts: AtomicU64,
    /// Upstream latency, until the response head.
    upstream_latency: Mutex<Histogram>,
    /// The shared cache, for its counters.
    cache: OnceLock<SharedCacheHandle>,
}

impl ProxyMetrics {
    fn observe(&self, latency: Duration) {
        (self.upstream_latency.lock())
            .unwrap_or_else(|e| e.into_inner())
            .observe(latency);
    }

    /// The Prometheus text exposition format.
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        self.served.render(&mut out);
        let counters = [
            (
                "ifmatch_not_modified_from_cache_total",
                "304s answered from the cache, without reaching the origin.",
                &self.not_modified_from_cache,
            ),
            (
                "ifmatch_upstream_requests_total",
                "Requests sent to the origin.",
                &self.upstream_requests,
            ),
            (
                "ifmatch_upstream_errors_total",
                "Requests the origin could not be reached for (502).",
                &self.upstream_errors,
            ),
            (
                "ifmatch_upstream_timeouts_total",
                "Requests the origin did not answer in time (504).",
                &self.upstream_timeouts,
            ),
        ];
        for (name, help, value) in counters {
            metrics::counter(&mut out, name, help, get(value));
        }
        let name = "ifmatch_upstream_latency_seconds";
        metrics::family(
            &mut out,
            name,
            "histogram",
            "Time until the origin's response head.",
        );
        (self.upstream_latency.lock())
            .unwrap_or_else(|e| e.into_inner())
            .render(&mut out, name, "");
        if let Some(cache) = self.cache.get() {
            render_cache(&mut out, &cache.report());
        }
        out
    }
}

/// Marks a response that came from the origin (the layer's own answers carry no mark).
#[derive(Debug, Clone, Copy)]
struct FromOrigin;

/// A client connection's peer, with its address spelled as the forwarding headers want it:
/// made once per connection rather than formatted on every request.
#[derive(Debug)]
pub struct Peer {
    address: SocketAddr,
    /// `X-Forwarded-For`'s element: the bare address.
    ip: HeaderValue,
    /// `Forwarded`'s `for=` node: IPv6 in quoted brackets (RFC 7239 section 6).
    node: String,
}

impl Peer {
    /// The peer at `address`.
    pub fn new(address: SocketAddr) -> Self {
        let ip = address.ip();
        let node = match ip {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => format!("\"[{v6}]\""),
        };
        Self {
            address,
            ip: HeaderValue::from_str(&ip.to_string()).expect("an address is a header value"),
            node,
        }
    }
}

/// The request's [`Peer`], for `X-Forwarded-For` and `Forwarded`.
#[derive(Debug, Clone)]
struct ClientAddr(Arc<Peer>);

#[derive(Debug)]
struct Upstream {
    /// The origin's host and port, for the request line.
    host_port: Authority,
    /// The upstream's path prefix, without a trailing `/`.
    prefix: String,
    authority: HeaderValue,
    timeout: Duration,
    preserve_host: bool,
}

/// The inner service: sends a request to the origin and streams its answer back.
#[derive(Debug, Clone)]
pub struct Forward {
    client: Client<HttpConnector, ProxyBody>,
    upstream: Arc<Upstream>,
    metrics: Arc<ProxyMetrics>,
}

impl Forward {
    fn new(options: &ProxyOptions, metrics: Arc<ProxyMetrics>) -> Result<Self, ProxyError> {
        let uri = &options.upstream;
        let bad = || ProxyError::BadUpstream(uri.to_string());
        if uri.scheme() != Some(&http::uri::Scheme::HTTP) {
            return Err(bad());
        }
        let authority = uri.authority().ok_or_else(bad)?;
        let upstream = Upstream {
            host_port: authority.clone(),
            prefix: uri.path().trim_end_matches('/').to_owned(),
            authority: HeaderValue::from_str(authority.as_str()).map_err(|_| bad())?,
            timeout: options.timeout,
            preserve_host: options.preserve_host,
        };
        Ok(Self {
            client: pool(options.timeout),
            upstream: Arc::new(upstream),
            metrics,
        })
    }

    /// This service with a pool of origin connections of its own.
    fn with_own_pool(&self) -> Self {
        Self {
            client: pool(self.upstream.timeout),
            ..self.clone()
        }
    }

    fn outbound(&self, mut request: Request<ProxyBody>) -> Request<ProxyBody> {
        let upstream = &self.upstream;
        let path = request.uri().path_and_query();
        let path = match (upstream.prefix.as_str(), path) {
            // The usual case: the path as it came, no string built.
            ("", Some(path)) => Some(path.clone()),
            (prefix, path) => {
                let path = path.map_or("/", PathAndQuery::as_str);
                PathAndQuery::try_from(format!("{prefix}{path}")).ok()
            }
        };
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(http::uri::Scheme::HTTP);
        parts.authority = Some(upstream.host_port.clone());
        parts.path_and_query = path;
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
        let client = request
            .extensions()
            .get::<ClientAddr>()
            .map(|c| c.0.clone());
        let version = request.version();
        let headers = request.headers_mut();
        remove_hop_by_hop(headers);
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned);
        if !upstream.preserve_host || !headers.contains_key(header::HOST) {
            headers.insert(header::HOST, upstream.authority.clone());
        }
        append_via(headers, version);
        if let Some(client) = client {
            let x_forwarded_for = HeaderName::from_static("x-forwarded-for");
            append(headers, x_forwarded_for, client.ip.clone());
            let mut forwarded = format!("for={};proto=http", client.node);
            if let Some(host) = host.as_deref().filter(|h| is_token_safe(h)) {
                let _ = write!(forwarded, ";host=\"{host}\"");
            }
            if let Ok(forwarded) = HeaderValue::from_str(&forwarded) {
                append(headers, header::FORWARDED, forwarded);
            }
            headers.insert(
                HeaderName::from_static("x-forwarded-proto"),
                HeaderValue::from_static("http"),
            );
            if let Some(host) = host.and_then(|h| HeaderValue::from_str(&h).ok()) {
                headers.insert(HeaderName::from_static("x-forwarded-host"), host);
            }
        }
        // The client speaks to the origin in HTTP/1.1 whatever the client spoke to us.
        *request.version_mut() = Version::HTTP_11;
        request
    }
}

/// A pool of connections to the origin. Each connection is a task on the runtime that opened
/// it.
fn pool(timeout: Duration) -> Client<HttpConnector, ProxyBody> {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(timeout));
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector)
}

impl Service<Request<ProxyBody>> for Forward {
    type Response = Response<ForwardBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<ProxyBody>) -> Self::Future {
        let version = request.version();
        let request = self.outbound(request);
        let (client, metrics) = (self.client.clone(), self.metrics.clone());
        let timeout = self.upstream.timeout;
        Box::pin(async move {
            metrics.upstream_requests.fetch_add(1, Ordering::Relaxed);
            let start = Instant::now();
            let answer = tokio::time::timeout(timeout, client.request(request)).await;
            metrics.observe(start.elapsed());
            let mut response = match answer {
                Ok(Ok(response)) => response.map(Either::Left),
                Ok(Err(error)) => {
                    metrics.upstream_errors.fetch_add(1, Ordering::Relaxed);
                    // The detail (addresses, OS errors) is for the operator's log only.
                    tracing::warn!(error = %chain(&error), "origin unreachable");
                    let why = "ifmatch proxy: origin unreachable\n".to_owned();
                    return Ok(plain(StatusCode::BAD_GATEWAY, why));
                }
                Err(_) => {
                    metrics.upstream_timeouts.fetch_add(1, Ordering::Relaxed);
                    let why = format!(
                        "ifmatch proxy: the origin did not answer within {} s\n",
                        timeout.as_secs_f64()
                    );
                    return Ok(plain(StatusCode::GATEWAY_TIMEOUT, why));
                }
            };
            remove_hop_by_hop(response.headers_mut());
            append_via(response.headers_mut(), version);
            // The proxy answers in its own version, whatever the origin spoke (RFC 9110 7.6).
            *response.version_mut() = version;
            response.extensions_mut().insert(FromOrigin);
            Ok(response)
        })
    }
}

/// The service of one client connection: `/metrics` when asked, everything else through the
/// layer to the origin.
pub type ProxyService<V = MemoryVersions> = Conditional<SharedCache<Forward>, V>;

/// Everything a connection needs: shared by all of them.
#[derive(Debug, Clone)]
pub struct Proxy<V = MemoryVersions> {
    service: ProxyService<V>,
    metrics: Arc<ProxyMetrics>,
    /// The shared cache, for purges.
    cache: SharedCacheHandle,
    serve_metrics: bool,
    metrics_listen: Option<SocketAddr>,
    admin_listen: Option<SocketAddr>,
    access_log: bool,
}

impl Proxy {
    /// The proxy `options` describe, with versions and write locks in this process.
    pub fn new(options: &ProxyOptions) -> Result<Self, ProxyError> {
        Self::with_versions(options, MemoryVersions::default())
    }
}

impl<V: VersionStore + Clone> Proxy<V> {
    /// The proxy `options` describe, with versions and write locks in `versions` (shared by
    /// several proxies with a shared backend).
    pub fn with_versions(options: &ProxyOptions, versions: V) -> Result<Self, ProxyError> {
        let metrics = Arc::new(ProxyMetrics::default());
        let forward = Forward::new(options, metrics.clone())?;
        // The origin may change behind the proxy: every conditional write asks it for the
        // current version, under the key's lock, and tags its answer as a GET through the
        // proxy would be.
        let origin = forward.clone();
        let limit = options.hash_limit;
        let mut layer = ConditionalLayer::new()
            .versions(versions)
            .hash_limit(options.hash_limit)
            .cache_capacity(options.cache_capacity)
            .require_precondition(options.require_precondition)
            // The proxy encodes nothing: the origin's tags leave as they came.
            .mark_encodings(false)
            .version_source(move |parts| {
                let get = ifmatch_tower::current_request::<ProxyBody>(&parts.uri, &parts.headers);
                let origin = origin.clone();
                async move {
                    let Ok(answer) = origin.oneshot(get).await;
                    Ok(ifmatch_tower::validators_of_answer(answer, limit).await?)
                }
            });
        if let Some(ttl) = options.cache_ttl {
            layer = layer.time_to_live(ttl);
        }
        if let Some(name) = &options.fencing_header {
            layer = layer.fencing_header(name.clone());
        }
        if !options.key_headers.is_empty() {
            let names = options.key_headers.clone();
            layer = layer.key_fn(move |uri, headers| Some(key(uri, headers, &names)));
        }
        let mut shared = SharedCacheLayer::new()
            .memory(options.cache_memory)
            .max_object(options.cache_max_object)
            .collapse_wait(options.cache_collapse_wait)
            .key_headers(options.key_headers.clone());
        if let Some(dir) = &options.cache_dir {
            shared = (shared.disk(dir, options.cache_disk_size))
                .map_err(|error| ProxyError::CacheDir(dir.clone(), error))?;
        }
        let cache = shared.handle();
        let _ = metrics.cache.set(cache.clone());
        Ok(Self {
            service: layer.layer(shared.layer(forward)),
            metrics,
            cache,
            serve_metrics: options.metrics,
            metrics_listen: options.metrics_listen,
            admin_listen: options.admin_listen,
            access_log: options.access_log,
        })
    }

    /// This proxy for another thread with a runtime of its own: the same cache, versions,
    /// write locks and counters, and its own pool of origin connections (a connection is a
    /// task of the runtime that opened it; sharing one would send every request across
    /// threads).
    pub fn for_thread(&self) -> Self {
        let mut proxy = self.clone();
        let forward = proxy.service.get_mut().get_mut();
        *forward = forward.with_own_pool();
        proxy
    }

    /// The counters behind `/metrics`.
    pub fn metrics(&self) -> &ProxyMetrics {
        &self.metrics
    }

    /// Its shared cache: what it did and holds, purges, and sharing what it forgets.
    pub fn cache(&self) -> &SharedCacheHandle {
        &self.cache
    }

    /// Answers one request from the client connection `peer`.
    pub(crate) fn handle(
        &self,
        peer: &Arc<Peer>,
        request: Request<RequestBody>,
    ) -> impl Future<Output = Response<ProxyResponseBody>> + Send + 'static + use<V> {
        let client = peer.address;
        let metrics = self.metrics.clone();
        let page = (self.serve_metrics && request.uri().path() == "/metrics")
            .then(|| metrics::page_response(Some(metrics.render())).map(Either::Right));
        let access_log = self.access_log;
        let start = Instant::now();
        let method = request.method().clone();
        let path = access_log.then(|| request.uri().path().to_owned());
        let bytes_in = metrics::declared_length(request.headers());
        // A body that is over before it starts (a GET's) costs no allocation.
        let mut request = request.map(|body| {
            ProxyBody((!http_body::Body::is_end_stream(&body)).then(|| Box::pin(body)))
        });
        request.extensions_mut().insert(ClientAddr(peer.clone()));
        let answer = self.service.clone().oneshot(request);
        async move {
            if let Some(page) = page {
                return page;
            }
            let Ok(response) = answer.await;
            if response.status() == StatusCode::NOT_MODIFIED
                && response.extensions().get::<FromOrigin>().is_none()
            {
                metrics
                    .not_modified_from_cache
                    .fetch_add(1, Ordering::Relaxed);
            }
            metrics.served.record(
                &Seen {
                    client: client.ip(),
                    method: &method,
                    path: path.as_deref().unwrap_or(""),
                    operation: metrics::method_name(&method),
                    lease_action: None,
                    status: response.status(),
                    latency: start.elapsed(),
                    bytes_in,
                    bytes_out: http_body::Body::size_hint(response.body())
                        .exact()
                        .unwrap_or(0),
                    request_id: None,
                },
                access_log,
            );
            response.map(Either::Left)
        }
    }
}

/// Serves the proxy on `listener`, under `limits`, until `shutdown` completes.
pub async fn serve<V: VersionStore + Clone>(
    listener: TcpListener,
    proxy: Proxy<V>,
    limits: crate::Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let pages = pages(&proxy).await?;
    let served = proxy.metrics.served.clone();
    let proxy = Arc::new(proxy);
    let result = crate::accept::serve_with(listener, limits, served, shutdown, |client| {
        connection(&proxy, client)
    })
    .await;
    for page in pages {
        page.abort();
    }
    result
}

/// Serves the proxy on `listeners` (from [`crate::bind_threads`]), each on a thread of its
/// own with a runtime and a pool of origin connections of its own, under `limits` (for all
/// of them together), until `shutdown` completes. The cache, versions, write locks and
/// counters are shared.
pub async fn serve_threads<V: VersionStore + Clone>(
    listeners: Vec<std::net::TcpListener>,
    proxy: Proxy<V>,
    limits: crate::Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let pages = pages(&proxy).await?;
    let connections = crate::accept::Connections::new(limits, proxy.metrics.served.clone());
    let result = crate::accept::on_threads(listeners, shutdown, || {
        let (proxy, connections) = (Arc::new(proxy.for_thread()), connections.clone());
        move |listener, stop| async move {
            connections
                .accept(listener, stop, |client| connection(&proxy, client))
                .await
        }
    })
    .await;
    connections.close();
    for page in pages {
        page.abort();
    }
    result
}

/// The listeners of their own, off the data path, that were asked for: `/metrics`, and the
/// admin's purges.
async fn pages<V>(proxy: &Proxy<V>) -> io::Result<Vec<tokio::task::JoinHandle<io::Result<()>>>> {
    let mut pages = Vec::new();
    if let Some(address) = proxy.metrics_listen {
        let metrics = proxy.metrics.clone();
        let listener = TcpListener::bind(address).await?;
        let page = metrics::serve_page(listener, move || metrics.render());
        pages.push(tokio::spawn(page));
    }
    if let Some(address) = proxy.admin_listen {
        let listener = TcpListener::bind(address).await?;
        pages.push(tokio::spawn(admin::serve(listener, proxy.cache.clone())));
    }
    Ok(pages)
}

/// The service of the connection of `client`.
fn connection<V: VersionStore + Clone>(
    proxy: &Arc<Proxy<V>>,
    client: SocketAddr,
) -> impl hyper::service::Service<
    Request<RequestBody>,
    Response = Response<ProxyResponseBody>,
    Error = Infallible,
    Future: Send + 'static,
> + Send
+ 'static {
    let proxy = proxy.clone();
    let peer = Arc::new(Peer::new(client));
    hyper::service::service_fn(move |request| {
        let answer = proxy.handle(&peer, request);
        async move { Ok::<_, Infallible>(answer.await) }
    })
}

/// The cache key: the path and query, then each named header's values.
fn key(uri: &Uri, headers: &HeaderMap, names: &[HeaderName]) -> String {
    let mut key = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |pq| pq.as_str().to_owned());
    for name in names {
        key.push('\0');
        for value in headers.get_all(name) {
            key.push_str(&String::from_utf8_lossy(value.as_bytes()));
            key.push('\n');
        }
    }
    key
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

/// Appends `value` to the list in the header `name` (one field line, comma-separated).
fn append(headers: &mut HeaderMap, name: HeaderName, value: HeaderValue) {
    let joined = match headers.get(&name) {
        None => Some(value),
        Some(before) => {
            let mut joined = Vec::with_capacity(before.len() + 2 + value.len());
            joined.extend_from_slice(before.as_bytes());
            joined.extend_from_slice(b", ");
            joined.extend_from_slice(value.as_bytes());
            HeaderValue::from_bytes(&joined).ok()
        }
    };
    if let Some(joined) = joined {
        headers.insert(name, joined);
    }
}

/// Whether a host can go into a quoted `Forwarded` parameter as it is.
fn is_token_safe(host: &str) -> bool {
    host.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b))
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
    fn keys_separate_the_named_headers_values() {
        let uri: Uri = "/a?b".parse().unwrap();
        let names = [header::AUTHORIZATION];
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            key(&uri, &h, &names)
        };
        assert_ne!(with("alice"), with("bob"));
        assert_ne!(with("alice"), key(&uri, &HeaderMap::new(), &names));
        assert!(with("alice").starts_with("/a?b\0"));
    }

    #[test]
    fn only_plain_http_upstreams_are_accepted() {
        let metrics = Arc::new(ProxyMetrics::default());
        for bad in ["https://example.com", "/relative", "ftp://x"] {
            let options = ProxyOptions::new(bad.parse().unwrap());
            assert!(Forward::new(&options, metrics.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_metrics_render_as_prometheus_text() {
        let metrics = ProxyMetrics::default();
        metrics.observe(Duration::from_millis(3));
        metrics.observe(Duration::from_secs(11));
        let text = metrics.render();
        assert!(text.contains("ifmatch_upstream_latency_seconds_bucket{le=\"0.005\"} 1\n"));
        assert!(text.contains("ifmatch_upstream_latency_seconds_bucket{le=\"10\"} 1\n"));
        assert!(text.contains("ifmatch_upstream_latency_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("ifmatch_upstream_latency_seconds_count 2\n"));
        assert!(text.contains("ifmatch_upstream_requests_total 0\n"));
        assert!(text.contains("# TYPE ifmatch_requests_total counter\n"));
    }
}
