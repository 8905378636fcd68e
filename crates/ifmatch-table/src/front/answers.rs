//! The shapes of the front's answers: JSON, empty, and as the client's `Prefer` asks.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use serde_json::Value as Json;

use super::asked::{Answer, Asked};
use crate::odata::Metadata;
use crate::prefer::{PREFERENCE_APPLIED, Preference};

pub(crate) fn json_answer(status: u16, body: &Json) -> Answer {
    let bytes = Bytes::from(serde_json::to_vec(body).unwrap_or_default());
    let mut answer = Response::new(bytes);
    *answer.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let json = "application/json;odata=minimalmetadata;streaming=true;charset=utf-8";
    (answer.headers_mut()).insert(header::CONTENT_TYPE, HeaderValue::from_static(json));
    answer
}

pub(crate) fn empty(status: StatusCode) -> Answer {
    let mut answer = Response::new(Bytes::new());
    *answer.status_mut() = status;
    answer
}

/// The answer to a write that could return what it wrote (an insert, Create Table): 201 with
/// it, made by `with_content`, or 204, as the client's `Prefer` asks (with
/// `Preference-Applied`) or, without one, with it.
pub(crate) fn as_preferred(asked: &Asked<'_>, with_content: impl FnOnce() -> Answer) -> Answer {
    let preference = Preference::of(asked.headers);
    let mut answer = if Preference::returns_content(preference, true) {
        with_content()
    } else {
        empty(StatusCode::NO_CONTENT)
    };
    if let Some(preference) = preference {
        (answer.headers_mut()).insert(PREFERENCE_APPLIED, preference.applied());
    }
    answer
}

pub(crate) fn metadata(asked: &Asked<'_>) -> Metadata {
    Metadata::of(
        asked
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok()),
    )
}

pub(crate) fn insert_header(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}
