//! `Cache-Status` (RFC 9211): what the cache did with each answer, as its field says.

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// `Cache-Status` (RFC 9211): what the cache did with each answer.
pub(crate) const CACHE_STATUS: HeaderName = HeaderName::from_static("cache-status");

/// Adds `status` to `headers`' `Cache-Status`, as this cache's member.
pub(crate) fn add_status(headers: &mut HeaderMap, status: &str) {
    // Those of every hit, miss and revalidation answered 304 without building a string.
    let value = match status {
        "hit" => HeaderValue::from_static("ifmatch; hit"),
        "fwd=miss; stored" => HeaderValue::from_static("ifmatch; fwd=miss; stored"),
        "fwd=uri-miss" => HeaderValue::from_static("ifmatch; fwd=uri-miss"),
        "fwd=stale; fwd-status=304" => {
            HeaderValue::from_static("ifmatch; fwd=stale; fwd-status=304")
        }
        status => match HeaderValue::from_str(&format!("ifmatch; {status}")) {
            Ok(value) => value,
            Err(_) => return,
        },
    };
    headers.append(CACHE_STATUS, value);
}
