//! `ifmatch proxy`: the Tower layers of `ifmatch-tower` in front of any HTTP origin.
//!
//! Every request goes through [`ConditionalLayer`] and [`SharedCacheLayer`] to a [`Forward`]
//! service, which sends it to the origin on a connection of its own pool ([`origin`]), bodies streaming both ways.
//! The origin gains a shared cache, strong ETags, 304s answered without reaching it, and atomic
//! `If-Match` / `If-Unmodified-Since` / `If-None-Match` on writes, without a line changed in it.
//!
//! - [`options`]: what it can be told;
//! - [`forward`]: the origin's side;
//! - [`forwarding`]: which forwarding fields of a client are believed, and what the origin is
//!   told of who asked;
//! - [`origin`]: the connections to the origin;
//! - [`tls`]: TLS to an `https://` origin;
//! - [`metrics`]: what it counts beside what every server counts;
//! - [`admin`]: purges, on a listener of its own;
//! - [`dialect`]: a storage dialect's range field, which the cache reads as the range, and its
//!   requests for a digest of a part, which pass the cache.

mod admin;
mod dialect;
mod forward;
mod forwarded_headers;
mod metrics;
mod options;
mod origin;
mod proxy_body;
mod tls;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::{Either, Full};
use ifmatch_azure::{Named, OperationName};
use ifmatch_cache::{CachedBody, SharedCache, SharedCacheHandle, SharedCacheLayer};
use ifmatch_tower::{
    Conditional, ConditionalLayer, MemoryVersions, VersionStore, cache_markers::BypassSharedCache,
};
use tokio::net::TcpListener;
use tower::{Layer, ServiceExt};

use self::forward::FromOrigin;
pub use self::forward::{Forward, ForwardBody};
pub use self::forwarded_headers::{Peer, TrustedHops};
pub use self::metrics::ProxyMetrics;
pub use self::options::{ProxyError, ProxyOptions};
pub use self::origin::OriginBody;
pub use self::proxy_body::ProxyBody;
use crate::guards::accept::RequestBody;
use crate::observe::ObserveLayer;

