//! The elements of a comma-separated list header (RFC 9110 section 5.6.1).

use http::HeaderMap;
use http::header::AsHeaderName;

/// The elements of every `name` field in `headers`, in order: each value split at its commas,
/// trimmed, empty elements skipped (5.6.1 lets a sender write `a, , b`). A value that is not
/// visible ASCII is skipped whole. For fields whose elements cannot contain a comma (names,
/// tokens, directives, URI references); not for entity-tag lists, whose quoted tags may.
///
/// ```
/// use http::{HeaderMap, header};
/// use ifmatch_core::header_list;
///
/// let mut headers = HeaderMap::new();
/// headers.append(header::VARY, "Accept-Encoding, ,Cookie".parse().unwrap());
/// headers.append(header::VARY, "authorization".parse().unwrap());
/// let names: Vec<&str> = header_list(&headers, header::VARY).collect();
/// assert_eq!(names, ["Accept-Encoding", "Cookie", "authorization"]);
/// ```
pub fn header_list<K: AsHeaderName>(headers: &HeaderMap, name: K) -> impl Iterator<Item = &str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|element| !element.is_empty())
}
