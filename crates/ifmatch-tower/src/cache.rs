//! The cache of the resources the layer has seen (each one: `resource.rs`), by key.
//!
//! One moka lookup per request finds a resource and all its variants (a thread's repeat read
//! of a hot one finds it in `recent.rs` first). A read holds on to the
//! resource it found; a write forgets the key, which detaches that resource, so what a read
//! that was already under way remembers afterwards lands in a resource nobody can find: a read
//! can never bring back a version that a write has replaced.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use ifmatch_core::{EntityTag, header_list};

use crate::resource::{KeptBody, Remembered, Resource};

/// Shared by the layer, every clone of it and every service it made: one reference count to
/// clone. The caches are built on first use with the settings given by then, so a handle
/// cloned before [`ReadCache::configure`] still reaches the one cache every service uses.
#[derive(Debug, Clone)]
pub(crate) struct ReadCache {
    inner: Arc<Cell>,
}

#[derive(Debug)]
struct Cell {
    settings: Mutex<(u64, Option<Duration>)>,
    caches: std::sync::OnceLock<Caches>,
    /// Whether the body a remembered tag was hashed from is kept, to reuse the tag (see
    /// [`ReadCache::keep`]).
    keep_bodies: std::sync::atomic::AtomicBool,
    /// The bytes of the bodies kept now.
    held: Arc<std::sync::atomic::AtomicU64>,
    /// The bodies whose tags writes asked for lately, each in the slot its address picks
    /// (see [`ReadCache::tag_of`]).
    asked: [Mutex<Option<KeptBody>>; ASKED_SLOTS],
    /// This cache among all (see `recent.rs`), and how many times what it holds changed.
    id: u64,
    epoch: std::sync::atomic::AtomicU64,
}

/// The ids of caches: an address could be reused by a cache made after one was dropped.
static CACHE_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[derive(Debug)]
struct Caches {
    resources: moka::sync::Cache<Arc<str>, Arc<Resource>, ifmatch_core::keyed::KeyHasher>,
    /// Whether reads look in the thread's recent resources first: not when what is
    /// remembered expires, which only moka knows.
    recent: bool,
}

/// The bytes of bodies the layer keeps to skip hashing them again.
const KEPT_BUDGET: u64 = 32 << 20;

/// Bodies smaller than this are hashed every time: a lookup would cost as much.
const REUSE_MIN: usize = 1024;

/// How many bodies a write's asking remembers the tags of, and the largest: at most 8 MiB of
/// the budget, so that bodies nobody asks for again cannot keep the reads' out for long.
const ASKED_SLOTS: usize = 64;
const ASKED_MAX: usize = 128 << 10;

impl ReadCache {
    /// A cache of at most `capacity` resources, each with at most [`MAX_VARIANTS`] variants.
    pub(crate) fn new(capacity: u64, time_to_live: Option<Duration>) -> Self {
        let cell = Cell {
            settings: Mutex::new((capacity, time_to_live)),
            caches: std::sync::OnceLock::new(),
            keep_bodies: std::sync::atomic::AtomicBool::new(true),
            held: Arc::default(),
            asked: std::array::from_fn(|_| Mutex::new(None)),
            id: CACHE_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            epoch: std::sync::atomic::AtomicU64::new(0),
        };
        Self {
            inner: Arc::new(cell),
        }
    }

    /// Sets the capacity and the time to live; they take effect if the cache has not been
    /// used yet (the layer's builder methods come before any request).
    pub(crate) fn configure(&self, capacity: u64, time_to_live: Option<Duration>) {
        if self.inner.caches.get().is_some() {
            tracing::warn!("the layer's cache was configured after its first use: ignored");
        }
        *self
            .inner
            .settings
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = (capacity, time_to_live);
    }

    /// Whether the body a remembered tag was hashed from is kept, to reuse the tag.
    pub(crate) fn keep_bodies(&self, yes: bool) {
        (self.inner.keep_bodies).store(yes, std::sync::atomic::Ordering::Relaxed);
    }

