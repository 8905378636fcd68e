//! The request fields of a storage dialect that choose which bytes an answer holds, made ones
//! the shared cache understands.
//!
//! Azure's SDKs and tools ask for a part of a blob with `x-ms-range`, which wins over `Range`
//! when both are sent. A cache that knew only `Range` would answer them with a stored whole,
//! and the Python SDK then fails the download ("Required Content-Range response header is
//! missing or malformed"). So:
//! - `x-ms-range` becomes the request's `Range`: the origin (Azure, an emulator, `ifmatch
//!   serve`) answers `Range` as it answers `x-ms-range`, and the cache answers it from a stored
//!   response as it answers `Range`;
//! - a request for the digest of its part (`x-ms-range-get-content-md5` or `-crc64`, `true`)
//!   passes the cache ([`Pass`]): only the origin sends that digest.

use http::Request;
use http::header::{self, HeaderName};
use ifmatch_tower::shared_cache::Pass;

const X_MS_RANGE: HeaderName = HeaderName::from_static("x-ms-range");

/// The fields that ask the origin for a digest of the part it sends.
const DIGESTS: [HeaderName; 2] = [
    HeaderName::from_static("x-ms-range-get-content-md5"),
    HeaderName::from_static("x-ms-range-get-content-crc64"),
];

/// `request` with its dialect's range made its `Range`, and marked to pass the cache if it
/// asks for a digest only the origin can send.
pub(super) fn adapt<B>(request: &mut Request<B>) {
    let headers = request.headers_mut();
    if let Some(range) = headers.remove(X_MS_RANGE) {
        headers.insert(header::RANGE, range);
    }
    let digest = DIGESTS.iter().any(|name| {
        (headers.get(name)).is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"true"))
    });
    if digest {
        request.extensions_mut().insert(Pass);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapted(fields: &[(&str, &str)]) -> Request<()> {
        let mut request = Request::get("/c/b");
        for (name, value) in fields {
            request = request.header(*name, *value);
        }
        let mut request = request.body(()).unwrap();
        adapt(&mut request);
        request
    }

    #[test]
    fn the_dialects_range_is_the_range_and_a_digest_passes() {
        let plain = adapted(&[("range", "bytes=0-9")]);
        assert_eq!(plain.headers()["range"], "bytes=0-9");
        assert!(plain.extensions().get::<Pass>().is_none());

        // `x-ms-range` wins over `Range`, as at Azure.
        let both = adapted(&[("range", "bytes=0-9"), ("x-ms-range", "bytes=4-7")]);
        assert_eq!(both.headers().get_all("range").iter().count(), 1);
        assert_eq!(both.headers()["range"], "bytes=4-7");
        assert!(!both.headers().contains_key("x-ms-range"));

        for name in ["x-ms-range-get-content-md5", "x-ms-range-get-content-crc64"] {
            let digest = adapted(&[("x-ms-range", "bytes=0-9"), (name, "TRUE")]);
            assert!(digest.extensions().get::<Pass>().is_some(), "{name}");
            let not = adapted(&[("x-ms-range", "bytes=0-9"), (name, "false")]);
            assert!(not.extensions().get::<Pass>().is_none(), "{name}");
        }
    }
}
