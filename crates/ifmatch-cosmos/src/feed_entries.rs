//! Where the change feed lives in a container's table: the partition `~feed` (no partition
//! key's JSON starts with `~`, so it sorts after every document), one entry per document, keyed
//! by a number the container's counter gives, in commit order; the counter itself is an entity
//! of the same partition (row key `""`, before every entry). How a commit moves them and how
//! the feed is read: `feed.rs`.

use ifmatch_table::{Entity, EntityKey, Value};

/// The partition of a documents' table that holds the change feed.
pub(crate) const FEED: &str = "~feed";

/// The property of a document that holds the number of its feed entry, and of the counter
/// that holds the last number given.
pub(crate) const NUMBER: &str = "~feed";

/// The counter's key.
pub(crate) fn counter_key() -> EntityKey {
    (FEED.to_owned(), String::new())
}

/// The key of the feed entry numbered `number`: ordered as the numbers are.
pub(crate) fn entry_key(number: i64) -> String {
    format!("{number:020}")
}

/// The number an entity holds: a document's entry, or the counter's last number given.
pub(crate) fn number_of(entity: &Entity) -> Option<i64> {
    match entity.properties.get(NUMBER) {
        Some(Value::Int64(number)) => Some(*number),
        _ => None,
    }
}

/// Whether `entity` is a change feed entry (or its counter), or another entry of the
/// container's own (a unique key's): not a document. Their partitions start with `~`, which
/// no partition key's JSON does.
pub(crate) fn is_feed(entity: &Entity) -> bool {
    entity.partition_key.starts_with('~')
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
