//! A read's start: a 304 from the cache without the inner service, or the inner service asked
//! (under the key's lock when the layer does not know the key yet). What its answer becomes:
//! `read_answer.rs`.

use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::header::{self, HeaderMap};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use ifmatch_core::EntityTag;
use ifmatch_core::precondition::rfc9110::{Target, evaluate};
use ifmatch_core::precondition::{CONDITIONS, Outcome, Validators};
use ifmatch_core::signs_request;
use tower_service::Service;

use crate::body::ConditionalBody;
use crate::config::Key;
use crate::encoding::{Mark, present};
use crate::future::ResponseFuture;
use crate::read_answer::ReadContext;
use crate::resource::{CREDENTIALS, Resource};
use crate::service::Conditional;
use crate::store::{VersionStore, absent};
use crate::validators::validators_of;

impl<S, V> Conditional<S, V> {
    pub(crate) fn read<ReqBody, ResBody>(
        &mut self,
        mut request: Request<ReqBody>,
        key: Key,
        mark: Option<Mark>,
    ) -> ResponseFuture<S::Future, ResBody, S::Error>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
        S::Future: Send,
        S::Error: Send,
        V: VersionStore + Clone,
        ReqBody: Send + 'static,
        ResBody: Body<Data = Bytes> + Unpin + Send + 'static,
        ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if !self.state.serves_get.load(Ordering::Relaxed) {
            self.state.serves_get.store(true, Ordering::Relaxed);
        }
        let headers = request.headers();
        let asks = Asks::of(headers);
        let key_text = key.of(&request);
        let resource = self.state.cache.resource_to_read(key_text);
        let key = resource.is_none().then(|| Arc::from(key_text));
        // The short-circuit: If-None-Match alone decides (If-Match and If-Unmodified-Since come
        // first in RFC 9110 13.2.2, and only the inner service knows about those).
        let decided_by_inm = asks.if_none_match && !asks.if_match_or_unmodified;
        let query = request.uri().query().unwrap_or("");
        let remembered =
            (resource.as_ref()).and_then(|r| r.get_known(query, headers, asks.credentials));
        if decided_by_inm && let Some(remembered) = &remembered {
            let validators = Validators::etag(remembered.etag.clone());
            if evaluate(request.method(), headers, Target::Current(&validators))
                == Outcome::NotModified
            {
                let mut response = Response::new(ConditionalBody::empty());
                *response.status_mut() = StatusCode::NOT_MODIFIED;
                *response.headers_mut() = remembered.headers.clone();
                present(mark.as_ref(), response.headers_mut());
                return ResponseFuture::ready(response);
            }
        }
        let head = request.method() == Method::HEAD;
        let conditional = asks.conditional();
        let context = ReadContext {
            conditional,
            mark,
            key,
            query: request.uri().query().unwrap_or("").to_owned(),
            request_headers: kept_headers(headers, asks, resource.as_deref().map(Resource::vary)),
            resource,
            remembered,
            head,
            cache: self.state.cache.clone(),
            hash_limit: self.state.config.hash_limit,
            remember_private: self.state.config.custom_key,
            // A HEAD may reach a handler of its own, whose answer is not the GET's: what the
            // cache remembers comes from GETs.
            may_remember: !head,
        };
        // HEAD gets the ETag of GET: ask for what GET would send, and send no body. Not with
        // credentials that may sign the method (Azure's Shared Key does): that HEAD goes on as
        // it came, and its answer's own fields are sent.
        if head && !signs_request(request.headers()) {
            *request.method_mut() = Method::GET;
        }
        if context.resource.is_some() {
            // Seen since the last write through the layer: the version backend knows it.
            return ResponseFuture::read(self.inner.call(request), context);
        }
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        // Only a layer that trusts its memory judges writes by the version backend's versions:
        // otherwise nothing to record.
        let record = self.state.config.judges_by_memory();
        let versions = self.state.versions.clone();
        ResponseFuture::boxed(move || learn(inner, versions, request, context, record))
    }
}

