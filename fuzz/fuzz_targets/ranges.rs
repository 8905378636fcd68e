//! `Range: bytes=...` against a representation of any length: parsing never panics, and a
//! part it answers lies inside the representation and is not empty.
#![no_main]

use ifmatch_blob::ByteRange;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let len = u64::from_le_bytes(data[..8].try_into().unwrap()) >> (data[0] % 64);
    let Ok(value) = std::str::from_utf8(&data[8..]) else {
        return;
    };
    if let ByteRange::Part(range) = ByteRange::parse(value, len) {
        assert!(
            range.start < range.end && range.end <= len,
            "{value:?} of {len}: {range:?}"
        );
    }
});
