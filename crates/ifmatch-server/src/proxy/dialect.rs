//! The request fields of a storage dialect that choose which bytes an answer holds, which a
//! generic HTTP cache would not know of.
//!
//! Azure's SDKs and tools ask for a part of a blob with `x-ms-range`, which wins over `Range`
//! when both are sent. A cache that knew only `Range` would answer them with a stored whole,
//! and the Python SDK then fails the download ("Required Content-Range response header is
//! missing or malformed"). So:
//! - the cache reads `x-ms-range` as the range ([`RANGE_FIELD`], given to
//!   [`SharedCacheLayer::range_field`](ifmatch_cache::SharedCacheLayer::range_field)), while
//!   the origin gets the request as the client sent it: Shared Key signs both fields;
//! - a request for the digest of its part (`x-ms-range-get-content-md5` or `-crc64`, `true`)
//!   passes the cache ([`Pass`]): only the origin sends that digest.
//!
//! An answer echoes the `x-ms-client-request-id` its request was given. One from the store
//! would carry the id of the request that fetched it, and Azure's Go SDK (rclone) refuses
//! such an answer ("client Request ID from request and response does not match"): every
//! answer is given its own request's id ([`Echo`]).
//!
//! A copy's source (`x-ms-copy-source`: Copy Blob, Put Block From URL and the like) is a URL,
//! and a client behind the proxy names the proxy in it (rclone builds it from its own
//! endpoint). The origin would take that for another server's blob (Azure, Azurite:
//! `CannotVerifyCopySource`), so a source naming the host the client asked for is pointed
//! at the origin ([`retarget_copy_source`]); not when Shared Key signs the request, which
//! signs this field too (`ifmatch serve` then knows itself by the proxy's
//! `X-Forwarded-Host`).

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, Uri};
use ifmatch_tower::cache_markers::BypassSharedCache;

/// The field the cache reads as the range, in place of `Range`.
pub(super) const RANGE_FIELD: HeaderName = HeaderName::from_static("x-ms-range");

/// The fields that ask the origin for a digest of the part it sends.
const DIGESTS: [HeaderName; 2] = [
    HeaderName::from_static("x-ms-range-get-content-md5"),
    HeaderName::from_static("x-ms-range-get-content-crc64"),
];

/// The URL of the blob a copy reads.
const COPY_SOURCE: HeaderName = HeaderName::from_static("x-ms-copy-source");

/// Points the copy source in `headers` at `origin` (its scheme, authority and path prefix)
/// if it names `client_host`, the host the client asked the proxy for, and nothing signs it.
pub(super) fn retarget_copy_source(headers: &mut HeaderMap, client_host: &str, origin: &str) {
    let Some(source) = headers.get(&COPY_SOURCE) else {
        return;
    };
    let Some(uri) = (source.to_str().ok()).and_then(|text| text.parse::<Uri>().ok()) else {
        return;
    };
    let names_the_proxy =
        (uri.authority()).is_some_and(|a| a.as_str().eq_ignore_ascii_case(client_host));
    if !names_the_proxy || ifmatch_core::signs_request(headers) {
        return;
    }
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    if let Ok(value) = HeaderValue::from_str(&format!("{origin}{path}")) {
        headers.insert(COPY_SOURCE, value);
    }
}

/// The id a client gives a request, which its answer echoes.
const CLIENT_REQUEST_ID: HeaderName = HeaderName::from_static("x-ms-client-request-id");

/// The `x-ms-client-request-id` of a request, for its answer.
#[derive(Debug)]
pub(super) struct Echo(Option<HeaderValue>);

impl Echo {
    /// Gives `response` the request's id, or none if it had none.
    pub(super) fn apply<B>(self, response: &mut Response<B>) {
        let headers = response.headers_mut();
        match self.0 {
            Some(id) => {
                headers.insert(CLIENT_REQUEST_ID, id);
            }
            None => {
                headers.remove(CLIENT_REQUEST_ID);
            }
        }
    }
}

/// Marks `request` to pass the cache if it asks for a digest only the origin can send; and
/// its id, for its answer.
pub(super) fn mark<B>(request: &mut Request<B>) -> Echo {
    // One pass over the few fields of a request costs less than a lookup of each name.
    let mut digest = false;
    let mut id = None;
    for (name, value) in request.headers() {
        if *name == CLIENT_REQUEST_ID {
            id = Some(value.clone());
        } else if DIGESTS.contains(name) && value.as_bytes().eq_ignore_ascii_case(b"true") {
            digest = true;
        }
    }
    if digest {
        request.extensions_mut().insert(BypassSharedCache);
    }
    Echo(id)
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
        request.extensions().get::<BypassSharedCache>().is_some()
    }

    #[test]
    fn an_answer_echoes_its_own_requests_id_or_none() {
        let stored = || {
            Response::builder()
                .header("x-ms-client-request-id", "of-the-first")
                .body(())
                .unwrap()
        };
        let mut request = Request::get("/c/b")
            .header("x-ms-client-request-id", "mine")
            .body(())
            .unwrap();
        let mut answer = stored();
        mark(&mut request).apply(&mut answer);
        assert_eq!(answer.headers()["x-ms-client-request-id"], "mine");
        let mut answer = stored();
        mark(&mut Request::get("/c/b").body(()).unwrap()).apply(&mut answer);
        assert!(!answer.headers().contains_key("x-ms-client-request-id"));
    }

    #[test]
    fn a_copy_source_naming_the_proxy_names_the_origin_unless_signed() {
        let origin = "https://account.blob.example:8443/prefix";
        let source = "http://proxy:8080/c/b.txt?sv=1&sig=x%2B";
        let retargeted = |fields: &[(&str, &str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in fields {
                headers.insert(
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    value.parse().unwrap(),
                );
            }
            retarget_copy_source(&mut headers, "proxy:8080", origin);
            headers["x-ms-copy-source"].to_str().unwrap().to_owned()
        };
        assert_eq!(
            retargeted(&[("x-ms-copy-source", source)]),
            "https://account.blob.example:8443/prefix/c/b.txt?sv=1&sig=x%2B"
        );
        assert_eq!(
            retargeted(&[("x-ms-copy-source", source), ("authorization", "Bearer t")]),
            "https://account.blob.example:8443/prefix/c/b.txt?sv=1&sig=x%2B"
        );
        // Signed with it: left as it came.
        let signed = [
            ("x-ms-copy-source", source),
            ("authorization", "SharedKey a:s"),
        ];
        assert_eq!(retargeted(&signed), source);
        // Another server's blob: left as it came.
        let elsewhere = "https://other.blob.example/c/b.txt";
        assert_eq!(retargeted(&[("x-ms-copy-source", elsewhere)]), elsewhere);
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
