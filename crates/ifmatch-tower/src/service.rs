//! The service: reads answered or tagged, writes checked and serialized.

use std::future::{Future, poll_fn};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use ifmatch_core::EntityTag;
use ifmatch_core::date::parse_http_date;
use ifmatch_core::not_modified_headers;
use ifmatch_core::precondition::http::{Target, evaluate};
use ifmatch_core::precondition::{CONDITIONS, Outcome, Validators, is_conditional};
use tower_service::Service;

use crate::body::ConditionalBody;
use crate::cache::{CREDENTIALS, ReadCache, Remembered, Resource};
use crate::encoding::{Mark, present};
use crate::future::{ReadContext, ResponseFuture};
use crate::layer::Config;
use crate::source::{current_request, validators_of_answer};
use crate::store::VersionStore;

/// The service of [`ConditionalLayer`](crate::ConditionalLayer).
///
/// Cloning it (axum clones a route's service for every request) costs the inner service's
/// clone and one reference count: everything else is shared behind one `Arc`.
#[derive(Debug, Clone)]
pub struct Conditional<S, V> {
    inner: S,
    shared: Arc<Shared<V>>,
}

#[derive(Debug)]
struct Shared<V> {
    versions: V,
    cache: ReadCache,
    config: Arc<Config>,
    /// Whether this service's inner service has answered a GET: only then may a write probe it
    /// with one. (axum's `Router::layer` wraps each method's handler on its own; a GET sent to
    /// the service wrapping a PUT handler would run the PUT handler.)
    serves_get: AtomicBool,
}

impl<S, V> Conditional<S, V> {
    pub(crate) fn new(inner: S, versions: V, cache: ReadCache, config: Arc<Config>) -> Self {
        let shared = Shared {
            serves_get: AtomicBool::new(false),
            versions,
            cache,
            config,
        };
        Self {
            inner,
            shared: Arc::new(shared),
        }
    }
}

impl<S, V, ReqBody, ResBody> Service<Request<ReqBody>> for Conditional<S, V>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    V: VersionStore + Clone,
    ReqBody: Default + Send + 'static,
    ResBody: Body<Data = Bytes> + Unpin + Send + 'static,
    ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<ConditionalBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        let skipped = (self.shared.config.skip.as_ref())
            .is_some_and(|skip| skip(request.uri(), request.headers()));
        let key = (!skipped)
            .then(|| (self.shared.config.key)(request.uri(), request.headers()))
            .flatten();
        let Some(key) = key else {
            return ResponseFuture::passthrough(self.inner.call(request));
        };
        let mark = Mark::of(request.headers());
        if let Some(mark) = &mark {
            mark.unmark(request.headers_mut());
        }
        match *request.method() {
            Method::GET | Method::HEAD => self.read(request, key, mark),
            Method::PUT | Method::POST | Method::PATCH | Method::DELETE => self.write(request, key),
            _ => ResponseFuture::passthrough(self.inner.call(request)),
        }
    }
}

