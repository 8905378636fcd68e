//! What a successful operation answers ([`Done`]) and the HTTP answer it becomes.

use http::StatusCode;
use ifmatch_table::{DateTime, EntityKey};
use serde_json::{Value as Json, json};

use crate::document;
use crate::failure::{Answer, Failure, bad_request};

/// What an operation answers: what it did, or why it did not.
pub(crate) type Answered = Result<Done, Failure>;

/// What a successful operation answers: its status, its body (JSON, written once), and the
/// version it wrote or read (for the `etag` and session headers).
pub struct Done {
    pub(crate) status: StatusCode,
    pub(crate) body: Option<Vec<u8>>,
    pub(crate) at: Option<DateTime>,
    /// An `etag` of another kind than a version's (the change feed's position).
    pub(crate) etag: Option<String>,
    pub(crate) count: Option<usize>,
    pub(crate) continuation: Option<String>,
    /// A script's `console.log`, when the request asked for it.
    pub(crate) log: Option<String>,
}

impl Done {
    /// `body` written as JSON: a [`Json`] value, or a type that serializes as the answer's
    /// shape (no map of values built to be written once).
    pub(crate) fn of(
        status: StatusCode,
        body: impl serde::Serialize,
        at: Option<DateTime>,
    ) -> Self {
        Self {
            status,
            body: Some(serde_json::to_vec(&body).expect("an answer serializes")),
            at,
            etag: None,
            count: None,
            continuation: None,
            log: None,
        }
    }

    /// A 200 of `body`, a resource as it stood at `at`.
    pub(crate) fn ok(body: impl serde::Serialize, at: DateTime) -> Self {
        Self::of(StatusCode::OK, body, Some(at))
    }

    /// A feed: `items` under `kind` (`Documents`, `Offers`, ...) with their `_rid` and
    /// `_count`, and the count in `x-ms-item-count`.
    pub(crate) fn feed(rid: &str, kind: &str, items: Vec<Json>, at: Option<DateTime>) -> Self {
        let count = items.len();
        let mut done = Self::of(
            StatusCode::OK,
            json!({ "_rid": rid, kind: items, "_count": count }),
            at,
        );
        done.count = Some(count);
        done
    }

    pub(crate) fn empty(status: StatusCode, at: Option<DateTime>) -> Self {
        Self {
            status,
            body: None,
            at,
            etag: None,
            count: None,
            continuation: None,
            log: None,
        }
    }
}

/// The answer a front gives for `done`, without the service's own headers.
pub(crate) fn answer_of(done: Done) -> Answer {
    let has_body = done.body.is_some();
    let mut answer = http::Response::new(bytes::Bytes::from(done.body.unwrap_or_default()));
    *answer.status_mut() = done.status;
    let headers = answer.headers_mut();
    if has_body {
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
    }
    let etag = done.etag.or_else(|| done.at.map(document::etag));
    if let Some(etag) = etag
        && let Ok(value) = http::HeaderValue::from_str(&etag)
    {
        headers.insert(http::header::ETAG, value);
    }
    if let Some(count) = done.count {
        headers.insert("x-ms-item-count", count.into());
    }
    if let Some(log) = &done.log {
        let encoded =
            percent_encoding::utf8_percent_encode(log, percent_encoding::NON_ALPHANUMERIC);
        if let Ok(value) = http::HeaderValue::from_str(&encoded.to_string()) {
            headers.insert("x-ms-documentdb-script-log-results", value);
        }
    }
    if let Some(next) = &done.continuation
        && let Ok(value) = http::HeaderValue::from_str(next)
    {
        headers.insert("x-ms-continuation", value);
    }
    answer
}

/// A continuation token: the key of the first resource not yet sent (base64 of its JSON, so
/// any id fits in a header).
pub(super) fn continuation_token(partition: &str, id: &str) -> String {
    use base64::Engine;
    let json = json!([partition, id]).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// The key a continuation token says to go on from.
pub(super) fn continuation_key(token: &str) -> Result<EntityKey, Failure> {
    use base64::Engine;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim())
        .unwrap_or_default();
    match serde_json::from_slice::<Json>(&json) {
        Ok(Json::Array(parts)) => match parts.as_slice() {
            [Json::String(p), Json::String(r)] => Ok((p.clone(), r.clone())),
            _ => Err(bad_request(
                "The continuation token is not one this server gave.",
            )),
        },
        _ => Err(bad_request(
            "The continuation token is not one this server gave.",
        )),
    }
}
