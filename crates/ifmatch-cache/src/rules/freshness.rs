//! Freshness: how long a stored response is fresh (RFC 9111 4.2.1, for the usual shape of
//! response, which the crate's policy need not be made for: [`usual_lifetime`]), and serving it
//! past that lifetime (RFC 9111 4.2.4): while it is
//! revalidated in the background, within its `stale-while-revalidate` window (RFC 5861 3);
//! when the inner service fails, within its `stale-if-error` window (RFC 5861 4) or, with
//! none given, for up to a day while the inner service cannot be reached (it answered 502 or
//! 504, or failed). Never when the response forbids it (`must-revalidate`, `proxy-revalidate`,
//! `no-cache`, and `s-maxage`, which implies `proxy-revalidate` in a shared cache), nor when
//! the client asks for a fresh or validated answer (`no-cache`, `max-age`, `min-fresh`). A
//! client's `max-stale` never overrides the response's own word either.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_cache_semantics::{BeforeRequest, CachePolicy};

/// How stale a response may be served while the inner service cannot be reached, when the
/// response says nothing of it.
const UNREACHABLE: Duration = Duration::from_secs(24 * 3600);

/// What a stored response allows once stale.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Freshness {
    fresh_until: SystemTime,
    while_revalidate: Option<Duration>,
    if_error: Option<Duration>,
    forbidden: bool,
    /// Whether its last revalidation left it fresh for a while (yes until one is made): when
    /// not, the next is taken to leave it stale again too, so that every request asks the
    /// inner service.
    #[serde(default = "yes")]
    keeps_fresh: bool,
}

/// What an entry stored before [`Freshness::keeps_fresh`] was recorded is taken to do.
fn yes() -> bool {
    true
}

impl Freshness {
    /// The rules of a response with the fields `shown` (as its policy was shown them), stored
    /// at `now`, fresh for `lifetime` from then.
    pub(crate) fn new(shown: &HeaderMap, lifetime: Duration, now: SystemTime) -> Self {
        let mut rules = Self {
            fresh_until: now + lifetime,
            while_revalidate: None,
            if_error: None,
            forbidden: false,
            keeps_fresh: true,
        };
        for (name, value) in directives(shown) {
            let seconds = value.and_then(|v| v.parse().ok()).map(Duration::from_secs);
            match name.as_str() {
                "stale-while-revalidate" => rules.while_revalidate = seconds,
                "stale-if-error" => rules.if_error = seconds,
                "must-revalidate" | "proxy-revalidate" | "no-cache" | "s-maxage" => {
                    rules.forbidden = true;
                }
                _ => {}
            }
        }
        rules
    }

    /// Whether the response is still fresh at `now` (its policy's time to live, read once).
    pub(crate) fn fresh_at(&self, now: SystemTime) -> bool {
        self.fresh_until > now
    }

    /// The same rules for the response once the inner service said at `now` that it is still
    /// current, under its new `policy`.
    pub(crate) fn refreshed(&self, policy: &CachePolicy, now: SystemTime) -> Self {
        let lifetime = policy.time_to_live(now);
        Self {
            fresh_until: now + lifetime,
            keeps_fresh: !lifetime.is_zero(),
            ..self.clone()
        }
    }

    /// Whether a revalidation may leave it fresh, as far as the last one tells (none made
    /// yet: it may): what requests that find it stale wait for while another revalidates it.
    /// One its last revalidation left fresh for no time at all (the inner service's answer
    /// says `no-cache` or `max-age=0`, or gives it no lifetime) is asked of the inner service
    /// by every request at once.
    pub(crate) fn keeps_fresh(&self) -> bool {
        self.keeps_fresh
    }

