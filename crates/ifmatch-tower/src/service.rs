//! The service: which requests are reads (`read.rs`), which are writes (`write.rs`), and the
//! layer's own error answers.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use ifmatch_core::EntityTag;
use ifmatch_core::date::parse_http_date;
use ifmatch_core::precondition::Validators;
use tower_service::Service;

use crate::body::ConditionalBody;
use crate::cache::ReadCache;
use crate::encoding::Mark;
use crate::future::ResponseFuture;
use crate::layer::Config;
use crate::store::VersionStore;

/// The service of [`ConditionalLayer`](crate::ConditionalLayer).
///
/// Cloning it (axum clones a route's service for every request) costs the inner service's
/// clone and one reference count: everything else is shared behind one `Arc`.
#[derive(Debug, Clone)]
pub struct Conditional<S, V> {
    pub(crate) inner: S,
    pub(crate) shared: Arc<Shared<V>>,
}

#[derive(Debug)]
pub(crate) struct Shared<V> {
    pub(crate) versions: V,
    pub(crate) cache: ReadCache,
    pub(crate) config: Arc<Config>,
    /// Whether a write may ask the inner service for the current version with a GET: from the
    /// start when it is the whole application, once it has answered a GET when it may be one
    /// method's handler (axum's `Router::layer` wraps each on its own; a GET sent to the
    /// service wrapping a PUT handler would run the PUT handler).
    pub(crate) serves_get: AtomicBool,
}

impl<S, V> Conditional<S, V> {
    pub(crate) fn new(
        inner: S,
        versions: V,
        cache: ReadCache,
        config: Arc<Config>,
        one_method: bool,
    ) -> Self {
        let shared = Shared {
            serves_get: AtomicBool::new(!one_method),
            versions,
            cache,
            config,
        };
        Self {
            inner,
            shared: Arc::new(shared),
        }
    }

    /// The inner service, to replace with one that answers alike (with a pool of connections
    /// of its own, say): each clone of this service has its own inner service, and shares the
    /// layer's cache, versions and write locks with the others.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }
}

impl<S, V, ReqBody, ResBody> Service<Request<ReqBody>> for Conditional<S, V>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    V: VersionStore + Clone,
    ReqBody: Default + Send + 'static,
    ResBody: Body<Data = Bytes> + Unpin + Send + 'static,
    ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<ConditionalBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let skipped = (self.shared.config.skip.as_ref())
            .is_some_and(|skip| skip(request.uri(), request.headers()));
        let key = match () {
            _ if skipped => None,
            _ if self.shared.config.custom_key => {
                (self.shared.config.key)(request.uri(), request.headers()).map(Key::Custom)
            }
            _ => Some(Key::Path),
        };
        let Some(key) = key else {
            return ResponseFuture::passthrough(self.inner.call(request));
        };
        let mark = (self.shared.config.mark_encodings)
            .then(|| Mark::of(request.headers()))
            .flatten();
        if let Some(mark) = &mark {
            mark.unmark(request.headers_mut());
        }
        match *request.method() {
            Method::GET | Method::HEAD => self.read(request, key, mark),
            Method::PUT | Method::POST | Method::PATCH | Method::DELETE => {
                // The ready service goes into the future; this one keeps a fresh clone
                // (tower's clone-and-swap: `poll_ready` was called on `self.inner`, not the
                // clone).
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                let shared = &self.shared;
                let key = key.of(&request).to_owned();
                // Boxed on purpose: a write awaits the backend's lock and version, perhaps a
                // probe of the inner service, and the write itself; it already costs a lock
                // and a round trip.
                ResponseFuture::boxed(Box::pin(crate::write::write(
                    inner,
                    shared.versions.clone(),
                    shared.cache.clone(),
                    shared.config.clone(),
                    shared.serves_get.load(Ordering::Relaxed),
                    request,
                    key,
                )))
            }
            _ => ResponseFuture::passthrough(self.inner.call(request)),
        }
    }
}

/// A request's resource key: the key function's, or the path (the default), read from the
/// request where it is needed, so that a read of a known resource copies none.
pub(crate) enum Key {
    Custom(String),
    Path,
}

impl Key {
    pub(crate) fn of<'a, B>(&'a self, request: &'a Request<B>) -> &'a str {
        match self {
            Key::Custom(key) => key,
            Key::Path => request.uri().path(),
        }
    }
}

/// The validators a response carries.
pub(crate) fn validators_of(headers: &HeaderMap) -> Option<Validators> {
    let etag = EntityTag::from_header(headers.get(header::ETAG)?).ok()?;
    let last_modified = headers.get(header::LAST_MODIFIED).and_then(parse_http_date);
    Some(Validators::new(Some(etag), last_modified))
}

/// Why the layer answered a request itself, with an error.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refusal {
    /// 412: the conditions do not hold for the current version.
    Failed,
    /// 412: the current version is not known, so no condition can be trusted to hold.
    Unknown,
    /// 428: a write without a condition, where conditions are required.
    Required,
    /// 503: the version backend (or the inner service, asked for the version) failed.
    Unavailable,
    /// 500: the layer wraps a single method's handler and has nothing to ask the current
    /// version of: a setup to fix, said at the first write.
    Blind,
}

/// What the layer says, and logs, when it wraps a single method's handler and can learn no
/// version: the setup's fix.
pub(crate) const BLIND: &str = "500 Internal Server Error: ifmatch's ConditionalLayer wraps \
    this route's write handler alone (axum's Router::layer and route_layer wrap each method \
    apart), so it cannot read the resource's current version to check this write's \
    conditions. Wrap the whole router instead: \
    Router::new().fallback_service(ConditionalLayer::new().layer(router)); or give the layer a \
    version_source\n";

/// The layer's own error answer: the status, and one line that says what failed and what to
/// do. It names no validator: a client that may not read the resource learns nothing of it.
pub(crate) fn refusal<B>(why: Refusal) -> Response<ConditionalBody<B>> {
    let (status, text) = match why {
        Refusal::Failed => (
            StatusCode::PRECONDITION_FAILED,
            "412 Precondition Failed: the resource's current version does not satisfy the \
             request's If-Match, If-Unmodified-Since or If-None-Match; read it again and retry\n",
        ),
        Refusal::Unknown => (
            StatusCode::PRECONDITION_FAILED,
            "412 Precondition Failed: the resource's current version is not known here, so the \
             conditions cannot be checked; read it (GET) and retry\n",
        ),
        Refusal::Required => (
            StatusCode::PRECONDITION_REQUIRED,
            "428 Precondition Required: send If-Match with the ETag you read, or \
             If-None-Match: * to create\n",
        ),
        Refusal::Unavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            "503 Service Unavailable: the current version cannot be checked now; retry later\n",
        ),
        Refusal::Blind => (StatusCode::INTERNAL_SERVER_ERROR, BLIND),
    };
    let mut response = Response::new(ConditionalBody::full(
        Bytes::from_static(text.as_bytes()),
        None,
    ));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    response
}

#[allow(dead_code)]
fn _assert_send<F: Future + Send>(_: F) {}
