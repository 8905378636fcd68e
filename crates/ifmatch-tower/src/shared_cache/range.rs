//! A part of a stored response for a request with `Range` (RFC 9110 14.2): one byte range of
//! a stored 200, as a 206, when `If-Range` (if any) still names the stored response; 416 when
//! the range starts past its end; else the whole, as a cache may always send.

use std::ops::Range;
use std::time::{Duration, SystemTime};

use http::header::{self, HeaderValue};
use http::{Method, Request, StatusCode};
use ifmatch_core::ByteRange;
use ifmatch_core::EntityTag;
use ifmatch_core::date::parse_http_date;
use ifmatch_core::precondition::http::{Target, evaluate};
use ifmatch_core::precondition::{Outcome, Validators};

/// The bytes of a stored body of `len` bytes that `asked` is to be sent, `head` (a stored 200)
/// made the answer that sends them; `None`: all of them, `head` unchanged.
pub(crate) fn part(
    asked: &Request<()>,
    head: &mut http::response::Parts,
    len: u64,
) -> Option<Range<u64>> {
    if asked.method() != Method::GET || head.status != StatusCode::OK {
        return None;
    }
    let value = asked.headers().get(header::RANGE)?.to_str().ok()?;
    let headers = &head.headers;
    let last_modified = (headers.get(header::LAST_MODIFIED)).and_then(parse_http_date);
    let mut current = Validators::new(
        (headers.get(header::ETAG)).and_then(|v| EntityTag::from_header(v).ok()),
        last_modified,
    );
    // A date is a strong validator when the response was sent a second or more after it
    // (RFC 9110 8.8.2.2).
    let sent = (headers.get(header::DATE)).and_then(parse_http_date);
    if let (Some(modified), Some(sent)) = (last_modified, sent)
        && SystemTime::from(sent) >= SystemTime::from(modified) + Duration::from_secs(1)
    {
        current = current.with_strong_last_modified();
    }
    // Only `If-Range` is this module's: a 304 or a 412 is the outer layer's to answer, from
    // the whole.
    if evaluate(asked.method(), asked.headers(), Target::Current(&current)) != Outcome::Proceed {
        return None;
    }
    let (status, range, content_range) = match ByteRange::parse(value, len) {
        ByteRange::Whole => return None,
        ByteRange::Part(range) => {
            let described = format!("bytes {}-{}/{len}", range.start, range.end - 1);
            (StatusCode::PARTIAL_CONTENT, range, described)
        }
        ByteRange::Unsatisfiable => (
            StatusCode::RANGE_NOT_SATISFIABLE,
            0..0,
            format!("bytes */{len}"),
        ),
    };
    head.status = status;
    let headers = &mut head.headers;
    headers.insert(
        header::CONTENT_LENGTH,
        HeaderValue::from(range.end - range.start),
    );
    if let Ok(value) = HeaderValue::from_str(&content_range) {
        headers.insert(header::CONTENT_RANGE, value);
    }
    Some(range)
}
