//! A request's way through the store: a fresh stored response is served as it is (with its
//! `Age`); a stale one is revalidated with the inner service, and a 304 refreshes its head;
//! anything else goes to the inner service, and a storable answer is stored on its way back.
//! An unsafe method that succeeds invalidates its target, and what its `Location` and
//! `Content-Location` name on the same origin (RFC 9111 4.4).

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::{Method, Request, Response, StatusCode, Uri};
use http_body::Body;
use http_body_util::Either;
use http_cache_semantics::BeforeRequest;
use ifmatch_core::signs_request;
use tower_service::Service;

use crate::answer::hit::from_store;
use crate::answer::miss::{BodyBeingStored, keep};
use crate::answer::revalidate::{Revalidated, in_background, revalidate, tags_once};
use crate::answer::{coding, language};
use crate::policy::{self};
use crate::rules::cache_status::add_status;
use crate::rules::freshness;
use crate::rules::key::{host_of, key_of, keyed, target_of};
use crate::rules::targeted::{self, SURROGATE_CAPABILITY, SURROGATE_CONTROL};
use crate::rules::unkeyed;
use crate::stats::Counters;
use crate::stored::cached_body::CachedBody;
use crate::stored::entry::Stored;
use crate::stored::hit_head::FreshHead;
use crate::stored::tee::Tee;
use crate::tiers::collapse::{self, MissTurn};
use crate::tiers::memory::{Forgotten, Store};

use ifmatch_core::BoxError;
use ifmatch_core::cache_markers::BypassSharedCache;

/// A shared HTTP cache in front of `S`; see the [module](super).
#[derive(Debug, Clone)]
pub struct SharedCache<S> {
    inner: S,
    store: Arc<Store>,
}

impl<S> SharedCache<S> {
    pub(crate) fn new(inner: S, store: Arc<Store>) -> Self {
        Self { inner, store }
    }

    /// The inner service.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }
}

/// What the cache can stand in front of: a service that can be cloned and moved between tasks,
/// answering a body of `Bytes`.
pub trait Cacheable<ReqBody>:
    Service<Request<ReqBody>, Response = Response<Self::ResponseBody>, Future: Send, Error: Send>
    + Clone
    + Send
    + 'static
{
    /// The body of its responses.
    type ResponseBody: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static;
}

impl<S, ReqBody, ResBody> Cacheable<ReqBody> for S
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    ResBody: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static,
{
    type ResponseBody = ResBody;
}

impl<S, ReqBody> Service<Request<ReqBody>> for SharedCache<S>
where
    S: Cacheable<ReqBody>,
    ReqBody: Default + Send + 'static,
{
    type Response = Response<CachedBody<S::ResponseBody>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The service that was made ready answers this request; the clone waits for the next.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let store = self.store.clone();
        Box::pin(async move {
            let mut response = through_store(inner, store, request).await?;
            // This cache's alone (see `targeted`).
            response.headers_mut().remove(SURROGATE_CONTROL);
            response.extensions_mut().remove::<BodyBeingStored>();
            Ok(response)
        })
    }
}

