//! A stored response that varies by `Accept-Encoding`, reused for another `Accept-Encoding`
//! that takes its content coding as readily as any other.
//!
//! Origins that compress send `Vary: Accept-Encoding`, and clients word the field each their
//! own way (`gzip, deflate, br, zstd`, `gzip,deflate`, `br;q=1.0, gzip;q=0.8`, none at all):
//! compared as they came, every wording is a variant of its own and a miss. The stored
//! response's `Content-Encoding` says what it needs of a client (RFC 9110 8.4), and RFC 9111
//! 4.1 lets a cache match selecting fields by what it knows of their meaning. So, while fresh:
//! - a response in one coding (`gzip`, `br`, ...) answers a request that names that coding at
//!   the highest weight it gives any coding (RFC 9110 12.5.3), whatever else it names;
//! - a response in no coding answers a request that takes no coding (no `Accept-Encoding`, an
//!   empty one, or `identity` alone), and one that offers no coding the request that stored it
//!   did not offer too: the origin chose no coding among those (nginx, by default, compresses
//!   nothing for a request that came through a proxy, and tells every client `Vary:
//!   Accept-Encoding`). A client that offers another coding gets what the origin chooses for it.
//!
//! Nothing else is presumed: a coding named below another's weight, `*`, or several codings
//! in one response go to the origin.

use std::collections::HashSet;
use std::time::SystemTime;

use http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, HeaderValue};
use http::{Request, response};

use crate::rules::weights::members;
use crate::stored::entry::Stored;

/// The head to serve `asked` from `stored`, fresh, if `stored` varies by `Accept-Encoding`
/// (and by nothing `asked` differs in otherwise) and `asked` takes its coding as above.
pub(crate) fn acceptable_head(
    stored: &Stored,
    asked: &Request<()>,
    now: SystemTime,
) -> Option<response::Parts> {
    let head = stored.fresh_head_as_stored(&ACCEPT_ENCODING, asked, now)?;
    let accepts = asked.headers().get(ACCEPT_ENCODING);
    let taken = match head.headers.get(CONTENT_ENCODING) {
        None => {
            let declined = stored.varied_value(&ACCEPT_ENCODING)?;
            takes_no_coding(accepts)? || offers_only(accepts, declined)?
        }
        Some(coding) => {
            let coding = coding.to_str().ok()?.trim();
            !coding.contains(',') && best_codings(accepts?)?.iter().any(|c| same(c, coding))
        }
    };
    taken.then_some(head)
}

/// Whether `accept_encoding` asks for no content coding: absent, empty, or naming `identity`
/// alone (`None`: a field this cannot read).
fn takes_no_coding(accept_encoding: Option<&HeaderValue>) -> Option<bool> {
    let Some(value) = accept_encoding else {
        return Some(true);
    };
    let members = members(value)?;
    Some(
        members
            .iter()
            .all(|(coding, weight)| coding.eq_ignore_ascii_case("identity") && *weight > 0),
    )
}

/// Whether `accept_encoding` takes identity and offers only codings that `declined` (the field
/// of a request the origin answered in no coding) offered too: the origin chose no coding among
/// more (`None`: a field this cannot read).
fn offers_only(accept_encoding: Option<&HeaderValue>, declined: &str) -> Option<bool> {
    let offered = |members: Vec<(&str, u16)>| -> Vec<String> {
        (members.into_iter())
            .filter(|(coding, weight)| *weight > 0 && !coding.eq_ignore_ascii_case("identity"))
            .map(|(coding, _)| plain(coding))
            .collect()
    };
    let asked = members(accept_encoding?)?;
    let excluded = |name: &str| {
        (asked.iter()).any(|(coding, weight)| coding.eq_ignore_ascii_case(name) && *weight == 0)
    };
    let names_identity = asked
        .iter()
        .any(|(c, _)| c.eq_ignore_ascii_case("identity"));
    if excluded("identity") || (excluded("*") && !names_identity) {
        return Some(false);
    }
    let before: HashSet<String> = offered(members(&HeaderValue::from_str(declined).ok()?)?)
        .into_iter()
        .collect();
    Some(offered(asked).iter().all(|coding| before.contains(coding)))
}

/// The codings `accept_encoding` names at its highest weight, if that weight is above 0 and
/// none of them is `*` or `identity`.
fn best_codings(accept_encoding: &HeaderValue) -> Option<Vec<&str>> {
    let members = members(accept_encoding)?;
    let top = members.iter().map(|(_, weight)| *weight).max()?;
    let best: Vec<&str> = (members.iter())
        .filter(|(_, weight)| *weight == top)
        .map(|(coding, _)| *coding)
        .collect();
    let plain = |c: &&str| *c == "*" || c.eq_ignore_ascii_case("identity");
    (top > 0 && !best.iter().any(plain)).then_some(best)
}

/// Whether two content codings are the same (RFC 9110 8.4.1).
fn same(a: &str, b: &str) -> bool {
    plain(a) == plain(b)
}

/// A content coding as compared: without case, `x-gzip` as `gzip` (RFC 9110 8.4.1.3).
fn plain(coding: &str) -> String {
    if coding.eq_ignore_ascii_case("x-gzip") {
        "gzip".to_owned()
    } else {
        coding.to_ascii_lowercase()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coding_is_taken_at_the_highest_weight_named_and_identity_alone() {
        let value = |field: &str| HeaderValue::from_str(field).unwrap();
        for (field, want) in [
            (
                "gzip, deflate, br, zstd",
                Some(vec!["gzip", "deflate", "br", "zstd"]),
            ),
            ("br;q=1.0, gzip;q=0.8", Some(vec!["br"])),
            ("gzip;q=0.5,deflate;Q=0.5", Some(vec!["gzip", "deflate"])),
            ("gzip;q=0", None),
            ("*", None),
            ("gzip, *", None),
            ("identity, gzip", None),
            ("gzip;q=2", None),
            ("", None),
        ] {
            assert_eq!(best_codings(&value(field)), want, "{field}");
        }
        for (field, want) in [
            (None, Some(true)),
            (Some(""), Some(true)),
            (Some("identity"), Some(true)),
            (Some("identity;q=0"), Some(false)),
            (Some("gzip"), Some(false)),
            (Some("identity, gzip;q=0.1"), Some(false)),
            (Some("identity;q=x"), None),
        ] {
            let field = field.map(value);
            assert_eq!(takes_no_coding(field.as_ref()), want, "{field:?}");
        }
        assert!(same("GZIP", "x-gzip") && same("br", "Br") && !same("gzip", "br"));
        let browser = "gzip, deflate, br, zstd";
        for (field, want) in [
            (Some("gzip, deflate, br, zstd"), Some(true)),
            (Some("br,GZIP"), Some(true)),
            (Some("x-gzip;q=0.5, deflate"), Some(true)),
            (Some("gzip, compress"), Some(false)),
            (Some("*"), Some(false)),
            (Some("gzip, identity;q=0"), Some(false)),
            (Some("gzip, *;q=0"), Some(false)),
            (Some("gzip, identity, *;q=0"), Some(true)),
            (Some("gzip;q=x"), None),
            (None, None),
        ] {
            let field = field.map(value);
            assert_eq!(offers_only(field.as_ref(), browser), want, "{field:?}");
        }
        assert_eq!(offers_only(Some(&value("gzip")), ""), Some(false));
    }
}
