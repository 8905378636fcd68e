//! Blob index tags' untrusted inputs: an `x-ms-if-tags` condition, a Find expression, a Set
//! Blob Tags body and an `x-ms-tags` header, each read from the fuzzer's bytes: none panics,
//! what reads as tags keeps the rules, and a condition that reads evaluates.
#![no_main]

use ifmatch_blob::tags::{self, Condition};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut blob = tags::Tags::new();
    blob.insert("team".into(), "a".into());
    if let Ok(condition) = Condition::parse(&text) {
        let _ = condition.holds(&blob);
    }
    if let Ok(condition) = Condition::parse_find(&text) {
        let _ = (condition.holds(&blob), condition.keys());
    }
    if let Ok(read) = tags::parse(data) {
        assert_eq!(tags::check(&read), Ok(()));
        assert_eq!(tags::parse(tags::xml(&read).as_bytes()), Ok(read));
    }
    if let Ok(value) = http::HeaderValue::from_bytes(data) {
        let mut headers = http::HeaderMap::new();
        headers.insert(tags::TAGS, value);
        if let Ok(read) = tags::from_header(&headers) {
            assert_eq!(tags::check(&read), Ok(()));
        }
    }
});
