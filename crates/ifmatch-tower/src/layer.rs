//! The layer and its options.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Uri};
use tower_layer::Layer;

use crate::cache::ReadCache;
use crate::config::{Config, path};
use crate::service::Conditional;
use crate::store::{MemoryVersions, VersionStore};

/// Adds conditional requests to a service. See the [crate docs](crate).
#[derive(Debug, Clone)]
pub struct ConditionalLayer<V = MemoryVersions> {
    config: Arc<Config>,
    versions: V,
    cache: ReadCache,
    cache_capacity: u64,
    time_to_live: Option<Duration>,
}

impl Default for ConditionalLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl ConditionalLayer {
    /// The layer with an in-memory version backend, a 1 MiB hashing limit, a cache of 10,000
    /// resources without expiry, and keys by path (the query selects a variant).
    pub fn new() -> Self {
        let config = Config {
            hash_limit: 1 << 20,
            require_precondition: false,
            mark_encodings: false,
            key: Arc::new(path),
            custom_key: false,
            skip: None,
            source: None,
            fencing_header: None,
            trust_memory: false,
            forget_ancestors: true,
            related: None,
        };
        Self {
            config: Arc::new(config),
            versions: MemoryVersions::default(),
            cache: ReadCache::new(10_000, None),
            cache_capacity: 10_000,
            time_to_live: None,
        }
    }
}

impl<V> ConditionalLayer<V> {
    /// Uses another version backend (the source of truth for writes). With a
    /// [`time_to_live`](Self::time_to_live), its versions expire as the cache's entries do.
    pub fn versions<W: VersionStore + Clone>(self, versions: W) -> ConditionalLayer<W> {
        let versions = match self.time_to_live {
            Some(ttl) => versions.expire_after(ttl),
            None => versions,
        };
        ConditionalLayer {
            config: self.config,
            versions,
            cache: self.cache,
            cache_capacity: self.cache_capacity,
            time_to_live: self.time_to_live,
        }
    }

    /// Responses without an ETag are buffered up to this many bytes to be hashed; a larger
    /// body streams through untagged.
    pub fn hash_limit(mut self, bytes: usize) -> Self {
        Arc::make_mut(&mut self.config).hash_limit = bytes;
        self
    }

    /// How many resources the 304 cache remembers, each with at most 8 variants (the 8 last
    /// seen).
    pub fn cache_capacity(mut self, resources: u64) -> Self {
        self.cache_capacity = resources;
        self.cache.configure(resources, self.time_to_live);
        self
    }

    /// How long the layer trusts what it learned of a resource: the 304 cache's entries and
    /// the version backend's versions alike (see [`VersionStore::expire_after`]). The bound on
    /// how stale a 304 can be, and on how long a write can be checked against a version that
    /// changed without going through this layer.
    pub fn time_to_live(mut self, ttl: Duration) -> Self
    where
        V: VersionStore,
    {
        self.time_to_live = Some(ttl);
        self.cache.configure(self.cache_capacity, self.time_to_live);
        self.versions = self.versions.expire_after(ttl);
        self
    }

    /// Marks every strong tag for the request's `Accept-Encoding` (`"<tag>+ae<digest>"`, with
    /// `Vary: Accept-Encoding`): only for an app that must put a compressor *outside* the
    /// layer, which would otherwise send gzip bytes under the tag of the identity bytes (RFC
    /// 9110 8.8.3 forbids it). Off by default: a tag leaves as the handler set it, or as the
    /// SHA-256 of the bytes that leave the layer, and a compressor *inside* the layer (the
    /// usual place) gets the encoded bytes their own tag.
    ///
    /// The cost of marking: two clients sent the same bytes get different tags when their
    /// `Accept-Encoding` fields differ by a byte, so a shared cache below keeps a copy per
    /// field, and a client holding the tag from elsewhere (the origin's, a CDN's) gets 200s
    /// where a 304 would do.
    pub fn mark_encodings(mut self, yes: bool) -> Self {
        Arc::make_mut(&mut self.config).mark_encodings = yes;
        self
    }

    /// Whether the layer keeps the body each remembered tag was hashed from (up to 32 MiB in
    /// all), so that a handler answering with the very same `Bytes` again gets its tag without
    /// a hash (the default): a read's, and a conditional write's asking the GET route, which a
    /// handler serving from memory answers with the same `Bytes` until they change. Off for a service whose bodies are never the same `Bytes` twice, such as a
    /// proxy's, read from a socket: there a kept body is only memory, and may be a slice
    /// that keeps a whole read buffer alive.
    pub fn reuse_tags(self, yes: bool) -> Self {
        self.cache.keep_bodies(yes);
        self
    }

    /// Answers 428 Precondition Required to PUT, PATCH and DELETE requests that carry no
    /// precondition, so no client can overwrite blindly (RFC 6585): `If-Match` with the tag it
    /// read, or `If-None-Match: *` to create (which holds where the resource is absent). A POST
    /// passes without one: it creates what the server names (a collection's new member) or
    /// acts, and overwrites no representation a client read; give it `If-Match` where it
    /// changes its own target.
    pub fn require_precondition(mut self, yes: bool) -> Self {
        Arc::make_mut(&mut self.config).require_precondition = yes;
        self
    }

