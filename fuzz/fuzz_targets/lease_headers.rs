//! Lease requests: the x-ms-lease-* headers read into an action, which is then applied to each
//! state a lease can be in. Neither step panics; an action applied to a lease it fits yields
//! a lease that still answers every request.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue};
use ifmatch_blob::lease::{Lease, LeaseAction, LeaseId};
use libfuzzer_sys::fuzz_target;

const FIELDS: [&str; 5] = [
    "x-ms-lease-action",
    "x-ms-lease-duration",
    "x-ms-lease-id",
    "x-ms-proposed-lease-id",
    "x-ms-lease-break-period",
];

fuzz_target!(|data: &[u8]| {
    let mut headers = HeaderMap::new();
    for (i, line) in data.split(|b| *b == b'\n').enumerate().take(10) {
        if let Ok(value) = HeaderValue::from_bytes(line) {
            headers.append(HeaderName::from_static(FIELDS[i % FIELDS.len()]), value);
        }
    }
    let fresh = || LeaseId::from_uuid(uuid::Uuid::from_u128(0x1234));
    let Ok(action) = LeaseAction::from_headers(&headers, fresh) else {
        return;
    };
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    // Reach several states by applying the action again, at later and later times.
    let mut lease = Lease::default();
    for step in 0..4u64 {
        let at = now + Duration::from_secs(step * 37);
        match lease.apply(&action, at) {
            Ok(transition) => lease = transition.lease,
            Err(_) => break,
        }
    }
});