    /// `asked`, without a `max-stale` this response does not let it serve it stale: it says
    /// `must-revalidate`, `proxy-revalidate`, `no-cache` or `s-maxage` (RFC 9111 5.2.2.2,
    /// 5.2.2.8, 5.2.2.4, 5.2.2.10). The policy's crate honours `max-stale` against all but
    /// `must-revalidate` (its issue 22), so the request it is shown says nothing of it.
    pub(crate) fn honoured<'a>(&self, asked: &'a Request<()>) -> Cow<'a, Request<()>> {
        if !self.forbidden || !directives(asked.headers()).any(|(name, _)| name == "max-stale") {
            return Cow::Borrowed(asked);
        }
        let kept: Vec<String> = ifmatch_core::header_list(asked.headers(), header::CACHE_CONTROL)
            .filter(|directive| {
                let name = directive.split_once('=').map_or(*directive, |(n, _)| n);
                !name.trim().eq_ignore_ascii_case("max-stale")
            })
            .map(str::to_owned)
            .collect();
        let mut headers = asked.headers().clone();
        headers.remove(header::CACHE_CONTROL);
        if let Ok(value) = HeaderValue::from_str(&kept.join(", "))
            && !kept.is_empty()
        {
            headers.insert(header::CACHE_CONTROL, value);
        }
        Cow::Owned(with_headers(asked, headers))
    }

    /// Whether it may ever be served stale (a window for it is given).
    pub(crate) fn lingers(&self) -> bool {
        !self.forbidden && (self.while_revalidate.is_some() || self.if_error.is_some())
    }

    /// How long it has been stale at `now`, if it is.
    fn stale_for(&self, now: SystemTime) -> Option<Duration> {
        now.duration_since(self.fresh_until)
            .ok()
            .filter(|d| !d.is_zero())
    }

    /// Whether it may be served to `asked` at `now` while it is revalidated.
    pub(crate) fn while_revalidating(&self, asked: &Request<()>, now: SystemTime) -> bool {
        let window = self.while_revalidate;
        self.allowed(asked) && (self.stale_for(now)).is_some_and(|s| window.is_some_and(|w| s <= w))
    }

    /// Whether it may be served to `asked` at `now` in place of a failure (`unreachable`: the
    /// inner service could not be reached).
    pub(crate) fn on_error(&self, asked: &Request<()>, now: SystemTime, unreachable: bool) -> bool {
        let window = self.if_error.or(unreachable.then_some(UNREACHABLE));
        self.allowed(asked) && (self.stale_for(now)).is_some_and(|s| window.is_some_and(|w| s <= w))
    }

    fn allowed(&self, asked: &Request<()>) -> bool {
        let pragma = (asked.headers().get_all(header::PRAGMA).iter()).any(|v| {
            v.to_str()
                .is_ok_and(|v| v.to_ascii_lowercase().contains("no-cache"))
        });
        let strict = directives(asked.headers())
            .any(|(name, _)| matches!(name.as_str(), "no-cache" | "max-age" | "min-fresh"));
        !self.forbidden && !pragma && !strict
    }
}

/// The `Cache-Control` directives of `headers`: names in lowercase, values unquoted.
fn directives(headers: &HeaderMap) -> impl Iterator<Item = (String, Option<&str>)> {
    ifmatch_core::header_list(headers, header::CACHE_CONTROL).map(|directive| {
        let (name, value) = match directive.split_once('=') {
            Some((name, value)) => (name, Some(value.trim().trim_matches('"'))),
            None => (directive, None),
        };
        (name.trim().to_ascii_lowercase(), value)
    })
}

/// Whether an answer of `status` is a failure a stale response may stand in for: `Some(true)`
/// when it says the inner service could not be reached.
pub(crate) fn failure(status: StatusCode) -> Option<bool> {
    match status {
        StatusCode::BAD_GATEWAY | StatusCode::GATEWAY_TIMEOUT => Some(true),
        StatusCode::INTERNAL_SERVER_ERROR | StatusCode::SERVICE_UNAVAILABLE => Some(false),
        _ => None,
    }
}

