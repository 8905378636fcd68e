//! Metadata (`x-ms-meta-*`), as every Azure storage service reads and writes it (blobs,
//! containers, queues).

use std::collections::BTreeMap;

use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::CommonCode;

/// The most bytes of metadata (names and values) one resource keeps, as in Azure.
const MAX_METADATA: usize = 8 << 10;

const META: &str = "x-ms-meta-";

/// The `x-ms-meta-*` of a request: names are C# identifiers (kept lowercased, as HTTP keeps
/// them), values ASCII; at most 8 KiB in all.
pub fn metadata(headers: &HeaderMap) -> Result<BTreeMap<String, String>, CommonCode> {
    let mut out = BTreeMap::new();
    let mut size = 0;
    for (name, value) in headers {
        let Some(name) = name.as_str().strip_prefix(META) else {
            continue;
        };
        let identifier = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let value = value.to_str().map_err(|_| CommonCode::InvalidMetadata)?;
        if !identifier {
            return Err(CommonCode::InvalidMetadata);
        }
        size += name.len() + value.len();
        if size > MAX_METADATA {
            return Err(CommonCode::MetadataTooLarge);
        }
        out.insert(name.to_owned(), value.trim().to_owned());
    }
    Ok(out)
}

/// Writes `metadata` as `x-ms-meta-*` headers.
pub fn insert_metadata(metadata: &BTreeMap<String, String>, out: &mut HeaderMap) {
    for (name, value) in metadata {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(format!("{META}{name}")),
            HeaderValue::try_from(value.as_str()),
        ) {
            out.append(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let pair = |&(name, value): &(&str, &str)| {
            (
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            )
        };
        pairs.iter().map(pair).collect()
    }

    #[test]
    fn metadata_names_are_identifiers_and_the_total_is_bounded() {
        let ok = metadata(&headers(&[
            ("x-ms-meta-Owner", "alice"),
            ("x-ms-meta-_n2", " 2 "),
        ]))
        .unwrap();
        assert_eq!(ok.get("owner").map(String::as_str), Some("alice"));
        assert_eq!(ok.get("_n2").map(String::as_str), Some("2"));
        for bad in ["x-ms-meta-2x", "x-ms-meta-a-b", "x-ms-meta-"] {
            assert_eq!(
                metadata(&headers(&[(bad, "v")])),
                Err(CommonCode::InvalidMetadata),
                "{bad}"
            );
        }
        let big = "v".repeat(9000);
        assert_eq!(
            metadata(&headers(&[("x-ms-meta-a", &big)])),
            Err(CommonCode::MetadataTooLarge)
        );
    }
}
