//! Where a conditional write may learn the current version for certain: a source the
//! application supplies ([`ConditionalLayer::version_source`](crate::ConditionalLayer::version_source)),
//! and the parts of one that asks an origin with a GET, as the proxy's does: the request
//! ([`current_request`]) and the tag the layer gives its answer ([`validators_of_answer`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::{Response, StatusCode, header};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use ifmatch_core::date::parse_http_date;
use ifmatch_core::precondition::{CONDITIONS, Validators};
use ifmatch_core::strong_etag;

use crate::cache::ReadCache;
use crate::validators::validators_of;
use ifmatch_core::BoxError;

/// What a version source answers: the current validators, `None` when the resource does not
/// exist.
pub type Current = Result<Option<Validators>, BoxError>;

/// The application's version source, boxed once: a write already awaits a lock and a source.
pub(crate) type Source = Arc<
    dyn Fn(&http::request::Parts) -> Pin<Box<dyn Future<Output = Current> + Send>> + Send + Sync,
>;

/// Boxes `source` for the layer's configuration.
pub(crate) fn boxed<F, Fut>(source: F) -> Source
where
    F: Fn(&http::request::Parts) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Current> + Send + 'static,
{
    Arc::new(move |parts| Box::pin(source(parts)))
}

/// The answer to a GET said nothing certain about the current version: a status other than
/// 200, 404 or 410, or a body that failed or was larger than the hashing limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the answer does not tell the current version")]
pub struct Uncertain;

/// What a version source answers, as its error, when it cannot learn the current version but
/// the inner service judges the write's conditions itself: an origin that would not tell the
/// version to the write's credentials (a signature made for the write, a token that may write
/// and not read), and that evaluates `If-Match` and `If-None-Match` as storage does. The write
/// is passed on with its conditions, under the key's lock, for the inner service to judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the inner service judges the write's conditions")]
pub struct Deferred;

/// The validators the layer gives a GET's answer: its own `ETag` (with `Last-Modified`) when it
/// has one, otherwise the strong SHA-256 tag of its body, read up to `limit` bytes (with the
/// name of its content coding, if any, after the digest). `None` for
/// 404 and 410: the resource does not exist. What a version source that asks an origin with a
/// GET (a proxy) answers, so that its versions are the very tags the layer serves.
pub async fn validators_of_answer<B>(
    response: Response<B>,
    limit: usize,
) -> Result<Option<Validators>, Uncertain>
where
    B: Body<Data = bytes::Bytes>,
    B::Error: Into<BoxError>,
{
    validators_of_asked(response, limit, None).await
}

/// [`validators_of_answer`], with the tags of the bodies the layer's writes asked for lately
/// (`asked`: see [`ReadCache::tag_of`]) reused rather than hashed again.
pub(crate) async fn validators_of_asked<B>(
    response: Response<B>,
    limit: usize,
    asked: Option<&ReadCache>,
) -> Result<Option<Validators>, Uncertain>
where
    B: Body<Data = bytes::Bytes>,
    B::Error: Into<BoxError>,
{
    let status = response.status();
    if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
        return Ok(None);
    }
    if status != StatusCode::OK {
        return Err(Uncertain);
    }
    if let Some(validators) = validators_of(response.headers()) {
        return Ok(Some(validators));
    }
    let last_modified = response
        .headers()
        .get(header::LAST_MODIFIED)
        .and_then(parse_http_date);
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, limit)
        .collect()
        .await
        .map_err(|_| Uncertain)?
        .to_bytes();
    let coding = parts.headers.get(header::CONTENT_ENCODING);
    let etag = match asked.and_then(|asked| asked.tag_of(&body, coding)) {
        Some(etag) => etag,
        None => {
            let etag = crate::encoding::coded(strong_etag(&body), &parts.headers);
            if let Some(asked) = asked {
                asked.learn_tag(&body, coding, &etag);
            }
            etag
        }
    };
    Ok(Some(Validators::new(Some(etag), last_modified)))
}

/// The GET that asks for the current representation of a write's target: the write's URI and
/// headers (its credentials, its `Accept-*`), less its conditions, ranges and body metadata.
pub fn current_request<B: Default>(uri: &http::Uri, headers: &http::HeaderMap) -> http::Request<B> {
    const RANGES: [header::HeaderName; 2] = [header::IF_RANGE, header::RANGE];
    const BODY: [header::HeaderName; 5] = [
        header::CONTENT_LENGTH,
        header::CONTENT_TYPE,
        header::CONTENT_ENCODING,
        header::TRANSFER_ENCODING,
        header::EXPECT,
    ];
    let mut get = http::Request::new(B::default());
    *get.uri_mut() = uri.clone();
    // Copied field by field, less those: cheaper than a copy of the whole map and a removal
    // of each name.
    let fields = get.headers_mut();
    fields.reserve(headers.len());
    for (name, value) in headers {
        let mut dropped = CONDITIONS.iter().chain(&RANGES).chain(&BODY);
        if !dropped.any(|n| n == name) {
            fields.append(name.clone(), value.clone());
        }
    }
    get
}
