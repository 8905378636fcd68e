//! Asking the inner service whether a stale stored response is still current: a 304 that
//! selects it refreshes its head; another answer is stored in its place (if it may be); a
//! failure is answered with the stale response where [`stale`](crate::stale) allows. In the
//! foreground for the request that found it stale, or in the background while the stale
//! response is served (`stale-while-revalidate`).

use std::collections::HashSet;
use std::future::poll_fn;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Either};
use http_cache_semantics::AfterResponse;
use ifmatch_core::{EntityTag, EntityTagList};
use tower_service::Service;

use crate::answer::hit::from_store;
use crate::answer::miss::keep;
use crate::policy;
use crate::rules::freshness;
use crate::rules::lazy_policy;
use crate::stats::Counters;
use crate::stored::cached_body::CachedBody;
use crate::stored::entry::Stored;
use crate::tiers::collapse::MissTurn;
use crate::tiers::memory::Store;
use ifmatch_core::BoxError;

/// `revalidation` with each tag of its `If-None-Match` once: the crate adds the stored
/// response's tag to the client's own, which is most often the same one (a browser
/// revalidating the copy it was given from this store), and the origin was asked
/// `If-None-Match: "a", "a"`.
/// A client's list may be long: each tag is looked up once, not against every other.
pub(crate) fn tags_once(mut revalidation: http::request::Parts) -> http::request::Parts {
    let lines = revalidation.headers.get_all(header::IF_NONE_MATCH);
    let Ok(EntityTagList::Tags(tags)) = EntityTagList::parse(lines.iter()) else {
        return revalidation;
    };
    let mut seen = HashSet::with_capacity(tags.len());
    let once: Vec<EntityTag> = (tags.iter())
        .filter(|tag| seen.insert(*tag))
        .cloned()
        .collect();
    if once.len() < tags.len() {
        let value = EntityTagList::Tags(once).to_header_value();
        revalidation.headers.insert(header::IF_NONE_MATCH, value);
    }
    revalidation
}

/// What a revalidation came to.
pub(crate) enum Revalidated<B> {
    /// The answer: the refreshed response, a new one, or the stale one in place of a failure.
    Answer(Response<CachedBody<B>>),
    /// A 304 that selects nothing stored (no validator of it, or another's): ask again, as
    /// the client asked.
    AskAgain,
}

/// Revalidates `stored` (stored under `key`, found stale for `asked`) with `revalidation`.
pub(crate) async fn revalidate<S, ReqBody, ResBody>(
    inner: &mut S,
    store: &Arc<Store>,
    key: &str,
    asked: &Request<()>,
    stored: &Arc<Stored>,
    revalidation: Request<ReqBody>,
) -> Result<Revalidated<ResBody>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let counters = &store.counters;
    let stale_in_place = |status: &str, unreachable: bool| {
        Counters::add(&counters.revalidation_failed, 1);
        let now = SystemTime::now();
        if !stored.stale.on_error(asked, now, unreachable) {
            return None;
        }
        let head = freshness::head(&stored.policy, asked, now)?;
        let status = format!("fwd=stale; fwd-status={status}; detail=stale-if-error");
        Counters::add(&counters.stale_served, 1);
        Some(Revalidated::Answer(from_store(
            store, head, stored, asked, &status,
        )))
    };
    let answer = match poll_fn(|cx| inner.poll_ready(cx)).await {
        Ok(()) => inner.call(revalidation).await,
        Err(error) => Err(error),
    };
    let response = match answer {
        Ok(response) => response,
        Err(error) => return stale_in_place("error", true).ok_or(error),
    };
    if let Some(unreachable) = freshness::failure(response.status())
        && let Some(stale) = stale_in_place(response.status().as_str(), unreachable)
    {
        return Ok(stale);
    }
    let now = SystemTime::now();
    let judged = policy::judged(&response, stored, asked);
    let after = match &judged {
        // The refreshed policy keeps the request's fields: copies (see `owned`).
        Some(judged) => {
            (stored.policy).after_response(&ifmatch_core::owned::head(asked), judged, now)
        }
        None => stored.policy.after_response(asked, &response, now),
    };
    Ok(match after {
        AfterResponse::NotModified(policy, head) => {
            let date = response
                .headers()
                .get(header::DATE)
                .map(ifmatch_core::owned::value);
            let refreshed = Arc::new(Stored {
                stale: stored.stale.refreshed(&policy, now),
                policy: lazy_policy::made(policy),
                body: stored.body.clone(),
                date: date.or_else(|| stored.date.clone()),
                status: stored.status,
                piece: stored.piece,
                variant: stored.variant.clone(),
                keyed: stored.keyed.clone(),
                validators: stored.validators.clone(),
                own_fields: stored.own_fields.clone(),
                fields: stored.fields,
                served: std::sync::OnceLock::new(),
            });
            store.put(key, refreshed.clone(), Some(stored));
            Counters::add(&counters.revalidated_not_modified, 1);
            let status = "fwd=stale; fwd-status=304";
            Revalidated::Answer(from_store(store, head, &refreshed, asked, status))
        }
        AfterResponse::Modified(..) if response.status() == StatusCode::NOT_MODIFIED => {
            Revalidated::AskAgain
        }
        AfterResponse::Modified(..) => {
            Counters::add(&counters.revalidated_modified, 1);
            Revalidated::Answer(keep(store, key, asked, response, now, Some(stored)))
        }
    })
}

/// Revalidates `stored` in a task of its own, if no other request of `gate` is asking the
/// inner service already, and there is a runtime to run it: what it stores, later requests
/// are served.
pub(crate) fn in_background<S, ReqBody, ResBody>(
    mut inner: S,
    store: Arc<Store>,
    (key, gate): (String, &str),
    asked: Request<()>,
    stored: Arc<Stored>,
    revalidation: Request<ReqBody>,
) where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    ReqBody: Send + 'static,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let MissTurn::Lead(lead) = store.gates.turn(gate) else {
        return;
    };
    runtime.spawn(async move {
        let _lead = lead;
        let done = revalidate(&mut inner, &store, &key, &asked, &stored, revalidation).await;
        // A new body being stored is read to its end by itself once its reader is dropped;
        // one of no declared length is stored only once read to its end, here, for as long
        // as it may still be stored (an endless one is let go past the largest object).
        if let Ok(Revalidated::Answer(response)) = done
            && let Either::Right(body) = response.into_body()
        {
            let mut body = std::pin::pin!(body);
            while body.is_keeping()
                && let Some(Ok(_)) = body.frame().await
            {}
        }
    });
}
