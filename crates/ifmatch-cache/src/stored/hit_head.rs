//! The head a fresh stored response is served with, made by the policy once and reused.
//!
//! For each hit the crate checks the request against the stored one (target, `Host`, the
//! fields `Vary` names), reads the request's and the response's `Cache-Control` again from
//! maps it builds anew, and copies the stored fields field by field: a quarter of a hit's
//! work. Between two requests without directives of their own, the only answer of the crate
//! that changes is the response's age. So the first such hit's answer, the crate's own, is
//! kept with the stored response, with what made that request match; a later request that
//! matches it the same way, with no `Cache-Control` or `Pragma` of its own, is served the same
//! head with its new `Age`, as long as the crate's own rule holds: fresh while the age is below
//! the freshness lifetime the crate gave. Anything else (a request with directives, another
//! target or host or variant, a stale response, an age past a day, where the crate may add a
//! warning) asks the crate.

use std::time::{Duration, SystemTime};

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, StatusCode, Uri};
use http_cache_semantics::CachePolicy;

use crate::rules::key::varied_names;

/// Past this age the crate may add a `Warning` to a heuristically fresh response: asked.
const DAY: Duration = Duration::from_secs(24 * 3600);

/// The crate's answer to one fresh hit, and what the request that got it was.
#[derive(Debug)]
pub(crate) struct FreshHead {
    status: StatusCode,
    /// Its fields but `Age` and `Date`, which change with each answer.
    fields: HeaderMap,
    /// The freshness lifetime the crate gave: fresh while the age is below it.
    lifetime: Duration,
    target: Uri,
    host: Option<HeaderValue>,
    /// The fields the response's `Vary` names, with the request's values.
    varied: Vec<(HeaderName, Option<HeaderValue>)>,
}

impl FreshHead {
    /// What the crate's answer `head` to `asked` (a request with no directives of its own, the
    /// crate's `Fresh` at `now`) says of the next such request, if it can say anything, for
    /// a stored response of the variant `variant` (see `Stored::variant`).
    pub(crate) fn of(
        policy: &CachePolicy,
        variant: &str,
        asked: &Request<()>,
        head: &http::response::Parts,
        now: SystemTime,
    ) -> Option<Self> {
        if has_directives(asked) {
            return None;
        }
        let mut varied = Vec::new();
        for name in varied_names(variant) {
            let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
            let value = asked.headers().get(&name).cloned();
            varied.push((name, value));
        }
        let mut fields = head.headers.clone();
        fields.remove(header::AGE);
        fields.remove(header::DATE);
        Some(Self {
            status: head.status,
            fields,
            lifetime: policy.time_to_live(now) + policy.age(now),
            target: asked.uri().clone(),
            host: asked.headers().get(header::HOST).cloned(),
            varied,
        })
    }

    /// The head `asked` is served with at `now`, if it is the crate's answer to the request
    /// this was made of, with its new age.
    pub(crate) fn head(
        &self,
        policy: &CachePolicy,
        asked: &Request<()>,
        now: SystemTime,
    ) -> Option<http::response::Parts> {
        let headers = asked.headers();
        let matches = !has_directives(asked)
            && *asked.uri() == self.target
            && headers.get(header::HOST) == self.host.as_ref()
            && (self.varied.iter()).all(|(name, value)| headers.get(name) == value.as_ref());
        if !matches {
            return None;
        }
        let age = policy.age(now);
        if age >= self.lifetime || age > DAY {
            return None;
        }
        let (mut head, ()) = http::Response::new(()).into_parts();
        head.status = self.status;
        head.headers = self.fields.clone();
        head.headers
            .insert(header::AGE, HeaderValue::from(age.as_secs()));
        Some(head)
    }
}

/// Whether `asked` says anything of its own to the crate's freshness rules.
fn has_directives(asked: &Request<()>) -> bool {
    let headers = asked.headers();
    headers.contains_key(header::CACHE_CONTROL) || headers.contains_key(header::PRAGMA)
}

