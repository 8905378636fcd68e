//! Where this cache and [`http_cache_semantics`] part, each with the reason; everything else
//! of storing and reusing is the crate's.
//!
//! - **Statuses.** The crate stores only the statuses RFC 7234 listed as understood; RFC 9111
//!   3 lets a cache store any final status with explicit freshness (`max-age`, `s-maxage`,
//!   `Expires`) or `public`, and `204` heuristically. The crate is shown such a response as a
//!   `200` (the real status is stored beside it), except under `must-understand` with a
//!   status RFC 9110 does not define (5.2.2.3). A `206` of one range is shown as a `200` too
//!   (RFC 9111 3.3 lets a cache store it): it is stored as a piece of its representation.
//! - **Empty bodies.** A `204` has no `Content-Length`, and its body is empty.
//! - **A 304 without validators** selects the stored response the revalidation named, and a
//!   304 never changes `Content-MD5` or `Content-Range` (see [`judged`]).
//! - **Targeted fields**: `CDN-Cache-Control` and `Surrogate-Control` are shown to the crate
//!   as `Cache-Control` (see [`targeted`]).
//! - **Directive names** are matched in any case (RFC 9111 5.2); the crate is shown them in
//!   lowercase.
//! - **`Age`, `Expires`, `must-understand`** are read as RFC 9111 reads them (see
//!   [`normalise`]).
//!
//! Kept from the crate on purpose: a response with `Set-Cookie` is not served from the store
//! unless `public` (a shared cache handing one user's cookie to another is the worse error).

use std::time::SystemTime;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_cache_semantics::{CacheOptions, CachePolicy};
use ifmatch_core::date::{date_header_value, parse_http_date_leniently};

use crate::rules::freshness::CRATE_STORES;
use crate::rules::lazy_policy::{self, Policy};
use crate::rules::{freshness, targeted};
use crate::stored::entry::{Stored, fields_size};

/// What decides the storing and reuse of a response.
pub(crate) struct Judged {
    pub(crate) policy: Policy,
    /// Whether the policy lets it be stored.
    pub(crate) storable: bool,
    /// The response's own `Cache-Control` and `Expires`, to be served, when the policy was
    /// shown others.
    pub(crate) own_fields: Option<HeaderMap>,
    /// What it allows once stale.
    pub(crate) stale: freshness::Freshness,
    /// The bytes of the fields the policy keeps: the response's, and the request's it reads.
    pub(crate) fields: usize,
    /// The response's `ETag` and `Last-Modified`, and its `Date`, in the policy's copy.
    pub(crate) validators: HeaderMap,
    pub(crate) date: Option<HeaderValue>,
}

/// Whether a response with `headers` may ever be reused: only if it says how long it is fresh
/// (`Cache-Control`, `Expires`, this cache's targeted fields) or has a validator (`ETag`,
/// `Last-Modified`, which also gives heuristic freshness). One that says none of these is
/// neither fresh nor revalidatable: the usual answer of an API, passed through unjudged.
pub(crate) fn may_be_reused(headers: &HeaderMap) -> bool {
    [
        header::CACHE_CONTROL,
        header::EXPIRES,
        header::ETAG,
        header::LAST_MODIFIED,
        targeted::CDN_CACHE_CONTROL,
        targeted::SURROGATE_CONTROL,
    ]
    .iter()
    .any(|name| headers.contains_key(name))
}

