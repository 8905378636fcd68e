//! The write path: under the key's lock, the conditions checked against the current version,
//! the inner service run only if they hold, and what the write changed recorded or forgotten.

use std::future::poll_fn;
use std::marker::PhantomData;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use ifmatch_core::precondition::rfc9110::{Target, evaluate};
use ifmatch_core::precondition::{Outcome, Validators, is_conditional};
use ifmatch_core::{EntityTag, EntityTagList, header_list};
use tower_service::Service;

use crate::body::ConditionalBody;
use crate::cache::ReadCache;
use crate::config::Config;
use crate::encoding::coding_of;
use crate::refusal::{Refusal, refusal};
use crate::resource::CREDENTIALS;
use crate::source::{Deferred, current_request, validators_of_asked};
use crate::store::{VersionStore, is_absent};
use crate::validators::validators_of;

/// A write: under the key's lock, check the preconditions against the current version, run the
/// inner service only if they hold, and record what the write made current.
pub(crate) async fn write<
    S,
    V: VersionStore,
    ReqBody: Default,
    ResBody: Body<Data = Bytes> + Unpin,
>(
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
    ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conditional = is_conditional(request.method(), request.headers());
    // A POST creates what the server names, or acts: it overwrites no representation the
    // client could have read, so 428 mode lets it through.
    if config.require_precondition && !conditional && request.method() != Method::POST {
        return Ok(refusal(Refusal::Required));
    }
    let guard = match versions.lock(&key).await {
        Ok(guard) => guard,
        Err(error) => {
            tracing::error!(%key, %error, "the version backend could not lock a key");
            return Ok(refusal(Refusal::Unavailable));
        }
    };
    let judged = Judge {
        inner: &mut inner,
        versions: &versions,
        cache: &cache,
        config: &config,
        serves_get,
        request: &mut request,
        key: &key,
        answers: PhantomData,
    };
    if conditional && let Some(answer) = judged.judge().await? {
        return Ok(answer);
    }
    if let (Some(name), Some(token)) = (&config.fencing_header, versions.fencing_token(&guard)) {
        request
            .headers_mut()
            .insert(name.clone(), HeaderValue::from(token));
    }
    let sent = Sent::of(&config, &request);
    poll_fn(|cx| inner.poll_ready(cx)).await?;
    let response = inner.call(request).await?;
    let state = (&versions, &cache, &*config);
    Ok(record(state, &guard, &key, sent, response).await)
}

/// The answer of a write, the layer's or the inner service's.
type Answered<B> = Response<ConditionalBody<B>>;

/// What a write is judged with: the inner service, the layer's versions, memory and
/// configuration, the request and its key.
struct Judge<'a, S, V, ReqBody, ResBody> {
    inner: &'a mut S,
    versions: &'a V,
    cache: &'a ReadCache,
    config: &'a Config,
    serves_get: bool,
    request: &'a mut Request<ReqBody>,
    key: &'a str,
    answers: PhantomData<fn() -> ResBody>,
}