/// The answer to `request`, from the store or through `inner`.
async fn through_store<S, ReqBody>(
    mut inner: S,
    store: Arc<Store>,
    mut request: Request<ReqBody>,
) -> Result<Response<CachedBody<S::ResponseBody>>, S::Error>
where
    S: Cacheable<ReqBody>,
    ReqBody: Default + Send + 'static,
{
    let method = request.method().clone();
    if method == Method::GET || method == Method::HEAD {
        as_forwarded(request.headers_mut());
    }
    if request.extensions().get::<BypassSharedCache>().is_some() && is_safe(&method) {
        let mut response = inner
            .call(request)
            .await?
            .map(|b| Either::Right(Tee::passing(b)));
        add_status(response.headers_mut(), "fwd=bypass");
        return Ok(response);
    }
    let host = host_of(&request);
    let key = key_of(&host, target_of(request.uri()));
    if method != Method::GET && method != Method::HEAD {
        return through_to_origin(inner, &store, request, &host, &key).await;
    }

    let mut asked = head_of(&request);
    if let Some(name) = store.range_field()
        && let Some(range) = asked.headers().get(name).cloned()
    {
        asked.headers_mut().insert(header::RANGE, range);
    }
    let own = keyed(asked.headers(), store.key_headers());
    store.restore(&key).await;
    let mut found = match lookup(&store, &key, &own, &asked) {
        Found::Fresh(head, stored) => {
            Counters::add(&store.counters.hits, 1);
            return Ok(from_store(&store, head, &stored, &asked, "hit"));
        }
        other => other,
    };
    // Not a hit: the requests of the key may have to meet.
    let gate = collapse::gate_of(&key, &own);
    if let Found::Stale(revalidation, stored) = &found {
        let now = SystemTime::now();
        if stored.stale.while_revalidating(&asked, now)
            && let Some(head) = freshness::head(&stored.policy, &asked, now)
        {
            let mut background = Request::from_parts(revalidation.clone(), ReqBody::default());
            with_sent_range(background.headers_mut(), request.headers());
            *background.extensions_mut() = request.extensions().clone();
            let keys = (key.clone(), gate.as_str());
            let again = head_of(&asked);
            in_background(
                inner,
                store.clone(),
                keys,
                again,
                stored.clone(),
                background,
            );
            let status = "hit; detail=stale-while-revalidate";
            Counters::add(&store.counters.stale_served, 1);
            return Ok(from_store(&store, head, stored, &asked, status));
        }
    }
    let lead = meet(&store, &key, &gate, &own, &asked, &mut found).await;
    match found {
        // Stored by the request this one waited for.
        Found::Fresh(head, stored) => {
            Counters::add(&store.counters.hits, 1);
            return Ok(from_store(&store, head, &stored, &asked, "hit"));
        }
        Found::Stale(revalidation, stored) => {
            let mut revalidation = Request::from_parts(revalidation, ReqBody::default());
            with_sent_range(revalidation.headers_mut(), request.headers());
            *revalidation.extensions_mut() = request.extensions().clone();
            let revalidated =
                revalidate(&mut inner, &store, &key, &asked, &stored, revalidation).await?;
            if let Revalidated::Answer(response) = revalidated {
                return Ok(response);
            }
        }
        Found::Nothing => {}
    }

    // Ready again: a revalidation above may have used the readiness the caller saw.
    poll_fn(|cx| inner.poll_ready(cx)).await?;
    let now = SystemTime::now();
    Counters::add(&store.counters.misses, 1);
    let response = inner.call(request).await?;
    let mut response = keep(&store, &key, &asked, response, now, None);
    // What it stored arrives still: the requests of the key that come meanwhile follow it
    // until all of it has come (see `StoredBody::hold`), whatever the store does with it.
    if let (Some(lead), Some(BodyBeingStored(body))) = (lead, response.extensions_mut().remove()) {
        body.hold(Box::new(lead));
    }
    Ok(response)
}

/// Where the requests of a key that miss meet: the one that leads (`Some`) asks the origin and
/// is held until what it stores is in the store, and those that come meanwhile wait for it and
/// look again (`found` is then what they find). A request for a part neither waits nor is
/// waited for: what it stores (a piece) answers few of the others. Nor does one that finds
/// stale what a revalidation leaves stale again: it would wait for another's revalidation, then
/// revalidate all the same.
async fn meet(
    store: &Arc<Store>,
    key: &str,
    gate: &str,
    own: &str,
    asked: &Request<()>,
    found: &mut Found,
) -> Option<collapse::Lead> {
    let part = asked.headers().contains_key(header::RANGE);
    let pays = !matches!(&*found, Found::Stale(_, stored) if !stored.stale.keeps_fresh());
    if asked.method() != Method::GET || part || !pays || !store.gates.worth_waiting(gate) {
        return None;
    }
    let leader = match store.gates.turn(gate) {
        MissTurn::Lead(leading) => return Some(leading),
        MissTurn::Follow(leader) => leader,
    };
    let published = collapse::wait(leader, store.collapse_wait()).await;
    *found = lookup(store, key, own, asked);
    // The store may have let it go already: what the leader stored serves.
    if let (Found::Nothing, Some(stored)) = (&*found, published) {
        *found = lookup_in(std::slice::from_ref(&stored), own, asked);
    }
    if matches!(found, Found::Fresh(..)) {
        Counters::add(&store.counters.collapsed, 1);
    }
    None
}

