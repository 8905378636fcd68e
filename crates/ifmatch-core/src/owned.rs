//! Copies that hold no connection's buffer.
//!
//! hyper parses a message without copying: its target, each header value, and a body that came
//! in one read, are slices of the connection's read buffer, and keeps all of that buffer (kilobytes,
//! up to hundreds when hyper has grown it) alive as long as it is. What the layers keep past
//! the request (a 304's fields, a stored response's policy and body) is copied into
//! allocations of its own size first, so that what a cache holds is what it weighs.

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery};
use http::{HeaderMap, HeaderValue, Request};

/// `value`, in an allocation of its own.
pub fn value(value: &HeaderValue) -> HeaderValue {
    let mut copy = HeaderValue::from_maybe_shared(Bytes::copy_from_slice(value.as_bytes()))
        .unwrap_or_else(|_| value.clone());
    copy.set_sensitive(value.is_sensitive());
    copy
}

/// `headers`, their values copied into one allocation of their own.
pub fn headers(headers: &HeaderMap) -> HeaderMap {
    let mut all = bytes::BytesMut::with_capacity(headers.values().map(|v| v.len()).sum());
    for v in headers.values() {
        all.extend_from_slice(v.as_bytes());
    }
    let mut all = all.freeze();
    // The same map (its names are allocations of their own already), each value replaced in
    // the order they were copied.
    let mut copy = headers.clone();
    for v in copy.values_mut() {
        let mine = all.split_to(v.len());
        if let Ok(mut mine) = HeaderValue::from_maybe_shared(mine) {
            mine.set_sensitive(v.is_sensitive());
            *v = mine;
        }
    }
    copy
}

/// The head `request`, its fields in allocations of their own.
pub fn head(request: &Request<()>) -> Request<()> {
    let mut copy = Request::new(());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = uri(request.uri());
    *copy.version_mut() = request.version();
    *copy.headers_mut() = headers(request.headers());
    copy
}

/// `uri`, in allocations of its own (a parsed target is a slice of the read buffer too).
pub fn uri(uri: &http::Uri) -> http::Uri {
    let copy = |part: &str| Bytes::copy_from_slice(part.as_bytes());
    let mut parts = http::uri::Parts::default();
    // Parsed from a string, a scheme is one of the two it knows or a copy of its own.
    parts.scheme = uri.scheme_str().and_then(|s| s.parse().ok());
    parts.authority =
        (uri.authority()).and_then(|a| Authority::from_maybe_shared(copy(a.as_str())).ok());
    parts.path_and_query =
        (uri.path_and_query()).and_then(|p| PathAndQuery::from_maybe_shared(copy(p.as_str())).ok());
    http::Uri::from_parts(parts).unwrap_or_else(|_| uri.clone())
}

/// `bytes`, in an allocation of exactly its size.
pub fn bytes(bytes: &Bytes) -> Bytes {
    Bytes::copy_from_slice(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copied_target_is_the_same_target() {
        for target in [
            "/",
            "/a/b?c=d&e",
            "http://Example.com:8080/x?y",
            "https://h/",
            "coap://h/p",
            "example.com:443",
            "*",
        ] {
            let parsed: http::Uri = target.parse().unwrap();
            let copy = uri(&parsed);
            assert_eq!(copy, parsed, "{target}");
            assert_eq!(copy.to_string(), parsed.to_string(), "{target}");
        }
    }
}
