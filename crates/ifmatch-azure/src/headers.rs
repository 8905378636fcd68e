//! The headers and extensions every Azure dialect answers with.

use http::{HeaderMap, HeaderName, HeaderValue, header};
use ifmatch_core::date::date_header_value;

use crate::Env;

/// `x-ms-request-id`
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-ms-request-id");

/// `x-ms-error-code`
pub const ERROR_CODE: HeaderName = HeaderName::from_static("x-ms-error-code");

/// `x-ms-version`: the dialect's version a request speaks, and its answer.
pub const MS_VERSION: HeaderName = HeaderName::from_static("x-ms-version");

/// `x-ms-date`, which every dialect's signatures take in place of `Date`.
pub const X_MS_DATE: HeaderName = HeaderName::from_static("x-ms-date");

/// `Content-MD5`, which `http` names no constant for.
pub const CONTENT_MD5: HeaderName = HeaderName::from_static("content-md5");

/// Azure's name of the operation a request asked (`GetBlob`, `InsertEntity`), for metrics and
/// logs: what a dialect answers beside its answer ([`Named`]), when the request named one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationName(pub &'static str);

/// An answer, and the name of the operation it answers when the request named one: beside the
/// answer, not in its extensions (a map made for every answer; see [`crate::Client`]).
pub type Named<A> = (A, Option<OperationName>);

/// A new `x-ms-request-id`: `env`'s random UUID.
pub fn request_id(env: &impl Env) -> HeaderValue {
    let mut id = [0; uuid::fmt::Hyphenated::LENGTH];
    let id = env.random_uuid().hyphenated().encode_lower(&mut id);
    HeaderValue::from_str(id).expect("a UUID is ASCII")
}

/// The `x-ms-version` an answer carries: the version the request names (`asked`) when it has
/// a version's shape (`YYYY-MM-DD`), else the dialect's `default`.
pub fn answered_version(asked: Option<&HeaderValue>, default: HeaderValue) -> HeaderValue {
    match asked {
        Some(version) if version.len() == 10 => version.clone(),
        _ => default,
    }
}

/// Stamps `answer` with what every answer of the services that read bodies whole carries: a
/// request id (`env`'s), the dialect's version (the one `asked` names, if it names one of
/// version's shape, else `default_version`, made when compiled) and the date (written by
/// [`date_header_value`], which keeps the last second's).
pub fn stamp(
    answer: &mut HeaderMap,
    asked: &HeaderMap,
    env: &impl Env,
    default_version: HeaderValue,
) {
    answer.insert(REQUEST_ID, request_id(env));
    let version = answered_version(asked.get(MS_VERSION), default_version);
    answer.insert(MS_VERSION, version);
    answer.insert(header::DATE, date_header_value(env.now().into()));
}
