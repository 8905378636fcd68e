//! A part of a stored response for a request with `Range` (RFC 9110 14.2): one byte range of
//! a stored 200, as a 206, when `If-Range` (if any) still names the stored response; 416 when
//! the range starts past its end; else the whole, as a cache may always send.
//!
//! A stored 206 is a [`Piece`] of its representation (RFC 9111 3.3: a cache may store
//! incomplete responses): it answers a request whose one range lies within it, with that
//! range, and no other request.

use std::ops::Range;
use std::time::{Duration, SystemTime};

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, StatusCode};
use ifmatch_core::ByteRange;
use ifmatch_core::EntityTag;
use ifmatch_core::date::parse_http_date;
use ifmatch_core::precondition::rfc9110::{Target, evaluate};
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
    without_digests(&mut head.headers);
    describe(&mut head.headers, range.end - range.start, &content_range);
    Some(range)
}

/// `headers` made those of a part of `length` bytes that `content_range` describes.
fn describe(headers: &mut HeaderMap, length: u64, content_range: &str) {
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    if let Ok(value) = HeaderValue::from_str(content_range) {
        headers.insert(header::CONTENT_RANGE, value);
    }
}

/// The fields that carry a digest of the bytes of the body they came with: HTTP's
/// (`Content-MD5`, `Content-Digest`, RFC 9530) and the storage dialects' (S3's checksums, which
/// boto3 checks, Azure's CRC64). Sent with a part of those bytes, they would fail a client's
/// check of the part: a part served from the store goes without them, as the origin's own
/// parts do (`Repr-Digest`, of the representation, stays).
const DIGESTS: [&str; 9] = [
    "content-md5",
    "content-digest",
    "x-amz-checksum-crc32",
    "x-amz-checksum-crc32c",
    "x-amz-checksum-crc64nvme",
    "x-amz-checksum-sha1",
    "x-amz-checksum-sha256",
    "x-amz-checksum-type",
    "x-ms-content-crc64",
];

/// `headers` without the [`DIGESTS`] of a body.
fn without_digests(headers: &mut HeaderMap) {
    for name in DIGESTS {
        headers.remove(name);
    }
}

/// Whether an answer with `status` and `headers` is a part of its representation sent as all
/// of it: a 200 whose `Content-Range` names a byte range (`bytes A-B/N`, `bytes A-B/*`) that is
/// not all of it. Such an answer is incomplete (RFC 9111 3.3): never stored, and never served
/// as the resource. A `Content-Range` that names no byte range has no meaning on a 200 (RFC
/// 9110 14.4) and is a field like any other.
pub fn is_part_as_whole(status: StatusCode, headers: &HeaderMap) -> bool {
    if status != StatusCode::OK {
        return false;
    }
    match headers.get(header::CONTENT_RANGE).and_then(byte_range) {
        None => false,
        Some((first, last, complete)) => first != 0 || complete != last.checked_add(1),
    }
}

/// The byte range a `Content-Range` value names: its first and last byte, and the length of
/// the representation when known (`bytes A-B/N`, `bytes A-B/*`).
fn byte_range(value: &HeaderValue) -> Option<(u64, u64, Option<u64>)> {
    let (range, complete) = (value.to_str().ok()?.strip_prefix("bytes "))?.split_once('/')?;
    let (first, last) = range.split_once('-')?;
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
    };
    let complete = match complete {
        "*" => None,
        complete => Some(number(complete)?),
    };
    Some((number(first)?, number(last)?, complete))
}

/// The bytes of its representation a stored 206 holds: `start..end` of `complete`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    start: u64,
    end: u64,
    complete: u64,
}

impl Piece {
    /// The piece a 206 with `headers` holds: one range (`Content-Range: bytes A-B/N`) of a
    /// representation whose length is known, its body as long as the range. Anything else (a
    /// multipart body, an unknown length, a length that disagrees) is no piece to store.
    pub(crate) fn of(headers: &HeaderMap) -> Option<Self> {
        let mut lines = headers.get_all(header::CONTENT_RANGE).iter();
        let (Some(value), None) = (lines.next(), lines.next()) else {
            return None;
        };
        let (start, last, complete) = byte_range(value)?;
        let complete = complete?;
        let piece = Self {
            start,
            end: last.checked_add(1)?,
            complete,
        };
        let length = length(http::StatusCode::PARTIAL_CONTENT, headers)?;
        (start <= last && last < complete && length == piece.end - start).then_some(piece)
    }

