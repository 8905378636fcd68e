//! A change of a blob as the change feed records it ([`crate::change_feed`]), kept in the
//! blob's record until it is published: what it did, to which blob, when, with the blob's
//! properties then.

use std::time::SystemTime;

/// What a change did, as the feed names it (`eventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    /// The blob's bytes were written (a new blob, or new bytes).
    BlobCreated,
    /// The blob was deleted.
    BlobDeleted,
    /// Its metadata or properties changed, its bytes did not.
    BlobPropertiesUpdated,
    /// A snapshot of it was taken.
    BlobSnapshotCreated,
}

impl Kind {
    /// The name the feed gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BlobCreated => "BlobCreated",
            Self::BlobDeleted => "BlobDeleted",
            Self::BlobPropertiesUpdated => "BlobPropertiesUpdated",
            Self::BlobSnapshotCreated => "BlobSnapshotCreated",
        }
    }
}

/// One change of a blob, kept in the blob's record until it is published.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Change {
    /// The sequencer: the change's instant in nanoseconds, then 64 random bits, in hex; the
    /// feed's order within a chunk, and the name of its marker.
    pub id: String,
    /// What it did.
    pub kind: Kind,
    /// The operation that did it (`api`: `PutBlob`, `PutBlockList`, `CopyBlob`, ...).
    pub api: String,
    /// When (`eventTime`), as Azure writes instants: seven digits of fraction.
    pub time: String,
    /// The stored container (`account~name` for an account other than the first).
    pub container: String,
    /// The blob.
    pub blob: String,
    /// The blob's ETag after the change (before it, for a deletion).
    pub etag: String,
    /// Its Content-Type.
    pub content_type: String,
    /// Its length.
    pub len: u64,
    /// `BlockBlob`, `AppendBlob` or `PageBlob`.
    pub blob_type: String,
    /// The snapshot a `BlobSnapshotCreated` took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

/// A change's id at `now`, `random` its random part: instants sort as their ids do.
pub fn id(now: SystemTime, random: u64) -> String {
    let nanos = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!("{nanos:016x}{random:016x}")
}

/// The instant of an id of [`id`]'s form.
pub fn instant(id: &str) -> Option<SystemTime> {
    let nanos = u64::from_str_radix(id.get(..16)?, 16).ok()?;
    Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(nanos))
}
