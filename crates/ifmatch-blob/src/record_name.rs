//! The names of blob records: a blob's own; a snapshot's, its blob's name, a tab and the
//! snapshot's id ([`crate::snapshot`]); a version's, its blob's name, a line feed and the
//! version's id ([`crate::version`]); a deleted blob's, its name, a vertical tab and the id of
//! its deletion's instant ([`crate::soft_delete`]).
//!
//! No blob name holds a control character, so no blob is named like a snapshot or a version;
//! and a tab and a line feed sort below every character a name may hold, so in every backend's
//! name-ordered scans a blob comes first, then its snapshots, its versions, its deleted selves (each in the
//! order of their ids, which is their instants'), then any longer name. So every backend (the
//! local disk, Redis, a bucket, the Worker's Durable Objects) keeps snapshots and versions
//! without knowing of them, and one scan of the names that start with a blob's and a separator
//! finds its snapshots or its versions.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error_code::ErrorCode;

/// What separates a blob's name from a snapshot's id.
const SNAPSHOT: char = '\t';
/// What separates a blob's name from a version's id.
const VERSION: char = '\n';
/// What separates a deleted blob's name from its deletion's id.
const DELETED: char = '\u{b}';

/// What a record name names besides its blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qualifier<'a> {
    /// A snapshot, by its id.
    Snapshot(&'a str),
    /// A version, by its id.
    Version(&'a str),
    /// A deleted blob, by the id of its deletion.
    Deleted(&'a str),
}

/// The record name of snapshot `id` of blob `blob`.
pub fn snapshot(blob: &str, id: &str) -> String {
    format!("{blob}{SNAPSHOT}{id}")
}

/// The record name of version `id` of blob `blob`.
pub fn version(blob: &str, id: &str) -> String {
    format!("{blob}{VERSION}{id}")
}

/// The record name of blob `blob` deleted at `id`.
pub fn deleted(blob: &str, id: &str) -> String {
    format!("{blob}{DELETED}{id}")
}

/// What every record name of `blob`'s deleted selves starts with.
pub fn deleted_of(blob: &str) -> String {
    format!("{blob}{DELETED}")
}

/// What every record name of `blob`'s snapshots starts with.
pub fn snapshots_of(blob: &str) -> String {
    format!("{blob}{SNAPSHOT}")
}

/// What every record name of `blob`'s versions starts with.
pub fn versions_of(blob: &str) -> String {
    format!("{blob}{VERSION}")
}

/// A record name as the blob it is of and what else it names, if anything.
pub fn split(name: &str) -> (&str, Option<Qualifier<'_>>) {
    match name.find([SNAPSHOT, VERSION, DELETED]) {
        Some(at) => {
            let (blob, id) = (&name[..at], &name[at + 1..]);
            match name.as_bytes()[at] {
                b'\t' => (blob, Some(Qualifier::Snapshot(id))),
                b'\n' => (blob, Some(Qualifier::Version(id))),
                _ => (blob, Some(Qualifier::Deleted(id))),
            }
        }
        None => (name, None),
    }
}

/// The id of a snapshot or a version made at `at`: ISO 8601 to the 100 ns tick, as Azure
/// names them
/// (`2026-11-28T09:00:00.1234567Z`); fixed width, so ids sort as their instants.
pub fn id(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    ifmatch_azure::iso8601::write_seconds(seconds, since.subsec_nanos() / 100)
}

/// Reads a `snapshot=` or `versionid=` of the query: an id of the form [`id`] gives (400
/// `InvalidQueryParameterValue` for any other text).
pub fn parse_id(text: &str) -> Result<String, ErrorCode> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_blob_sorts_before_its_snapshots_then_its_versions_then_longer_names() {
        let id = "2026-11-18T09:46:40.1234567Z";
        let names = [
            "a",
            &snapshot("a", id),
            &version("a", id),
            &deleted("a", id),
            "a ",
            "a/b",
        ];
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        assert_eq!(split(names[1]), ("a", Some(Qualifier::Snapshot(id))));
        assert_eq!(split(names[2]), ("a", Some(Qualifier::Version(id))));
        assert_eq!(split(names[3]), ("a", Some(Qualifier::Deleted(id))));
        assert_eq!(split("a/b"), ("a/b", None));
    }

    #[test]
    fn ids_are_azures_form_and_sort_as_their_instants() {
        let at = UNIX_EPOCH + Duration::new(1_795_000_000, 123_456_789);
        let id = id(at);
        assert_eq!(id, "2026-11-18T11:06:40.1234567Z");
        assert_eq!(parse_id(&id), Ok(id.clone()));
        let later = super::id(at + Duration::from_nanos(100));
        assert!(later > id);
        for bad in [
            "",
            "2026-11-18T09:46:40Z",
            "2026-11-18T09:46:40.123456Z",
            "x",
        ] {
            assert_eq!(
                parse_id(bad),
                Err(ErrorCode::InvalidQueryParameterValue),
                "{bad}"
            );
        }
    }
}
