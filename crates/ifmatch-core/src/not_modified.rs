//! The header section of a 304 Not Modified (RFC 9110 15.4.5).

use http::{HeaderMap, HeaderName, header};

/// Turns the headers that a 200 would have carried into those of the 304 that replaces it.
///
/// Kept: `ETag`, `Date`, `Vary`, `Cache-Control`, `Expires`, `Content-Location` (which a 304
/// MUST carry when the 200 would have), `Last-Modified` (it guides cache updates), and fields
/// that are not representation metadata (`Set-Cookie`, `x-ms-*`, ...). Dropped: the other
/// representation metadata and body framing, that is every `Content-*` field but
/// `Content-Location`, and `Transfer-Encoding`: a 304 has no content, and a `Content-Length` or
/// `Content-Type` there would describe one.
///
/// ```
/// use http::{HeaderMap, header};
/// use ifmatch_core::not_modified_headers;
///
/// let mut headers = HeaderMap::new();
/// headers.insert(header::ETAG, "\"a\"".parse().unwrap());
/// headers.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
/// headers.insert(header::VARY, "accept-encoding".parse().unwrap());
/// not_modified_headers(&mut headers);
/// assert!(headers.contains_key(header::ETAG) && headers.contains_key(header::VARY));
/// assert!(!headers.contains_key(header::CONTENT_TYPE));
/// ```
pub fn not_modified_headers(headers: &mut HeaderMap) {
    let dropped: Vec<HeaderName> = headers
        .keys()
        .filter(|name| is_dropped_on_304(name))
        .cloned()
        .collect();
    for name in dropped {
        headers.remove(name);
    }
}

fn is_dropped_on_304(name: &HeaderName) -> bool {
    (name.as_str().starts_with("content-") && *name != header::CONTENT_LOCATION)
        || *name == header::TRANSFER_ENCODING
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_exactly_what_15_4_5_asks() {
        let all = [
            ("etag", true),
            ("date", true),
            ("vary", true),
            ("cache-control", true),
            ("expires", true),
            ("content-location", true),
            ("last-modified", true),
            ("set-cookie", true),
            ("x-ms-lease-state", true),
            ("accept-ranges", true),
            ("content-type", false),
            ("content-length", false),
            ("content-encoding", false),
            ("content-language", false),
            ("content-range", false),
            ("content-disposition", false),
            ("content-md5", false),
            ("transfer-encoding", false),
        ];
        let mut headers = HeaderMap::new();
        for (name, _) in all {
            headers.append(HeaderName::from_static(name), "x".parse().unwrap());
            headers.append(HeaderName::from_static(name), "y".parse().unwrap());
        }
        not_modified_headers(&mut headers);
        for (name, kept) in all {
            let count = headers.get_all(name).iter().count();
            assert_eq!(count, if kept { 2 } else { 0 }, "{name}");
        }
    }
}