/// The answer to a request of another method than GET and HEAD: through `inner`, the stored
/// answers of the target (and of those its answer names) invalidated when it changed them;
/// a POST's answer kept as the target's when it says it is and is explicitly fresh.
async fn through_to_origin<S, ReqBody>(
    mut inner: S,
    store: &Arc<Store>,
    request: Request<ReqBody>,
    host: &str,
    key: &str,
) -> Result<Response<CachedBody<S::ResponseBody>>, S::Error>
where
    S: Cacheable<ReqBody>,
    ReqBody: Default + Send + 'static,
{
    let method = request.method().clone();
    let target = request.uri().clone();
    // What a later GET would ask, should the answer say it is the target's.
    let as_get = (method == Method::POST).then(|| with_method(&head_of(&request), Method::GET));
    let response = inner.call(request).await?;
    let status = response.status();
    if !is_safe(&method) && (status.is_success() || status.is_redirection()) {
        invalidate(store, host, &target, response.headers());
    }
    if let Some(as_get) = as_get
        && status.is_success()
        && names_its_target(response.headers(), host, &target)
        && policy::explicitly_fresh(response.headers())
    {
        return Ok(keep(store, key, &as_get, response, SystemTime::now(), None));
    }
    Ok(response.map(|body| Either::Right(Tee::passing(body))))
}

/// A read's fields as the origin is asked with them: without those no answer is keyed by
/// (`unkeyed.rs`), saying that this cache reads `Surrogate-Control` (`targeted.rs`).
fn as_forwarded(headers: &mut http::HeaderMap) {
    unkeyed::remove(headers);
    headers.append(SURROGATE_CAPABILITY, targeted::capability());
}

/// What the store holds for a request.
enum Found {
    /// A response it may be served, with the head to serve.
    Fresh(http::response::Parts, Arc<Stored>),
    /// A response it may be served once the inner service says it is still current, with the
    /// request that asks.
    Stale(http::request::Parts, Arc<Stored>),
    Nothing,
}

/// The stored response `asked` may be served, the most recent first, among those stored
/// under `key` for requests with the key fields `own`.
///
/// A HEAD is answered from a stored GET while it is fresh (RFC 9110 9.3.2: the same fields);
/// a stale one is left to the inner service, which has no body to send for it.
fn lookup(store: &Store, key: &str, own: &str, asked: &Request<()>) -> Found {
    lookup_in(store.get(key).as_deref().unwrap_or_default(), own, asked)
}

/// [`lookup`] among `variants`.
fn lookup_in(variants: &[Arc<Stored>], own: &str, asked: &Request<()>) -> Found {
    let now = SystemTime::now();
    let head = asked.method() == Method::HEAD;
    let signed = signs_request(asked.headers());
    let as_get;
    let asked = if head {
        as_get = with_method(asked, Method::GET);
        &as_get
    } else {
        asked
    };
    // A piece answers only a GET of a range it holds.
    let answers = |stored: &Stored| match stored.piece {
        None => stored.status != StatusCode::PARTIAL_CONTENT,
        Some(piece) => !head && piece.holds(asked).is_some(),
    };
    let usable = (variants.iter())
        .filter(|stored| stored.keyed == own && !stored.body.failed() && answers(stored));
    for stored in usable {
        let honoured = stored.stale.honoured(asked);
        let asked = honoured.as_ref();
        let served = stored.served.get().and_then(Option::as_ref);
        if let Some(head) = served.and_then(|served| served.head(&stored.policy, asked, now)) {
            return Found::Fresh(head, stored.clone());
        }
        match stored.policy.before_request(asked, now) {
            BeforeRequest::Fresh(head) => {
                if stored.served.get().is_none() {
                    let served = FreshHead::of(&stored.policy, &stored.variant, asked, &head, now);
                    // Made of a request with directives of its own, it says nothing yet.
                    if served.is_some() {
                        let _ = stored.served.set(served);
                    }
                }
                return Found::Fresh(head, stored.clone());
            }
            // A request whose credentials may sign it reaches the inner service as it came: the
            // signature may cover the conditions a revalidation adds (Azure's Shared Key covers
            // `If-None-Match`), so what is stale is fetched again for it, not revalidated.
            BeforeRequest::Stale {
                request,
                matches: true,
            } if !head && !signed => return Found::Stale(tags_once(request), stored.clone()),
            BeforeRequest::Stale { matches: false, .. } => {
                let negotiated = language::first_choice_head(stored, asked, now)
                    .or_else(|| coding::acceptable_head(stored, asked, now));
                if let Some(head) = negotiated {
                    return Found::Fresh(head, stored.clone());
                }
            }
            BeforeRequest::Stale { .. } => {}
        }
    }
    Found::Nothing
}

