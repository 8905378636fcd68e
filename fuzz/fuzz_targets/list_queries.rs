//! List Blobs queries (prefix, marker, maxresults, and anything else): never panic, and an
//! accepted page size is within 1 to 5000.
#![no_main]

use http::{Method, Uri};
use ifmatch_blob::{MAX_RESULTS, Operation, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(uri) = format!("/box?restype=container&comp=list&{query}").parse::<Uri>() else {
        return;
    };
    if let Ok(Target {
        operation: Operation::ListBlobs(options),
        ..
    }) = Target::parse(&Method::GET, uri.path(), uri.query())
    {
        assert!((1..=MAX_RESULTS).contains(&options.max_results), "{query}");
    }
});
