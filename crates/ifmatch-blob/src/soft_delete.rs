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
        moving: false,
    }
}

/// What a deleted container's stored name starts with, after its account's (no container's
/// name has a `$` or a `.`): `$deleted.{name}.{version}`.
const DELETED_CONTAINER: &str = "$deleted.";

/// The stored name a container deleted as `version` is kept under: beside its account's
/// containers (`stored` is `name` or `account~name`), listed only with `include=deleted`.
pub fn deleted_container(stored: &str, version: &str) -> String {
    match stored.split_once('~') {
        Some((account, name)) => format!("{account}~{DELETED_CONTAINER}{name}.{version}"),
        None => format!("{DELETED_CONTAINER}{stored}.{version}"),
    }
}

/// The name and version of a deleted container, from the name its account knows its record
/// by (see [`deleted_container`]); `None` for any other.
pub fn parse_deleted_container(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix(DELETED_CONTAINER)?.rsplit_once('.')
}

/// A deleted container's version, as Azure gives one: 16 hex digits of the instant of its
/// deletion (100-nanosecond ticks since 1601, as a Windows file time).
pub fn container_version(now: SystemTime) -> String {
    const SINCE_1601: u128 = 11_644_473_600 * 10_000_000;
    let ticks = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() / 100)
        + SINCE_1601;
    format!("{ticks:016X}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_container_is_named_apart_from_every_container() {
        let version = container_version(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1));
        assert_eq!(version, "019DB1DED5D71680");
        let kept = deleted_container("box-1", &version);
        assert_eq!(kept, "$deleted.box-1.019DB1DED5D71680");
        assert_eq!(
            parse_deleted_container(&kept),
            Some(("box-1", version.as_str()))
        );
        assert_eq!(
            deleted_container("acct~box", "01"),
            "acct~$deleted.box.01",
            "among its account's containers"
        );
        assert_eq!(parse_deleted_container("box"), None);
        assert_eq!(parse_deleted_container("$service"), None);
    }
}
