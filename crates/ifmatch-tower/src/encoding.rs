//! Tags that stay strong under a compressor outside the layer, when
//! [`mark_encodings`](crate::ConditionalLayer::mark_encodings) asks for it (off by default: the
//! compressor's place is inside the layer, which then tags the encoded bytes themselves).
//!
//! A compressor placed outside the layer (tower-http's `CompressionLayer` after it, say)
//! encodes what the layer already tagged: the gzip bytes would leave with the identity bytes'
//! strong tag, which RFC 9110 8.8.3 forbids. What a compressor sends is a function of the body
//! and the request's `Accept-Encoding`, so marking makes the tag one too: to a request that
//! carries `Accept-Encoding`, the strong tag of a GET or HEAD answer (200 or 304) leaves as
//! `"<tag>+ae<8 hex digits of the field's digest>"`, with `Vary: Accept-Encoding` (a request
//! without the field gets the plain tag, which names the unencoded bytes it is sent). Two
//! requests that may be sent different bytes never share a tag, whichever order the layers are
//! in, and whoever set the tag. (Two requests sent the same bytes may get different tags:
//! allowed, it costs a shared cache a copy.)
//!
//! Inside the layer everything speaks the plain tag: on the way in, a request's `If-Match` and
//! `If-None-Match` have the mark of its own `Accept-Encoding` taken off, so the cache, the
//! version backend, a version source and the handler compare versions as they always do (a
//! write with the tag a gzip reader was shown is a write to the version it read). `If-Range`
//! keeps the mark: a part is sent unencoded, so it must never be joined to encoded bytes, and a
//! marked tag never matches the plain one.

use http::HeaderValue;
use http::header::{self, HeaderMap};
use ifmatch_core::{EntityTag, header_list, strong_etag};

/// `etag`, the layer's tag of a body, for a response with `headers`: bytes in a content coding
/// (a compressor inside the layer) get its name after the digest, `"<hex>-gzip"`. Tags are
/// opaque to clients; the name lets any instance asked for a write with that tag ask for the
/// same representation again (`Accept-Encoding: gzip`) without having served it.
pub(crate) fn coded(etag: EntityTag, headers: &HeaderMap) -> EntityTag {
    let Some(coding) = headers.get(header::CONTENT_ENCODING) else {
        return etag;
    };
    let coding = coding.as_bytes();
    if !is_coding(coding) || coding.eq_ignore_ascii_case(b"identity") {
        return etag;
    }
    let mut opaque = etag.opaque().to_vec();
    opaque.push(b'-');
    opaque.extend(coding.iter().map(u8::to_ascii_lowercase));
    EntityTag::strong(opaque).unwrap_or(etag)
}

/// The content coding a tag the layer made names: `identity` for a bare digest, the name after
/// it otherwise; `None` for a tag the layer did not make.
pub(crate) fn coding_of(etag: &EntityTag) -> Option<&str> {
    let opaque = etag.opaque();
    let digest = opaque.get(..64)?;
    if etag.is_weak() || !digest.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    match &opaque[64..] {
        [] => Some("identity"),
        // Only what `coded` writes: a short token (the tag may be a client's invention).
        [b'-', name @ ..] if is_coding(name) => std::str::from_utf8(name).ok(),
        _ => None,
    }
}

/// Whether `name` may name a content coding in a tag: a short token.
fn is_coding(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= 16
        && (name.iter()).all(|b| b.is_ascii_alphanumeric() || *b == b'-')
}

/// The mark of one request's `Accept-Encoding`: `+ae` and 8 hex digits, then the closing quote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark([u8; 12]);

impl Mark {
    /// The mark of `request`'s `Accept-Encoding`; `None` when it has none (nothing would be
    /// encoded for it).
    pub(crate) fn of(request: &HeaderMap) -> Option<Self> {
        let mut values = request.get_all(header::ACCEPT_ENCODING).iter().peekable();
        values.peek()?;
        let mut field = Vec::new();
        for (i, value) in values.enumerate() {
            if i > 0 {
                field.extend_from_slice(b", ");
            }
            field.extend_from_slice(value.as_bytes());
        }
        if field.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let digest = strong_etag(&field);
        let mut mark = *b"+ae00000000\"";
        mark[3..11].copy_from_slice(&digest.opaque()[..8]);
        Some(Self(mark))
    }

    /// Takes this mark off the tags in `request`'s `If-Match` and `If-None-Match`.
    pub(crate) fn unmark(&self, request: &mut HeaderMap) {
        for name in [header::IF_MATCH, header::IF_NONE_MATCH] {
            if !request.contains_key(&name) {
                continue;
            }
            let values: Vec<HeaderValue> = request.get_all(&name).iter().cloned().collect();
            if !values.iter().any(|v| find(v.as_bytes(), &self.0).is_some()) {
                continue;
            }
            request.remove(&name);
            for value in values {
                request.append(&name, self.strip(&value));
            }
        }
    }

