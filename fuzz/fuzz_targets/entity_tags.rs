//! Entity-tags and lists of them (RFC 9110 8.8.3, 13.1.1-13.1.2): parsing never panics, and
//! whatever parses prints back to something that parses the same.
#![no_main]

use http::HeaderValue;
use ifmatch_core::{EntityTag, EntityTagList};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(tag) = EntityTag::parse(data) {
        let again = EntityTag::from_header(&tag.to_header_value()).expect("a printed tag parses");
        assert_eq!(again, tag);
    }
    // Several field lines, split where the input has a newline.
    let lines: Vec<HeaderValue> = data
        .split(|b| *b == b'\n')
        .filter_map(|line| HeaderValue::from_bytes(line).ok())
        .collect();
    if let Ok(list) = EntityTagList::parse(lines.iter()) {
        let printed = list.to_header_value();
        let again = EntityTagList::parse([&printed]).expect("a printed list parses");
        assert_eq!(again, list);
    }
});
