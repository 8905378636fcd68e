//! The keys of the store: the host and the target a response is stored under, the values of
//! the store's key fields that set one user's answers apart (`keyed`), and the values of the
//! fields a response's `Vary` names (`variant`).

use http::header::{self, HeaderValue};
use http::{Request, Uri};

/// The values of the fields `names` in `request`: what sets one user's answers apart from
/// another's when the store is told to (see [`SharedCacheLayer::key_headers`]).
///
/// [`SharedCacheLayer::key_headers`]: crate::SharedCacheLayer::key_headers
pub(crate) fn keyed(request: &http::HeaderMap, names: &[http::HeaderName]) -> String {
    let mut out = String::new();
    for name in names {
        for value in request.get_all(name) {
            out.push_str(&String::from_utf8_lossy(value.as_bytes()));
            out.push('\n');
        }
        out.push('\0');
    }
    out
}

/// `Stored::variant` of a response with `response` headers stored for a request with
/// `request` headers.
pub(crate) fn variant(request: &http::HeaderMap, response: &http::HeaderMap) -> String {
    let mut out = String::new();
    for name in ifmatch_core::header_list(response, http::header::VARY) {
        let name = name.to_ascii_lowercase();
        out.push_str(&name);
        out.push('=');
        for value in request.get_all(name.as_str()) {
            out.push_str(&String::from_utf8_lossy(value.as_bytes()));
            out.push(',');
        }
        out.push('\n');
    }
    out
}

/// The names of the fields in a `Stored::variant`: those the response's `Vary` names, in
/// lowercase, from every line of it (the head the policy makes keeps only the last).
pub(crate) fn varied_names(variant: &str) -> impl Iterator<Item = &str> {
    variant
        .lines()
        .filter_map(|line| Some(line.split_once('=')?.0))
}

/// The host a request names (its target's authority, or `Host`), lowercased: a part of every
/// key, so that an answer made for one host (links built from it, say) never reaches another.
pub(crate) fn host_of<B>(request: &Request<B>) -> String {
    let host = (request.uri().authority().map(|a| a.as_str().as_bytes()))
        .or_else(|| {
            request
                .headers()
                .get(header::HOST)
                .map(HeaderValue::as_bytes)
        })
        .unwrap_or_default();
    String::from_utf8_lossy(host).to_ascii_lowercase()
}

/// Where a request's answers are stored: its host, and its target (path and query).
pub(crate) fn key_of(host: &str, target: &str) -> String {
    let mut key = String::with_capacity(host.len() + 1 + target.len());
    key.push_str(host);
    key.push(' ');
    key.push_str(target);
    key
}

/// A request target's path and query.
pub(crate) fn target_of(uri: &Uri) -> &str {
    uri.path_and_query().map_or("/", |p| p.as_str())
}