#[cfg(test)]
mod tests {
    use http::Response;
    use http_cache_semantics::BeforeRequest;

    use super::*;
    use crate::policy;
    use crate::policy::tests::asked;
    use crate::rules::key;

    /// The crate's head for `asked` at `now`, if fresh, without `Date` (which a hit replaces).
    fn crates(policy: &CachePolicy, asked: &Request<()>, now: SystemTime) -> Option<HeaderMap> {
        match policy.before_request(asked, now) {
            BeforeRequest::Fresh(mut head) => {
                head.headers.remove(header::DATE);
                Some(head.headers)
            }
            BeforeRequest::Stale { .. } => None,
        }
    }

    #[test]
    fn a_reused_head_is_the_crates_own_or_none() {
        // Two `Vary` lines: the crate's head keeps only the last, the crate checks both.
        let response = Response::builder()
            .header("cache-control", "max-age=600")
            .header("etag", "\"v1\"")
            .header("vary", "Accept-Language")
            .header("vary", "x-Mode")
            .header("age", "10")
            .header("connection", "x-hop")
            .header("x-hop", "gone")
            .header("link", "</a>; rel=a")
            .body(())
            .unwrap();
        let first = asked(&[("host", "h"), ("accept-language", "fr"), ("x-mode", "a")]);
        let stored_at = SystemTime::now();
        let policy = policy::of(&first, &response, stored_at).policy;
        let variant = key::variant(first.headers(), response.headers());
        let head = match policy.before_request(&first, stored_at) {
            BeforeRequest::Fresh(head) => head,
            BeforeRequest::Stale { .. } => panic!("a fresh response"),
        };
        let served = FreshHead::of(&policy, &variant, &first, &head, stored_at).unwrap();

        let later = [0, 1, 300, 589, 590, 591, 3600];
        let requests = [
            first.clone(),
            asked(&[
                ("host", "h"),
                ("accept-language", "fr"),
                ("x-mode", "a"),
                ("cookie", "c"),
            ]),
            asked(&[("host", "h"), ("accept-language", "fr"), ("x-mode", "b")]),
            asked(&[("host", "h"), ("accept-language", "de"), ("x-mode", "a")]),
            asked(&[
                ("host", "other"),
                ("accept-language", "fr"),
                ("x-mode", "a"),
            ]),
            asked(&[("accept-language", "fr"), ("x-mode", "a")]),
            asked(&[
                ("host", "h"),
                ("accept-language", "fr"),
                ("x-mode", "a"),
                ("cache-control", "max-age=5"),
            ]),
            asked(&[
                ("host", "h"),
                ("accept-language", "fr"),
                ("x-mode", "a"),
                ("pragma", "no-cache"),
            ]),
            Request::get("http://h/a?c")
                .header("host", "h")
                .body(())
                .unwrap(),
        ];
        let mut reused = 0;
        for seconds in later {
            let now = stored_at + Duration::from_secs(seconds);
            for request in &requests {
                let ours = served.head(&policy, request, now);
                let theirs = crates(&policy, request, now);
                // Never served where the crate would not serve, never another head.
                if let Some(ours) = ours {
                    assert_eq!(Some(ours.headers), theirs, "{request:?} after {seconds} s");
                    assert_eq!(ours.status, head.status);
                    reused += 1;
                }
            }
        }
        // The first two requests, while fresh: stored at an age of 10 s, asked after 0, 1,
        // 300 and 589 s of the 590 s left.
        assert_eq!(reused, 2 * 4);
        assert_eq!(
            served.head(&policy, &first, stored_at).unwrap().headers["age"],
            "10"
        );
        assert!(!served.fields.contains_key("x-hop"));

        // Made of a request with directives of its own, it is not made at all.
        let directed = &requests[6];
        assert!(FreshHead::of(&policy, &variant, directed, &head, stored_at).is_none());
    }
}