impl<S, V, ReqBody, ResBody> Judge<'_, S, V, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    V: VersionStore,
    ReqBody: Default,
    ResBody: Body<Data = Bytes> + Unpin,
    ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// The write's conditions against its target's current version: `Some` answer when the
    /// write is not to run (412, or a version that cannot be known), `None` when it runs (the
    /// conditions hold, or the source left them to the inner service).
    async fn judge(mut self) -> Result<Option<Answered<ResBody>>, S::Error> {
        let current = match self.current_version().await? {
            Ok(current) => current,
            Err(answer) => return Ok(Some(answer)),
        };
        let Self {
            inner,
            cache,
            config,
            request,
            key,
            ..
        } = self;
        // Unknown here when the source deferred to the inner service, which has the
        // conditions still.
        if let Some(current) = current {
            let target = Target::of(request.method(), current.as_ref());
            let mut outcome = evaluate(request.method(), request.headers(), target);
            // A tag of another representation of the resource (the gzip bytes, another
            // language) is a tag of the version it was read from: asked for that
            // representation again, the application says whether it still is.
            if outcome == Outcome::PreconditionFailed
                && config.asks_service()
                && let Some(other) = Self::another_representation(
                    inner,
                    (cache, key),
                    request.uri(),
                    request.headers(),
                    (
                        config.hash_limit,
                        current.as_ref().and_then(|c| c.etag.as_ref()),
                    ),
                )
                .await?
            {
                let target = Target::of(request.method(), Some(&other));
                outcome = evaluate(request.method(), request.headers(), target);
            }
            if outcome == Outcome::PreconditionFailed {
                // Asked, the application said the client's tag is not current. When the
                // current tag is not one the layer remembers, its memory is stale too (a change
                // behind the layer): it goes, and no 304 answers the old tag again. When it is,
                // the memory agrees with the application and stays: a stream of writes with
                // made-up tags cannot make every read run the handler.
                let agrees = (current.as_ref().and_then(|c| c.etag.as_ref()))
                    .is_some_and(|etag| cache.resource(key).is_some_and(|r| r.remembers(etag)));
                if !config.judges_by_memory() && !agrees {
                    cache.invalidate(key);
                }
                return Ok(Some(refusal(Refusal::Failed)));
            }
        }
        Ok(None)
    }

    /// The current version of the write's target, asked of the application's source, of the
    /// version backend or of the inner service: `Some(None)` when it has no representation, `None`
    /// when the source left the conditions to the inner service; `Err` with the answer when the
    /// version cannot be known (the write does not run).
    async fn current_version(&mut self) -> Result<Known<ResBody>, S::Error> {
        let (versions, cache, config) = (self.versions, self.cache, self.config);
        let (serves_get, key) = (self.serves_get, self.key);
        let (inner, request) = (&mut *self.inner, &mut *self.request);
        let current = match &config.source {
            // The application's source is authoritative: asked under the lock, every time;
            // its `None` means the resource does not exist.
            Some(source) => {
                let (parts, body) = std::mem::take(request).into_parts();
                let current = source(&parts).await;
                *request = Request::from_parts(parts, body);
                match current {
                    Ok(current) => Some(current),
                    Err(error) if error.is::<Deferred>() => {
                        tracing::debug!(%key, "the inner service judges the conditions");
                        None
                    }
                    Err(error) => {
                        tracing::error!(%key, %error, "the version source failed");
                        return Ok(Err(refusal(Refusal::Unavailable)));
                    }
                }
            }
            // Asked of the application itself: the resource as it is now.
            None if config.asks_service() => {
                if !serves_get {
                    tracing::error!(%key, "{}", crate::refusal::BLIND.trim_end());
                    return Ok(Err(refusal(Refusal::Blind)));
                }
                let asked = (request.uri(), request.headers());
                match Self::ask(inner, cache, asked, config.hash_limit).await? {
                    Ok(current) => Some(current),
                    Err(answer) => return Ok(Err(answer)),
                }
            }
            None => Some(match versions.get(key).await {
                // A GET found it missing, and nobody has written since.
                Ok(Some(known)) if is_absent(&known) => None,
                // Per-variant tags (`Vary`: per user, per encoding): the tag of the variant this
                // request selects, while nobody has written since this instance learned them;
                // otherwise the key's one version.
                Ok(Some(known)) => match cache.resource(key).and_then(|r| {
                    let query = request.uri().query().unwrap_or("");
                    r.current_for(query, request.headers(), &known)
                }) {
                    None => Some(known),
                    Some(Some(etag)) => Some(Validators::new(Some(etag), known.last_modified)),
                    Some(None) => return Ok(Err(refusal(Refusal::Unknown))),
                },
                // The version cannot be known: fail closed. The client re-reads, which teaches
                // the layer the version, and retries.
                Ok(None) if !serves_get => return Ok(Err(refusal(Refusal::Unknown))),
                Ok(None) => {
                    let asked = (request.uri(), request.headers());
                    match Self::ask(inner, cache, asked, config.hash_limit).await? {
                        Ok(current) => current,
                        Err(answer) => return Ok(Err(answer)),
                    }
                }
                Err(error) => {
                    tracing::error!(%key, %error, "the version backend could not read a version");
                    return Ok(Err(refusal(Refusal::Unavailable)));
                }
            }),
        };
        Ok(Ok(current))
    }

    /// The current validators of the representation that the write's `If-Match` names, when that
    /// is another variant of the resource than the one the write itself selects (`rendered`: its
    /// tag, made already): asked of the inner service with that variant's selecting fields
    /// (never its credentials: the writer's own go), or its coding; never the same again.
    async fn another_representation(
        inner: &mut S,
        (cache, key): (&ReadCache, &str),
        uri: &http::Uri,
        headers: &HeaderMap,
        (limit, rendered): (usize, Option<&EntityTag>),
    ) -> Result<Option<Validators>, S::Error> {
        let lines = headers.get_all(header::IF_MATCH);
        let Ok(EntityTagList::Tags(tags)) =
            EntityTagList::parse(lines.iter().map(|v| v.as_bytes()))
        else {
            return Ok(None);
        };
        // A variant this instance served: asked for with the fields that selected it.
        let query = uri.query().unwrap_or("");
        let wanted = |etag: &EntityTag| tags.iter().any(|t| t.strong_eq(etag));
        if let Some(resource) = cache.resource(key)
            && let Some(selecting) = resource.selecting(query, wanted)
        {
            let mut headers = headers.clone();
            for name in resource.vary().iter().filter(|n| !CREDENTIALS.contains(n)) {
                headers.remove(name);
            }
            for (name, value) in &selecting {
                headers.append(name.clone(), value.clone());
            }
            return Ok(Self::ask(inner, cache, (uri, &headers), limit)
                .await?
                .ok()
                .flatten());
        }
        // Any instance's: a tag the layer made names its content coding, asked for by name (at most
        // two codings, whatever the list).
        // Not the coding already rendered: asked again, it would answer the same.
        let rendered = rendered.and_then(coding_of);
        let mut codings: Vec<&str> = (tags.iter().filter_map(coding_of))
            .filter(|coding| Some(*coding) != rendered)
            .collect();
        codings.dedup();
        for coding in codings.into_iter().take(2) {
            let Ok(coding) = HeaderValue::from_str(coding) else {
                continue;
            };
            let mut headers = headers.clone();
            headers.insert(header::ACCEPT_ENCODING, coding);
            if let Ok(Some(current)) = Self::ask(inner, cache, (uri, &headers), limit).await?
                && current.etag.as_ref().is_some_and(wanted)
            {
                return Ok(Some(current));
            }
        }
        Ok(None)
    }

    /// Asks the inner service for the current representation of the write's target, as a GET with
    /// the write's headers (less conditions and body metadata), and tags it as a GET would be. The
    /// application's refusal of the requester (401, 403) is the write's answer: a 412 would tell a
    /// stranger the resource exists and has moved on; an answer that tells no version is a 503.
    async fn ask(
        inner: &mut S,
        cache: &ReadCache,
        (uri, headers): (&http::Uri, &HeaderMap),
        limit: usize,
    ) -> Result<Learned<ResBody>, S::Error> {
        let mut get = current_request(uri, headers);
        // A shared cache inside the layer must not answer it from its store: the resource as it
        // is now is the question.
        get.extensions_mut()
            .insert(ifmatch_core::cache_markers::BypassSharedCache);
        poll_fn(|cx| inner.poll_ready(cx)).await?;
        let response = inner.call(get).await?;
        match response.status() {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                return Ok(Err(response.map(ConditionalBody::new)));
            }
            // A target that has no GET (an action such as `POST /docs/a/append`) has no current
            // representation: `If-Match` fails on it, `If-None-Match: *` holds (RFC 9110 13.1).
            StatusCode::METHOD_NOT_ALLOWED => return Ok(Ok(None)),
            _ => {}
        }
        Ok(
            match validators_of_asked(response, limit, Some(cache)).await {
                Ok(current) => Ok(current),
                Err(_) => {
                    tracing::warn!(
                        path = uri.path(),
                        "the inner service did not tell the current version"
                    );
                    Err(refusal(Refusal::Unavailable))
                }
            },
        )
    }
}

