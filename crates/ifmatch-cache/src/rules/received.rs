//! A validation request a client sends the cache (RFC 9111 4.3.2), where the stored response
//! alone cannot answer it: `If-Modified-Since` against a stored response without
//! `Last-Modified` or `ETag` is compared with its `Date`, the time it was current. The rest
//! (tags, `Last-Modified`, `If-Match`) is the outer [`ConditionalLayer`]'s, from the fields
//! the answer carries.
//!
//! [`ConditionalLayer`]: ifmatch_tower::ConditionalLayer

use http::header::{self, HeaderMap};
use http::{Method, Request, StatusCode};
use ifmatch_core::date::parse_http_date;
use ifmatch_core::not_modified_headers;
use ifmatch_core::precondition::rfc9110::{Target, evaluate};
use ifmatch_core::precondition::{Outcome, Validators};

/// Makes `head` (a stored 200 for `asked`) a 304 if `asked` holds what it is, by its date.
pub(crate) fn not_modified(asked: &Request<()>, head: &mut http::response::Parts) -> bool {
    let fields: &HeaderMap = &head.headers;
    let by_date = matches!(*asked.method(), Method::GET | Method::HEAD)
        && head.status == StatusCode::OK
        && !fields.contains_key(header::LAST_MODIFIED)
        && !fields.contains_key(header::ETAG)
        && !asked.headers().contains_key(header::IF_NONE_MATCH)
        && asked.headers().contains_key(header::IF_MODIFIED_SINCE);
    let Some(date) = by_date.then(|| fields.get(header::DATE)).flatten() else {
        return false;
    };
    let current = Validators::new(None, parse_http_date(date));
    let outcome = evaluate(asked.method(), asked.headers(), Target::Current(&current));
    if outcome != Outcome::NotModified {
        return false;
    }
    head.status = StatusCode::NOT_MODIFIED;
    not_modified_headers(&mut head.headers);
    true
}