/// What the proxy answers: through the layer, or `/metrics`.
pub type ProxyResponseBody =
    Either<ifmatch_tower::ConditionalBody<CachedBody<ForwardBody>>, Full<Bytes>>;

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
    /// Records every request in the metrics, and the access log.
    observe: ObserveLayer,
    /// The hops whose forwarding fields are believed.
    trusted: TrustedHops,
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
        // proxy would be. An origin that will not tell it to the write's credentials judges
        // the conditions it is sent, as storage does: credentials that sign the write (Azure's
        // Shared Key, AWS's signatures) are no good for a GET, so it is not asked; others it
        // may refuse (401, 403: a SAS may write and not read).
        let origin = forward.clone();
        let limit = options.hash_limit;
        let mut layer = ConditionalLayer::new()
            .versions(versions)
            .hash_limit(options.hash_limit)
            .cache_capacity(options.cache_capacity)
            .require_precondition(options.require_precondition)
            // The proxy encodes nothing: the origin's tags leave as they came.
            .mark_encodings(false)
            // Its bodies are new bytes from a socket every time.
            .reuse_tags(false)
            .version_source(move |parts| {
                let signed = ifmatch_core::signs_request(&parts.headers);
                let get =
                    ifmatch_tower::source::current_request::<ProxyBody>(&parts.uri, &parts.headers);
                let origin = origin.clone();
                async move {
                    if signed {
                        return Err(ifmatch_tower::source::Deferred.into());
                    }
                    let Ok(answer) = origin.oneshot(get).await;
                    let refused = [StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN];
                    if refused.contains(&answer.status()) {
                        return Err(ifmatch_tower::source::Deferred.into());
                    }
                    Ok(ifmatch_tower::source::validators_of_answer(answer, limit).await?)
                }
            });
        if let Some(ttl) = options.cache_ttl {
            layer = layer.time_to_live(ttl);
        }
        if let Some(name) = &options.fencing_header {
            layer = layer.fencing_header(name.clone());
        }
        // What a trusted hop says of how it was reached shapes answers: it is keyed.
        let trusted = forwarded_headers::TrustedHops::new(options.trusted_proxies.clone());
        let mut key_headers = options.key_headers.clone();
        key_headers.extend(forwarded_headers::key_headers(&trusted));
        if !key_headers.is_empty() {
            let names = key_headers.clone();
            layer = layer.key_fn(move |uri, headers| Some(key(uri, headers, &names)));
        }
        let mut shared = SharedCacheLayer::new()
            .memory(options.cache_memory)
            .max_object(options.cache_max_object)
            .collapse_wait(options.cache_collapse_wait)
            .key_headers(key_headers)
            .range_field(dialect::RANGE_FIELD);
        if let Some(dir) = &options.cache_dir {
            shared = (shared.disk(dir, options.cache_disk_size))
                .map_err(|error| ProxyError::CacheDir(dir.clone(), error))?;
        }
        let cache = shared.handle();
        let _ = metrics.cache.set(cache.clone());
        let observe = ObserveLayer::new(metrics.served.clone(), options.observe.access_log);
        Ok(Self {
            service: layer.layer(shared.layer(forward)),
            metrics,
            cache,
            serve_metrics: options.metrics,
            metrics_listen: options.observe.metrics_listen,
            admin_listen: options.admin_listen,
            observe,
            trusted,
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
    ) -> impl Future<Output = Named<Response<ProxyResponseBody>>> + Send + 'static + use<V> {
        let metrics = self.metrics.clone();
        let page = (self.serve_metrics && request.uri().path() == "/metrics")
            .then(|| crate::metrics::page_response(Some(metrics.render())).map(Either::Right));
        // The proxy's operations are the methods, in the metrics' rows.
        let operation = OperationName(crate::metrics::method_name(request.method()));
        // A body that is over before it starts (a GET's) costs no allocation.
        let mut request = request.map(|body| {
            ProxyBody((!http_body::Body::is_end_stream(&body)).then(|| Box::pin(body)))
        });
        peer.admit(request.headers_mut());
        // Content in a GET or HEAD has no meaning HTTP defines (RFC 9110 9.3.1), so no key
        // holds it; an origin that reads it anyway answers that one request, never stored.
        if (request.method() == Method::GET || request.method() == Method::HEAD)
            && request.body().0.is_some()
        {
            request.extensions_mut().insert(BypassSharedCache);
        }
        let echo = dialect::mark(&mut request);
        let mut service = self.service.clone();
        service.get_mut().get_mut().set_peer(peer);
        let answer = service.oneshot(request);
        async move {
            let response = match page {
                Some(page) => page,
                None => {
                    let Ok(mut response) = answer.await;
                    echo.apply(&mut response);
                    if response.status() == StatusCode::NOT_MODIFIED
                        && response.extensions().get::<FromOrigin>().is_none()
                    {
                        (metrics.not_modified_from_cache).fetch_add(1, Ordering::Relaxed);
                    }
                    response.map(Either::Left)
                }
            };
            (response, Some(operation))
        }
    }
}

/// `limits`, with the origin's interim (1xx) responses passed on to clients (RFC 9110 15.2).
fn passing_interim(limits: crate::guards::accept::Limits) -> crate::guards::accept::Limits {
    crate::guards::accept::Limits {
        interim_responses: true,
        ..limits
    }
}

/// Serves the proxy on `listener`, under `limits`, until `shutdown` completes.
pub async fn serve<V: VersionStore + Clone>(
    listener: TcpListener,
    proxy: Proxy<V>,
    limits: crate::guards::accept::Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let pages = pages(&proxy).await?;
    let served = proxy.metrics.served.clone();
    let proxy = Arc::new(proxy);
    let limits = passing_interim(limits);
    let result =
        crate::guards::accept::serve_over(listener, None, limits, served, shutdown, |client| {
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
    limits: crate::guards::accept::Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let pages = pages(&proxy).await?;
    let limits = passing_interim(limits);
    let connections = crate::guards::accept::Connections::new(limits, proxy.metrics.served.clone());
    let result = crate::guards::accept::on_threads(listeners, shutdown, || {
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
        let page = crate::guards::accept::serve_metrics_page(listener, move || metrics.render());
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
    let observe = proxy.observe.clone();
    let proxy = proxy.clone();
    let peer = Arc::new(Peer::new(client, &proxy.trusted));
    let service = move |request| proxy.handle(&peer, request);
    observe.layer(service, client.ip())
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

#[cfg(test)]
mod tests {
    use http::header;

    use super::*;

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
}