    fn caches(&self) -> &Caches {
        self.inner.caches.get_or_init(|| {
            let (capacity, time_to_live) = *self
                .inner
                .settings
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let resources = moka::sync::Cache::builder().max_capacity(capacity);
            let resources = match time_to_live {
                Some(ttl) => resources
                    .time_to_live(ttl)
                    .build_with_hasher(ifmatch_core::keyed::KeyHasher::default()),
                None => resources.build_with_hasher(ifmatch_core::keyed::KeyHasher::default()),
            };
            Caches {
                resources,
                recent: time_to_live.is_none(),
            }
        })
    }

    /// The resource `key` names, when it has been seen since it last changed.
    pub(crate) fn resource(&self, key: &str) -> Option<Arc<Resource>> {
        self.caches().resources.get(key)
    }

    /// [`ReadCache::resource`] for a read, found among the resources this thread found last
    /// when nothing changed since (see `recent.rs`).
    pub(crate) fn resource_to_read(&self, key: &str) -> Option<Arc<Resource>> {
        use std::sync::atomic::Ordering::Acquire;
        let caches = self.caches();
        if !caches.recent {
            return caches.resources.get(key);
        }
        let epoch = self.inner.epoch.load(Acquire);
        crate::recent::find(self.inner.id, epoch, key, |key| caches.resources.get(key))
    }

