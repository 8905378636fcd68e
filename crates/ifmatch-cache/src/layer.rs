//! The layer and what it can be told.

use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use crate::rules::key::key_of;
use crate::service::SharedCache;
use crate::stats::CacheReport;
use crate::tiers::memory::Forgotten;
use crate::tiers::memory::{Settings, Store};

/// Puts a [`SharedCache`] in front of a service. Every service it makes, and every clone of
/// it, shares one store.
#[derive(Debug, Clone)]
pub struct SharedCacheLayer {
    settings: Settings,
    store: Arc<Store>,
}

impl SharedCacheLayer {
    /// A cache of 256 MiB of responses of up to 16 MiB each, whose concurrent misses of one
    /// key wait up to 5 s for the first.
    pub fn new() -> Self {
        let settings = Settings {
            memory: 256 << 20,
            max_object: 16 << 20,
            key_headers: Vec::new(),
            range_field: None,
            collapse_wait: Duration::from_secs(5),
            disk: None,
        };
        let store = Arc::new(Store::new(settings.clone()));
        Self { settings, store }
    }

    /// With `change` made to its settings, and a new, empty store.
    fn with(mut self, change: impl FnOnce(&mut Settings)) -> Self {
        change(&mut self.settings);
        self.store = Arc::new(Store::new(self.settings.clone()));
        self
    }

    /// Request fields whose values set stored answers apart as if every answer named them in
    /// `Vary` (a tenant's header, a session): an answer is served only to requests with the
    /// same values. Invalidation still forgets every answer of the path (a new, empty store).
    pub fn key_headers(self, names: Vec<http::HeaderName>) -> Self {
        self.with(|s| s.key_headers = names)
    }

    /// A request field that names the range wanted in place of `Range`, and wins over it when
    /// both are sent: Azure's `x-ms-range`, which its SDKs and tools send. The cache answers
    /// it from a stored response as it answers `Range`; the request reaches the inner service
    /// as it came (a signature may cover its fields). A new, empty store.
    pub fn range_field(self, name: http::HeaderName) -> Self {
        self.with(|s| s.range_field = Some(name))
    }

    /// The bytes the stored responses may take, bodies and headers (a new, empty store).
    pub fn memory(self, bytes: u64) -> Self {
        self.with(|s| s.memory = bytes)
    }

    /// The largest response stored, in bytes; larger ones stream through (a new, empty
    /// store).
    pub fn max_object(self, bytes: u64) -> Self {
        self.with(|s| s.max_object = bytes)
    }

    /// A disk tier in `dir` (made if missing) of at most `size` bytes: every stored response
    /// is also written there once whole, and read back when memory no longer holds it, after
    /// a restart too. A process killed at any moment leaves each file whole or absent (see
    /// the module docs of `disk`). Fails if the directory cannot be made or read.
    pub fn disk(self, dir: impl AsRef<std::path::Path>, size: u64) -> std::io::Result<Self> {
        let disk = crate::tiers::disk::Disk::open(dir.as_ref(), size)?;
        Ok(self.with(|s| s.disk = Some(disk)))
    }

    /// How long a request that misses waits for another request of the same key already
    /// asking, before it asks itself (a new, empty store). Zero: never waits.
    pub fn collapse_wait(self, wait: Duration) -> Self {
        self.with(|s| s.collapse_wait = wait)
    }
}

impl SharedCacheLayer {
    /// A handle on this layer's store (every service it makes shares it): what the cache did
    /// and holds, and purging.
    pub fn handle(&self) -> SharedCacheHandle {
        SharedCacheHandle {
            store: self.store.clone(),
        }
    }
}

/// A handle on a [`SharedCacheLayer`]'s store, for an operator.
#[derive(Debug, Clone)]
pub struct SharedCacheHandle {
    store: Arc<Store>,
}

impl SharedCacheHandle {
    /// What the cache did since it was made, and what it holds.
    pub fn report(&self) -> CacheReport {
        self.store.report()
    }

    /// Forgets what is stored for `target` (a path and query) on `host`: whether anything
    /// was.
    pub fn purge(&self, host: &str, target: &str) -> bool {
        let key = key_of(&host.to_ascii_lowercase(), target);
        self.store.announce(Forgotten::Key(&key));
        self.store.forget(Forgotten::Key(&key)) > 0
    }

    /// Forgets what is stored for every target on `host` that starts with `prefix` (`/` for
    /// all of the host): how many targets.
    pub fn purge_prefix(&self, host: &str, prefix: &str) -> u64 {
        let prefix = key_of(&host.to_ascii_lowercase(), prefix);
        self.store.announce(Forgotten::Prefix(&prefix));
        self.store.forget(Forgotten::Prefix(&prefix))
    }

    /// Has `tell` told of everything this cache forgets from now on because of a request (a
    /// successful write) or a purge, so that other instances forget it too (at most one
    /// listener; `false` if there was one already).
    pub fn on_forget(&self, tell: impl Fn(Forgotten<'_>) + Send + Sync + 'static) -> bool {
        self.store.announce_to(Box::new(tell))
    }

    /// Forgets what another instance's cache forgot (as told to its [`on_forget`]), without
    /// telling anyone: how many keys.
    ///
    /// [`on_forget`]: SharedCacheHandle::on_forget
    pub fn forget(&self, forgotten: Forgotten<'_>) -> u64 {
        self.store.forget(forgotten)
    }
}

impl Default for SharedCacheLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Layer<S> for SharedCacheLayer {
    type Service = SharedCache<S>;

    fn layer(&self, inner: S) -> SharedCache<S> {
        SharedCache::new(inner, self.store.clone())
    }
}