/// How `response` to `asked`, received at `now`, is to be stored and reused.
pub(crate) fn of<B>(asked: &Request<()>, response: &Response<B>, now: SystemTime) -> Judged {
    let (kept, shown) = self::shown(asked, response);
    let changed = [header::CACHE_CONTROL, header::EXPIRES].iter().any(|name| {
        let (own, as_shown) = (
            response.headers().get_all(name),
            shown.headers().get_all(name),
        );
        !own.iter().eq(as_shown.iter())
    });
    let own_fields =
        changed.then(|| ifmatch_core::owned::headers(&targeted::replaced(response.headers())));
    let fields = fields_size(kept.headers()) + fields_size(response.headers());
    // The usual response is judged without the crate's policy, which is made when first
    // needed (see `lazy_policy`); any other, by the crate at once.
    let (storable, lifetime, policy) = match freshness::usual_lifetime(&kept, &shown) {
        Some(lifetime) => (true, lifetime, None),
        None => {
            let policy = CachePolicy::new_options(&kept, &shown, now, CacheOptions::default());
            (policy.is_storable(), policy.time_to_live(now), Some(policy))
        }
    };
    let stale = freshness::Freshness::new(shown.headers(), lifetime, now);
    let validators = [header::ETAG, header::LAST_MODIFIED]
        .into_iter()
        .filter_map(|name| Some((name.clone(), shown.headers().get(&name)?.clone())))
        .collect();
    let date = shown.headers().get(header::DATE).cloned();
    let policy = match policy {
        Some(policy) => lazy_policy::made(policy),
        None => lazy_policy::later(kept, shown, now),
    };
    Judged {
        policy,
        storable,
        own_fields,
        stale,
        fields,
        validators,
        date,
    }
}

/// The heads the crate is shown of `response` to `asked`: what its policy keeps of the
/// request, and the response's fields as RFC 9111 reads them, in allocations of their own
/// (see `owned`).
pub(crate) fn shown<B>(asked: &Request<()>, response: &Response<B>) -> (Request<()>, Response<()>) {
    let kept = kept_request(asked, response.headers());
    let mut shown = Response::new(());
    *shown.headers_mut() = ifmatch_core::owned::headers(response.headers());
    let headers = shown.headers_mut();
    if let Some(directives) = targeted::directives(headers) {
        targeted::replace(headers, &directives);
    }
    lowercase_directives(headers);
    normalise(response.status(), headers);
    if !stands_in(response.status(), headers) {
        *shown.status_mut() = response.status();
    }
    (kept, shown)
}

/// The copy of `asked` that a policy of a response with `headers` keeps: its target, and the
/// only fields the policy reads of it: `Host` (an answer serves its host alone), `Authorization`
/// (RFC 9111 3.5), `Cache-Control` (its request directives), and those the response's `Vary`
/// names (4.1). A request's other fields (cookies, user agents) are not stored with every
/// answer.
fn kept_request(asked: &Request<()>, headers: &HeaderMap) -> Request<()> {
    let named = ifmatch_core::header_list(headers, header::VARY)
        .filter_map(|name| HeaderName::from_bytes(name.as_bytes()).ok());
    let names = [header::HOST, header::AUTHORIZATION, header::CACHE_CONTROL];
    let mut fields = HeaderMap::new();
    for name in names.into_iter().chain(named) {
        if fields.contains_key(&name) {
            continue;
        }
        for value in asked.headers().get_all(&name) {
            fields.append(name.clone(), ifmatch_core::owned::value(value));
        }
    }
    let mut kept = Request::new(());
    *kept.method_mut() = asked.method().clone();
    *kept.uri_mut() = ifmatch_core::owned::uri(asked.uri());
    *kept.version_mut() = asked.version();
    *kept.headers_mut() = fields;
    kept
}

/// The fields of a response as RFC 9111 reads them, for the crate, which reads them otherwise:
/// - `Age`: the first member of the first line, ignored when it is no whole number of
///   seconds (5.1); the crate reads the first line whole, as 0 when it is not a number;
/// - `Expires`: a date in any of the three formats (5.3), names in any case, any weekday; an
///   invalid one is in the past; the crate reads one format, and more than one space;
/// - `no-store` does not apply with `must-understand` to a status RFC 9110 defines
///   (5.2.2.3); the crate knows no `must-understand`.
fn normalise(status: StatusCode, headers: &mut HeaderMap) {
    let mut lines = headers.get_all(header::AGE).iter();
    if let Some(line) = lines.next() {
        let one = lines.next().is_none();
        let age = line.to_str().ok().and_then(|v| {
            let first = v.split(',').next()?.trim();
            Some((first.parse::<u64>().ok()?, one && first.len() == v.len()))
        });
        match age {
            // The usual `Age`: one number, as it is.
            Some((_, true)) => {}
            Some((age, false)) => {
                headers.insert(header::AGE, HeaderValue::from(age));
            }
            None => {
                headers.remove(header::AGE);
            }
        }
    }
    if headers.contains_key(header::EXPIRES) {
        let mut lines = headers.get_all(header::EXPIRES).iter();
        let expires = match (lines.next(), lines.next()) {
            (Some(one), None) => parse_http_date_leniently(one),
            _ => None,
        };
        let value = expires.map_or(HeaderValue::from_static("0"), date_header_value);
        headers.insert(header::EXPIRES, value);
    }
    // Directive names are in lowercase here (see `lowercase_directives`): the bytes tell
    // whether the directive can be there before the list is read.
    let mentioned = (headers.get_all(header::CACHE_CONTROL).iter())
        .any(|v| v.as_bytes().windows(15).any(|w| w == b"must-understand"));
    if mentioned && has_directive(headers, "must-understand") && defined(status.as_u16()) {
        let kept: Vec<&str> = ifmatch_core::header_list(headers, header::CACHE_CONTROL)
            .filter(|d| !d.trim().eq_ignore_ascii_case("no-store"))
            .collect();
        if let Ok(value) = HeaderValue::from_str(&kept.join(",")) {
            headers.insert(header::CACHE_CONTROL, value);
        }
    }
}

