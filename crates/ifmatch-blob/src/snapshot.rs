//! Snapshots: a blob's read-only copy at an instant, named by the instant (`snapshot=` in the
//! query, `x-ms-snapshot` in Snapshot Blob's answer).
//!
//! A snapshot is a blob record of its own, stored under its blob's name, a tab and its id
//! ([`name`]). No blob name holds a control character, so no blob is named so, and a tab sorts
//! below every character a name may hold: a blob's snapshots come right after it and before any
//! longer name, in the order of their instants, in every backend's name-ordered scans. So every
//! backend (the local disk, Redis, a bucket, the Worker's Durable Objects) keeps snapshots
//! without knowing of them, and the listing finds a blob's snapshots with one scan of the names
//! that start with its own and a tab.

use std::time::{SystemTime, UNIX_EPOCH};

use ifmatch_azure::ErrorCode;

/// What separates a blob's name from a snapshot's id in the snapshot's record name.
pub const SEPARATOR: char = '\t';

/// `x-ms-snapshot`: Snapshot Blob's answer names the snapshot it made.
pub const SNAPSHOT: &str = "x-ms-snapshot";

/// `x-ms-delete-snapshots`: what Delete Blob does with a blob's snapshots.
pub const DELETE_SNAPSHOTS: &str = "x-ms-delete-snapshots";

/// The record name of snapshot `id` of blob `blob`.
pub fn name(blob: &str, id: &str) -> String {
    format!("{blob}{SEPARATOR}{id}")
}

/// What every record name of `blob`'s snapshots starts with.
pub fn prefix(blob: &str) -> String {
    format!("{blob}{SEPARATOR}")
}

/// A record name as the blob it is of and, for a snapshot, its id.
pub fn split(name: &str) -> (&str, Option<&str>) {
    match name.split_once(SEPARATOR) {
        Some((blob, id)) => (blob, Some(id)),
        None => (name, None),
    }
}

/// The id of a snapshot taken at `at`: ISO 8601 to the 100 ns tick, as Azure names them
/// (`2026-11-28T09:00:00.1234567Z`); fixed width, so ids sort as their instants.
pub fn id(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    ifmatch_core::date::iso8601_ticks(seconds, since.subsec_nanos() / 100)
}

/// Reads a `snapshot=` of the query: an id of the form [`id`] gives (400
/// `InvalidQueryParameterValue` for any other text).
pub fn parse(text: &str) -> Result<String, ErrorCode> {
    let shape = b"dddd-dd-ddTdd:dd:dd.dddddddZ";
    let fits = text.len() == shape.len()
        && (text.bytes().zip(shape)).all(|(c, s)| match s {
            b'd' => c.is_ascii_digit(),
            s => c == *s,
        });
    match fits {
        true => Ok(text.to_owned()),
        false => Err(ErrorCode::InvalidQueryParameterValue),
    }
}

/// What Delete Blob is asked to do with the blob's snapshots (`x-ms-delete-snapshots`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleting {
    /// No header: the blob alone, refused (409 `SnapshotsPresent`) while it has snapshots.
    Blob,
    /// `include`: the blob and its snapshots.
    Include,
    /// `only`: its snapshots, not the blob.
    Only,
}

impl Deleting {
    /// Reads `x-ms-delete-snapshots` (400 `InvalidHeaderValue` for a value it does not take).
    pub fn from_headers(headers: &http::HeaderMap) -> Result<Self, ErrorCode> {
        match headers
            .get(DELETE_SNAPSHOTS)
            .map(http::HeaderValue::as_bytes)
        {
            None => Ok(Self::Blob),
            Some(b"include") => Ok(Self::Include),
            Some(b"only") => Ok(Self::Only),
            Some(_) => Err(ErrorCode::InvalidHeaderValue),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ids_are_azures_form_and_sort_as_their_instants() {
        let at = UNIX_EPOCH + Duration::new(1_795_000_000, 123_456_789);
        let id = id(at);
        assert_eq!(id, "2026-11-18T11:06:40.1234567Z");
        assert_eq!(parse(&id), Ok(id.clone()));
        let later = super::id(at + Duration::from_nanos(100));
        assert!(later > id);
        for bad in [
            "",
            "2026-11-18T09:46:40Z",
            "2026-11-18T09:46:40.123456Z",
            "x",
        ] {
            assert_eq!(
                parse(bad),
                Err(ErrorCode::InvalidQueryParameterValue),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_snapshot_sorts_right_after_its_blob() {
        let (a, snap) = ("a", name("a", "2026-11-18T09:46:40.1234567Z"));
        assert!(a < snap.as_str() && snap.as_str() < "a " && snap.as_str() < "a/b");
        assert_eq!(split(&snap), ("a", Some("2026-11-18T09:46:40.1234567Z")));
        assert_eq!(split("a/b"), ("a/b", None));
    }
}
