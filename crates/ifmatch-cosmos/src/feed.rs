//! Where the change feed lives in a container's table: the partition `~feed` (no partition
//! key's JSON starts with `~`, so it sorts after every document), one entry per document,
//! keyed by the instant of its version. The front moves an entry in the same commit that
//! writes its document; queries and feeds of documents stop where the entries start.

use ifmatch_table::Entity;

/// The partition of a documents' table that holds the change feed.
pub(crate) const FEED: &str = "~feed";

/// The change feed's key of a version written at `ticks`: ordered as the instants are.
pub(crate) fn feed_key(ticks: i64) -> String {
    format!("{ticks:020}")
}

/// Whether `entity` is a change feed entry, not a document.
pub(crate) fn is_feed(entity: &Entity) -> bool {
    entity.partition_key == FEED
}

/// Drops the change feed's entries from a chunk read across partitions (they sort after every
/// document); `true` when it reached them, and so the end of the documents.
pub(crate) fn documents_only(chunk: &mut Vec<Entity>) -> bool {
    match chunk.iter().position(is_feed) {
        Some(first) => {
            chunk.truncate(first);
            true
        }
        None => false,
    }
}