/// A read of a key whose version the layer does not know: under the key's write lock if it is
/// free, so no write can come between the answer and the version recorded from it (when
/// `record`) and the 304 headers remembered; otherwise served at once, remembering nothing.
async fn learn<S, V, ReqBody, ResBody>(
    mut inner: S,
    versions: V,
    request: Request<ReqBody>,
    context: ReadContext,
    record: bool,
) -> Result<Response<ConditionalBody<ResBody>>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    V: VersionStore,
    ResBody: Body<Data = Bytes> + Unpin,
    ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (key, head, mark) = (context.key().clone(), context.head, context.mark);
    // A 404 says the resource is missing only when it answers for the resource itself: not
    // for a variant the query selects, nor (under the default key, the path) for one user, to
    // whom an app may deny a resource that exists.
    let for_everyone = context.remember_private
        || !CREDENTIALS
            .iter()
            .any(|name| context.request_headers().contains_key(name));
    let says_absence = context.query.is_empty() && for_everyone;
    // Reads never wait: the first read of a key takes its lock if it is free and learns the
    // version; reads meanwhile, and reads while a write holds the lock, are served and learn
    // nothing. A backend that is down costs the read nothing either.
    let guard = versions.try_lock(&key).await.ok().flatten();
    let mut context = context;
    context.may_remember = guard.is_some() && !context.head;
    let cache = context.cache.clone();
    poll_fn(|cx| inner.poll_ready(cx)).await?;
    let response = ResponseFuture::read(inner.call(request), context).await?;
    let Some(guard) = guard.filter(|_| !head && record) else {
        return Ok(response);
    };
    match response.status() {
        StatusCode::OK | StatusCode::NOT_MODIFIED => {
            if let Some(validators) = plain_validators(mark.as_ref(), response.headers())
                && versions.set(&guard, validators.clone()).await.is_ok()
                && let Some(resource) = cache.resource(&key)
            {
                resource.stamp(validators);
            }
        }
        // Known missing: `If-None-Match: *` may create it, until someone writes it.
        StatusCode::NOT_FOUND | StatusCode::GONE
            if says_absence && !response.headers().contains_key(header::VARY) =>
        {
            let _ = versions.set(&guard, absent()).await;
        }
        _ => {}
    }
    Ok(response)
}

/// The validators of an answer the layer presented to a request with `mark`: its version,
/// without the mark.
fn plain_validators(mark: Option<&Mark>, headers: &HeaderMap) -> Option<Validators> {
    let validators = validators_of(headers)?;
    let (Some(mark), Some(etag)) = (mark, headers.get(header::ETAG)) else {
        return Some(validators);
    };
    let etag = EntityTag::from_header(&mark.strip(etag)).ok()?;
    Some(Validators::new(Some(etag), validators.last_modified))
}

/// The fields of a read's request that the layer acts on, found in one pass over its names
/// (a lookup each would hash a dozen names on every request).
#[derive(Debug, Default, Clone, Copy)]
struct Asks {
    if_none_match: bool,
    /// `If-Match` or `If-Unmodified-Since`, which come before `If-None-Match`.
    if_match_or_unmodified: bool,
    if_modified_since: bool,
    range: bool,
    credentials: bool,
}

impl Asks {
    fn of(headers: &HeaderMap) -> Self {
        let mut asks = Self::default();
        for name in headers.keys() {
            if name == header::IF_NONE_MATCH {
                asks.if_none_match = true;
            } else if name == header::IF_MATCH || name == header::IF_UNMODIFIED_SINCE {
                asks.if_match_or_unmodified = true;
            } else if name == header::IF_MODIFIED_SINCE {
                asks.if_modified_since = true;
            } else if name == header::RANGE {
                asks.range = true;
            } else if CREDENTIALS.contains(name) {
                asks.credentials = true;
            }
        }
        asks
    }

    /// Whether a read carries a precondition (for GET and HEAD, all of them count).
    fn conditional(self) -> bool {
        self.if_none_match || self.if_match_or_unmodified || self.if_modified_since
    }
}

/// The request headers a read needs after the response: the preconditions, `Range`, the
/// credentials, and the headers named in `vary` (all headers when `vary` is not known); `None`
/// for the usual request, which has none of them.
fn kept_headers(
    headers: &HeaderMap,
    asks: Asks,
    vary: Option<&[header::HeaderName]>,
) -> Option<Box<HeaderMap>> {
    let Some(vary) = vary else {
        return Some(Box::new(headers.clone()));
    };
    // The usual request: nothing to keep, and nothing to look up.
    if !asks.conditional() && vary.is_empty() && !asks.range && !asks.credentials {
        return None;
    }
    let mut kept = HeaderMap::new();
    let ranges = [header::IF_RANGE, header::RANGE];
    for name in CONDITIONS
        .iter()
        .chain(&ranges)
        .chain(vary)
        .chain(&CREDENTIALS)
    {
        // A name listed twice (`Vary: Authorization` is a credential too) is copied once, so
        // the kept values select the same variant as the request's own.
        if kept.contains_key(name) {
            continue;
        }
        for value in headers.get_all(name) {
            kept.append(name.clone(), value.clone());
        }
    }
    Some(Box::new(kept))
}
