//! A request line (method, path and query) read into a blob operation: never panics, and
//! whatever it accepts names a valid container and a blob with no `.` or `..` segment, so no
//! request can reach outside the data directory.
#![no_main]

use http::{Method, Uri};
use ifmatch_blob::Target;
use libfuzzer_sys::fuzz_target;

const METHODS: [Method; 6] = [
    Method::GET,
    Method::HEAD,
    Method::PUT,
    Method::DELETE,
    Method::POST,
    Method::OPTIONS,
];

fuzz_target!(|data: &[u8]| {
    let Some((first, rest)) = data.split_first() else {
        return;
    };
    let Ok(uri) = Uri::try_from(rest) else {
        return;
    };
    let method = &METHODS[usize::from(*first) % METHODS.len()];
    if let Ok(target) = Target::parse(method, uri.path(), uri.query()) {
        assert!((3..=63).contains(&target.container.len()));
        assert!(
            target
                .container
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
        assert!(
            !target
                .blob
                .split(['/', '\\'])
                .any(|s| s == "." || s == ".."),
            "{uri}"
        );
        assert!(!target.blob.chars().any(char::is_control), "{uri}");
    }
});
