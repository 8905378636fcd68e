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
use std::time::SystemTime;

use http::{Request, Response};
use http_cache_semantics::{CacheOptions, CachePolicy};

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

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use http_cache_semantics::BeforeRequest;

    use super::*;
    use crate::policy;
    use crate::rules::freshness::usual_lifetime;
    use http::{Method, header};
    use std::time::Duration;

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
