//! One stored response: what decides its reuse (the crate's policy, made when first needed),
//! its head, and its body, whole or arriving. The memory tier that holds them by key: `memory.rs`.

use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use http_cache_semantics::BeforeRequest;

use crate::rules::freshness::Freshness;
use crate::rules::lazy_policy::Policy;
use crate::rules::range::Piece;
use crate::stored::entry_body::StoredBody;
use crate::stored::hit_head::FreshHead;

/// One stored response: what decides its reuse, its head, and its body.
#[derive(Debug)]
pub(crate) struct Stored {
    /// Made by the crate when first needed (see `lazy_policy.rs`).
    pub(crate) policy: Policy,
    /// Its status (which the policy may have been shown as another; see `policy.rs`).
    pub(crate) status: http::StatusCode,
    /// Which bytes of its representation it holds, if it is a 206 (see [`Piece`]).
    pub(crate) piece: Option<Piece>,
    /// Its body, whole or arriving.
    pub(crate) body: Arc<StoredBody>,
    /// Its `Date`, as the origin sent it (the policy's head carries the time it is served,
    /// in a form that is no HTTP-date).
    pub(crate) date: Option<http::HeaderValue>,
    /// Its `ETag` and `Last-Modified`, as stored first (a 304 changes neither).
    pub(crate) validators: http::HeaderMap,
    /// Its `Cache-Control` and `Expires` as the origin sent them, when the policy was shown a
    /// targeted field's directives in their place.
    pub(crate) own_fields: Option<http::HeaderMap>,
    /// What it allows once stale.
    pub(crate) stale: Freshness,
    /// The bytes of the fields its policy keeps: the response's, and those of the request's
    /// it reads (see `policy.rs`).
    pub(crate) fields: usize,
    /// The response's `Vary` and the request's values of the fields it names, and of the
    /// store's own key fields: which requests it answers, for a newer response of the same
    /// to replace it.
    pub(crate) variant: String,
    /// The request's values of the store's key fields: only requests with the same are
    /// answered from it.
    pub(crate) keyed: String,
    /// The policy's answer to its first fresh hit, for the next ones (see `hit_head.rs`).
    pub(crate) served: OnceLock<Option<FreshHead>>,
}

/// The bytes `headers` take: names, values, and 32 bytes of bookkeeping each.
pub(crate) fn fields_size(headers: &http::HeaderMap) -> usize {
    headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 32)
        .sum()
}

impl Stored {
    /// The value of `field` (a lowercase name) in the request that stored it, its lines joined
    /// with commas (`Some("")`: it had none), if it varies by `field`.
    pub(crate) fn varied_value(&self, field: &http::HeaderName) -> Option<&str> {
        let line = (self.variant.lines())
            .find_map(|line| line.strip_prefix(field.as_str())?.strip_prefix('='))?;
        Some(line.strip_suffix(',').unwrap_or(line))
    }

    /// The head to serve `asked` with, fresh, had `asked` sent `field` (a lowercase name) as the
    /// request that stored it did: for a field the cache knows the meaning of, which may select
    /// the same response for other values (see `language.rs`, `coding.rs`). `None`
    /// if it does not vary by `field`, differs from `asked` in another field it varies by, or is
    /// not fresh.
    pub(crate) fn fresh_head_as_stored(
        &self,
        field: &http::HeaderName,
        asked: &http::Request<()>,
        now: SystemTime,
    ) -> Option<http::response::Parts> {
        let value = self.varied_value(field)?;
        let mut as_stored = http::Request::new(());
        *as_stored.method_mut() = asked.method().clone();
        *as_stored.uri_mut() = asked.uri().clone();
        *as_stored.headers_mut() = asked.headers().clone();
        if value.is_empty() {
            as_stored.headers_mut().remove(field);
        } else {
            let value = http::HeaderValue::from_str(value).ok()?;
            as_stored.headers_mut().insert(field, value);
        }
        match self.policy.before_request(&as_stored, now) {
            BeforeRequest::Fresh(head) => Some(head),
            BeforeRequest::Stale { .. } => None,
        }
    }

    /// Whether it takes `older`'s place: for the same requests, a whole representation or
    /// the same piece of it, or another representation (other validators). Pieces of the
    /// same representation and the whole are kept side by side.
    pub(crate) fn supersedes(&self, older: &Self) -> bool {
        self.variant == older.variant
            && self.keyed == older.keyed
            && (self.piece.is_none()
                || self.piece == older.piece
                || self.validators != older.validators)
    }

    /// What it weighs: its body, its fields twice (the policy's copy and the head made of
    /// it), and 2 KiB for the rest (measured: about that per entry beyond these, allocator
    /// included).
    pub(crate) fn weight(&self) -> u64 {
        self.body.len() + 2 * self.fields as u64 + 2048
    }
}
