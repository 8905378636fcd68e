//! What a read's answer becomes once the inner service has given it: tagged with the SHA-256
//! of its body (or the tag remembered for those very bytes), remembered for the 304s to come,
//! and checked against the request's conditions.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode};
use http_body::Body;
use ifmatch_core::EntityTag;
use ifmatch_core::date::parse_http_date;
use ifmatch_core::precondition::rfc9110::{Target, evaluate};
use ifmatch_core::precondition::{Outcome, Validators};
use ifmatch_core::{not_modified_headers, strong_etag};

use crate::body::ConditionalBody;
use crate::cache::{ReadCache, rememberable};
use crate::encoding::{Mark, present};
use crate::refusal::{Refusal, refusal};
use crate::resource::{Remembered, Resource};
use crate::validators::validators_of;
use ifmatch_core::cache_markers::FreshInSharedCache;

/// What a read needs once the inner response arrives.
#[derive(Debug)]
pub(crate) struct ReadContext {
    /// Whether the request carries any precondition; without one there is nothing to evaluate.
    pub(crate) conditional: bool,
    /// The mark of the request's `Accept-Encoding`, for the tag it is sent.
    pub(crate) mark: Option<Mark>,
    /// The key, when the read found no resource (which has its own).
    pub(crate) key: Option<Arc<str>>,
    /// The request's query: it selects a variant of the key's resource.
    pub(crate) query: String,
    /// The request's headers that matter after the response: the preconditions, `Range`, and
    /// those the resource varies on (all of them while that is not known); `None` when none
    /// of them came (the usual read), so that the context is small to move.
    pub(crate) request_headers: Option<Box<HeaderMap>>,
    /// The resource as the read found it in the cache, if it did.
    pub(crate) resource: Option<Arc<Resource>>,
    /// The variant of it this request selects, if remembered.
    pub(crate) remembered: Option<Arc<Remembered>>,
    pub(crate) head: bool,
    pub(crate) cache: ReadCache,
    pub(crate) hash_limit: usize,
    pub(crate) remember_private: bool,
    /// Whether what the answer shows may be remembered: a read of a key seen since its last
    /// change (a write detaches what it remembers), or one that holds the key's lock. A read
    /// that found the lock taken is served, and teaches nothing.
    pub(crate) may_remember: bool,
}

impl ReadContext {
    /// The key of the resource read.
    pub(crate) fn key(&self) -> &Arc<str> {
        match (&self.key, &self.resource) {
            (Some(key), _) => key,
            (None, Some(resource)) => resource.key(),
            (None, None) => unreachable!("a read knows its key or its resource"),
        }
    }

    /// The request's headers that matter after the response.
    pub(crate) fn request_headers(&self) -> &HeaderMap {
        static NONE: std::sync::LazyLock<HeaderMap> = std::sync::LazyLock::new(HeaderMap::new);
        self.request_headers.as_deref().unwrap_or(&NONE)
    }

    /// The request's method: a read is a GET or a HEAD.
    fn method(&self) -> &'static Method {
        if self.head {
            &Method::HEAD
        } else {
            &Method::GET
        }
    }
}

