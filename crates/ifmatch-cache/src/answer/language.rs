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

use crate::rules::weights;
use crate::stored::entry::Stored;

/// The head to serve `asked` from `stored`, fresh, if `stored` varies by `Accept-Language`
/// (and by nothing `asked` differs in otherwise) and is in `asked`'s first choice.
pub(crate) fn first_choice_head(
    stored: &Stored,
    asked: &Request<()>,
    now: SystemTime,
) -> Option<response::Parts> {
    let first = first_choice(asked.headers().get(ACCEPT_LANGUAGE)?)?;
    let head = stored.fresh_head_as_stored(&ACCEPT_LANGUAGE, asked, now)?;
    let language = head.headers.get(CONTENT_LANGUAGE)?.as_bytes();
    language
        .eq_ignore_ascii_case(first.as_bytes())
        .then_some(head)
}

/// The language range `accept_language` weighs above every other, if one does (the first of
/// those of the highest weight, RFC 9110 12.5.4), and it is not `*`.
fn first_choice(accept_language: &HeaderValue) -> Option<&str> {
    let members = weights::members(accept_language)?;
    let top = members.iter().map(|(_, weight)| *weight).max()?;
    let (range, _) = members.into_iter().find(|(_, weight)| *weight == top)?;
    (top > 0 && range != "*").then_some(range)
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