/// What [`Judge::current_version`] learned.
type Known<B> = Result<Option<Option<Validators>>, Answered<B>>;

/// What the record of a write needs of its request once the inner service has it: its
/// target, its host, the keys the request itself names as changed with it, and its headers when
/// the application's key function reads them.
struct Sent {
    uri: http::Uri,
    host: Option<HeaderValue>,
    headers: Option<HeaderMap>,
    related: Vec<String>,
}

impl Sent {
    fn of<B>(config: &Config, request: &Request<B>) -> Self {
        let (uri, headers) = (request.uri(), request.headers());
        // The application's relations, and the target's ancestors (unless told otherwise),
        // each under its key.
        let mut related: Vec<String> = (config.related.as_ref())
            .map(|related| related(uri, headers))
            .unwrap_or_default();
        if config.forget_ancestors {
            let keys = ancestors(uri.path()).into_iter();
            related.extend(keys.filter_map(|path| config.key_of_path(path, headers)));
        }
        Self {
            uri: uri.clone(),
            host: headers.get(header::HOST).cloned(),
            headers: config.custom_key.then(|| headers.clone()),
            related,
        }
    }
}

/// What a write that ran changed: its target and the other resources it names forgotten by
/// the cache, and, in a layer that trusts its memory, the version it made current recorded
/// (or, when it told none, forgotten).
async fn record<V: VersionStore, B>(
    (versions, cache, config): (&V, &ReadCache, &Config),
    guard: &V::Guard,
    key: &str,
    sent: Sent,
    mut response: Response<B>,
) -> Answered<B> {
    cache.invalidate(key);
    // What else the write changed: forgotten too, in the cache and the version backend.
    let memory = config.judges_by_memory();
    for other in related_keys(config, sent, response.headers_mut()) {
        if other == *key {
            continue;
        }
        cache.invalidate(&other);
        if memory && let Err(error) = versions.forget(&other).await {
            tracing::error!(key = %other, %error, "the version backend could not forget a key");
        }
    }
    // Only a layer that trusts its memory reads the version backend's versions.
    if !memory {
        return response.map(ConditionalBody::new);
    }
    // A write that reports its new ETag makes it current; any other outcome leaves the version
    // unknown, to be learned again before the next conditional write. A lock that expired
    // meanwhile refuses the record: forgotten too.
    let learned = match validators_of(response.headers()) {
        Some(validators) if response.status().is_success() => versions.set(guard, validators).await,
        _ => versions.forget(key).await,
    };
    if let Err(error) = learned {
        // The write happened; the backend could not record it. Nothing stale may stay behind.
        tracing::warn!(%key, %error, "the version backend could not record a write");
        if let Err(error) = versions.forget(key).await {
            tracing::error!(%key, %error, "the version backend could not forget a key");
        }
    }
    response.map(ConditionalBody::new)
}

