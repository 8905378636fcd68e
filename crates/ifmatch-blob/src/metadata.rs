//! Metadata (`x-ms-meta-*`) and a blob's HTTP headers (its properties): read from requests,
//! written into answers, and folded into the ETag.
//!
//! How the ETag is built: a blob uploaded without metadata and without properties besides
//! `Content-Type` keeps the tag of its bytes, `"` + hex SHA-256 + `"`. Otherwise the tag is the
//! SHA-256 of the bytes' tag, the metadata and the properties (each name and value, sorted,
//! NUL-separated): the same bytes uploaded with the same headers get the same tag. Set Blob
//! Metadata and Set Blob Properties also fold in a random value, so every such change gives a
//! new tag even when it restores an earlier state: an `If-Match` taken before another client's
//! change never passes after it. The bytes' own tag is always in the `x-ifmatch-content-sha256`
//! answer header.

use std::collections::BTreeMap;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use ifmatch_core::{EntityTag, strong_etag};

use crate::record::Properties;

/// The answer header with the tag of the blob's bytes alone.
pub(crate) const CONTENT_SHA256: HeaderName = HeaderName::from_static("x-ifmatch-content-sha256");

pub(crate) use ifmatch_azure::metadata::{insert_metadata, metadata};

/// The blob properties an upload sets, by the names Azure gives them on a write.
const BLOB_CONTENT_TYPE: HeaderName = HeaderName::from_static("x-ms-blob-content-type");
const BLOB_CACHE_CONTROL: HeaderName = HeaderName::from_static("x-ms-blob-cache-control");
const BLOB_CONTENT_ENCODING: HeaderName = HeaderName::from_static("x-ms-blob-content-encoding");
const BLOB_CONTENT_LANGUAGE: HeaderName = HeaderName::from_static("x-ms-blob-content-language");
const BLOB_CONTENT_DISPOSITION: HeaderName =
    HeaderName::from_static("x-ms-blob-content-disposition");

/// The content type and properties a Put Blob (or Put Block List) sets: `x-ms-blob-*` first,
/// the request's own `Content-*` headers otherwise (Put Blob only).
pub(crate) fn upload_properties(
    headers: &HeaderMap,
    plain_too: bool,
) -> (Option<String>, Properties) {
    let get = |blob: HeaderName, plain: HeaderName| {
        headers
            .get(blob)
            .or(if plain_too { headers.get(plain) } else { None })
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let content_type = get(BLOB_CONTENT_TYPE, header::CONTENT_TYPE);
    let properties = Properties {
        cache_control: get(BLOB_CACHE_CONTROL, header::CACHE_CONTROL),
        content_encoding: get(BLOB_CONTENT_ENCODING, header::CONTENT_ENCODING),
        content_language: get(BLOB_CONTENT_LANGUAGE, header::CONTENT_LANGUAGE),
        content_disposition: get(BLOB_CONTENT_DISPOSITION, header::CONTENT_DISPOSITION),
    };
    (content_type, properties)
}

/// Writes a blob's properties as the answer headers of a read.
pub(crate) fn insert_properties(properties: &Properties, out: &mut HeaderMap) {
    let fields = [
        (header::CACHE_CONTROL, &properties.cache_control),
        (header::CONTENT_ENCODING, &properties.content_encoding),
        (header::CONTENT_LANGUAGE, &properties.content_language),
        (header::CONTENT_DISPOSITION, &properties.content_disposition),
    ];
    for (name, value) in fields {
        if let Some(value) = value.as_deref().and_then(|v| HeaderValue::try_from(v).ok()) {
            out.insert(name, value);
        }
    }
}

impl crate::record::Content {
    /// The ETag of a blob of this content whose bytes are tagged `bytes`, with `metadata`
    /// ([`blob_tag`] of its type and properties).
    pub(crate) fn blob_tag(
        &self,
        bytes: &EntityTag,
        metadata: &BTreeMap<String, String>,
    ) -> EntityTag {
        let content_type = self.content_type.as_deref();
        blob_tag(bytes, content_type, metadata, &self.properties, None)
    }
}

/// The ETag of a blob with these bytes (their tag), metadata and properties; `nonce` (a Set
/// Blob Metadata or Set Blob Properties) makes it new whatever the state.
pub(crate) fn blob_tag(
    bytes: &EntityTag,
    content_type: Option<&str>,
    metadata: &BTreeMap<String, String>,
    properties: &Properties,
    nonce: Option<&[u8]>,
) -> EntityTag {
    if metadata.is_empty() && properties.is_empty() && nonce.is_none() {
        return bytes.clone();
    }
    let mut input = Vec::new();
    let mut push = |part: &[u8]| {
        input.extend_from_slice(part);
        input.push(0);
    };
    push(b"ifmatch blob tag 1");
    push(bytes.opaque());
    push(content_type.unwrap_or("").as_bytes());
    for value in [
        &properties.cache_control,
        &properties.content_encoding,
        &properties.content_language,
        &properties.content_disposition,
    ] {
        push(value.as_deref().unwrap_or("").as_bytes());
    }
    for (name, value) in metadata {
        push(name.as_bytes());
        push(value.as_bytes());
    }
    if let Some(nonce) = nonce {
        push(nonce);
    }
    strong_etag(&input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_rules() {
        let bytes = strong_etag(b"bytes");
        let none = BTreeMap::new();
        let plain = Properties::default();
        // (c) no metadata, no properties: the bytes' tag, whatever the content type.
        assert_eq!(
            blob_tag(&bytes, Some("text/plain"), &none, &plain, None),
            bytes
        );
        // (b) the same bytes and headers: the same tag.
        let meta = BTreeMap::from([("k".to_owned(), "v".to_owned())]);
        let one = blob_tag(&bytes, None, &meta, &plain, None);
        assert_eq!(one, blob_tag(&bytes, None, &meta, &plain, None));
        assert_ne!(one, bytes);
        // (a) another value, or a set with a nonce: another tag.
        let other = BTreeMap::from([("k".to_owned(), "w".to_owned())]);
        assert_ne!(one, blob_tag(&bytes, None, &other, &plain, None));
        assert_ne!(blob_tag(&bytes, None, &none, &plain, Some(b"1")), bytes);
        assert_ne!(
            blob_tag(&bytes, None, &none, &plain, Some(b"1")),
            blob_tag(&bytes, None, &none, &plain, Some(b"2"))
        );
    }
}