    /// Marks a forget: what threads found before it is looked up again.
    fn changed(&self) {
        (self.inner.epoch).fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// Remembers a response's ETag and 304 headers for the variant this request selects.
    /// `known` is the resource the read found when it started; `None` when it found none, and
    /// then `request` holds all the request's headers. `Vary: *` is never remembered: no
    /// request can be known to select the same variant. When the response varies on other
    /// headers than `known` says, the key is forgotten, so that the next request keeps all its
    /// headers.
    pub(crate) fn remember(
        &self,
        key: &str,
        known: Option<&Resource>,
        query: &str,
        request: &HeaderMap,
        response: &HeaderMap,
        remembered: Remembered,
    ) {
        let Some(vary) = vary(response) else { return };
        match known {
            Some(resource) if resource.vary() == vary => resource.put(query, request, remembered),
            Some(_) => self.invalidate(key),
            None => {
                let key: Arc<str> = Arc::from(key);
                let resource = Resource::new(key.clone(), vary);
                resource.put(query, request, remembered);
                self.caches().resources.insert(key, Arc::new(resource));
            }
        }
    }

    /// Forgets every variant of `key`.
    pub(crate) fn invalidate(&self, key: &str) {
        self.caches().resources.invalidate(key);
        self.changed();
    }

    /// `bytes`, sent with `coding`, to keep beside the tag hashed from them, if bodies are
    /// kept, these are worth a lookup, and the budget has room: bodies smaller than
    /// [`REUSE_MIN`] cost as much to hash as to look up.
    pub(crate) fn keep(
        &self,
        bytes: &Bytes,
        coding: Option<&HeaderValue>,
        etag: &EntityTag,
    ) -> Option<KeptBody> {
        use std::sync::atomic::Ordering::Relaxed;
        if bytes.len() < REUSE_MIN || !self.inner.keep_bodies.load(Relaxed) {
            return None;
        }
        let len = bytes.len() as u64;
        if self.inner.held.fetch_add(len, Relaxed) + len > KEPT_BUDGET {
            self.inner.held.fetch_sub(len, Relaxed);
            return None;
        }
        Some(KeptBody::new(
            bytes.clone(),
            coding.cloned(),
            etag,
            self.inner.held.clone(),
        ))
    }

    /// The tag of `bytes` sent with `coding`, when a write asked for these very bytes lately
    /// (see [`KeptBody::is`]): a handler that answers from what it holds in memory answers
    /// each write's asking with the same `Bytes` until its content changes, and its tag is not
    /// hashed again. A write forgets its key's resource, and with it the body a read kept, so
    /// these are kept apart: a tag of bytes stays true whatever was written since.
    pub(crate) fn tag_of(&self, bytes: &Bytes, coding: Option<&HeaderValue>) -> Option<EntityTag> {
        if !(REUSE_MIN..=ASKED_MAX).contains(&bytes.len()) {
            return None;
        }
        let slot = self.inner.asked[asked_slot(bytes)]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (slot.as_ref())
            .filter(|kept| kept.is(bytes, coding))
            .map(|kept| kept.tag().clone())
    }

    /// Remembers the tag hashed from `bytes` sent with `coding`, for [`ReadCache::tag_of`], in
    /// place of the body kept in its slot, if the budget has room.
    pub(crate) fn learn_tag(&self, bytes: &Bytes, coding: Option<&HeaderValue>, etag: &EntityTag) {
        if bytes.len() > ASKED_MAX {
            return;
        }
        let Some(kept) = self.keep(bytes, coding, etag) else {
            return;
        };
        let slot = &self.inner.asked[asked_slot(bytes)];
        let replaced = slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(kept);
        // Released outside the slot's lock.
        drop(replaced);
    }
}

/// The slot of the bodies asked for that `bytes`' address picks.
fn asked_slot(bytes: &Bytes) -> usize {
    let address = bytes.as_ptr() as usize as u64;
    (address.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % ASKED_SLOTS
}

/// The header names of a response's `Vary`, sorted; `None` for `Vary: *` or a name that is
/// not one.
fn vary(response: &HeaderMap) -> Option<Vec<HeaderName>> {
    let mut vary = Vec::new();
    for value in response.get_all(header::VARY) {
        for name in value.to_str().ok()?.split(',').map(str::trim) {
            match name {
                "" => {}
                "*" => return None,
                name => vary.push(HeaderName::try_from(name).ok()?),
            }
        }
    }
    vary.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    vary.dedup();
    Some(vary)
}

/// Whether a 200 may be remembered for other requests: never with `no-store`, and with
/// `private` or `Set-Cookie` only when the key function separates users.
pub(crate) fn rememberable(headers: &HeaderMap, remember_private: bool) -> bool {
    let directives = header_list(headers, header::CACHE_CONTROL).map(|d| {
        d.split('=')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    let mut private = headers.contains_key(header::SET_COOKIE);
    for directive in directives {
        match directive.as_str() {
            "no-store" => return false,
            "private" => private = true,
            _ => {}
        }
    }
    !private || remember_private
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::MAX_VARIANTS;
    use ifmatch_core::strong_etag;

    fn remembered(tag: &str) -> Remembered {
        Remembered {
            etag: EntityTag::strong(tag).unwrap(),
            headers: HeaderMap::new(),
            shown: None,
        }
    }

    #[test]
    fn a_tag_is_reused_only_for_the_very_same_bytes_and_coding() {
        let cache = ReadCache::new(100, None);
        let body = Bytes::from(vec![b'a'; 4096]);
        let tag = strong_etag(&body);
        let mut headers = HeaderMap::new();
        headers.insert(header::ETAG, tag.to_header_value());
        let remembered = Remembered {
            etag: tag.clone(),
            headers,
            shown: cache.keep(&body, None, &tag),
        };
        assert_eq!(
            remembered.etag_of(&body.clone(), None),
            Some(tag.to_header_value()),
            "same bytes, same tag"
        );
        // Equal content elsewhere, or other content, is hashed again.
        assert_eq!(remembered.etag_of(&Bytes::from(body.to_vec()), None), None);
        // A slice that starts at the same address but is shorter is other content.
        assert_eq!(remembered.etag_of(&body.slice(..2048), None), None);
        // The same bytes sent with a coding are another representation.
        let gzip = HeaderValue::from_static("gzip");
        assert_eq!(remembered.etag_of(&body, Some(&gzip)), None);
    }

    #[test]
    fn a_write_reuses_the_tag_of_the_very_bytes_it_asked_for_alone() {
        let cache = ReadCache::new(100, None);
        let body = Bytes::from(vec![b'a'; 4096]);
        let tag = strong_etag(&body);
        assert_eq!(cache.tag_of(&body, None), None, "nothing learned yet");
        cache.learn_tag(&body, None, &tag);
        assert_eq!(cache.tag_of(&body.clone(), None), Some(tag.clone()));
        // Equal content elsewhere, a shorter slice at the same address, another coding:
        // hashed again.
        assert_eq!(cache.tag_of(&Bytes::from(body.to_vec()), None), None);
        assert_eq!(cache.tag_of(&body.slice(..2048), None), None);
        let gzip = HeaderValue::from_static("gzip");
        assert_eq!(cache.tag_of(&body, Some(&gzip)), None);
        // Other bytes in the same slot take it: the first ones are hashed again, and no longer held.
        // (Those of other slots are held meanwhile: dropped, their address would come again.)
        let mut tried = Vec::new();
        let other = loop {
            let other = Bytes::from(vec![b'b'; 4096]);
            if asked_slot(&other) == asked_slot(&body) {
                break other;
            }
            tried.push(other);
        };
        let held = cache.inner.held.load(std::sync::atomic::Ordering::Relaxed);
        cache.learn_tag(&other, None, &strong_etag(&other));
        assert_eq!(cache.tag_of(&body, None), None);
        assert_eq!(cache.tag_of(&other, None), Some(strong_etag(&other)));
        assert_eq!(
            cache.inner.held.load(std::sync::atomic::Ordering::Relaxed),
            held,
            "the bytes replaced are given back"
        );
        // Bodies too small to be worth it, or too large to hold, are not learned.
        let small = Bytes::from(vec![b'c'; REUSE_MIN - 1]);
        cache.learn_tag(&small, None, &strong_etag(&small));
        assert_eq!(cache.tag_of(&small, None), None);
        let large = Bytes::from(vec![b'd'; ASKED_MAX + 1]);
        cache.learn_tag(&large, None, &strong_etag(&large));
        assert_eq!(cache.tag_of(&large, None), None);
    }

    #[test]
    fn kept_bodies_stay_within_their_budget_and_give_it_back() {
        let cache = ReadCache::new(100, None);
        let big = Bytes::from(vec![0u8; (KEPT_BUDGET / 2) as usize]);
        let tag = strong_etag(&big);
        let first = cache.keep(&big, None, &tag).expect("room for one");
        let second = cache.keep(&big, None, &tag).expect("room for two");
        assert!(
            cache.keep(&big, None, &tag).is_none(),
            "no room for a third"
        );
        drop(first);
        assert!(
            cache.keep(&big, None, &tag).is_some(),
            "room again once one is gone"
        );
        drop(second);
        assert!(
            cache
                .keep(&Bytes::from_static(b"small"), None, &tag)
                .is_none(),
            "too small to keep"
        );
        cache.keep_bodies(false);
        assert!(
            cache.keep(&big, None, &tag).is_none(),
            "not kept when told not to"
        );
    }

    #[test]
    fn a_response_that_varies_on_new_headers_is_not_remembered_under_incomplete_ones() {
        let cache = ReadCache::new(100, None);
        let mut request = HeaderMap::new();
        request.insert("accept-language", "fr".parse().unwrap());
        // Known not to vary: the layer kept no accept-language from the request.
        cache.remember(
            "/k",
            None,
            "",
            &HeaderMap::new(),
            &HeaderMap::new(),
            remembered("a"),
        );
        let known = cache.resource("/k").unwrap();
        assert!(known.vary().is_empty());
        let mut varying = HeaderMap::new();
        varying.insert(header::VARY, "accept-language".parse().unwrap());
        cache.remember(
            "/k",
            Some(&known),
            "",
            &HeaderMap::new(),
            &varying,
            remembered("b"),
        );
        assert!(
            cache.resource("/k").is_none(),
            "forgotten, so the next request keeps all its headers"
        );
        cache.remember("/k", None, "", &request, &varying, remembered("b"));
        let known = cache.resource("/k").unwrap();
        assert_eq!(
            known.get("", &request).unwrap().etag,
            EntityTag::strong("b").unwrap()
        );
        assert!(
            known.get("", &HeaderMap::new()).is_none(),
            "another variant"
        );
    }

    /// A cache that remembers `/k` as `tag`, shown to a request with no fields.
    fn knowing_k(tag: &str) -> ReadCache {
        let cache = ReadCache::new(100, None);
        let none = HeaderMap::new();
        cache.remember("/k", None, "", &none, &none, remembered(tag));
        cache
    }

    #[test]
    fn a_read_that_finishes_after_a_write_remembers_nothing_findable() {
        let cache = knowing_k("v1");
        let none = HeaderMap::new();
        let found_by_read = cache.resource("/k").unwrap();
        cache.invalidate("/k"); // the write
        cache.remember(
            "/k",
            Some(&found_by_read),
            "",
            &none,
            &none,
            remembered("v1"),
        );
        assert!(cache.resource("/k").is_none());
    }

    #[test]
    fn a_thread_finds_again_only_what_nothing_changed_since() {
        let cache = knowing_k("v1");
        let none = HeaderMap::new();
        let first = cache.resource_to_read("/k").unwrap();
        let again = cache.resource_to_read("/k").unwrap();
        assert!(Arc::ptr_eq(&first, &again), "found again");
        cache.invalidate("/k"); // a write
        assert!(cache.resource_to_read("/k").is_none(), "forgotten");
        cache.remember("/k", None, "", &none, &none, remembered("v2"));
        let learned = cache.resource_to_read("/k").unwrap();
        assert_eq!(
            learned.get("", &none).unwrap().etag,
            EntityTag::strong("v2").unwrap()
        );
        // Another write, to another key: what this thread found is looked up again, and
        // still there.
        cache.invalidate("/other");
        assert!(Arc::ptr_eq(
            &learned,
            &cache.resource_to_read("/k").unwrap()
        ));
        // Another cache (another layer), made after this one was dropped, finds nothing of it.
        drop((first, again, learned));
        drop(cache);
        let other = ReadCache::new(100, None);
        assert!(other.resource_to_read("/k").is_none());
    }

    #[test]
    fn a_read_with_a_time_to_live_finds_nothing_once_it_expired() {
        let cache = ReadCache::new(100, Some(Duration::from_millis(50)));
        let none = HeaderMap::new();
        cache.remember("/k", None, "", &none, &none, remembered("v1"));
        assert!(cache.resource_to_read("/k").is_some());
        std::thread::sleep(Duration::from_millis(120));
        assert!(cache.resource_to_read("/k").is_none());
    }

    #[test]
    fn variants_are_bounded_and_selected_exactly() {
        let cache = ReadCache::new(100, None);
        let mut varying = HeaderMap::new();
        varying.insert(header::VARY, "Accept-Encoding, accept".parse().unwrap());
        let request = |encoding: &str, accept: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, encoding.parse().unwrap());
            headers.insert(header::ACCEPT, accept.parse().unwrap());
            headers
        };
        cache.remember(
            "/k",
            None,
            "",
            &request("e0", "a"),
            &varying,
            remembered("0"),
        );
        let resource = cache.resource("/k").unwrap();
        assert_eq!(resource.vary(), [header::ACCEPT, header::ACCEPT_ENCODING]);
        for i in 1..=MAX_VARIANTS {
            let tag = i.to_string();
            cache.remember(
                "/k",
                Some(&resource),
                "",
                &request(&format!("e{i}"), "a"),
                &varying,
                remembered(&tag),
            );
        }
        assert!(
            resource.get("", &request("e0", "a")).is_none(),
            "the oldest went"
        );
        assert_eq!(
            resource.get("", &request("e1", "a")).unwrap().etag,
            EntityTag::strong("1").unwrap()
        );
        // The values of one header never pass for those of two.
        assert!(resource.get("", &request("e1a", "")).is_none());
    }
}
