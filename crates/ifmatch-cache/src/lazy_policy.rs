//! A stored response's [`CachePolicy`], made by the crate the first time it is needed; and the
//! crate's judgement of the usual response, reached without it.
//!
//! Making the crate's policy (its copies of both heads, its maps of both `Cache-Control`s,
//! hashed with SipHash) and asking it whether to store and for how long was about 7,000 of
//! the 74,000 instructions of a stored miss (callgrind), and a response asked for once never
//! needs the policy again. So a response of the usual shape (below) is judged here, by the
//! crate's own rules for that shape, and its policy is made of the same heads, as of the same
//! time, when a hit, a revalidation or the disk tier first asks for it. A response of any other
//! shape is judged by the crate at once. `the_usual_shape_is_judged_as_the_crate_judges_it`
//! puts both side by side over 36,890 heads.
//!
//! The usual shape: a GET or HEAD whose request has no `Cache-Control` and no `Authorization`;
//! a status the crate stores; a `Cache-Control` of `max-age` or `s-maxage` (whole seconds,
//! unquoted) with nothing but `public`, `must-revalidate`, `immutable`, `no-transform`,
//! `stale-while-revalidate` and `stale-if-error` beside them, none twice; no `Set-Cookie`, no
//! `Vary: *`. Such a response is storable, and fresh for its `s-maxage` (a shared cache's),
//! else its `max-age`, less its `Age`: `Expires`, `Date` and `Last-Modified` do not count.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use http::header::{self, HeaderMap};
use http::{Method, Request, Response};
use http_cache_semantics::{CacheOptions, CachePolicy};

use super::policy::CRATE_STORES;

/// The policy of a stored response: the crate's, made when first asked for.
pub(crate) type Policy = LazyLock<CachePolicy, Box<dyn FnOnce() -> CachePolicy + Send>>;

/// `policy`, made already.
pub(crate) fn made(policy: CachePolicy) -> Policy {
    LazyLock::new(Box::new(move || policy))
}

