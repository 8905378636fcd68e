//! Fields some frameworks read as another target or another method (`X-Original-URL`,
//! `X-Rewrite-URL`, `X-HTTP-Method-Override`, ...). They are no part of the key: a GET that
//! carried one could have another resource's answer (or a DELETE's) stored under its own URL
//! and served to everyone. They are removed from every GET and HEAD before the inner service
//! sees it; other methods keep them (their answers are not stored).

use http::header::{HeaderMap, HeaderName};

const REWRITING: [HeaderName; 5] = [
    HeaderName::from_static("x-original-url"),
    HeaderName::from_static("x-rewrite-url"),
    HeaderName::from_static("x-http-method-override"),
    HeaderName::from_static("x-http-method"),
    HeaderName::from_static("x-method-override"),
];

/// Removes them from `headers`.
pub(crate) fn remove(headers: &mut HeaderMap) {
    // The usual request has none: one look at its names rather than a lookup of each.
    if !(headers.keys()).any(|name| name.as_str().starts_with("x-")) {
        return;
    }
    for name in &REWRITING {
        headers.remove(name);
    }
}
