//! A stored response that varies by `Accept-Language`, reused for another `Accept-Language`
//! whose first choice is the language it is in.
//!
//! The origin chose the stored response's `Content-Language` for the request that stored it, so
//! it has that language; a request that prefers it above every other (alone at the highest
//! weight, RFC 9110 12.5.4) would be sent the same. RFC 9111 4.1 lets a cache match selecting
//! fields by what it knows of their meaning. Nothing else is presumed: a request whose first
//! choice is another language, a range (`de` against `de-CH`), or `*` goes to the origin.

use std::time::SystemTime;

use http::header::{ACCEPT_LANGUAGE, CONTENT_LANGUAGE, HeaderValue};
use http::{Request, response};
use http_cache_semantics::BeforeRequest;

use super::store::Stored;

/// The head to serve `asked` from `stored`, fresh, if `stored` varies by `Accept-Language`
/// (and by nothing `asked` differs in otherwise) and is in `asked`'s first choice.
pub(super) fn first_choice_head(
    stored: &Stored,
    asked: &Request<()>,
    now: SystemTime,
) -> Option<response::Parts> {
    let line = (stored.variant.lines()).find_map(|line| line.strip_prefix("accept-language="))?;
    let first = first_choice(asked.headers().get(ACCEPT_LANGUAGE)?)?;
    // `asked`, with the languages of the request that stored it.
    let mut as_stored = Request::new(());
    *as_stored.method_mut() = asked.method().clone();
    *as_stored.uri_mut() = asked.uri().clone();
    *as_stored.headers_mut() = asked.headers().clone();
    match line.strip_suffix(',').filter(|value| !value.is_empty()) {
        Some(value) => {
            let value = HeaderValue::from_str(value).ok()?;
            as_stored.headers_mut().insert(ACCEPT_LANGUAGE, value);
        }
        None => {
            as_stored.headers_mut().remove(ACCEPT_LANGUAGE);
        }
    }
    let BeforeRequest::Fresh(head) = stored.policy.before_request(&as_stored, now) else {
        return None;
    };
    let language = head.headers.get(CONTENT_LANGUAGE)?.as_bytes();
    language
        .eq_ignore_ascii_case(first.as_bytes())
        .then_some(head)
}

/// The language range `accept_language` weighs above every other, if one does (the first of
/// those of the highest weight, RFC 9110 12.5.4), and it is not `*`.
fn first_choice(accept_language: &HeaderValue) -> Option<&str> {
    let mut best: Option<(&str, u16)> = None;
    for member in accept_language.to_str().ok()?.split(',') {
        let mut parts = member.split(';').map(str::trim);
        // Empty members count for nothing (RFC 9110 5.6.1).
        let Some(range) = parts.next().filter(|range| !range.is_empty()) else {
            continue;
        };
        let mut weight = 1000;
        for parameter in parts {
            let (name, value) = parameter.split_once('=')?;
            if name.trim().eq_ignore_ascii_case("q") {
                weight = thousandths(value.trim())?;
            }
        }
        if best.is_none_or(|(_, top)| weight > top) {
            best = Some((range, weight));
        }
    }
    let (range, weight) = best?;
    (weight > 0 && range != "*").then_some(range)
}

/// A weight (RFC 9110 12.4.2: `0`, `1`, up to three decimals) in thousandths.
fn thousandths(qvalue: &str) -> Option<u16> {
    let (whole, decimals) = qvalue.split_once('.').unwrap_or((qvalue, ""));
    if decimals.len() > 3 || !decimals.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = format!("{decimals:0<3}").parse::<u16>().ok()?;
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_choice_is_alone_at_the_highest_weight_or_first_among_them() {
        for (field, want) in [
            ("de", Some("de")),
            ("fr;q=0.5, de;q=1.0", Some("de")),
            ("fr;q=0.5,de", Some("de")),
            ("en, de", Some("en")),
            ("de-ch;q=0.9, de;q=0.8", Some("de-ch")),
            ("fr;Q=0.25, it;q=0.3", Some("it")),
            ("*", None),
            ("*, de;q=0.5", None),
            ("de;q=0", None),
            ("de;q=2", None),
            ("de;q=0.1234", None),
            ("de;q=x", None),
            ("de, ,fr", Some("de")),
            (" ", None),
        ] {
            let value = HeaderValue::from_str(field).unwrap();
            assert_eq!(first_choice(&value), want, "{field}");
        }
    }
}
