//! The answers' parts: status and headers, XML bodies, and the headers that describe a blob.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use http::{Response, StatusCode, header};
use ifmatch_core::date::date_header_value;

use super::headers::{CONTENT_CRC64, CONTENT_MD5};
use crate::body::ResponseBody;
use crate::checksums::Checksums;
use crate::metadata;
use crate::record::Record;

/// An answer of the front over objects whose reader is `R`.
pub(super) type Answer<R> = Response<ResponseBody<R>>;

pub(super) fn validator_headers(record: &Record) -> HeaderMap {
    // Room for every header a blob's answer carries: the map never grows on the way.
    let mut out = HeaderMap::with_capacity(24);
    out.insert(header::ETAG, record.etag.to_header_value());
    out.insert(
        header::LAST_MODIFIED,
        date_header_value(record.last_modified_date()),
    );
    if let Some(id) = record
        .version
        .as_deref()
        .and_then(|v| HeaderValue::try_from(v).ok())
    {
        out.insert(crate::version::VERSION_ID, id);
    }
    out
}

pub(super) fn answer<R>(status: StatusCode, headers: HeaderMap) -> Answer<R> {
    let mut response = Response::new(ResponseBody::empty());
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// A 200 with an XML body and `headers`.
pub(super) fn xml_answer<R>(mut headers: HeaderMap, xml: impl Into<Bytes>) -> Answer<R> {
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml"),
    );
    let mut response = answer(StatusCode::OK, headers);
    *response.body_mut() = ResponseBody::full(xml);
    response
}

/// The checksums an upload's answer carries: its `Content-MD5`, and its
/// `x-ms-content-crc64` when the client sent one.
pub(super) fn insert_checksums(checksums: &Checksums, out: &mut HeaderMap) {
    if let Ok(md5) = HeaderValue::try_from(checksums.md5.as_str()) {
        out.insert(CONTENT_MD5, md5);
    }
    if let Some(crc64) = checksums
        .crc64
        .as_deref()
        .and_then(|c| HeaderValue::try_from(c).ok())
    {
        out.insert(CONTENT_CRC64, crc64);
    }
}

/// The tag of the blob's bytes alone (`x-ifmatch-content-sha256`).
pub(super) fn insert_sha256(record: &Record, out: &mut HeaderMap) {
    // An append or a page blob's tag chains its changes (see `Content::chained`): not its
    // bytes' hash.
    if record.content.as_ref().is_some_and(|c| !c.chained()) {
        out.insert(
            metadata::CONTENT_SHA256,
            record.bytes_tag().to_header_value(),
        );
    }
}

/// The blob's `Content-MD5`, when it has one.
pub(super) fn insert_md5(record: &Record, out: &mut HeaderMap) {
    if let Some(md5) = record.content.as_ref().and_then(|c| c.md5.as_deref())
        && let Ok(value) = HeaderValue::try_from(md5)
    {
        out.insert(CONTENT_MD5, value);
    }
}
