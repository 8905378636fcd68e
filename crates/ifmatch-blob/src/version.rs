//! Versions: while an account keeps them (`<IsVersioningEnabled>true` in its Blob service
//! properties, [`crate::settings`]), every change of a blob's bytes or metadata (a change of its ETag: Put Blob,
//! Put Block List, Copy Blob, Set Blob Metadata and Properties; not an append, a lease or its
//! tags) and its deletion keep the blob as it was as a version, a read-only blob record named as
//! [`crate::record_name`] says, by the id the blob had (`x-ms-version-id`).
//!
//! A version is written before the change it keeps a blob from, in the same compare-and-swap
//! attempt, under the id of the state it copies: an attempt that loses its race and starts over
//! writes the same version again (found: nothing to do), so a version is never lost and never
//! kept twice, on every backend, without a transaction across records.

use std::time::SystemTime;

/// `x-ms-version-id`: the version a write made, or a read read.
pub const VERSION_ID: &str = "x-ms-version-id";

/// The id of a version written at `now` over one of id `previous`: the instant's, or one tick
/// after `previous` when the clock has not passed it (another instance's, or the same tick),
/// so a blob's version ids only grow.
pub fn next_id(now: SystemTime, previous: Option<&str>) -> String {
    let id = crate::record_name::id(now);
    match previous.and_then(ticks) {
        Some(before) if ticks(&id).is_none_or(|t| t <= before) => from_ticks(before + 1),
        _ => id,
    }
}

/// Ticks of 100 ns since 1970 of an id of [`crate::record_name::id`]'s form.
fn ticks(id: &str) -> Option<i64> {
    ifmatch_azure::iso8601::read_written(id)
}

fn from_ticks(ticks: i64) -> String {
    ifmatch_azure::iso8601::write(ticks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn ids_only_grow() {
        let at = UNIX_EPOCH + Duration::new(1_795_000_000, 123_456_700);
        let first = next_id(at, None);
        assert_eq!(first, "2026-11-18T11:06:40.1234567Z");
        let again = next_id(at, Some(&first));
        assert_eq!(again, "2026-11-18T11:06:40.1234568Z");
        let earlier = next_id(at - Duration::from_secs(5), Some(&again));
        assert_eq!(earlier, "2026-11-18T11:06:40.1234569Z");
        assert_eq!(
            next_id(at + Duration::from_secs(1), Some(&again)),
            "2026-11-18T11:06:41.1234567Z"
        );
    }
}
