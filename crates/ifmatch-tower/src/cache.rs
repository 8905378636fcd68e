//! What the layer remembers of the resources it has seen: per resource, the request headers
//! its responses vary on; per variant, the current ETag and the headers of a 304.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::header::{self, HeaderMap, HeaderName};
use ifmatch_core::EntityTag;

/// The variants of one resource: which request headers select them, and the generation that
/// makes every variant of an earlier version unreachable at once.
#[derive(Debug)]
struct Resource {
    vary: Vec<HeaderName>,
    generation: u64,
}

/// What a conditional GET needs to be answered 304 without the inner service.
#[derive(Debug)]
pub(crate) struct Remembered {
    pub(crate) etag: EntityTag,
    /// The headers of the 304: those of the 200, less the representation metadata.
    pub(crate) headers: HeaderMap,
}

#[derive(Debug, Clone)]
pub(crate) struct ReadCache {
    resources: moka::sync::Cache<String, Arc<Resource>>,
    variants: moka::sync::Cache<String, Arc<Remembered>>,
    generations: Arc<AtomicU64>,
}

impl ReadCache {
    pub(crate) fn new(capacity: u64, time_to_live: Option<Duration>) -> Self {
        Self {
            resources: cache(capacity, time_to_live),
            variants: cache(capacity, time_to_live),
            generations: Arc::new(AtomicU64::new(0)),
        }
    }

    fn variant_key(key: &str, resource: &Resource, request: &HeaderMap) -> String {
        let mut out = format!("{}\u{0}{key}", resource.generation);
        for name in &resource.vary {
            out.push('\u{0}');
            for value in request.get_all(name) {
                out.push_str(&String::from_utf8_lossy(value.as_bytes()));
                out.push(',');
            }
        }
        out
    }

    /// The remembered variant that this request selects.
    pub(crate) fn get(&self, key: &str, request: &HeaderMap) -> Option<Arc<Remembered>> {
        let resource = self.resources.get(key)?;
        self.variants
            .get(&Self::variant_key(key, &resource, request))
    }

    /// Remembers a response's ETag and 304 headers for the variant this request selects.
    /// `Vary: *` is never remembered: no request can be known to select the same variant.
    pub(crate) fn remember(
        &self,
        key: &str,
        request: &HeaderMap,
        response: &HeaderMap,
        remembered: Remembered,
    ) {
        let mut vary = Vec::new();
        for value in response.get_all(header::VARY) {
            let Ok(value) = value.to_str() else { return };
            for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                if name == "*" {
                    return;
                }
                match HeaderName::try_from(name) {
                    Ok(name) => vary.push(name),
                    Err(_) => return,
                }
            }
        }
        vary.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        vary.dedup();
        let resource = match self.resources.get(key) {
            Some(known) if known.vary == vary => known,
            _ => {
                let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
                let fresh = Arc::new(Resource { vary, generation });
                self.resources.insert(key.to_owned(), fresh.clone());
                fresh
            }
        };
        self.variants.insert(
            Self::variant_key(key, &resource, request),
            Arc::new(remembered),
        );
    }

    /// Whether some variant of `key` has been remembered since the key last changed.
    pub(crate) fn knows(&self, key: &str) -> bool {
        self.resources.contains_key(key)
    }

    /// Forgets every variant of `key`.
    pub(crate) fn invalidate(&self, key: &str) {
        self.resources.invalidate(key);
    }
}

fn cache<V: Clone + Send + Sync + 'static>(
    capacity: u64,
    time_to_live: Option<Duration>,
) -> moka::sync::Cache<String, V> {
    let builder = moka::sync::Cache::builder().max_capacity(capacity);
    match time_to_live {
        Some(ttl) => builder.time_to_live(ttl).build(),
        None => builder.build(),
    }
}
