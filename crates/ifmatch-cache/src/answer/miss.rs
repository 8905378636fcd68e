//! A miss's answer on its way back: stored if the rules allow and it fits, its body read into
//! the store as its client reads it (or kept as it passes, and stored once whole, when its
//! length is not declared).

use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use bytes::Bytes;
use http::header;
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::Either;
use ifmatch_core::BoxError;
use ifmatch_core::cache_markers::FreshInSharedCache;

use crate::policy::{self, Judged};
use crate::rules::cache_status::add_status;
use crate::rules::key::{keyed, variant};
use crate::rules::range::{self, Piece};
use crate::stats::Counters;
use crate::stored::cached_body::CachedBody;
use crate::stored::entry::Stored;
use crate::stored::entry_body::StoredBody;
use crate::stored::tee::{self, Tee};
use crate::tiers::collapse;
use crate::tiers::memory::Store;

/// The body a miss is storing, on its answer's way out of [`keep`]: what its gate is held by.
#[derive(Clone)]
pub(crate) struct BodyBeingStored(pub(crate) Arc<StoredBody>);

/// `response`, received at `now`, stored under `key` in place of `replaces` if the rules
/// allow and it fits: its body is then read into the store as its client reads it, and other
/// clients may read it from the store meanwhile.
pub(crate) fn keep<B>(
    store: &Arc<Store>,
    key: &str,
    asked: &Request<()>,
    response: Response<B>,
    now: SystemTime,
    replaces: Option<&Arc<Stored>>,
) -> Response<CachedBody<B>>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let declared = range::length(response.status(), response.headers());
    Counters::add(&store.counters.bytes_from_origin, declared.unwrap_or(0));
    // Stored only if it can ever be reused: fresh for a while, revalidated with a validator,
    // or served stale by its own leave. One with none of these would be fetched whole again
    // by every request (and would make them wait for one another). One whose fields say
    // nothing of any of these is not even judged.
    let headers = response.headers();
    let judged = (policy::may_be_reused(headers)).then(|| policy::of(asked, &response, now));
    let reusable = |judged: &Judged| {
        judged.stale.fresh_at(now)
            || headers.contains_key(header::ETAG)
            || headers.contains_key(header::LAST_MODIFIED)
            || judged.stale.lingers()
    };
    // A 206 is stored only as one piece of its representation (see `range`).
    let piece = (response.status() == StatusCode::PARTIAL_CONTENT)
        .then(|| Piece::of(headers))
        .flatten();
    let whole_or_piece = match response.status() {
        StatusCode::PARTIAL_CONTENT => piece.is_some(),
        status => !range::is_part_as_whole(status, headers),
    };
    let judged = judged.filter(|judged| judged.storable && reusable(judged) && whole_or_piece);
    let get = asked.method() == Method::GET;
    let fits = declared.is_none_or(|len| len <= store.max_object());
    // The request's key fields and its gate, once.
    let own = keyed(asked.headers(), store.key_headers());
    let gate = collapse::gate_of(key, &own);
    // What a request for a part stores (a piece) is nothing for the key's gate to know of.
    if get && piece.is_none() {
        // A body of no declared length is stored, if at all, once it ended: nothing for the
        // requests meanwhile to wait for.
        let stored_now = fits && declared.is_some() && judged.is_some();
        store.gates.stored(&gate, stored_now);
    }
    let fresh = judged.as_ref().is_some_and(|j| j.stale.fresh_at(now));
    let storable = judged.is_some();
    let (Some(judged), true, true) = (judged, fits, get) else {
        let status = if storable && !fits {
            "fwd=miss; detail=too-large"
        } else {
            "fwd=uri-miss"
        };
        let mut response = response.map(|body| Either::Right(Tee::passing(body)));
        add_status(response.headers_mut(), status);
        return response;
    };
    let (mut head, body) = response.into_parts();
    if fresh && head.headers.contains_key(header::ETAG) {
        head.extensions.insert(FreshInSharedCache);
    }
    let variant = variant(asked.headers(), &head.headers);
    let status = (head.status, piece);
    let Some(len) = declared else {
        // Kept as it passes, and stored once whole, unless something was forgotten meanwhile
        // (a write, a purge: what it holds may be older than that).
        let (into, key, replaces) = (store.clone(), key.to_owned(), replaces.cloned());
        let forgotten = store.forgotten(&key);
        let keep: tee::Keep = Box::new(move |bytes| {
            if into.forgotten(&key) != forgotten {
                return;
            }
            Counters::add(&into.counters.bytes_from_origin, bytes.len() as u64);
            let stored = entry(status, variant, own, judged, StoredBody::whole(bytes));
            into.gates.stored(&gate, true);
            into.put(&key, Arc::new(stored), replaces.as_ref());
            // Forgotten between the look above and the put (an invalidation moves the number
            // before it removes): forgotten again.
            if into.forgotten(&key) != forgotten {
                into.invalidate(&key);
            }
        });
        let body = Tee::keeping(body, store.max_object(), keep);
        add_status(&mut head.headers, "fwd=miss; detail=stored-once-whole");
        return Response::from_parts(head, Either::Right(body));
    };
    let body = StoredBody::reading(body, len);
    let stored = Arc::new(entry(status, variant, own, judged, body.clone()));
    if piece.is_none() {
        store.gates.publish(&gate, &stored);
    }
    store.put(key, stored, replaces);
    head.extensions.insert(BodyBeingStored(body.clone()));
    add_status(&mut head.headers, "fwd=miss; stored");
    Response::from_parts(head, Either::Left(body.reader()))
}

/// The entry of a response with `status` (and the piece it holds, if a 206) that `judged`
/// judged, for the requests `variant` and `keyed` select, with `body`.
fn entry(
    (status, piece): (StatusCode, Option<Piece>),
    variant: String,
    keyed: String,
    judged: Judged,
    body: Arc<StoredBody>,
) -> Stored {
    Stored {
        status,
        piece,
        variant,
        keyed,
        date: judged.date,
        validators: judged.validators,
        own_fields: judged.own_fields,
        fields: judged.fields,
        stale: judged.stale,
        policy: judged.policy,
        body,
        served: OnceLock::new(),
    }
}