/// `headers`, of a request the cache makes of the client's `sent`, with the client's own
/// `Range` or none: the cache may read another field as the range (see
/// [`SharedCacheLayer::range_field`](crate::SharedCacheLayer::range_field)), and sends the
/// origin what the client sent.
fn with_sent_range(headers: &mut HeaderMap, sent: &HeaderMap) {
    match sent.get(header::RANGE) {
        Some(range) => headers.insert(header::RANGE, range.clone()),
        None => headers.remove(header::RANGE),
    };
}

/// `asked` with `method`.
fn with_method(asked: &Request<()>, method: Method) -> Request<()> {
    let mut request = head_of(asked);
    *request.method_mut() = method;
    request
}

/// The request's head, for the policy (which keeps its fields).
///
/// Its target is in origin form and its host in `Host`, as the key has them (in lowercase):
/// an HTTP/2 request names its host in its target's authority and sends no `Host` (RFC 9113
/// 8.3.1), an HTTP/1.1 one names it in `Host`, and the policy compares targets and `Host` as
/// they are, so that neither would be served the other's answer (and each would store its own
/// over the other's).
fn head_of<B>(request: &Request<B>) -> Request<()> {
    let mut head = Request::new(());
    *head.method_mut() = request.method().clone();
    *head.version_mut() = request.version();
    *head.headers_mut() = combined(request.headers());
    let uri = request.uri();
    *head.uri_mut() = match uri.authority() {
        None => uri.clone(),
        Some(_) => Uri::from(
            uri.path_and_query()
                .cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/")),
        ),
    };
    let host = request.headers().get(header::HOST);
    if (uri.authority().is_some()
        || host.is_some_and(|h| h.as_bytes().iter().any(u8::is_ascii_uppercase)))
        && let Ok(host) = HeaderValue::try_from(host_of(request))
    {
        head.headers_mut().insert(header::HOST, host);
    }
    policy::lowercase_directives(head.headers_mut());
    head
}

/// `headers` with the lines of each field combined into one (RFC 9110 5.3; `Cookie`'s with
/// `; `, RFC 9113 8.2.3), and without the whitespace around a list's commas: the policy
/// compares the first line of a field `Vary` names, a request whose second `Cookie` line
/// differs must not be served another's answer, and one that differs from another only in
/// that whitespace (no part of a list's members, RFC 9110 5.6.1) is served the same (RFC 9111
/// 4.1 lets a cache normalise it). A date's comma is not a list's. `Accept-Language` is in
/// lowercase: language tags and parameter names are case-insensitive (RFC 5646 2.1.1, RFC
/// 9110 5.6.6). The order of its members stays: RFC 9110 12.5.4 notes that servers read it
/// as a priority among equal weights.
fn combined(headers: &HeaderMap) -> HeaderMap {
    let mut out = joined(headers);
    let languages = out.get(header::ACCEPT_LANGUAGE);
    if let Some(lowered) = languages.and_then(|value| {
        let bytes = value.as_bytes();
        let upper = bytes.iter().any(u8::is_ascii_uppercase);
        upper.then(|| HeaderValue::from_bytes(&bytes.to_ascii_lowercase()).ok())?
    }) {
        out.insert(header::ACCEPT_LANGUAGE, lowered);
    }
    out
}

