//! What a layer was told: its options, shared by every service it makes.

use std::fmt;
use std::sync::Arc;

use http::{HeaderMap, Request, Uri};

/// Computes the resource key of a request; `None` leaves the request alone.
pub(crate) type KeyFn = Arc<dyn Fn(&Uri, &HeaderMap) -> Option<String> + Send + Sync>;

/// Picks the requests the layer leaves alone.
pub(crate) type SkipFn = Arc<dyn Fn(&Uri, &HeaderMap) -> bool + Send + Sync>;

/// Names the keys of the other resources a write to a request's target changes.
pub(crate) type RelatedFn = Arc<dyn Fn(&Uri, &HeaderMap) -> Vec<String> + Send + Sync>;

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) hash_limit: usize,
    pub(crate) require_precondition: bool,
    pub(crate) key: KeyFn,
    /// A key function that separates users may remember `private` and `Set-Cookie` answers.
    pub(crate) custom_key: bool,
    /// Requests the layer leaves alone.
    pub(crate) skip: Option<SkipFn>,
    /// The application's version source, asked under the lock by every conditional write.
    pub(crate) source: Option<crate::source::Source>,
    /// Writes carry the lock's fencing token in this request header.
    pub(crate) fencing_header: Option<http::HeaderName>,
    /// Strong tags are marked for each `Accept-Encoding` (see [`ConditionalLayer::mark_encodings`];
    /// off by default).
    pub(crate) mark_encodings: bool,
    /// The application promised that every change passes through this layer: a conditional
    /// write may be judged against what the layer remembers (see
    /// [`ConditionalLayer::every_change_passes_through`]).
    pub(crate) trust_memory: bool,
    /// A write forgets what the layer remembers of its target's ancestors (`/docs/a/append`:
    /// `/docs/a`, `/docs`, `/`).
    pub(crate) forget_ancestors: bool,
    /// The application's own relations between resources.
    pub(crate) related: Option<RelatedFn>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("hash_limit", &self.hash_limit)
            .field("require_precondition", &self.require_precondition)
            .field("custom_key", &self.custom_key)
            .field("source", &self.source.is_some())
            .field("fencing_header", &self.fencing_header)
            .field("trust_memory", &self.trust_memory)
            .field("forget_ancestors", &self.forget_ancestors)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Whether a conditional write is judged by the version backend's versions (learned from
    /// GETs and writes): only when promised, and with no version source.
    pub(crate) fn judges_by_memory(&self) -> bool {
        self.trust_memory && self.source.is_none()
    }

    /// The key of the resource at `path` (with its query, if any) for a request with
    /// `headers`: with the default key, the path itself, taken as it is (a write names its
    /// ancestors and related resources by path); otherwise the application's key function's,
    /// asked with it parsed.
    pub(crate) fn key_of_path(&self, path: String, headers: &HeaderMap) -> Option<String> {
        if !self.custom_key {
            return Some(match path.split_once('?') {
                Some((path, _)) => path.to_owned(),
                None => path,
            });
        }
        let path: Uri = path.parse().ok()?;
        (self.key)(&path, headers)
    }

    /// Whether a conditional write asks the wrapped service for the resource: the default.
    pub(crate) fn asks_service(&self) -> bool {
        !self.trust_memory && self.source.is_none()
    }
}

/// The default resource key: the path. The query selects a variant of the resource, so a
/// write to a path forgets every query of it (`?view=raw` cannot outlive a PUT), and the path
/// has one write lock.
pub(crate) fn path(uri: &Uri, _: &HeaderMap) -> Option<String> {
    Some(uri.path().to_owned())
}

/// A request's resource key: the key function's, or the path (the default), read from the
/// request where it is needed, so that a read of a known resource copies none.
pub(crate) enum Key {
    Custom(String),
    Path,
}

impl Key {
    pub(crate) fn of<'a, B>(&'a self, request: &'a Request<B>) -> &'a str {
        match self {
            Key::Custom(key) => key,
            Key::Path => request.uri().path(),
        }
    }
}
