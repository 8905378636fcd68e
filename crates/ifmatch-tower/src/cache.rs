//! What the layer remembers of the resources it has seen: per resource, the request headers
//! its responses vary on and, per variant, the current ETag and the headers of a 304.
//!
//! One moka lookup per request finds a resource and all its variants. A read holds on to the
//! resource it found; a write forgets the key, which detaches that resource, so what a read
//! that was already under way remembers afterwards lands in a resource nobody can find: a read
//! can never bring back a version that a write has replaced.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use ifmatch_core::precondition::Validators;
use ifmatch_core::{EntityTag, header_list, strong_etag};

/// The variants one resource keeps at most; a new one beyond that replaces the oldest.
pub(crate) const MAX_VARIANTS: usize = 8;

/// A resource the layer has seen since it last changed.
#[derive(Debug)]
pub(crate) struct Resource {
    /// Its key, shared with the map that finds it: a read of a known resource needs no copy.
    key: Arc<str>,
    /// The request headers that select a variant, sorted.
    vary: Vec<HeaderName>,
    /// The variants, oldest first.
    variants: Mutex<Vec<Variant>>,
    /// The version the version backend held when this instance learned the resource (under
    /// the key's lock). While the backend still holds exactly that, nobody has written since,
    /// here or on another instance, and each variant's tag is current for the requests that
    /// select it.
    stamp: Mutex<Option<Validators>>,
}

/// One variant of a resource.
#[derive(Debug)]
struct Variant {
    /// The query and the selecting headers' values (see [`Resource::selector`]).
    selector: Vec<u8>,
    /// The selecting headers but the credentials, as the request that was shown it sent them:
    /// what a write asks the application with to learn whether its tag is still current.
    selected_by: HeaderMap,
    remembered: Arc<Remembered>,
}

/// What a conditional GET needs to be answered 304 without the inner service.
#[derive(Debug)]
pub(crate) struct Remembered {
    pub(crate) etag: EntityTag,
    /// The headers of the 304: those of the 200, less the representation metadata.
    pub(crate) headers: HeaderMap,
    /// The bytes the tag was hashed from, when kept (see [`ReadCache::keep`]).
    pub(crate) shown: Option<KeptBody>,
}

impl Remembered {
    /// The tag's field value, when `bytes` are the very bytes the tag was hashed from, sent
    /// with the same `Content-Encoding`: a handler that answers with the same `Bytes` again
    /// (same address and length; holding them keeps them immutable) answers with the same
    /// content, and its tag is reused without hashing.
    pub(crate) fn etag_of(
        &self,
        bytes: &Bytes,
        coding: Option<&HeaderValue>,
    ) -> Option<HeaderValue> {
        let shown = self.shown.as_ref()?;
        let same = shown.bytes.as_ptr() == bytes.as_ptr()
            && shown.bytes.len() == bytes.len()
            && shown.coding.as_ref() == coding;
        same.then(|| shown.etag.clone())
    }
}

/// A body kept beside its tag, counted against the bytes all kept bodies may hold.
#[derive(Debug)]
pub(crate) struct KeptBody {
    bytes: Bytes,
    coding: Option<HeaderValue>,
    /// The `ETag` field hashed from them.
    etag: HeaderValue,
    held: Arc<std::sync::atomic::AtomicU64>,
}