impl<S, V> Conditional<S, V> {
    fn read<ReqBody, ResBody>(
        &mut self,
        mut request: Request<ReqBody>,
        key: String,
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
        if !self.shared.serves_get.load(Ordering::Relaxed) {
            self.shared.serves_get.store(true, Ordering::Relaxed);
        }
        let headers = request.headers();
        let resource = self.shared.cache.resource(&key);
        // The short-circuit: If-None-Match alone decides (If-Match and If-Unmodified-Since come
        // first in RFC 9110 13.2.2, and only the inner service knows about those).
        let decided_by_inm = headers.contains_key(header::IF_NONE_MATCH)
            && !headers.contains_key(header::IF_MATCH)
            && !headers.contains_key(header::IF_UNMODIFIED_SINCE);
        let query = request.uri().query().unwrap_or("");
        if decided_by_inm
            && let Some(remembered) = resource.as_ref().and_then(|r| r.get(query, headers))
        {
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
        let conditional = is_conditional(request.method(), headers);
        let context = ReadContext {
            conditional,
            mark,
            key,
            query: request.uri().query().unwrap_or("").to_owned(),
            method: request.method().clone(),
            request_headers: kept_headers(
                headers,
                conditional,
                resource.as_deref().map(Resource::vary),
            ),
            resource,
            head,
            cache: self.shared.cache.clone(),
            hash_limit: self.shared.config.hash_limit,
            remember_private: self.shared.config.custom_key,
            // A HEAD may reach a handler of its own, whose answer is not the GET's: what the
            // cache remembers comes from GETs.
            may_remember: !head,
        };
        // HEAD gets the ETag of GET: ask for what GET would send, and send no body.
        if head {
            *request.method_mut() = Method::GET;
        }
        if context.resource.is_some() {
            // Seen since the last write through the layer: the version backend knows it.
            return ResponseFuture::read(self.inner.call(request), context);
        }
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        ResponseFuture::boxed(Box::pin(learn(
            inner,
            self.shared.versions.clone(),
            request,
            context,
        )))
    }

    fn write<ReqBody, ResBody>(
        &mut self,
        request: Request<ReqBody>,
        key: String,
    ) -> ResponseFuture<S::Future, ResBody, S::Error>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
        S::Future: Send,
        S::Error: Send,
        V: VersionStore + Clone,
        ReqBody: Default + Send + 'static,
        ResBody: Body<Data = Bytes> + Unpin + Send + 'static,
        ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        // The ready service goes into the future; this one keeps a fresh clone
        // (tower's clone-and-swap: `poll_ready` was called on `self.inner`, not the clone).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let (versions, cache, config) = (
            self.shared.versions.clone(),
            self.shared.cache.clone(),
            self.shared.config.clone(),
        );
        // Boxed on purpose: a write awaits the backend's lock and version, perhaps a probe of the
        // inner service, and the write itself; it already costs a lock and a round trip.
        let serves_get = self.shared.serves_get.load(Ordering::Relaxed);
        ResponseFuture::boxed(Box::pin(write(
            inner, versions, cache, config, serves_get, request, key,
        )))
    }
}

/// A write: under the key's lock, check the preconditions against the current version, run the
/// inner service only if they hold, and record what the write made current.
async fn write<S, V, ReqBody, ResBody>(
    mut inner: S,
    versions: V,
    cache: ReadCache,
    config: Arc<Config>,
    serves_get: bool,
    mut request: Request<ReqBody>,
    key: String,
) -> Result<Response<ConditionalBody<ResBody>>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    V: VersionStore,
    ReqBody: Default,
    ResBody: Body<Data = Bytes> + Unpin,
    ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conditional = is_conditional(request.method(), request.headers());
    if config.require_precondition && !conditional {
        return Ok(refusal(Refusal::Required));
    }
    let guard = match versions.lock(&key).await {
        Ok(guard) => guard,
        Err(error) => {
            tracing::error!(%key, %error, "the version backend could not lock a key");
            return Ok(refusal(Refusal::Unavailable));
        }
    };
    if conditional {
        let current = match &config.source {
            // The application's source is authoritative: asked under the lock, every time;
            // its `None` means the resource does not exist.
            Some(source) => {
                let (parts, body) = request.into_parts();
                let current = source(&parts).await;
                request = Request::from_parts(parts, body);
                match current {
                    Ok(current) => current,
                    Err(error) => {
                        tracing::error!(%key, %error, "the version source failed");
                        return Ok(refusal(Refusal::Unavailable));
                    }
                }
            }
            None => match versions.get(&key).await {
                // Per-variant tags (`Vary`: per user, per encoding): the tag of the variant this
                // request selects, while nobody has written since this instance learned them;
                // otherwise the key's one version.
                Ok(Some(known)) => match cache.resource(&key).and_then(|r| {
                    let query = request.uri().query().unwrap_or("");
                    r.current_for(query, request.headers(), &known)
                }) {
                    None => Some(known),
                    Some(Some(etag)) => Some(Validators::new(Some(etag), known.last_modified)),
                    Some(None) => return Ok(refusal(Refusal::Unknown)),
                },
                // The version cannot be known: fail closed. The client re-reads, which teaches
                // the layer the version, and retries.
                Ok(None) if !serves_get => return Ok(refusal(Refusal::Unknown)),
                Ok(None) => match probe(
                    &mut inner,
                    request.uri().clone(),
                    request.headers().clone(),
                    config.hash_limit,
                )
                .await?
                {
                    Probe::Known(current) => current,
                    Probe::Unknown => {
                        tracing::warn!(%key, "the inner service did not tell the current version");
                        return Ok(refusal(Refusal::Unavailable));
                    }
                },
                Err(error) => {
                    tracing::error!(%key, %error, "the version backend could not read a version");
                    return Ok(refusal(Refusal::Unavailable));
                }
            },
        };
        let target = Target::of(request.method(), current.as_ref());
        if evaluate(request.method(), request.headers(), target) == Outcome::PreconditionFailed {
            return Ok(refusal(Refusal::Failed));
        }
    }
    if let (Some(name), Some(token)) = (&config.fencing_header, versions.fencing_token(&guard)) {
        request
            .headers_mut()
            .insert(name.clone(), HeaderValue::from(token));
    }
    let (uri, headers) = (request.uri().clone(), request.headers().clone());
    poll_fn(|cx| inner.poll_ready(cx)).await?;
    let mut response = inner.call(request).await?;
    cache.invalidate(&key);
    // What else the write changed: forgotten too, in the cache and the version backend.
    for other in related_keys(&config, &uri, &headers, response.headers_mut()) {
        if other == key {
            continue;
        }
        cache.invalidate(&other);
        if let Err(error) = versions.forget(&other).await {
            tracing::error!(key = %other, %error, "the version backend could not forget a key");
        }
    }
    // A write that reports its new ETag makes it current; any other outcome leaves the version
    // unknown, to be learned again before the next conditional write. A lock that expired
    // meanwhile refuses the record: forgotten too.
    let learned = match validators_of(response.headers()) {
        Some(validators) if response.status().is_success() => {
            versions.set(&guard, validators).await
        }
        _ => versions.forget(&key).await,
    };
    if let Err(error) = learned {
        // The write happened; the backend could not record it. Nothing stale may stay behind.
        tracing::warn!(%key, %error, "the version backend could not record a write");
        if let Err(error) = versions.forget(&key).await {
            tracing::error!(%key, %error, "the version backend could not forget a key");
        }
    }
    Ok(response.map(ConditionalBody::new))
}