/// Finishes a read once the response's validators are known: remember them, then answer 304,
/// 412 or the response itself.
pub(crate) fn finish_read<B: Body<Data = Bytes>>(
    context: &ReadContext,
    mut parts: http::response::Parts,
    body: ConditionalBody<B>,
    tagged: Option<Tagged>,
) -> Response<ConditionalBody<B>>
where
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (hashed, bytes) = match tagged {
        Some(Tagged::Reused) if !context.conditional && !context.head => {
            // The very bytes of the remembered variant, for a request without conditions:
            // nothing to learn, nothing to evaluate.
            let mut response = Response::from_parts(parts, body);
            present(context.mark.as_ref(), response.headers_mut());
            return response;
        }
        Some(Tagged::Reused) => (context.remembered.as_ref().map(|r| r.etag.clone()), None),
        Some(Tagged::Hashed(etag, bytes)) => (Some(etag), Some(bytes)),
        None => (None, None),
    };
    let tagged = parts.status == StatusCode::OK;
    // A shared cache inside the layer that keeps the answer under the origin's own tag
    // answers its conditional requests (see `FreshInSharedCache`): nothing to remember.
    let kept_below = hashed.is_none() && parts.extensions.get::<FreshInSharedCache>().is_some();
    let validators = match hashed {
        Some(etag) => {
            let last_modified = parts
                .headers
                .get(header::LAST_MODIFIED)
                .and_then(parse_http_date);
            Some(Validators::new(Some(etag), last_modified))
        }
        None => validators_of(&parts.headers),
    }
    .filter(|_| tagged);
    let known = |etag: &EntityTag| (context.remembered.as_ref()).is_some_and(|r| r.etag == *etag);
    if let Some(validators) = &validators
        && context.may_remember
        && let Some(etag) = &validators.etag
        && !known(etag)
        && !kept_below
        && rememberable(&parts.headers, context.remember_private)
    {
        // Reduced first, then copied: a map the size of what a 304 keeps (a copy of the whole
        // map, reduced after, keeps the whole map's room: 12 MiB more for 10,000 resources).
        let mut headers = parts.headers.clone();
        not_modified_headers(&mut headers);
        headers.remove(header::DATE);
        let headers = ifmatch_core::owned::headers(&headers);
        let coding = parts.headers.get(header::CONTENT_ENCODING);
        let remembered = Remembered {
            etag: etag.clone(),
            headers,
            shown: bytes.and_then(|bytes| context.cache.keep(&bytes, coding, etag)),
        };
        context.cache.remember(
            context.key(),
            context.resource.as_deref(),
            &context.query,
            context.request_headers(),
            &parts.headers,
            remembered,
        );
    }
    // A part (206) is not the representation, and the layer never hashes one: its conditions
    // are those of the whole representation, whose tag the handler gave or the cache knows
    // from a GET of the same variant. Knowing neither, the handler's answer stands.
    let partial = parts.status == StatusCode::PARTIAL_CONTENT;
    let whole = partial
        .then(|| {
            validators_of(&parts.headers).or_else(|| {
                let remembered = context.remembered.as_ref()?;
                Some(Validators::etag(remembered.etag.clone()))
            })
        })
        .flatten();
    // RFC 9110 13.2.1: only a 2xx is subject to the preconditions.
    let current = validators.as_ref().or(whole.as_ref());
    let outcome = outcome_of(context, &parts, current, partial);
    let mut response = match outcome {
        Outcome::NotModified => not_modified(parts, whole.as_ref()),
        Outcome::PreconditionFailed => refusal(Refusal::Failed),
        Outcome::Proceed | Outcome::IgnoreRange if context.head => {
            // The GET's length (RFC 9110 9.3.2), which an empty body would otherwise turn
            // into `Content-Length: 0`.
            if !parts.headers.contains_key(header::CONTENT_LENGTH)
                && let Some(len) = body.size_hint().exact()
            {
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
            }
            Response::from_parts(parts, ConditionalBody::empty())
        }
        Outcome::Proceed | Outcome::IgnoreRange => Response::from_parts(parts, body),
    };
    if matches!(response.status(), StatusCode::OK | StatusCode::NOT_MODIFIED) {
        present(context.mark.as_ref(), response.headers_mut());
    }
    response
}

/// How the request's conditions come out against `current`, the answer's validators (or,
/// for a part, its representation's), when the answer is one they apply to.
fn outcome_of(
    context: &ReadContext,
    parts: &http::response::Parts,
    current: Option<&Validators>,
    partial: bool,
) -> Outcome {
    match current {
        _ if !context.conditional => Outcome::Proceed,
        None if partial => Outcome::Proceed,
        Some(current) => evaluate(
            context.method(),
            context.request_headers(),
            Target::Current(current),
        ),
        None if parts.status.is_success() => {
            let untagged = Validators::new(
                None,
                parts
                    .headers
                    .get(header::LAST_MODIFIED)
                    .and_then(parse_http_date),
            );
            evaluate(
                context.method(),
                context.request_headers(),
                Target::Current(&untagged),
            )
        }
        None => Outcome::Proceed,
    }
}

