//! The header section of a 304 Not Modified (RFC 9110 15.4.5).

use http::{HeaderMap, HeaderName, header};

/// Turns the headers that a 200 would have carried into those of the 304 that replaces it.
///
/// Kept, and only these: what RFC 9110 15.4.5 lists (`ETag`, `Date`, `Vary`, `Cache-Control`,
/// `Expires`, `Content-Location`), and `Last-Modified` when there is no `ETag` (15.4.5's own
/// example of metadata that guides cache updates; with an `ETag` it adds nothing). Everything
/// else goes: the content's metadata and framing, and every other field of the 200. A 304 may be
/// answered from a cache to a request the 200 was not made for, so it must not replay
/// `Set-Cookie`, a user's own fields, or anything else of the 200's.
///
/// ```
/// use http::{HeaderMap, header};
/// use ifmatch_core::not_modified_headers;
///
/// let mut headers = HeaderMap::new();
/// headers.insert(header::ETAG, "\"a\"".parse().unwrap());
/// headers.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
/// headers.insert(header::SET_COOKIE, "session=alice".parse().unwrap());
/// headers.insert(header::VARY, "accept-encoding".parse().unwrap());
/// not_modified_headers(&mut headers);
/// assert!(headers.contains_key(header::ETAG) && headers.contains_key(header::VARY));
/// assert!(!headers.contains_key(header::CONTENT_TYPE));
/// assert!(!headers.contains_key(header::SET_COOKIE));
/// ```
pub fn not_modified_headers(headers: &mut HeaderMap) {
    let dropped: Vec<HeaderName> = headers
        .keys()
        .filter(|name| !KEPT_ON_304.contains(name))
        .cloned()
        .collect();
    for name in dropped {
        headers.remove(name);
    }
    if headers.contains_key(header::ETAG) {
        headers.remove(header::LAST_MODIFIED);
    }
}

/// The fields a 304 carries (RFC 9110 15.4.5, and `Last-Modified`).
const KEPT_ON_304: [HeaderName; 7] = [
    header::ETAG,
    header::DATE,
    header::VARY,
    header::CACHE_CONTROL,
    header::EXPIRES,
    header::CONTENT_LOCATION,
    header::LAST_MODIFIED,
];

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
            ("set-cookie", false),
            ("x-user", false),
            ("x-ms-lease-state", false),
            ("accept-ranges", false),
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
        let mut without_tag = headers.clone();
        not_modified_headers(&mut headers);
        for (name, kept) in all {
            let count = headers.get_all(name).iter().count();
            let kept = kept && name != "last-modified";
            assert_eq!(count, if kept { 2 } else { 0 }, "{name}");
        }
        // Last-Modified guides a cache only when there is no ETag.
        without_tag.remove(header::ETAG);
        not_modified_headers(&mut without_tag);
        assert_eq!(without_tag.get_all(header::LAST_MODIFIED).iter().count(), 2);
    }
}