/// The policy the crate makes of `shown`, received at `at` for `asked`, when first asked for.
pub(crate) fn later(asked: Request<()>, shown: Response<()>, at: SystemTime) -> Policy {
    LazyLock::new(Box::new(move || {
        CachePolicy::new_options(&asked, &shown, at, CacheOptions::default())
    }))
}

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

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use http_cache_semantics::BeforeRequest;

    use super::super::policy;
    use super::*;

    const CACHE_CONTROLS: &[&str] = &[
        "",
        "max-age=60",
        "s-maxage=30, max-age=60",
        "max-age=60, s-maxage=30",
        "public, max-age=60",
        "public",
        "max-age=60, must-revalidate",
        "max-age=60, immutable, no-transform",
        "immutable",
        "max-age=60, stale-while-revalidate=30, stale-if-error=300",
        "max-age=60, max-age=60",
        "max-age=60, max-age=70",
        "max-age=60, public, public",
        "Max-Age=60",
        "max-age=\"60\"",
        "max-age=-1",
        "max-age=",
        "max-age=6 0",
        "max-age=99999999999999999999999",
        " max-age = 60 ",
        "max-age=60,,",
        "max-age=0",
        "s-maxage=0, max-age=600",
        "no-store, max-age=60",
        "private, max-age=60",
        "no-cache, max-age=60",
        "proxy-revalidate, max-age=60",
        "must-understand, no-store, max-age=60",
        "max-age=60, x-extension=\"a, b\"",
        "max-age=60, public=1",
        "stale-while-revalidate=30",
    ];

    /// Fields of a response beside `Cache-Control`, `now` being the time it is received.
    fn others(now: SystemTime) -> Vec<Vec<(&'static str, String)>> {
        let date = |offset: i64| {
            let at = if offset < 0 {
                now - Duration::from_secs(offset.unsigned_abs())
            } else {
                now + Duration::from_secs(offset as u64)
            };
            httpdate::fmt_http_date(at)
        };
        vec![
            vec![],
            vec![("age", "100".into())],
            vec![("age", "7200".into())],
            vec![("age", "abc".into())],
            vec![("age", "10, 20".into())],
            vec![("set-cookie", "a=b".into())],
            vec![("vary", "*".into())],
            vec![("vary", "accept, *".into())],
            vec![("vary", "accept-encoding".into())],
            vec![("expires", date(-60))],
            vec![("expires", date(7200))],
            vec![("expires", "0".into())],
            vec![("date", date(-30)), ("expires", date(600))],
            vec![("date", date(0)), ("last-modified", date(-86_400))],
            vec![("last-modified", date(-86_400))],
            vec![("pragma", "no-cache".into())],
            vec![("etag", "\"v\"".into())],
        ]
    }

    #[test]
    fn the_usual_shape_is_judged_as_the_crate_judges_it() {
        let now = SystemTime::now();
        let requests: &[(Method, &[(&str, &str)])] = &[
            (Method::GET, &[]),
            (Method::GET, &[("accept-encoding", "gzip")]),
            (Method::HEAD, &[]),
            (Method::POST, &[]),
            (Method::GET, &[("cache-control", "no-store")]),
            (Method::GET, &[("cache-control", "max-age=0")]),
            (Method::GET, &[("authorization", "Basic YTpi")]),
        ];
        let statuses = [200, 203, 204, 206, 301, 302, 404, 418, 500, 599];
        let (mut usual, mut judged) = (0, 0);
        for (method, fields) in requests {
            let mut asked = policy::tests::asked(fields);
            *asked.method_mut() = method.clone();
            for status in statuses {
                for cache_control in CACHE_CONTROLS {
                    for others in others(now) {
                        let mut response = Response::new(());
                        *response.status_mut() = StatusCode::from_u16(status).unwrap();
                        let headers = response.headers_mut();
                        if !cache_control.is_empty() {
                            headers.insert(header::CACHE_CONTROL, cache_control.parse().unwrap());
                        }
                        for (name, value) in &others {
                            headers.append(*name, value.parse().unwrap());
                        }
                        let case =
                            format!("{method} {fields:?} {status} {cache_control:?} {others:?}");
                        // The crate, as `policy::of` shows it the heads.
                        let (kept, shown) = policy::shown(&asked, &response);
                        let theirs =
                            CachePolicy::new_options(&kept, &shown, now, CacheOptions::default());
                        if let Some(lifetime) = usual_lifetime(&kept, &shown) {
                            usual += 1;
                            assert!(theirs.is_storable(), "{case}");
                            assert_eq!(lifetime, theirs.time_to_live(now), "{case}");
                        }
                        // What the store is told, either way, is the crate's.
                        let ours = policy::of(&asked, &response, now);
                        assert_eq!(ours.storable, theirs.is_storable(), "{case}");
                        let fresh = theirs.time_to_live(now);
                        for at in [now, now + fresh, now + fresh + Duration::from_secs(1)] {
                            assert_eq!(ours.stale.fresh_at(at), !theirs.is_stale(at), "{case}");
                        }
                        // The policy made later is the one made at once.
                        for later in [0, 30, 59, 61, 7201] {
                            let at = now + Duration::from_secs(later);
                            assert_eq!(ours.policy.time_to_live(at), theirs.time_to_live(at));
                            let (a, b) = (
                                ours.policy.before_request(&asked, at),
                                theirs.before_request(&asked, at),
                            );
                            match (a, b) {
                                (BeforeRequest::Fresh(a), BeforeRequest::Fresh(b)) => {
                                    assert_eq!(
                                        (a.status, a.headers),
                                        (b.status, b.headers),
                                        "{case}"
                                    );
                                }
                                (
                                    BeforeRequest::Stale {
                                        request: a,
                                        matches: x,
                                    },
                                    BeforeRequest::Stale {
                                        request: b,
                                        matches: y,
                                    },
                                ) => {
                                    assert_eq!((a.headers, x), (b.headers, y), "{case}");
                                }
                                _ => panic!("{case}: fresh for one, stale for the other"),
                            }
                        }
                        judged += 1;
                    }
                }
            }
        }
        // The shapes the fast way takes are many, and the bench's is among them.
        assert!(usual > 300, "{usual} of {judged}");
        let response = Response::builder()
            .header("cache-control", "max-age=3600")
            .header("etag", "\"key\"")
            .header("content-length", "4096")
            .header("date", httpdate::fmt_http_date(now))
            .body(())
            .unwrap();
        let (kept, shown) = policy::shown(&policy::tests::asked(&[("host", "h")]), &response);
        assert_eq!(
            usual_lifetime(&kept, &shown),
            Some(Duration::from_secs(3600))
        );
    }
}