/// The 304 made of the handler's own answer to this very request (its parts): what it says
/// to this client (a session renewed on every view) stays; a 304 from memory carries none.
/// It carries the representation's tag when the answer was a part of it (`whole`).
fn not_modified<B>(
    mut parts: http::response::Parts,
    whole: Option<&Validators>,
) -> Response<ConditionalBody<B>> {
    let cookies: Vec<HeaderValue> = parts
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .cloned()
        .collect();
    not_modified_headers(&mut parts.headers);
    for cookie in cookies {
        parts.headers.append(header::SET_COOKIE, cookie);
    }
    if let Some(etag) = whole.and_then(|w| w.etag.as_ref())
        && !parts.headers.contains_key(header::ETAG)
    {
        parts.headers.insert(header::ETAG, etag.to_header_value());
    }
    parts.status = StatusCode::NOT_MODIFIED;
    Response::from_parts(parts, ConditionalBody::empty())
}

/// The tag the layer gave a body.
pub(crate) enum Tagged {
    /// The remembered variant's (`ReadContext::remembered`): the handler answered with the
    /// very bytes it was hashed from.
    Reused,
    /// Their digest, just computed, and the bytes.
    Hashed(EntityTag, Bytes),
}

/// Sets the strong ETag of a body the layer hashed, and its length: the remembered ones when
/// the handler answered with the very bytes the tag was hashed from, computed otherwise.
pub(crate) fn tag(
    context: &ReadContext,
    parts: &mut http::response::Parts,
    bytes: &Bytes,
    coded: bool,
) -> Tagged {
    // The length goes as the body's exact size, which the server writes as `Content-Length`.
    let coding = coded
        .then(|| parts.headers.get(header::CONTENT_ENCODING))
        .flatten();
    if let Some(remembered) = &context.remembered
        && let Some(value) = remembered.etag_of(bytes, coding)
    {
        parts.headers.insert(header::ETAG, value);
        return Tagged::Reused;
    }
    let etag = crate::encoding::coded(strong_etag(bytes), &parts.headers);
    parts.headers.insert(header::ETAG, etag.to_header_value());
    Tagged::Hashed(etag, bytes.clone())
}

/// How a response's body is to be hashed, and whether it has a `Content-Encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) hashing: Hashing,
    pub(crate) coded: bool,
}

/// How a response's body is to be hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hashing {
    /// Not at all: not a 200, already tagged, a stream, or known to be too large.
    No,
    /// Whole: its length is known and within the limit.
    Whole,
    /// Only if all of it is ready at once (a body of unknown length, such as one a compressor
    /// inside the layer encodes as it goes): at the first wait, what came is sent, the rest
    /// streams through untagged, and nothing is held back.
    IfReady,
}

/// How a response is to be hashed: a 200 without an ETag, not known to be larger than the limit.
pub(crate) fn shape<B: Body>(response: &Response<B>, limit: usize) -> Shape {
    let no = Shape {
        hashing: Hashing::No,
        coded: false,
    };
    if response.status() != StatusCode::OK {
        return no;
    }
    // One pass over the names (a response has few): already tagged, or server-sent events,
    // which are never held back, even for a moment.
    let mut coded = false;
    for (name, value) in response.headers() {
        if name == header::ETAG
            || (name == header::CONTENT_TYPE && value.as_bytes().starts_with(b"text/event-stream"))
        {
            return no;
        }
        coded |= name == header::CONTENT_ENCODING;
    }
    let hashing = match response.body().size_hint().exact() {
        Some(len) if len <= limit as u64 => Hashing::Whole,
        Some(_) => Hashing::No,
        None => Hashing::IfReady,
    };
    Shape { hashing, coded }
}
