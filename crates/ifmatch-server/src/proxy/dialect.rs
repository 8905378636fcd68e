//! The request fields of a storage dialect that choose which bytes an answer holds, which a
//! generic HTTP cache would not know of.
//!
//! Azure's SDKs and tools ask for a part of a blob with `x-ms-range`, which wins over `Range`
//! when both are sent. A cache that knew only `Range` would answer them with a stored whole,
//! and the Python SDK then fails the download ("Required Content-Range response header is
//! missing or malformed"). So:
//! - the cache reads `x-ms-range` as the range ([`RANGE_FIELD`], given to
//!   [`SharedCacheLayer::range_field`](ifmatch_tower::SharedCacheLayer::range_field)), while
//!   the origin gets the request as the client sent it: Shared Key signs both fields;
//! - a request for the digest of its part (`x-ms-range-get-content-md5` or `-crc64`, `true`)
//!   passes the cache ([`Pass`]): only the origin sends that digest.

use http::Request;
use http::header::HeaderName;
use ifmatch_tower::shared_cache::Pass;

/// The field the cache reads as the range, in place of `Range`.
pub(super) const RANGE_FIELD: HeaderName = HeaderName::from_static("x-ms-range");

/// The fields that ask the origin for a digest of the part it sends.
const DIGESTS: [HeaderName; 2] = [
    HeaderName::from_static("x-ms-range-get-content-md5"),
    HeaderName::from_static("x-ms-range-get-content-crc64"),
];

/// Marks `request` to pass the cache if it asks for a digest only the origin can send.
pub(super) fn mark<B>(request: &mut Request<B>) {
    // One pass over the few fields of a request costs less than a lookup of each name.
    let digest = (request.headers().iter()).any(|(name, value)| {
        DIGESTS.contains(name) && value.as_bytes().eq_ignore_ascii_case(b"true")
    });
    if digest {
        request.extensions_mut().insert(Pass);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(fields: &[(&str, &str)]) -> bool {
        let mut request = Request::get("/c/b");
        for (name, value) in fields {
            request = request.header(*name, *value);
        }
        let mut request = request.body(()).unwrap();
        mark(&mut request);
        request.extensions().get::<Pass>().is_some()
    }

    #[test]
    fn a_request_for_a_parts_digest_passes() {
        assert!(!marked(&[("x-ms-range", "bytes=0-9")]));
        for name in ["x-ms-range-get-content-md5", "x-ms-range-get-content-crc64"] {
            assert!(
                marked(&[("x-ms-range", "bytes=0-9"), (name, "TRUE")]),
                "{name}"
            );
            assert!(
                !marked(&[("x-ms-range", "bytes=0-9"), (name, "false")]),
                "{name}"
            );
        }
    }
}
