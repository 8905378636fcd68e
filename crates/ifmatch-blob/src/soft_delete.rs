//! Soft delete: while an account keeps deleted blobs (`<DeleteRetentionPolicy>` in its Blob
//! service properties, [`crate::settings`]), a deleted blob is kept for that many days as a
//! record of its own, named as [`crate::record_name`] says by its deletion's instant, and a
//! deleted snapshot keeps its name, marked deleted; both are listed with `include=deleted`,
//! brought back by Undelete Blob, and removed for good by the sweep once their days are over.
//! A new blob may take a deleted one's name meanwhile: Undelete Blob then brings back its
//! snapshots, not its deleted self.

use std::time::SystemTime;

use crate::record::{Deleted, unix_seconds};

/// The times of a blob deleted at `now` and kept `days`.
pub fn kept(now: SystemTime, days: u32) -> Deleted {
    let at = unix_seconds(now);
    Deleted {
        at,
        until: at + u64::from(days) * 86_400,
    }
}