/// The response field in which a handler names the other resources its write changed: URI
/// references (paths, or absolute URIs of the same host), comma-separated. The layer forgets
/// them and removes the field.
pub const INVALIDATES: header::HeaderName = header::HeaderName::from_static("ifmatch-invalidates");

/// The keys of the other resources a write changed: after a 2xx, those its `Location` and
/// `Content-Location` name (RFC 9111 4.4) and those the handler lists in
/// [`INVALIDATES`] (which is removed from the response). References to another host are
/// ignored.
fn related_keys(
    config: &Config,
    uri: &http::Uri,
    request: &HeaderMap,
    response: &mut HeaderMap,
) -> Vec<String> {
    let declared: Vec<HeaderValue> = response.get_all(INVALIDATES).iter().cloned().collect();
    response.remove(INVALIDATES);
    let host = request
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or(uri.authority().map(|a| a.as_str()));
    let mut references: Vec<String> = Vec::new();
    for name in [header::LOCATION, header::CONTENT_LOCATION] {
        references.extend(
            response
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_owned),
        );
    }
    for value in &declared {
        if let Ok(text) = value.to_str() {
            references.extend(text.split(',').map(|r| r.trim().to_owned()));
        }
    }
    references
        .iter()
        .filter_map(|reference| {
            let target: http::Uri = reference.parse().ok()?;
            let same_host = match target.authority() {
                None => true,
                Some(authority) => host.is_some_and(|h| h.eq_ignore_ascii_case(authority.as_str())),
            };
            if !same_host || !target.path().starts_with('/') {
                return None;
            }
            let path: http::Uri = target.path_and_query()?.as_str().parse().ok()?;
            (config.key)(&path, request)
        })
        .collect()
}