/// `Cache-Control`'s directive names in lowercase, as the crate matches them (RFC 9111 5.2:
/// they are case-insensitive).
pub(crate) fn lowercase_directives(headers: &mut HeaderMap) {
    let lines = headers.get_all(header::CACHE_CONTROL);
    if (lines.iter()).all(|v| !v.as_bytes().iter().any(u8::is_ascii_uppercase)) {
        return;
    }
    let values: Vec<_> = lines.iter().cloned().collect();
    headers.remove(header::CACHE_CONTROL);
    for value in values {
        let Ok(text) = value.to_str() else { continue };
        let lowered: Vec<String> = text
            .split(',')
            .map(|directive| match directive.split_once('=') {
                Some((name, argument)) => format!("{}={argument}", name.to_ascii_lowercase()),
                None => directive.to_ascii_lowercase(),
            })
            .collect();
        if let Ok(value) = lowered.join(",").parse() {
            headers.append(header::CACHE_CONTROL, value);
        }
    }
}

/// Whether a response the crate would not store for its status alone is to be shown to it
/// as a 200: a 206 that is a piece of its representation, stored and reused as a 200 would be
/// (see [`Piece`](crate::rules::range::Piece)).
fn stands_in(status: StatusCode, headers: &HeaderMap) -> bool {
    let code = status.as_u16();
    if code == 206 {
        return crate::rules::range::Piece::of(headers).is_some();
    }
    if code < 200 || CRATE_STORES.contains(&code) || code == 304 {
        return false;
    }
    let has = |name: &str| has_directive(headers, name);
    if has("must-understand") && !defined(code) {
        return false;
    }
    has("max-age") || has("s-maxage") || has("public") || headers.contains_key(header::EXPIRES)
}

/// Whether a response with `headers` says how long it is fresh (`max-age`, `s-maxage`,
/// `Expires`, or a targeted field), not left to heuristics: what a POST's answer needs to be
/// stored (RFC 9110 9.3.3).
pub(crate) fn explicitly_fresh(headers: &HeaderMap) -> bool {
    has_directive(headers, "max-age")
        || has_directive(headers, "s-maxage")
        || headers.contains_key(header::EXPIRES)
        || targeted::directives(headers).is_some()
}

/// Whether `Cache-Control` has the directive `name` (lowercase), in any case.
fn has_directive(headers: &HeaderMap, name: &str) -> bool {
    ifmatch_core::header_list(headers, header::CACHE_CONTROL).any(|directive| {
        let own = directive.split('=').next().unwrap_or_default();
        own.trim().eq_ignore_ascii_case(name)
    })
}

/// Whether RFC 9110 defines the status.
fn defined(code: u16) -> bool {
    matches!(code, 200..=206 | 300..=305 | 307 | 308 | 400..=417 | 421..=426 | 500..=505)
}

