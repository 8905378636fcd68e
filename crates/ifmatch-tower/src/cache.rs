//! What the layer remembers of the resources it has seen: per resource, the request headers
//! its responses vary on; per variant, the current ETag and the headers of a 304.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName};
use ifmatch_core::{EntityTag, strong_etag};

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

/// Shared by every clone of the layer's services: one reference count to clone.
#[derive(Debug, Clone)]
pub(crate) struct ReadCache {
    inner: Arc<Caches>,
}

#[derive(Debug)]
struct Caches {
    resources: moka::sync::Cache<String, Arc<Resource>>,
    variants: moka::sync::Cache<String, Arc<Remembered>>,
    generations: AtomicU64,
    /// The last body hashed per key, with its tag. Holding the `Bytes` keeps them immutable, so
    /// a handler that answers with the same `Bytes` again (same address and length) answers
    /// with the same content, and the tag is reused without hashing. Bounded in bytes.
    hashed: moka::sync::Cache<String, (Bytes, EntityTag)>,
}

/// The bytes of bodies the layer keeps to skip hashing them again.
const HASHED_BUDGET: u64 = 32 << 20;

/// Bodies smaller than this are hashed every time: a lookup would cost as much.
const REUSE_MIN: usize = 1024;

impl ReadCache {
    pub(crate) fn new(capacity: u64, time_to_live: Option<Duration>) -> Self {
        let hashed = moka::sync::Cache::builder()
            .max_capacity(HASHED_BUDGET)
            .weigher(|_: &String, (bytes, _): &(Bytes, EntityTag)| {
                u32::try_from(bytes.len()).unwrap_or(u32::MAX)
            })
            .build();
        let caches = Caches {
            resources: cache(capacity, time_to_live),
            variants: cache(capacity, time_to_live),
            generations: AtomicU64::new(0),
            hashed,
        };
        Self {
            inner: Arc::new(caches),
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
        let resource = self.inner.resources.get(key)?;
        self.inner
            .variants
            .get(&Self::variant_key(key, &resource, request))
    }

    /// Remembers a response's ETag and 304 headers for the variant this request selects.
    /// `Vary: *` is never remembered: no request can be known to select the same variant.
    /// `request` must hold the headers the response varies on; when the response varies on
    /// other headers than the ones known for `key` (`kept`), the key is forgotten instead, so
    /// that the next request brings all its headers.
    pub(crate) fn remember(
        &self,
        key: &str,
        request: &HeaderMap,
        kept: Option<&[HeaderName]>,
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
        if kept.is_some_and(|kept| kept != vary.as_slice()) {
            self.invalidate(key);
            return;
        }
        let resource = match self.inner.resources.get(key) {
            Some(known) if known.vary == vary => known,
            _ => {
                let generation = self.inner.generations.fetch_add(1, Ordering::Relaxed) + 1;
                let fresh = Arc::new(Resource { vary, generation });
                self.inner.resources.insert(key.to_owned(), fresh.clone());
                fresh
            }
        };
        self.inner.variants.insert(
            Self::variant_key(key, &resource, request),
            Arc::new(remembered),
        );
    }

    /// Whether some variant of `key` has been remembered since the key last changed.
    pub(crate) fn knows(&self, key: &str) -> bool {
        self.inner.resources.contains_key(key)
    }

    /// Forgets every variant of `key`.
    pub(crate) fn invalidate(&self, key: &str) {
        self.inner.resources.invalidate(key);
    }

    /// The request headers that select a variant of `key`, when known.
    pub(crate) fn vary(&self, key: &str) -> Option<Vec<HeaderName>> {
        self.inner.resources.get(key).map(|r| r.vary.clone())
    }

    /// The strong tag of `body`, the body served last under `key`: reused when the handler
    /// answered with the very same bytes, computed (and kept for next time) otherwise.
    pub(crate) fn tag_of(&self, key: &str, body: &Bytes) -> EntityTag {
        if body.len() < REUSE_MIN {
            return strong_etag(body);
        }
        if let Some((last, etag)) = self.inner.hashed.get(key)
            && last.as_ptr() == body.as_ptr()
            && last.len() == body.len()
        {
            return etag;
        }
        let etag = strong_etag(body);
        self.inner
            .hashed
            .insert(key.to_owned(), (body.clone(), etag.clone()));
        etag
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_is_reused_only_for_the_very_same_bytes() {
        let cache = ReadCache::new(100, None);
        let body = Bytes::from(vec![b'a'; 4096]);
        let tag = cache.tag_of("/k", &body);
        assert_eq!(tag, strong_etag(&body));
        assert_eq!(
            cache.tag_of("/k", &body.clone()),
            tag,
            "same bytes, same tag"
        );
        // Equal content elsewhere: hashed again, same tag.
        let copy = Bytes::from(body.to_vec());
        assert_eq!(cache.tag_of("/k", &copy), tag);
        // Other content of the same length: another tag, never the remembered one.
        let other = Bytes::from(vec![b'b'; 4096]);
        assert_eq!(cache.tag_of("/k", &other), strong_etag(&other));
        // A slice that starts at the same address but is shorter is other content.
        assert_eq!(
            cache.tag_of("/k", &other.slice(..2048)),
            strong_etag(&other[..2048])
        );
    }

    #[test]
    fn a_response_that_varies_on_new_headers_is_not_remembered_under_incomplete_ones() {
        let cache = ReadCache::new(100, None);
        let remembered = |tag: &str| Remembered {
            etag: EntityTag::strong(tag).unwrap(),
            headers: HeaderMap::new(),
        };
        let mut request = HeaderMap::new();
        request.insert("accept-language", "fr".parse().unwrap());
        // Known not to vary: the layer kept no accept-language from the request.
        cache.remember(
            "/k",
            &HeaderMap::new(),
            None,
            &HeaderMap::new(),
            remembered("a"),
        );
        assert_eq!(cache.vary("/k"), Some(vec![]));
        let mut varying = HeaderMap::new();
        varying.insert(header::VARY, "accept-language".parse().unwrap());
        cache.remember(
            "/k",
            &HeaderMap::new(),
            Some(&[]),
            &varying,
            remembered("b"),
        );
        assert_eq!(
            cache.vary("/k"),
            None,
            "forgotten, so the next request keeps all its headers"
        );
        cache.remember("/k", &request, None, &varying, remembered("b"));
        assert_eq!(
            cache.get("/k", &request).unwrap().etag,
            EntityTag::strong("b").unwrap()
        );
        assert!(
            cache.get("/k", &HeaderMap::new()).is_none(),
            "another variant"
        );
    }
}
