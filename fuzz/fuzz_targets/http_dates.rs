//! HTTP dates in their three formats, before 1970 too: parsing never panics, and a parsed date
//! prints as an IMF-fixdate that parses to the same second.
#![no_main]

use ifmatch_core::date::HttpDate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(date) = text.parse::<HttpDate>() {
        let printed = date.to_string();
        assert_eq!(
            printed.parse::<HttpDate>(),
            Ok(date),
            "{text:?} printed as {printed:?}"
        );
    }
});
