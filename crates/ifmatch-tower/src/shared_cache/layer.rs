//! The layer and what it can be told.

use std::sync::Arc;

use tower_layer::Layer;

use super::service::SharedCache;
use super::store::Store;

/// Puts a [`SharedCache`] in front of a service. Every service it makes, and every clone of
/// it, shares one store.
#[derive(Debug, Clone)]
pub struct SharedCacheLayer {
    memory: u64,
    max_object: u64,
    key_headers: Vec<http::HeaderName>,
    store: Arc<Store>,
}

impl Default for SharedCacheLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl SharedCacheLayer {
    /// A cache of 256 MiB of responses of up to 8 MiB each.
    pub fn new() -> Self {
        let (memory, max_object) = (256 << 20, 8 << 20);
        Self {
            memory,
            max_object,
            key_headers: Vec::new(),
            store: Arc::new(Store::new(memory, max_object, Vec::new())),
        }
    }

    fn renew(mut self) -> Self {
        let key_headers = self.key_headers.clone();
        self.store = Arc::new(Store::new(self.memory, self.max_object, key_headers));
        self
    }

    /// Request fields whose values set stored answers apart as if every answer named them in
    /// `Vary` (a tenant's header, a session): an answer is served only to requests with the
    /// same values. Invalidation still forgets every answer of the path (a new, empty store).
    pub fn key_headers(mut self, names: Vec<http::HeaderName>) -> Self {
        self.key_headers = names;
        self.renew()
    }

    /// The bytes the stored responses may take, bodies and headers (a new, empty store).
    pub fn memory(mut self, bytes: u64) -> Self {
        self.memory = bytes;
        self.renew()
    }

    /// The largest response stored, in bytes; larger ones stream through (a new, empty
    /// store).
    pub fn max_object(mut self, bytes: u64) -> Self {
        self.max_object = bytes;
        self.renew()
    }
}

impl<S> Layer<S> for SharedCacheLayer {
    type Service = SharedCache<S>;

    fn layer(&self, inner: S) -> SharedCache<S> {
        SharedCache::new(inner, self.store.clone())
    }
}