/// A read of a key whose version the layer does not know: under the key's write lock if it is
/// free, so no write can come between the answer and the version recorded from it; otherwise
/// served at once, remembering nothing.
async fn learn<S, V, ReqBody, ResBody>(
    mut inner: S,
    versions: V,
    request: Request<ReqBody>,
    context: ReadContext,
) -> Result<Response<ConditionalBody<ResBody>>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    V: VersionStore,
    ResBody: Body<Data = Bytes> + Unpin,
    ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (key, head, mark) = (context.key.clone(), context.head, context.mark);
    // Reads never wait: the first read of a key takes its lock if it is free and learns the
    // version; reads meanwhile, and reads while a write holds the lock, are served and learn
    // nothing. A backend that is down costs the read nothing either.
    let guard = versions.try_lock(&key).await.ok().flatten();
    let mut context = context;
    context.may_remember = guard.is_some() && !context.head;
    let cache = context.cache.clone();
    poll_fn(|cx| inner.poll_ready(cx)).await?;
    let response = ResponseFuture::read(inner.call(request), context).await?;
    let full = matches!(response.status(), StatusCode::OK | StatusCode::NOT_MODIFIED);
    if let Some(guard) = &guard
        && !head
        && full
        && let Some(validators) = plain_validators(mark.as_ref(), response.headers())
        && versions.set(guard, validators.clone()).await.is_ok()
        && let Some(resource) = cache.resource(&key)
    {
        resource.stamp(validators);
    }
    Ok(response)
}

enum Probe {
    /// The current validators (`None`: the resource does not exist).
    Known(Option<Validators>),
    /// The inner service did not say.
    Unknown,
}

/// Asks the inner service for the current representation of the write's target, as a GET with
/// the write's headers (less conditions and body metadata), and tags it as a GET would be.
async fn probe<S, ReqBody, ResBody>(
    inner: &mut S,
    uri: http::Uri,
    headers: HeaderMap,
    limit: usize,
) -> Result<Probe, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ReqBody: Default,
    ResBody: Body<Data = Bytes>,
    ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let get = current_request(&uri, &headers);
    poll_fn(|cx| inner.poll_ready(cx)).await?;
    let response = inner.call(get).await?;
    Ok(match validators_of_answer(response, limit).await {
        Ok(current) => Probe::Known(current),
        Err(_) => Probe::Unknown,
    })
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

/// The validators a response carries.
pub(crate) fn validators_of(headers: &HeaderMap) -> Option<Validators> {
    let etag = EntityTag::from_header(headers.get(header::ETAG)?).ok()?;
    let last_modified = headers.get(header::LAST_MODIFIED).and_then(parse_http_date);
    Some(Validators::new(Some(etag), last_modified))
}

/// Why the layer answered a request itself, with an error.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    /// 412: the conditions do not hold for the current version.
    Failed,
    /// 412: the current version is not known, so no condition can be trusted to hold.
    Unknown,
    /// 428: a write without a condition, where conditions are required.
    Required,
    /// 503: the version backend (or the inner service, asked for the version) failed.
    Unavailable,
}

/// The layer's own error answer: the status, and one line that says what failed and what to
/// do. It names no validator: a client that may not read the resource learns nothing of it.
fn refusal<B>(why: Refusal) -> Response<ConditionalBody<B>> {
    let (status, text) = match why {
        Refusal::Failed => (
            StatusCode::PRECONDITION_FAILED,
            "412 Precondition Failed: the resource's current version does not satisfy the \
             request's If-Match, If-Unmodified-Since or If-None-Match; read it again and retry\n",
        ),
        Refusal::Unknown => (
            StatusCode::PRECONDITION_FAILED,
            "412 Precondition Failed: the resource's current version is not known here, so the \
             conditions cannot be checked; read it (GET) and retry\n",
        ),
        Refusal::Required => (
            StatusCode::PRECONDITION_REQUIRED,
            "428 Precondition Required: send If-Match with the ETag you read, or \
             If-None-Match: * to create\n",
        ),
        Refusal::Unavailable => (
            StatusCode::SERVICE_UNAVAILABLE,
            "503 Service Unavailable: the current version cannot be checked now; retry later\n",
        ),
    };
    let mut response = Response::new(ConditionalBody::full(
        Bytes::from_static(text.as_bytes()),
        None,
    ));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    response
}

