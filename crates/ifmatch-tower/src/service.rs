//! The service: which requests are reads (`read.rs`) and which are writes (`write.rs`).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body::Body;
use tower_service::Service;

use crate::body::ConditionalBody;
use crate::cache::ReadCache;
use crate::config::{Config, Key};
use crate::encoding::Mark;
use crate::future::ResponseFuture;
use crate::store::VersionStore;

/// The service of [`ConditionalLayer`](crate::ConditionalLayer).
///
/// Cloning it (axum clones a route's service for every request) costs the inner service's
/// clone and one reference count: everything else is shared behind one `Arc`.
#[derive(Debug, Clone)]
pub struct Conditional<S, V> {
    pub(crate) inner: S,
    pub(crate) state: Arc<LayerState<V>>,
}

#[derive(Debug)]
/// What every clone of the service shares: the versions, the cache of read answers, the
/// configuration.
pub(crate) struct LayerState<V> {
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
        let state = LayerState {
            serves_get: AtomicBool::new(!one_method),
            versions,
            cache,
            config,
        };
        Self {
            inner,
            state: Arc::new(state),
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
        let skipped = (self.state.config.skip.as_ref())
            .is_some_and(|skip| skip(request.uri(), request.headers()));
        let key = match () {
            _ if skipped => None,
            _ if self.state.config.custom_key => {
                (self.state.config.key)(request.uri(), request.headers()).map(Key::Custom)
            }
            _ => Some(Key::Path),
        };
        let Some(key) = key else {
            return ResponseFuture::passthrough(self.inner.call(request));
        };
        let mark = (self.state.config.mark_encodings)
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
                let state = &self.state;
                let key = key.of(&request).to_owned();
                let (versions, cache, config) = (
                    state.versions.clone(),
                    state.cache.clone(),
                    state.config.clone(),
                );
                let serves_get = state.serves_get.load(Ordering::Relaxed);
                // Boxed on purpose: a write awaits the backend's lock and version, perhaps a
                // probe of the inner service, and the write itself; it already costs a lock
                // and a round trip.
                ResponseFuture::boxed(move || {
                    crate::write::write(inner, versions, cache, config, serves_get, request, key)
                })
            }
            _ => ResponseFuture::passthrough(self.inner.call(request)),
        }
    }
}

#[allow(dead_code)]
fn _assert_send<F: Future + Send>(_: F) {}