/// The head the policy is to judge a 304 to a revalidation by (`None`: any other response,
/// as it is):
/// - without the fields that describe one body, which a 304 cannot change (`Content-MD5`,
///   `Content-Range`; the crate keeps `Content-Length` and `Content-Encoding` itself);
/// - if it carries no validator and the revalidation carried only `stored`'s (the client sent
///   no condition naming another), with `stored`'s: no other response can be the one it
///   selects (RFC 9111 4.3.3). Origins leave them out of 304s (RFC 9110 15.4.5 says to send
///   them), and the cache would otherwise have to ask again.
pub(crate) fn judged<B>(
    response: &Response<B>,
    stored: &Stored,
    asked: &Request<()>,
) -> Option<Response<()>> {
    if response.status() != StatusCode::NOT_MODIFIED {
        return None;
    }
    let mut judged = Response::new(());
    *judged.status_mut() = StatusCode::NOT_MODIFIED;
    let headers = judged.headers_mut();
    *headers = ifmatch_core::owned::headers(response.headers());
    headers.remove(header::CONTENT_RANGE);
    headers.remove("content-md5");
    if let Some(directives) = targeted::directives(headers) {
        targeted::replace(headers, &directives);
    }
    lowercase_directives(headers);
    let conditions = [
        (header::IF_NONE_MATCH, header::ETAG),
        (header::IF_MODIFIED_SINCE, header::LAST_MODIFIED),
    ];
    let another = conditions.iter().any(|(condition, validator)| {
        let own = stored.validators.get(validator);
        (asked.headers().get_all(condition).iter()).any(|value| Some(value) != own)
    });
    if !headers.contains_key(header::ETAG)
        && !headers.contains_key(header::LAST_MODIFIED)
        && !another
    {
        headers.extend(stored.validators.clone());
    }
    Some(judged)
}

#[cfg(test)]
pub(super) mod tests {
    use http_cache_semantics::BeforeRequest;

    use super::*;

    /// A GET of `http://h/a?b` with `fields`.
    pub(crate) fn asked(fields: &[(&str, &str)]) -> Request<()> {
        let mut asked = Request::get("http://h/a?b").body(()).unwrap();
        for (name, value) in fields {
            let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
            asked.headers_mut().append(name, value.parse().unwrap());
        }
        asked
    }

    #[test]
    fn a_policy_keeps_of_the_request_only_the_fields_it_reads() {
        let response = Response::builder()
            .header("cache-control", "max-age=600")
            .header("vary", "Accept-Language, x-Mode")
            .body(())
            .unwrap();
        let first = asked(&[
            ("host", "h"),
            ("cookie", "session=alice"),
            ("user-agent", "curl"),
            ("accept-language", "fr"),
            ("x-mode", "a"),
            ("x-mode", "b"),
            ("cache-control", "max-stale=5"),
        ]);
        let kept = kept_request(&first, response.headers());
        let names: Vec<_> = kept.headers().keys().map(HeaderName::as_str).collect();
        assert_eq!(
            names,
            ["host", "cache-control", "accept-language", "x-mode"]
        );
        assert_eq!(kept.headers().get_all("x-mode").iter().count(), 2);
        assert_eq!(kept.uri(), first.uri());

        // What it weighs is what it keeps: a cookie and a user agent add nothing.
        let bare = asked(&[
            ("host", "h"),
            ("accept-language", "fr"),
            ("x-mode", "a"),
            ("x-mode", "b"),
            ("cache-control", "max-stale=5"),
        ]);
        let judged = of(&first, &response, SystemTime::now());
        assert_eq!(
            judged.fields,
            of(&bare, &response, SystemTime::now()).fields
        );
        assert_eq!(
            judged.fields,
            fields_size(kept.headers()) + fields_size(response.headers())
        );

        // What `Vary` names still selects; what it does not name never did.
        let policy = judged.policy;
        let fresh = |fields: &[(&str, &str)]| {
            let request = asked(fields);
            matches!(
                policy.before_request(&request, SystemTime::now()),
                BeforeRequest::Fresh(_)
            )
        };
        let same = [("host", "h"), ("accept-language", "fr"), ("x-mode", "a")];
        assert!(fresh(&same));
        assert!(fresh(&[
            same[0],
            same[1],
            same[2],
            ("cookie", "session=bob")
        ]));
        assert!(!fresh(&[
            ("host", "h"),
            ("accept-language", "de"),
            ("x-mode", "a")
        ]));
        assert!(!fresh(&[("host", "other"), same[1], same[2]]));
    }
}