    /// Decides every conditional write against the version `source` answers, asked under the
    /// key's write lock: the current validators of the resource the request names (the `ETag`
    /// your GET handler sets, read from your database, say), or `None` when it does not exist.
    /// Instead of a GET of the wrapped service (the default), which renders the resource: one
    /// query per conditional write, and it works where the layer wraps each method's handler
    /// apart (axum's `Router::layer`). An error answers 503 and runs no handler.
    ///
    /// A source may also ask an origin with a GET and tag its answer as the layer does
    /// ([`validators_of_answer`](crate::source::validators_of_answer)): what `ifmatch proxy` does.
    pub fn version_source<F, Fut>(mut self, source: F) -> Self
    where
        F: Fn(&http::request::Parts) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = crate::source::Current> + Send + 'static,
    {
        Arc::make_mut(&mut self.config).source = Some(crate::source::boxed(source));
        self
    }

    /// Promises that every change to the resources behind this layer passes through it (and,
    /// with a shared [`VersionStore`], through the layers that share it): no job, console,
    /// other service or other route writes them unseen. A conditional write is then judged
    /// against the version the layer remembers (learned from the GETs it served and the
    /// writes it passed) without asking the service for the resource first, which saves a GET
    /// of the inner service per conditional write.
    ///
    /// What breaks if the promise does not hold: a write carrying a tag read before an unseen
    /// change is accepted, and that change is lost. Without this promise (the default), every
    /// conditional write asks the inner service for the resource with a GET under the key's
    /// write lock and is judged against its answer: the resource as it is now.
    pub fn every_change_passes_through(mut self) -> Self {
        Arc::make_mut(&mut self.config).trust_memory = true;
        self
    }

    /// Whether a successful write forgets what the layer remembers of its target's ancestors
    /// (on by default): a `POST /docs/a/append` or a `PUT /docs/b` changes `/docs/a` or the
    /// listing `/docs` too, whose old tags must not be answered 304. Each ancestor path is
    /// turned into a key by the key function.
    pub fn forget_ancestors(mut self, yes: bool) -> Self {
        Arc::make_mut(&mut self.config).forget_ancestors = yes;
        self
    }

    /// Names the keys of the other resources a write to a request's target changes, beyond its
    /// ancestors, its `Location`, its `Content-Location` and the handler's
    /// [`INVALIDATES`](crate::INVALIDATES): a write to `/users/7` that changes `/teams/3`, say.
    /// A successful write forgets what the layer remembers of them.
    pub fn relates(
        mut self,
        related: impl Fn(&Uri, &HeaderMap) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        Arc::make_mut(&mut self.config).related = Some(Arc::new(related));
        self
    }

    /// Sends each write to the inner service with the fencing token of its lock in this request
    /// header (when the version backend has tokens, see [`VersionStore::fencing_token`]). An
    /// inner service or origin that remembers the highest token per resource and refuses lower
    /// ones cannot be overwritten by a writer whose lock expired while it stalled.
    pub fn fencing_header(mut self, name: http::HeaderName) -> Self {
        Arc::make_mut(&mut self.config).fencing_header = Some(name);
        self
    }

    /// Computes resource keys: requests for which it answers `None` pass through untouched.
    /// A key function is trusted to separate whatever must be separated (for example the
    /// user, from a session header), so with one, responses marked `Cache-Control: private` or
    /// carrying `Set-Cookie` are remembered too.
    pub fn key_fn(
        mut self,
        key: impl Fn(&Uri, &HeaderMap) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        let config = Arc::make_mut(&mut self.config);
        config.key = Arc::new(key);
        config.custom_key = true;
        self
    }

    /// Leaves the requests `skip` picks alone: no tag, no 304, no check; they reach the inner
    /// service as they came (a route that streams, an upload endpoint). Unlike a
    /// [`key_fn`](Self::key_fn) answering `None`, it changes nothing of how other answers are
    /// remembered.
    pub fn skip(mut self, skip: impl Fn(&Uri, &HeaderMap) -> bool + Send + Sync + 'static) -> Self {
        Arc::make_mut(&mut self.config).skip = Some(Arc::new(skip));
        self
    }

    /// Forgets what the layer knows of `key`, for a change made outside the layer: the 304
    /// cache's variants and the version backend's version, so no 304 answers an old tag. (A
    /// conditional write asks the service anyway; under
    /// [`every_change_passes_through`](Self::every_change_passes_through), this is how a change
    /// made outside is reported: until the layer learns the version again, a conditional write
    /// of `key` is checked against the service's answer, never the version from before.)
    pub async fn invalidate(&self, key: &str)
    where
        V: VersionStore,
    {
        self.cache.invalidate(key);
        if let Err(error) = self.versions.forget(key).await {
            tracing::error!(%key, %error, "the version backend could not forget a key");
        }
    }
}

impl<S, V: Clone> Layer<S> for ConditionalLayer<V> {
    type Service = Conditional<S, V>;

    fn layer(&self, inner: S) -> Self::Service {
        Conditional::new(
            inner,
            self.versions.clone(),
            self.cache.clone(),
            self.config.clone(),
            wraps_one_method::<S>(),
        )
    }
}

/// Whether `S` may be a single method's handler: axum's `Router::layer` and `route_layer` wrap
/// each method's handler of a route apart, each as a `Route`, and a GET sent to the one that
/// wraps a PUT handler would run the PUT handler. Such a service is asked for the current
/// version only once it has answered a GET itself; any other service is the whole
/// application, and is asked from the first write. (The type's name is the one mark axum
/// leaves; a `Route` that wraps a whole nested service is told apart by its first GET.)
fn wraps_one_method<S>() -> bool {
    std::any::type_name::<S>().starts_with("axum::routing::route::Route")
}
