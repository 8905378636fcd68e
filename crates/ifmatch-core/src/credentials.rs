//! What a request's credentials cover.

use http::HeaderMap;
use http::header::AUTHORIZATION;

/// Whether the request's `Authorization` may sign the request itself (its method, its target,
/// its fields), so that an intermediary must send it on exactly as it came: no HEAD asked as a
/// GET, no validators added, no probe of another method made with it.
///
/// `Bearer` and `Basic` credentials name their holder and cover nothing of the request; every
/// other scheme may (Azure's `SharedKey` signs the method, `If-None-Match` and `Range`, AWS's
/// `AWS4-HMAC-SHA256` and HTTP `Digest` the method and target), so any scheme not known to be
/// one of the two counts as a signature. Schemes compare without regard to case (RFC 9110
/// 11.1).
pub fn signs_request(headers: &HeaderMap) -> bool {
    headers.get_all(AUTHORIZATION).iter().any(|value| {
        let scheme = value
            .as_bytes()
            .split(|&b| b == b' ')
            .next()
            .unwrap_or_default();
        !(scheme.eq_ignore_ascii_case(b"Bearer") || scheme.eq_ignore_ascii_case(b"Basic"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(AUTHORIZATION, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn only_bearer_and_basic_leave_the_request_unsigned() {
        for unsigned in [&[][..], &["Bearer abc"], &["bearer abc"], &["BASIC YTpi"]] {
            assert!(!signs_request(&with(unsigned)), "{unsigned:?}");
        }
        for signed in [
            &["SharedKey account:c2ln"][..],
            &["SharedKeyLite account:c2ln"],
            &["AWS4-HMAC-SHA256 Credential=a/b, SignedHeaders=host, Signature=c"],
            &["Digest username=\"a\", response=\"b\""],
            &["Bearerx abc"],
            &["Bearer abc", "SharedKey account:c2ln"],
            &[""],
        ] {
            assert!(signs_request(&with(signed)), "{signed:?}");
        }
    }
}