/// Finishes a read once the response's validators are known: remember them, then answer 304,
/// 412 or the response itself.
pub(crate) fn finish_read<B: Body<Data = Bytes>>(
    context: &ReadContext,
    mut parts: http::response::Parts,
    body: ConditionalBody<B>,
    hashed: Option<EntityTag>,
) -> Response<ConditionalBody<B>>
where
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let tagged = parts.status == StatusCode::OK;
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
    let known = |etag: &EntityTag| {
        context
            .resource
            .as_ref()
            .and_then(|r| r.get(&context.query, &context.request_headers))
            .is_some_and(|r| r.etag == *etag)
    };
    if let Some(validators) = &validators
        && context.may_remember
        && let Some(etag) = &validators.etag
        && !known(etag)
        && rememberable(&parts.headers, context.remember_private)
    {
        let mut headers = parts.headers.clone();
        not_modified_headers(&mut headers);
        headers.remove(header::DATE);
        let remembered = Remembered {
            etag: etag.clone(),
            headers,
        };
        context.cache.remember(
            &context.key,
            context.resource.as_deref(),
            &context.query,
            &context.request_headers,
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
                let remembered = context
                    .resource
                    .as_ref()?
                    .get(&context.query, &context.request_headers)?;
                Some(Validators::etag(remembered.etag.clone()))
            })
        })
        .flatten();
    // RFC 9110 13.2.1: only a 2xx is subject to the preconditions.
    let outcome = match validators.as_ref().or(whole.as_ref()) {
        _ if !context.conditional => Outcome::Proceed,
        None if partial => Outcome::Proceed,
        Some(current) => evaluate(
            &context.method,
            &context.request_headers,
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
                &context.method,
                &context.request_headers,
                Target::Current(&untagged),
            )
        }
        None => Outcome::Proceed,
    };
    let mut response = match outcome {
        Outcome::NotModified => {
            not_modified_headers(&mut parts.headers);
            if let Some(etag) = whole.as_ref().and_then(|w| w.etag.as_ref())
                && !parts.headers.contains_key(header::ETAG)
            {
                parts.headers.insert(header::ETAG, etag.to_header_value());
            }
            parts.status = StatusCode::NOT_MODIFIED;
            Response::from_parts(parts, ConditionalBody::empty())
        }
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

/// The request headers a read needs after the response: the preconditions, `Range`, the
/// credentials, and the headers named in `vary` (all headers when `vary` is not known).
fn kept_headers(
    headers: &HeaderMap,
    conditional: bool,
    vary: Option<&[header::HeaderName]>,
) -> HeaderMap {
    let Some(vary) = vary else {
        return headers.clone();
    };
    let mut kept = HeaderMap::new();
    // The usual request: nothing to keep, and nothing to look up.
    if !conditional
        && vary.is_empty()
        && !headers.contains_key(header::RANGE)
        && !CREDENTIALS.iter().any(|name| headers.contains_key(name))
    {
        return kept;
    }
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
    kept
}

/// Whether a 200 may be remembered for other requests: never with `no-store`, and with
/// `private` or `Set-Cookie` only when the key function separates users.
fn rememberable(headers: &HeaderMap, remember_private: bool) -> bool {
    let directives = headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|d| {
            d.trim()
                .split('=')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase()
        });
    let mut private = headers.contains_key(header::SET_COOKIE);
    for directive in directives {
        match directive.as_str() {
            "no-store" => return false,
            "private" => private = true,
            _ => {}
        }
    }
    !private || remember_private
}

/// Sets the strong ETag of a body the layer hashed.
pub(crate) fn tag(
    cache: &ReadCache,
    key: &str,
    parts: &mut http::response::Parts,
    bytes: &Bytes,
) -> EntityTag {
    let (etag, value) = cache.tag_of(key, bytes);
    parts.headers.insert(header::ETAG, value);
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    etag
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
pub(crate) fn hashing<B: Body>(response: &Response<B>, limit: usize) -> Hashing {
    // Server-sent events are never held back, even for a moment.
    let streams = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
    if response.status() != StatusCode::OK
        || response.headers().contains_key(header::ETAG)
        || streams
    {
        return Hashing::No;
    }
    match response.body().size_hint().exact() {
        Some(len) if len <= limit as u64 => Hashing::Whole,
        Some(_) => Hashing::No,
        None => Hashing::IfReady,
    }
}

#[allow(dead_code)]
fn _assert_send<F: Future + Send>(_: F) {}
