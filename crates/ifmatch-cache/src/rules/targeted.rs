//! `Cache-Control` for this cache alone: `CDN-Cache-Control` (RFC 9213), then
//! `Surrogate-Control` (Edge Architecture 1.0) directives with no target or this cache's
//! (`max-age=60;ifmatch`). When a response carries either, the policy sees their directives in
//! place of `Cache-Control` and `Expires` (which still reach clients as the origin sent them);
//! `Surrogate-Control` is this cache's alone and is removed from answers. Requests to the
//! inner service announce the target in `Surrogate-Capability`.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// This cache's name as a target.
const TARGET: &str = "ifmatch";

pub(crate) const SURROGATE_CONTROL: HeaderName = HeaderName::from_static("surrogate-control");
pub(crate) const CDN_CACHE_CONTROL: HeaderName = HeaderName::from_static("cdn-cache-control");
pub(crate) const SURROGATE_CAPABILITY: HeaderName = HeaderName::from_static("surrogate-capability");

/// What `Surrogate-Capability` says of this cache.
pub(crate) fn capability() -> HeaderValue {
    HeaderValue::from_static("ifmatch=\"Surrogate/1.0\"")
}

/// The directives a response's targeted fields give this cache, in `Cache-Control` syntax, if
/// any of them is for it.
pub(crate) fn directives(headers: &HeaderMap) -> Option<String> {
    if headers.contains_key(CDN_CACHE_CONTROL)
        && let Some(directives) = cdn_cache_control(headers)
    {
        return Some(directives);
    }
    let mut mine = Vec::new();
    let mut any = false;
    for item in ifmatch_core::header_list(headers, SURROGATE_CONTROL) {
        let (directive, target) = match item.split_once(';') {
            Some((directive, target)) => (directive, Some(target.trim())),
            None => (item, None),
        };
        if target.is_none_or(|t| t.eq_ignore_ascii_case(TARGET)) {
            any = true;
            if !directive.trim().is_empty() {
                mine.push(directive.trim());
            }
        }
    }
    any.then(|| mine.join(", "))
}

/// `CDN-Cache-Control`'s directives, if it is a valid Structured Field dictionary (RFC 9213
/// 2.1: else it is ignored as a whole), in `Cache-Control` syntax; a directive that takes
/// seconds with a value of another type (`max-age="60"`) is left out.
fn cdn_cache_control(headers: &HeaderMap) -> Option<String> {
    let lines: Vec<&str> = (headers.get_all(CDN_CACHE_CONTROL).iter())
        .map(|v| v.to_str())
        .collect::<Result<_, _>>()
        .ok()?;
    let dictionary: sfv::Dictionary = sfv::Parser::new(&lines.join(", ")).parse().ok()?;
    let seconds = [
        "max-age",
        "s-maxage",
        "stale-while-revalidate",
        "stale-if-error",
    ];
    let directives: Vec<String> = dictionary
        .iter()
        .filter_map(|(name, entry)| {
            let sfv::ListEntry::Item(item) = entry else {
                return None;
            };
            let name = name.as_str();
            match &item.bare_item {
                sfv::BareItem::Boolean(true) => Some(name.to_owned()),
                sfv::BareItem::Integer(n) => Some(format!("{name}={n}")),
                _ if seconds.contains(&name) => None,
                sfv::BareItem::Token(token) => Some(format!("{name}={}", token.as_str())),
                _ => None,
            }
        })
        .collect();
    Some(directives.join(", "))
}

/// `headers` with `Cache-Control` made `directives`, and without `Expires`.
pub(crate) fn replace(headers: &mut HeaderMap, directives: &str) {
    headers.remove(header::EXPIRES);
    headers.remove(header::CACHE_CONTROL);
    if let Ok(value) = HeaderValue::from_str(directives)
        && !directives.is_empty()
    {
        headers.insert(header::CACHE_CONTROL, value);
    }
}

/// The fields [`replace`] replaces, as `headers` has them.
pub(crate) fn replaced(headers: &HeaderMap) -> HeaderMap {
    let mut own = HeaderMap::new();
    for name in [header::CACHE_CONTROL, header::EXPIRES] {
        for value in headers.get_all(&name) {
            own.append(name.clone(), value.clone());
        }
    }
    own
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directives_for_this_cache() {
        // A response's fields; the directives for this cache.
        type Case = (
            &'static [(&'static str, &'static str)],
            Option<&'static str>,
        );
        let cases: &[Case] = &[
            (&[("cache-control", "max-age=1")], None),
            (&[("surrogate-control", "max-age=60")], Some("max-age=60")),
            (
                &[("surrogate-control", "max-age=60;ifmatch")],
                Some("max-age=60"),
            ),
            (
                &[("surrogate-control", "max-age=60;IfMatch, no-store")],
                Some("max-age=60, no-store"),
            ),
            (&[("surrogate-control", "max-age=60;other")], None),
            (
                &[("surrogate-control", "foobar, MaX-aGe=60")],
                Some("foobar, MaX-aGe=60"),
            ),
            (
                &[
                    ("cdn-cache-control", "max-age=5"),
                    ("surrogate-control", "max-age=60"),
                ],
                Some("max-age=5"),
            ),
        ];
        for (fields, want) in cases {
            let mut headers = HeaderMap::new();
            for (name, value) in *fields {
                headers.append(*name, value.parse().unwrap());
            }
            assert_eq!(directives(&headers).as_deref(), *want, "{fields:?}");
        }
    }
}