impl Drop for KeptBody {
    fn drop(&mut self) {
        (self.held).fetch_sub(
            self.bytes.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

impl Resource {
    /// Its key.
    pub(crate) fn key(&self) -> &Arc<str> {
        &self.key
    }

    /// The request headers that select a variant.
    pub(crate) fn vary(&self) -> &[HeaderName] {
        &self.vary
    }

    /// Records the version the backend holds as of this resource's learning.
    pub(crate) fn stamp(&self, version: Validators) {
        *self.stamp.lock().unwrap_or_else(PoisonError::into_inner) = Some(version);
    }

    /// The current tag for `request`, if the backend still holds `stored`, the version it
    /// held when this resource was learned (then nobody has written since): `Some(Some(tag))`,
    /// the tag of the variant it selects; `Some(None)`, a variant (another user's, another
    /// encoding) this requester has not been shown, so its tag cannot be vouched for. `None`
    /// when the stamp does not hold: only the backend's version speaks.
    pub(crate) fn current_for(
        &self,
        query: &str,
        request: &HeaderMap,
        stored: &Validators,
    ) -> Option<Option<EntityTag>> {
        let stamp = self.stamp.lock().unwrap_or_else(PoisonError::into_inner);
        if stamp.as_ref() != Some(stored) {
            return None;
        }
        drop(stamp);
        Some(
            self.get(query, request)
                .map(|remembered| remembered.etag.clone()),
        )
    }

    /// The remembered variant that this request (its query and headers) selects.
    pub(crate) fn get(&self, query: &str, request: &HeaderMap) -> Option<Arc<Remembered>> {
        self.get_known(query, request, has_credentials(request))
    }

    /// [`Resource::get`], for a request already known to carry credentials or not.
    pub(crate) fn get_known(
        &self,
        query: &str,
        request: &HeaderMap,
        credentials: bool,
    ) -> Option<Arc<Remembered>> {
        let selector = self.selector(query, request, credentials);
        let variants = self.variants.lock().unwrap_or_else(PoisonError::into_inner);
        variants
            .iter()
            .find(|variant| variant.selector == selector)
            .map(|variant| variant.remembered.clone())
    }

    /// The selecting headers, but the credentials, of a remembered variant of `query` whose
    /// tag `wanted` picks: how to ask for that representation again. Never another user's
    /// credentials: a tag shown to someone else is asked for with the asker's own.
    pub(crate) fn selecting(
        &self,
        query: &str,
        wanted: impl Fn(&EntityTag) -> bool,
    ) -> Option<HeaderMap> {
        let variants = self.variants.lock().unwrap_or_else(PoisonError::into_inner);
        let of_query = |selector: &[u8]| match selector.strip_prefix(&[1]) {
            None => query.is_empty(),
            Some(rest) => rest
                .strip_prefix(query.as_bytes())
                .is_some_and(|rest| !query.is_empty() && rest.first() == Some(&0)),
        };
        variants
            .iter()
            .find(|v| wanted(&v.remembered.etag) && of_query(&v.selector))
            .map(|v| v.selected_by.clone())
    }

    fn put(&self, query: &str, request: &HeaderMap, remembered: Remembered) {
        let selector = self.selector(query, request, has_credentials(request));
        let mut selected_by = HeaderMap::new();
        for name in self.vary.iter().filter(|n| !CREDENTIALS.contains(n)) {
            for value in request.get_all(name) {
                selected_by.append(name.clone(), value.clone());
            }
        }
        let mut variants = self.variants.lock().unwrap_or_else(PoisonError::into_inner);
        variants.retain(|variant| variant.selector != selector);
        if variants.len() == MAX_VARIANTS {
            variants.remove(0);
        }
        variants.push(Variant {
            selector,
            selected_by,
            remembered: Arc::new(remembered),
        });
    }

    /// The query, then the values of the headers in `vary`, each ended by a NUL (which neither
    /// holds), so that no two different requests select the same variant; then the digest of
    /// the request's credentials, whatever `vary` says. The query is part of the variant, not
    /// of the key: a write to a path forgets every query of it.
    fn selector(&self, query: &str, request: &HeaderMap, credentials: bool) -> Vec<u8> {
        let mut out = Vec::new();
        // 0x01 starts a query: no header value holds it. No query, no bytes: the usual
        // request (no query, no `Vary`, no credentials) selects with an empty, unallocated key.
        if !query.is_empty() {
            out.push(1);
            out.extend_from_slice(query.as_bytes());
            out.push(0);
        }
        for name in &self.vary {
            push_values(&mut out, request, name);
        }
        if credentials {
            out.extend_from_slice(&who(request));
        }
        out
    }
}

/// The request fields that say who is asking.
pub(crate) const CREDENTIALS: [HeaderName; 2] = [header::AUTHORIZATION, header::COOKIE];

/// Who is asking, as a digest of the request's `Authorization` and `Cookie` values (empty when
/// it has neither). It is part of every variant's selector: an answer made for one user's
/// credentials is never replayed as a 304 to a request with other credentials, or none
/// (RFC 9111 3.5 for `Authorization`, and the same care for `Cookie`). A digest, so the cache
/// holds no secret.
fn who(request: &HeaderMap) -> Vec<u8> {
    let mut values = Vec::new();
    for name in &CREDENTIALS {
        push_values(&mut values, request, name);
    }
    strong_etag(&values).opaque().to_vec()
}

/// Whether the request carries credentials.
fn has_credentials(request: &HeaderMap) -> bool {
    CREDENTIALS.iter().any(|name| request.contains_key(name))
}

/// Appends the values of `name` in `request`, comma-joined and ended by a NUL.
fn push_values(out: &mut Vec<u8>, request: &HeaderMap, name: &HeaderName) {
    for (i, value) in request.get_all(name).iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(value.as_bytes());
    }
    out.push(0);
}

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
}

#[derive(Debug)]
struct Caches {
    resources: crate::keyed::Map<Arc<str>, Arc<Resource>>,
}

/// The bytes of bodies the layer keeps to skip hashing them again.
const KEPT_BUDGET: u64 = 32 << 20;

/// Bodies smaller than this are hashed every time: a lookup would cost as much.
const REUSE_MIN: usize = 1024;

impl ReadCache {
    /// A cache of at most `capacity` resources, each with at most [`MAX_VARIANTS`] variants.
    pub(crate) fn new(capacity: u64, time_to_live: Option<Duration>) -> Self {
        let cell = Cell {
            settings: Mutex::new((capacity, time_to_live)),
            caches: std::sync::OnceLock::new(),
            keep_bodies: std::sync::atomic::AtomicBool::new(true),
            held: Arc::default(),
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
                    .build_with_hasher(crate::keyed::KeyHasher::default()),
                None => resources.build_with_hasher(crate::keyed::KeyHasher::default()),
            };
            Caches { resources }
        })
    }

    /// The resource `key` names, when it has been seen since it last changed.
    pub(crate) fn resource(&self, key: &str) -> Option<Arc<Resource>> {
        self.caches().resources.get(key)
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
            Some(resource) if resource.vary == vary => resource.put(query, request, remembered),
            Some(_) => self.invalidate(key),
            None => {
                let key: Arc<str> = Arc::from(key);
                let resource = Resource {
                    key: key.clone(),
                    vary,
                    variants: Mutex::new(Vec::new()),
                    stamp: Mutex::new(None),
                };
                resource.put(query, request, remembered);
                self.caches().resources.insert(key, Arc::new(resource));
            }
        }
    }

    /// Forgets every variant of `key`.
    pub(crate) fn invalidate(&self, key: &str) {
        self.caches().resources.invalidate(key);
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
        Some(KeptBody {
            bytes: bytes.clone(),
            coding: coding.cloned(),
            etag: etag.to_header_value(),
            held: self.inner.held.clone(),
        })
    }
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

    #[test]
    fn a_read_that_finishes_after_a_write_remembers_nothing_findable() {
        let cache = ReadCache::new(100, None);
        let none = HeaderMap::new();
        cache.remember("/k", None, "", &none, &none, remembered("v1"));
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
