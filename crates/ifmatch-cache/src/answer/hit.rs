//! A stored response served: all of it, the part a `Range` names, or a 304, with the head the
//! policy made of it.

use http::header;
use http::{Method, Request, Response};
use http_body::Body;
use http_body_util::Either;
use ifmatch_core::cache_markers::FreshInSharedCache;

use crate::rules::cache_status::add_status;
use crate::rules::range;
use crate::rules::received;
use crate::stats::Counters;
use crate::stored::cached_body::CachedBody;
use crate::stored::entry::Stored;
use crate::tiers::memory::Store;

/// `stored` for `asked`, with the head `head` the policy made of it (its fields, refreshed,
/// with `Age`): all of it, the part `asked` names in `Range`, or a 304.
pub(crate) fn from_store<B>(
    store: &Store,
    mut head: http::response::Parts,
    stored: &Stored,
    asked: &Request<()>,
    status: &str,
) -> Response<CachedBody<B>> {
    // The policy stamps `Date` with the time it is served, and not as an HTTP-date: a cache
    // sends the origin's (RFC 9110 6.6.1), or none for the server to add.
    head.status = stored.status;
    if let Some(own) = &stored.own_fields {
        head.headers.remove(header::CACHE_CONTROL);
        head.headers.remove(header::EXPIRES);
        head.headers.extend(own.clone());
    }
    head.headers.remove(header::DATE);
    if let Some(date) = &stored.date {
        head.headers.insert(header::DATE, date.clone());
    }
    let body = if received::not_modified(asked, &mut head) {
        stored.body.part(0..0)
    } else if let Some(piece) = stored.piece {
        // Found for a range it holds (see `lookup_in`).
        let within = piece.holds(asked).unwrap_or(0..stored.body.len());
        piece.head_for(&mut head, &within);
        stored.body.part(within)
    } else {
        match range::part(asked, &mut head, stored.body.len()) {
            Some(range) => stored.body.part(range),
            None => stored.body.reader(),
        }
    };
    if asked.method() == Method::GET {
        let bytes = body.size_hint().exact().unwrap_or(0);
        Counters::add(&store.counters.bytes_from_cache, bytes);
    }
    let kept = status == "hit" && head.headers.contains_key(header::ETAG);
    let mut response = Response::from_parts(head, Either::Left(body));
    add_status(response.headers_mut(), status);
    if kept {
        response.extensions_mut().insert(FreshInSharedCache);
    }
    response
}