    /// `value` with this mark taken off its tags.
    pub(crate) fn strip(&self, value: &HeaderValue) -> HeaderValue {
        let plain = replace(value.as_bytes(), &self.0, b"\"");
        HeaderValue::from_bytes(&plain).unwrap_or_else(|_| value.clone())
    }
}

/// Readies a GET or HEAD answer (200 or 304) for a compressor on either side of the layer: to a
/// request with a mark, when it has a tag, adds `Vary: Accept-Encoding` (unless `Vary` already
/// names it, or `*`) and marks a strong tag.
pub(crate) fn present(mark: Option<&Mark>, response: &mut HeaderMap) {
    // Without a mark the tag is the plain one, which names the bytes of an unencoded answer:
    // right for any cache that keeps it, whatever it varies on.
    let Some(mark) = mark else { return };
    if !response.contains_key(header::ETAG) {
        return;
    }
    let named = header_list(response, header::VARY)
        .any(|name| name == "*" || name.eq_ignore_ascii_case("accept-encoding"));
    if !named {
        response.append(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    let etag = response[header::ETAG].as_bytes();
    if etag.len() < 2 || etag.starts_with(b"W/") || !etag.ends_with(b"\"") {
        return;
    }
    let mut marked = Vec::with_capacity(etag.len() + mark.0.len());
    marked.extend_from_slice(&etag[..etag.len() - 1]);
    marked.extend_from_slice(&mark.0);
    if let Ok(value) = HeaderValue::from_bytes(&marked) {
        response.insert(header::ETAG, value);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn replace(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(at) = find(rest, needle) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(with);
        rest = &rest[at + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_of_encoded_bytes_names_its_coding() {
        let plain = strong_etag(b"bytes");
        let mut headers = HeaderMap::new();
        assert_eq!(coded(plain.clone(), &headers), plain);
        assert_eq!(coding_of(&plain), Some("identity"));
        headers.insert(header::CONTENT_ENCODING, "GZip".parse().unwrap());
        let gzip = coded(plain.clone(), &headers);
        assert_eq!(gzip.opaque(), [plain.opaque(), b"-gzip"].concat());
        assert_eq!(coding_of(&gzip), Some("gzip"));
        // Not the layer's: a name with no digest, a weak tag, a list of codings, a name no
        // coding has.
        assert_eq!(coding_of(&EntityTag::strong("v1").unwrap()), None);
        let odd = [plain.opaque(), "-gz/ip".as_bytes()].concat();
        assert_eq!(coding_of(&EntityTag::strong(odd).unwrap()), None);
        assert_eq!(coding_of(&EntityTag::weak(plain.opaque()).unwrap()), None);
        headers.insert(header::CONTENT_ENCODING, "gzip, br".parse().unwrap());
        assert_eq!(coded(plain.clone(), &headers), plain);
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let pair = |&(name, value): &(&str, &str)| {
            (
                header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            )
        };
        pairs.iter().map(pair).collect()
    }

    #[test]
    fn a_mark_goes_on_and_comes_off_for_the_same_accept_encoding_only() {
        let gzip = Mark::of(&headers(&[("accept-encoding", "gzip")])).unwrap();
        let br = Mark::of(&headers(&[("accept-encoding", "br")])).unwrap();
        assert_ne!(gzip, br);
        assert!(Mark::of(&headers(&[])).is_none());

        let mut response = headers(&[("etag", "\"abc\"")]);
        present(Some(&gzip), &mut response);
        let marked = response[header::ETAG].to_str().unwrap().to_owned();
        assert!(
            marked.starts_with("\"abc+ae") && marked.ends_with('"'),
            "{marked}"
        );
        assert_eq!(response[header::VARY], "accept-encoding");

        let mut request = headers(&[("if-none-match", &format!("\"x\", {marked}, W/{marked}"))]);
        gzip.unmark(&mut request);
        assert_eq!(request[header::IF_NONE_MATCH], "\"x\", \"abc\", W/\"abc\"");
        let mut request = headers(&[("if-match", &marked), ("if-range", &marked)]);
        br.unmark(&mut request);
        assert_eq!(
            request[header::IF_MATCH],
            marked.as_str(),
            "another mark stays"
        );
        gzip.unmark(&mut request);
        assert_eq!(request[header::IF_MATCH], "\"abc\"");
        assert_eq!(
            request[header::IF_RANGE],
            marked.as_str(),
            "If-Range keeps it"
        );
    }

    #[test]
    fn weak_tags_are_not_marked_and_vary_is_not_repeated() {
        let gzip = Mark::of(&headers(&[("accept-encoding", "gzip")])).unwrap();
        let mut weak = headers(&[("etag", "W/\"abc\""), ("vary", "Accept-Encoding")]);
        present(Some(&gzip), &mut weak);
        assert_eq!(weak[header::ETAG], "W/\"abc\"");
        assert_eq!(weak.get_all(header::VARY).iter().count(), 1);
        let mut untagged = headers(&[]);
        present(Some(&gzip), &mut untagged);
        assert!(untagged.is_empty());
        let mut plain = headers(&[("etag", "\"abc\"")]);
        present(None, &mut plain);
        assert_eq!(plain.len(), 1, "no mark, nothing added");
    }
}
