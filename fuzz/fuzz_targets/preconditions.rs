//! The condition headers together (If-Match, If-None-Match, If-Modified-Since,
//! If-Unmodified-Since, If-Range, Range) under both dialects and every method kind: the
//! evaluation never panics, whatever the values.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, Method, header};
use ifmatch_blob::precondition as blob;
use ifmatch_core::date::HttpDate;
use ifmatch_core::precondition::{Validators, rfc9110 as rfc};
use ifmatch_core::strong_etag;
use libfuzzer_sys::fuzz_target;

const FIELDS: [header::HeaderName; 6] = [
    header::IF_MATCH,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_UNMODIFIED_SINCE,
    header::IF_RANGE,
    header::RANGE,
];

fuzz_target!(|data: &[u8]| {
    let mut headers = HeaderMap::new();
    for (i, line) in data.split(|b| *b == b'\n').enumerate().take(12) {
        if let Ok(value) = HeaderValue::from_bytes(line) {
            headers.append(FIELDS[i % FIELDS.len()].clone(), value);
        }
    }
    let date = HttpDate::from(UNIX_EPOCH + Duration::from_secs(784_111_777));
    let current = Validators::new(Some(strong_etag(b"current")), Some(date));
    for method in [
        Method::GET,
        Method::HEAD,
        Method::PUT,
        Method::DELETE,
        Method::POST,
    ] {
        for target in [
            rfc::Target::of(&method, Some(&current)),
            rfc::Target::of(&method, None),
        ] {
            let _ = rfc::evaluate(&method, &headers, target);
        }
    }
    for operation in [
        blob::Operation::Read,
        blob::Operation::Put,
        blob::Operation::Write,
        blob::Operation::Container,
    ] {
        let _ = blob::evaluate(operation, &headers, Some(&current));
        let _ = blob::evaluate(operation, &headers, None);
    }
});