    /// The bytes of the representation `asked` (a GET) wants, within this piece's body, if it
    /// holds them all: its one satisfiable range, and no `If-Range` (which could ask for the
    /// whole).
    pub(crate) fn holds(&self, asked: &Request<()>) -> Option<Range<u64>> {
        let headers = asked.headers();
        if asked.method() != Method::GET || headers.contains_key(header::IF_RANGE) {
            return None;
        }
        let value = headers.get(header::RANGE)?.to_str().ok()?;
        match ByteRange::parse(value, self.complete) {
            ByteRange::Part(range) if self.start <= range.start && range.end <= self.end => {
                Some(range.start - self.start..range.end - self.start)
            }
            _ => None,
        }
    }

    /// `head` (this piece's) made the head of an answer that sends `within` of its body.
    pub(crate) fn head_for(&self, head: &mut http::response::Parts, within: &Range<u64>) {
        let (first, last) = (self.start + within.start, self.start + within.end - 1);
        let described = format!("bytes {first}-{last}/{}", self.complete);
        let length = within.end - within.start;
        if length != self.end - self.start {
            without_digests(&mut head.headers);
        }
        describe(&mut head.headers, length, &described);
    }
}

/// The length of a response's body, if it is known before it is read.
pub(crate) fn length(status: StatusCode, headers: &HeaderMap) -> Option<u64> {
    if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        return Some(0);
    }
    let value = headers.get(header::CONTENT_LENGTH)?;
    value.to_str().ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(range: &str, length: &str) -> Option<Piece> {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_RANGE, range.parse().unwrap());
        headers.insert(header::CONTENT_LENGTH, length.parse().unwrap());
        Piece::of(&headers)
    }

    fn asked(fields: &[(&str, &str)]) -> Request<()> {
        let mut request = Request::get("/a");
        for (name, value) in fields {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap()
    }

    #[test]
    fn a_piece_is_one_range_of_a_known_length_as_long_as_its_body() {
        assert!(piece("bytes 4-9/10", "6").is_some());
        assert!(piece("bytes 0-0/1", "1").is_some());
        for (range, length) in [
            ("bytes 4-9/10", "5"),
            ("bytes 4-9/*", "6"),
            ("bytes 4-10/10", "7"),
            ("bytes 9-4/10", "0"),
            ("bytes */10", "0"),
            ("bytes 4-9", "6"),
            ("items 4-9/10", "6"),
            ("bytes 4-9/10, 0-1", "6"),
            ("bytes +4-9/10", "6"),
        ] {
            assert_eq!(piece(range, length), None, "{range} {length}");
        }
    }

    #[test]
    fn a_200_with_a_content_range_is_whole_only_when_the_range_is_all_of_it() {
        let with = |range: &str, length: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_RANGE, range.parse().unwrap());
            headers.insert(header::CONTENT_LENGTH, length.parse().unwrap());
            headers
        };
        let part = with("bytes 0-4/1000", "5");
        assert!(is_part_as_whole(StatusCode::OK, &part));
        assert!(!is_part_as_whole(StatusCode::PARTIAL_CONTENT, &part));
        assert!(is_part_as_whole(StatusCode::OK, &with("bytes 0-4/*", "5")));
        assert!(is_part_as_whole(StatusCode::OK, &with("bytes 5-9/10", "5")));
        // No byte range named: a field with no meaning on a 200, stored as any other.
        assert!(!is_part_as_whole(StatusCode::OK, &with("nonsense", "5")));
        assert!(!is_part_as_whole(StatusCode::OK, &with("bytes 0-4/5", "5")));
        assert!(!is_part_as_whole(StatusCode::OK, &HeaderMap::new()));
    }

    #[test]
    fn a_piece_holds_the_ranges_within_it_and_nothing_else() {
        let held = piece("bytes 4-9/10", "6").unwrap();
        for (range, want) in [
            ("bytes=4-9", Some(0..6)),
            ("bytes=6-8", Some(2..5)),
            ("bytes=6-", Some(2..6)),
            ("bytes=-1", Some(5..6)),
            ("bytes=-5", Some(1..6)),
            ("bytes=4-100", Some(0..6)),
            ("bytes=3-5", None),
            ("bytes=-7", None),
            ("bytes=10-", None),
            ("bytes=4-5,7-8", None),
            ("lines=4-5", None),
        ] {
            assert_eq!(held.holds(&asked(&[("range", range)])), want, "{range}");
        }
        assert_eq!(held.holds(&asked(&[])), None, "a request for the whole");
        let if_range = asked(&[("range", "bytes=6-8"), ("if-range", "\"a\"")]);
        assert_eq!(held.holds(&if_range), None);
        let mut head = asked(&[("range", "bytes=6-8")]);
        *head.method_mut() = Method::HEAD;
        assert_eq!(held.holds(&head), None);

        let (mut parts, ()) = http::Response::new(()).into_parts();
        held.head_for(&mut parts, &(2..5));
        assert_eq!(parts.headers[header::CONTENT_RANGE], "bytes 6-8/10");
        assert_eq!(parts.headers[header::CONTENT_LENGTH], "3");
    }
}
