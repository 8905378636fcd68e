//! A resource the layer remembers: the request headers its responses vary on and, per
//! variant, the current ETag, the headers of a 304 and perhaps the body the tag was hashed
//! from. The cache that finds resources by key: `cache.rs`.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use ifmatch_core::precondition::Validators;
use ifmatch_core::{EntityTag, strong_etag};

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
        shown.is(bytes, coding).then(|| shown.field.clone())
    }
}

/// A body kept beside its tag, counted against the bytes all kept bodies may hold.
#[derive(Debug)]
pub(crate) struct KeptBody {
    bytes: Bytes,
    coding: Option<HeaderValue>,
    /// The tag hashed from them, and its `ETag` field.
    tag: EntityTag,
    field: HeaderValue,
    held: Arc<std::sync::atomic::AtomicU64>,
}

impl KeptBody {
    /// `bytes`, sent with `coding`, beside the tag hashed from them, counted in `held`
    /// (which the caller has already added them to).
    pub(crate) fn new(
        bytes: Bytes,
        coding: Option<HeaderValue>,
        tag: &EntityTag,
        held: Arc<std::sync::atomic::AtomicU64>,
    ) -> Self {
        Self {
            bytes,
            coding,
            field: tag.to_header_value(),
            tag: tag.clone(),
            held,
        }
    }

    /// Whether `bytes`, sent with `coding`, are these very bytes: the same address and length
    /// (holding them keeps them immutable), the same `Content-Encoding`. Their tag is then
    /// this one, without hashing.
    pub(crate) fn is(&self, bytes: &Bytes, coding: Option<&HeaderValue>) -> bool {
        self.bytes.as_ptr() == bytes.as_ptr()
            && self.bytes.len() == bytes.len()
            && self.coding.as_ref() == coding
    }

    /// The tag hashed from the bytes.
    pub(crate) fn tag(&self) -> &EntityTag {
        &self.tag
    }
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
    /// A resource whose answers vary on `vary` (sorted), with no variant yet.
    pub(crate) fn new(key: Arc<str>, vary: Vec<HeaderName>) -> Self {
        Self {
            key,
            vary,
            variants: Mutex::new(Vec::new()),
            stamp: Mutex::new(None),
        }
    }

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
            .find(|variant| same(&variant.selector, &selector))
            .map(|variant| variant.remembered.clone())
    }

    /// Whether some variant's remembered tag is `etag`.
    pub(crate) fn remembers(&self, etag: &EntityTag) -> bool {
        let variants = self.variants.lock().unwrap_or_else(PoisonError::into_inner);
        variants
            .iter()
            .any(|variant| variant.remembered.etag == *etag)
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

    pub(crate) fn put(&self, query: &str, request: &HeaderMap, remembered: Remembered) {
        let selector = self.selector(query, request, has_credentials(request));
        let mut selected_by = HeaderMap::new();
        for name in self.vary.iter().filter(|n| !CREDENTIALS.contains(n)) {
            for value in request.get_all(name) {
                selected_by.append(name.clone(), value.clone());
            }
        }
        let mut variants = self.variants.lock().unwrap_or_else(PoisonError::into_inner);
        variants.retain(|variant| !same(&variant.selector, &selector));
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

/// Whether two selectors are the same. The usual one is empty, and an empty `Vec`'s pointer
/// dangles (it is 1): `==` on two of them calls `memcmp` with a length of 0, which glibc's
/// AVX-512 `memcmp` serves with a masked load from that address, and a masked load from an
/// unmapped page costs a microcode assist (hundreds of cycles) even when it loads nothing:
/// measured, 0.9% of the CPU time of every plain read (`perf record` on `scripts/bench-tower`).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
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
