//! Snapshots: a blob's read-only copy at an instant, named by the instant (`snapshot=` in the
//! query, `x-ms-snapshot` in Snapshot Blob's answer).
//!
//! A snapshot is a blob record of its own, named as [`crate::record_name`] says.

use crate::error_code::ErrorCode;

/// `x-ms-snapshot`: Snapshot Blob's answer names the snapshot it made.
pub const SNAPSHOT: &str = "x-ms-snapshot";

/// `x-ms-delete-snapshots`: what Delete Blob does with a blob's snapshots.
pub const DELETE_SNAPSHOTS: &str = "x-ms-delete-snapshots";

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
