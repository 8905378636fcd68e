//! What the cache did, counted, and what it holds: for an operator's metrics.

use std::sync::atomic::{AtomicU64, Ordering};

/// The cache's counters since it was made, and what it holds now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheReport {
    /// Answers served from the store while fresh.
    pub hits: u64,
    /// Requests the store had nothing usable for, asked of the inner service.
    pub misses: u64,
    /// Stale answers served: while revalidated, or in place of a failure.
    pub stale_served: u64,
    /// Revalidations the inner service answered 304 (the stored answer refreshed).
    pub revalidated_not_modified: u64,
    /// Revalidations the inner service answered with a new response.
    pub revalidated_modified: u64,
    /// Revalidations that failed (the stale answer or the failure served).
    pub revalidation_failed: u64,
    /// Requests that waited for another of their key and were served what it stored.
    pub collapsed: u64,
    /// Body bytes served from the store.
    pub bytes_from_cache: u64,
    /// Body bytes the inner service declared for what it answered through the cache.
    pub bytes_from_origin: u64,
    /// Entries evicted for room.
    pub evictions: u64,
    /// Keys stored now.
    pub entries: u64,
    /// Bytes the stored answers weigh now.
    pub bytes: u64,
    /// Answers read back from the disk tier into memory.
    pub disk_hits: u64,
    /// Answers written to the disk tier.
    pub disk_writes: u64,
    /// Writes to and reads from the disk tier that failed (a full disk, a torn file).
    pub disk_errors: u64,
    /// Answers not written to the disk tier because its queue of writes was full: misses
    /// came faster than the disk took them.
    pub disk_skipped: u64,
    /// URLs with answers on disk now.
    pub disk_entries: u64,
    /// Bytes of the disk tier's files now.
    pub disk_bytes: u64,
    /// Whether the disk tier is still indexing the files a previous process left: their keys
    /// are misses until it has.
    pub disk_indexing: bool,
}

/// The counters of [`CacheReport`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) stale_served: AtomicU64,
    pub(crate) revalidated_not_modified: AtomicU64,
    pub(crate) revalidated_modified: AtomicU64,
    pub(crate) revalidation_failed: AtomicU64,
    pub(crate) collapsed: AtomicU64,
    pub(crate) bytes_from_cache: AtomicU64,
    pub(crate) bytes_from_origin: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) disk_hits: AtomicU64,
}

impl Counters {
    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Their values, with what the store holds.
    pub(crate) fn report(&self, entries: u64, bytes: u64) -> CacheReport {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CacheReport {
            hits: get(&self.hits),
            misses: get(&self.misses),
            stale_served: get(&self.stale_served),
            revalidated_not_modified: get(&self.revalidated_not_modified),
            revalidated_modified: get(&self.revalidated_modified),
            revalidation_failed: get(&self.revalidation_failed),
            collapsed: get(&self.collapsed),
            bytes_from_cache: get(&self.bytes_from_cache),
            bytes_from_origin: get(&self.bytes_from_origin),
            evictions: get(&self.evictions),
            entries,
            bytes,
            disk_hits: get(&self.disk_hits),
            ..CacheReport::default()
        }
    }
}