/// The head to serve `policy`'s response to `asked` with, stale (its fields, with `Age`).
pub(crate) fn head(
    policy: &CachePolicy,
    asked: &Request<()>,
    now: SystemTime,
) -> Option<http::response::Parts> {
    let mut headers = asked.headers().clone();
    headers.remove(header::PRAGMA);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-stale"));
    match policy.before_request(&with_headers(asked, headers), now) {
        BeforeRequest::Fresh(head) => Some(head),
        BeforeRequest::Stale { .. } => None,
    }
}

/// `asked` with `headers` in place of its own.
fn with_headers(asked: &Request<()>, headers: HeaderMap) -> Request<()> {
    let mut request = Request::new(());
    *request.method_mut() = asked.method().clone();
    *request.uri_mut() = asked.uri().clone();
    *request.version_mut() = asked.version();
    *request.headers_mut() = headers;
    request
}
/// The statuses the crate understands (stores when the rest allows).
pub(crate) const CRATE_STORES: &[u16] = &[
    200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 501,
];

/// How long `shown`, received for `asked` (both as the crate is shown them), is fresh from
/// the time it was received, if it has the usual shape (see the [module](self)): the crate's
/// `time_to_live` then, for a response its `is_storable` accepts. `None` for any other shape,
/// which the crate judges.
pub(crate) fn usual_lifetime(asked: &Request<()>, shown: &Response<()>) -> Option<Duration> {
    let request = asked.headers();
    let plain_request = matches!(*asked.method(), Method::GET | Method::HEAD)
        && !request.contains_key(header::CACHE_CONTROL)
        && !request.contains_key(header::AUTHORIZATION);
    let headers = shown.headers();
    if !plain_request
        || !CRATE_STORES.contains(&shown.status().as_u16())
        || headers.contains_key(header::SET_COOKIE)
        || (headers.get_all(header::VARY).iter()).any(|v| v.as_bytes().contains(&b'*'))
    {
        return None;
    }
    let (max_age, s_maxage) = lifetimes(headers)?;
    let lifetime = Duration::from_secs(s_maxage.or(max_age)?);
    // Its `Age` as the crate reads it (whole seconds, or none; see `policy::normalise`).
    let age = headers
        .get(header::AGE)
        .map_or(Some(0), |age| age.to_str().ok()?.parse::<u64>().ok())?;
    Some(lifetime.saturating_sub(Duration::from_secs(age)))
}

/// `max-age` and `s-maxage` of `Cache-Control` made only of the directives the usual shape
/// allows, each once.
fn lifetimes(headers: &HeaderMap) -> Option<(Option<u64>, Option<u64>)> {
    const FLAGS: [&str; 4] = ["public", "must-revalidate", "immutable", "no-transform"];
    const SECONDS: [&str; 4] = [
        "max-age",
        "s-maxage",
        "stale-while-revalidate",
        "stale-if-error",
    ];
    let mut seen = [false; FLAGS.len() + SECONDS.len()];
    let (mut max_age, mut s_maxage) = (None, None);
    for line in headers.get_all(header::CACHE_CONTROL) {
        for directive in line.to_str().ok()?.split(',') {
            let directive = directive.trim();
            if directive.is_empty() {
                continue;
            }
            let (name, value) = match directive.split_once('=') {
                Some((name, value)) => (name.trim(), Some(value.trim())),
                None => (directive, None),
            };
            let at = match value {
                None => FLAGS.iter().position(|flag| *flag == name)?,
                Some(value) => {
                    let at = SECONDS.iter().position(|known| *known == name)?;
                    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                        return None;
                    }
                    let seconds = value.parse::<u64>().ok()?;
                    match at {
                        0 => max_age = Some(seconds),
                        1 => s_maxage = Some(seconds),
                        _ => {}
                    }
                    FLAGS.len() + at
                }
            };
            if std::mem::replace(&mut seen[at], true) {
                return None;
            }
        }
    }
    Some((max_age, s_maxage))
}
