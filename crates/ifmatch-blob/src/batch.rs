//! Blob Batch: a `multipart/mixed` body of subrequests (`DELETE`s), each an HTTP request of its
//! own with its own credentials, answered by a `multipart/mixed` body of subresponses in the
//! same order, each with the `Content-ID` of its subrequest.
//!
//! Only the envelope is read and written here; every subrequest is handled by the front like
//! any other request, credentials and all.

use crate::error_code::ErrorCode;
use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response};

/// The most subrequests one batch may carry.
pub(crate) const MAX_SUBREQUESTS: usize = 256;

/// The largest batch body, in bytes.
pub(crate) const MAX_BODY: usize = 4 << 20;

/// One subrequest: its `Content-ID` and the request itself (no body).
#[derive(Debug)]
pub(crate) struct Subrequest {
    pub(crate) content_id: Option<HeaderValue>,
    pub(crate) request: Request<()>,
}

/// A batch that cannot be read: its code and what to say.
pub(crate) type Malformed = (ErrorCode, &'static str);

/// The boundary a `multipart/mixed` content type names.
pub(crate) fn boundary(content_type: Option<&HeaderValue>) -> Result<String, Malformed> {
    let refused = (
        ErrorCode::InvalidInput,
        "A batch needs Content-Type: multipart/mixed; boundary=...",
    );
    let value = content_type.and_then(|v| v.to_str().ok()).ok_or(refused)?;
    let (kind, params) = value.split_once(';').ok_or(refused)?;
    if !kind.trim().eq_ignore_ascii_case("multipart/mixed") {
        return Err(refused);
    }
    params
        .split(';')
        .filter_map(|p| p.trim().split_once('='))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("boundary"))
        .map(|(_, b)| b.trim().trim_matches('"').to_owned())
        .filter(|b| !b.is_empty() && b.len() <= 70)
        .ok_or(refused)
}

/// Reads the subrequests of a batch body.
pub(crate) fn parse(body: &[u8], boundary: &str) -> Result<Vec<Subrequest>, Malformed> {
    let malformed = (
        ErrorCode::InvalidInput,
        "The batch body is not a multipart/mixed body of HTTP requests.",
    );
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut rest = body;
    // The preamble, up to the first delimiter.
    let start = find(rest, delimiter.as_bytes()).ok_or(malformed)?;
    rest = &rest[start + delimiter.len()..];
    loop {
        if rest.starts_with(b"--") {
            break;
        }
        rest = rest.strip_prefix(b"\r\n").ok_or(malformed)?;
        let end = find(rest, delimiter.as_bytes()).ok_or(malformed)?;
        let part = &rest[..end];
        rest = &rest[end + delimiter.len()..];
        if parts.len() == MAX_SUBREQUESTS {
            return Err((
                ErrorCode::InvalidInput,
                "A batch carries at most 256 subrequests.",
            ));
        }
        parts.push(subrequest(part).ok_or(malformed)?);
    }
    if parts.is_empty() {
        return Err((ErrorCode::InvalidInput, "The batch carries no subrequest."));
    }
    Ok(parts)
}

/// One part: its headers (`Content-ID`), a blank line, then the subrequest's request line and
/// headers.
fn subrequest(part: &[u8]) -> Option<Subrequest> {
    let mut scratch = [httparse::EMPTY_HEADER; 16];
    let (used, part_headers) = match httparse::parse_headers(part, &mut scratch).ok()? {
        httparse::Status::Complete(parsed) => parsed,
        httparse::Status::Partial => return None,
    };
    let content_id = part_headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-id"))
        .and_then(|h| HeaderValue::from_bytes(h.value).ok());
    let mut scratch = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut scratch);
    if !parsed.parse(&part[used..]).ok()?.is_complete() {
        return None;
    }
    let mut request = Request::builder()
        .method(Method::from_bytes(parsed.method?.as_bytes()).ok()?)
        .uri(parsed.path?);
    for h in parsed.headers.iter() {
        request = request.header(
            HeaderName::from_bytes(h.name.as_bytes()).ok()?,
            HeaderValue::from_bytes(h.value).ok()?,
        );
    }
    Some(Subrequest {
        content_id,
        request: request.body(()).ok()?,
    })
}

/// The body of a batch's answer: each subresponse (status, headers, body) as a part with its
/// subrequest's `Content-ID`.
pub(crate) fn multipart_body(
    boundary: &str,
    subresponses: Vec<(Option<HeaderValue>, Response<Bytes>)>,
) -> Bytes {
    let mut out = BytesMut::new();
    for (content_id, response) in subresponses {
        out.put_slice(format!("--{boundary}\r\nContent-Type: application/http\r\n").as_bytes());
        if let Some(id) = content_id {
            out.put_slice(b"Content-ID: ");
            out.put_slice(id.as_bytes());
            out.put_slice(b"\r\n");
        }
        let status = response.status();
        out.put_slice(
            format!(
                "\r\nHTTP/1.1 {} {}\r\n",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            )
            .as_bytes(),
        );
        write_headers(&mut out, response.headers());
        out.put_slice(b"\r\n");
        out.put_slice(response.body());
        out.put_slice(b"\r\n");
    }
    out.put_slice(format!("--{boundary}--\r\n").as_bytes());
    out.freeze()
}

fn write_headers(out: &mut BytesMut, headers: &HeaderMap) {
    for (name, value) in headers {
        if name == header::CONTENT_LENGTH {
            continue;
        }
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_reads_into_its_subrequests() {
        let body = "--b1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\nContent-ID: 0\r\n\r\nDELETE /acct/box/a HTTP/1.1\r\nx-ms-date: x\r\nAuthorization: SharedKey acct:sig\r\nContent-Length: 0\r\n\r\n\r\n--b1\r\nContent-Type: application/http\r\nContent-ID: 1\r\n\r\nDELETE /acct/box/b%20c HTTP/1.1\r\n\r\n\r\n--b1--\r\n";
        let parts = parse(body.as_bytes(), "b1").unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].content_id.as_ref().unwrap(), "0");
        assert_eq!(parts[0].request.method(), Method::DELETE);
        assert_eq!(parts[0].request.uri().path(), "/acct/box/a");
        assert_eq!(
            parts[0].request.headers()["authorization"],
            "SharedKey acct:sig"
        );
        assert_eq!(parts[1].request.uri().path(), "/acct/box/b%20c");
        for bad in ["", "--b1\r\ngarbage", "--b1--\r\n", "no delimiter"] {
            assert!(parse(bad.as_bytes(), "b1").is_err(), "{bad:?}");
        }
        let content_type = HeaderValue::from_static("multipart/mixed; boundary=\"b1\"");
        assert_eq!(boundary(Some(&content_type)).unwrap(), "b1");
        assert!(boundary(Some(&HeaderValue::from_static("text/plain"))).is_err());
    }
}