/// The response field in which a handler names the other resources its write changed: URI
/// references (paths, or absolute URIs of the same host), comma-separated. The layer forgets
/// them and removes the field.
pub const INVALIDATES: header::HeaderName = header::HeaderName::from_static("ifmatch-invalidates");

/// The keys of the other resources a write changed: those its request names (see [`Sent`]),
/// those its `Location` and `Content-Location` name (RFC 9111 4.4) and those the handler
/// lists in [`INVALIDATES`] (which is removed from the response). References to another host
/// are ignored.
fn related_keys(config: &Config, sent: Sent, response: &mut HeaderMap) -> Vec<String> {
    let mut keys = sent.related;
    // `Location` and `Content-Location` hold one URI reference each (which may contain commas);
    // the handler's own header is a list.
    let named = [header::LOCATION, header::CONTENT_LOCATION]
        .iter()
        .any(|name| response.contains_key(name))
        || response.contains_key(INVALIDATES);
    if !named {
        return keys;
    }
    let mut references: Vec<String> = [header::LOCATION, header::CONTENT_LOCATION]
        .iter()
        .flat_map(|name| response.get_all(name))
        .filter_map(|v| v.to_str().ok())
        .map(str::to_owned)
        .collect();
    references.extend(header_list(response, INVALIDATES).map(str::to_owned));
    response.remove(INVALIDATES);
    let host = (sent.host.as_ref())
        .and_then(|h| h.to_str().ok())
        .or(sent.uri.authority().map(|a| a.as_str()));
    let none = HeaderMap::new();
    let headers = sent.headers.as_ref().unwrap_or(&none);
    keys.extend(references.iter().filter_map(|reference| {
        let target: http::Uri = reference.parse().ok()?;
        let same_host = match target.authority() {
            None => true,
            Some(authority) => host.is_some_and(|h| h.eq_ignore_ascii_case(authority.as_str())),
        };
        if !same_host || !target.path().starts_with('/') {
            return None;
        }
        config.key_of_path(target.path_and_query()?.as_str().to_owned(), headers)
    }));
    keys
}

/// The paths above `path`, nearest first, each with and without its trailing slash (a listing
/// may be served at either): `/docs/a/append` gives `/docs/a`, `/docs/a/`, `/docs`, `/docs/`,
/// `/`.
fn ancestors(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = path.trim_end_matches('/');
    while let Some(at) = rest.rfind('/') {
        rest = &rest[..at];
        if rest.is_empty() {
            out.push("/".to_owned());
            break;
        }
        out.push(rest.to_owned());
        out.push(format!("{rest}/"));
    }
    out
}

/// What asking the inner service for the current version gives: the validators (`None`: the
/// resource has no representation), or the answer the write gets instead.
type Learned<B> = Result<Option<Validators>, Answered<B>>;

#[cfg(test)]
mod tests {
    use super::ancestors;

    #[test]
    fn the_ancestors_of_a_path() {
        assert_eq!(
            ancestors("/docs/a/append"),
            ["/docs/a", "/docs/a/", "/docs", "/docs/", "/"]
        );
        assert_eq!(ancestors("/docs/"), ["/"]);
        assert_eq!(ancestors("/"), Vec::<String>::new());
        assert_eq!(ancestors("/docs"), ["/"]);
    }
}
