//! The byte cache both object stores keep in front of their small objects: objects are
//! immutable and their names never reused, so a cached object can never be stale, on any
//! instance; the cache needs no invalidation for correctness, only to free memory on discard.

use bytes::Bytes;
use ifmatch_blob::{StoreError, check_len};

/// Objects no larger than this are read whole and kept.
pub(crate) const CACHED_OBJECT_MAX: u64 = 4 << 20;

/// Object name to its bytes, weighed by their length.
pub(crate) type ByteCache = moka::sync::Cache<String, Bytes>;

/// A cache holding up to `bytes` bytes.
pub(crate) fn byte_cache(bytes: u64) -> ByteCache {
    moka::sync::Cache::builder()
        .max_capacity(bytes)
        .weigher(|_: &String, bytes: &Bytes| u32::try_from(bytes.len()).unwrap_or(u32::MAX))
        .build()
}

/// `range` (or all) of `object`'s whole `bytes`, which its record says are `len` long.
pub(crate) fn slice(
    object: &str,
    bytes: &Bytes,
    len: u64,
    range: Option<std::ops::Range<u64>>,
) -> Result<Bytes, StoreError> {
    check_len(object, bytes.len() as u64, len)?;
    let range = range.unwrap_or(0..len);
    Ok(bytes.slice(range.start as usize..range.end as usize))
}