/// `headers` with the lines of each field combined, and a list's commas tight (see
/// [`combined`]).
fn joined(headers: &HeaderMap) -> HeaderMap {
    let loose_list = |name: &HeaderName, value: &[u8]| {
        let date = [
            header::DATE,
            header::IF_MODIFIED_SINCE,
            header::IF_UNMODIFIED_SINCE,
            header::IF_RANGE,
        ];
        loose(value) && !date.contains(name)
    };
    // The usual request: one line per field, no space after a list's comma.
    if headers.len() == headers.keys_len()
        && !(headers.iter()).any(|(name, value)| loose_list(name, value.as_bytes()))
    {
        return headers.clone();
    }
    let mut out = HeaderMap::with_capacity(headers.keys_len());
    for name in headers.keys() {
        let mut values = headers.get_all(name).iter();
        if let (Some(only), None) = (values.next(), values.next())
            && !loose_list(name, only.as_bytes())
        {
            out.insert(name.clone(), only.clone());
            continue;
        }
        let separator: &[u8] = if name == header::COOKIE { b"; " } else { b", " };
        let mut joined = Vec::new();
        for (n, value) in headers.get_all(name).iter().enumerate() {
            if n > 0 {
                joined.extend_from_slice(separator);
            }
            joined.extend_from_slice(value.as_bytes());
        }
        if loose_list(name, &joined) {
            joined = tight(&joined);
        }
        if let Ok(value) = HeaderValue::from_bytes(&joined) {
            out.insert(name.clone(), value);
        }
    }
    out
}

/// Whether a comma in `value` has whitespace beside it.
fn loose(value: &[u8]) -> bool {
    value.contains(&b',')
        && (value.windows(2)).any(|w| matches!(w, [b',', b' ' | b'\t'] | [b' ' | b'\t', b',']))
}

/// `value` without the whitespace beside its commas.
fn tight(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    for (n, member) in value.split(|&b| b == b',').enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(member.trim_ascii());
    }
    out
}

/// Methods that change nothing (RFC 9110 9.2.1): they invalidate nothing.
fn is_safe(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// Forgets what is stored for `target` and for the same-origin URIs in the answer's
/// `Location` and `Content-Location` (RFC 9111 4.4).
/// Whether `answer` says with its `Content-Location` that it is the representation of
/// `target` on `host`: a POST's answer that does, with explicit freshness, answers a later GET
/// of the target (RFC 9110 9.3.3, RFC 9111 4.3.5's reading of `Content-Location`).
fn names_its_target(answer: &HeaderMap, host: &str, target: &Uri) -> bool {
    let Some(named) =
        (answer.get(header::CONTENT_LOCATION)).and_then(|v| v.to_str().ok()?.parse::<Uri>().ok())
    else {
        return false;
    };
    let same_origin = (named.authority()).is_none_or(|a| a.as_str().eq_ignore_ascii_case(host));
    same_origin && target_of(&named) == target_of(target)
}

fn invalidate(store: &Store, host: &str, target: &Uri, answer: &HeaderMap) {
    let forget = |key: &str| {
        store.invalidate(key);
        store.announce(Forgotten::Key(key));
    };
    forget(&key_of(host, target_of(target)));
    for name in [header::LOCATION, header::CONTENT_LOCATION] {
        let Some(uri) = answer
            .get(&name)
            .and_then(|v| v.to_str().ok()?.parse::<Uri>().ok())
        else {
            continue;
        };
        let same_origin = (uri.authority()).is_none_or(|a| a.as_str().eq_ignore_ascii_case(host));
        if same_origin && uri.path().starts_with('/') {
            forget(&key_of(host, target_of(&uri)));
        }
    }
}
