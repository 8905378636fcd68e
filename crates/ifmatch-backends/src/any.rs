//! One records type, one objects type and one tables type for whichever backends were chosen at start, so a
//! server is built once (one arm, not one per combination). Each call goes to the backend
//! chosen; the rules stay in the front.
//!
//! A call's future is as large as the largest backend's, and every request's future holds
//! one: the object store's records and tables build futures of 4 to 10 KB (a `put` or a
//! `commit` holds a whole conditional write to the bucket), where the local disk's and
//! Redis's take under one, so the bucket's arms are boxed: a request on the embedded default
//! then moves and allocates a future of its own size, and a request to a bucket, which waits
//! on the network anyway, pays one allocation more.

use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body::{Body, SizeHint};
use ifmatch_blob::{
    Block, BlockToStage, Key, Objects, PutMode, Record, Records, Scan, Staged, StoreError,
};
use ifmatch_blob::{Incoming, Span};
use ifmatch_table::{Change, Entity, EntityKey, TableError};

#[cfg(feature = "object-store")]
use crate::bucket::{BucketObjects, BucketReader};
use crate::local::{LocalObjects, LocalRecords, ObjectReader};
use ifmatch_core::FramePoll;

/// The records of the backend chosen: the local disk, Redis, or an object store.
#[derive(Debug, Clone)]
pub enum AnyRecords {
    /// On the local disk ([`LocalRecords`]).
    Local(LocalRecords),
    /// In Redis, shared by a fleet.
    #[cfg(feature = "redis")]
    Redis(ifmatch_redis::RedisRecords),
    /// In an object store, shared by a fleet.
    #[cfg(feature = "bucket")]
    Bucket(ifmatch_bucket::BucketRecords),
}

/// The objects of the backend chosen: the local disk, or an object store.
#[derive(Debug, Clone)]
pub enum AnyObjects {
    /// On the local disk ([`LocalObjects`]).
    Local(LocalObjects),
    /// In an object store ([`BucketObjects`]).
    #[cfg(feature = "object-store")]
    Bucket(BucketObjects),
}

/// Awaits `$call` on the backend inside `$value`, an `$any` ([`AnyRecords`], [`AnyTables`]),
/// whichever it is (the bucket's boxed).
macro_rules! awaited {
    ($any:ident, $value:expr, $inner:ident => $call:expr) => {
        match $value {
            $any::Local($inner) => $call.await,
            #[cfg(feature = "redis")]
            $any::Redis($inner) => $call.await,
            #[cfg(feature = "bucket")]
            $any::Bucket($inner) => Box::pin($call).await,
        }
    };
}

/// Calls `$call` on the backend inside `$value`, whichever it is.
macro_rules! objects {
    ($value:expr, $inner:ident => $call:expr) => {
        match $value {
            AnyObjects::Local($inner) => $call,
            #[cfg(feature = "object-store")]
            AnyObjects::Bucket($inner) => $call,
        }
    };
}

impl Records for AnyRecords {
    async fn get(&self, key: &Key) -> Result<Option<Arc<Record>>, StoreError> {
        awaited!(AnyRecords, self, r => r.get(key))
    }

    async fn put(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
        awaited!(AnyRecords, self, r => r.put(key, record, mode))
    }

    async fn delete(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
        awaited!(AnyRecords, self, r => r.delete(key, generation))
    }

    async fn list(&self, scan: Scan<'_>) -> Result<Vec<(String, Record)>, StoreError> {
        awaited!(AnyRecords, self, r => r.list(scan))
    }

    async fn stage_block(&self, stage: BlockToStage<'_>) -> Result<bool, StoreError> {
        awaited!(AnyRecords, self, r => r.stage_block(stage))
    }

    async fn staged_blocks(&self, key: &Key, epoch: u64) -> Result<Vec<Block>, StoreError> {
        awaited!(AnyRecords, self, r => r.staged_blocks(key, epoch))
    }

    async fn drop_staged(&self, key: &Key, epoch: u64) -> Result<(), StoreError> {
        awaited!(AnyRecords, self, r => r.drop_staged(key, epoch))
    }

    fn inline_max(&self) -> u64 {
        match self {
            AnyRecords::Local(r) => r.inline_max(),
            #[cfg(feature = "redis")]
            AnyRecords::Redis(r) => r.inline_max(),
            #[cfg(feature = "bucket")]
            AnyRecords::Bucket(r) => r.inline_max(),
        }
    }

    async fn containers(&self) -> Result<Vec<String>, StoreError> {
        awaited!(AnyRecords, self, r => r.containers())
    }
}

/// The body of a read, from whichever objects were chosen.
pub enum AnyReader {
    /// From the local disk.
    Local(ObjectReader),
    /// From an object store.
    Bucket(BucketReaderIfAny),
}

impl std::fmt::Debug for AnyReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local(reader) => reader.fmt(f),
            Self::Bucket(_) => f.write_str("AnyReader::Bucket"),
        }
    }
}

/// An object store's reader, when the feature is on; nothing otherwise.
#[cfg(feature = "object-store")]
type BucketReaderIfAny = BucketReader;
#[cfg(not(feature = "object-store"))]
type BucketReaderIfAny = http_body_util::Empty<Bytes>;

impl Body for AnyReader {
    type Data = Bytes;
    type Error = StoreError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        // Both readers are `Unpin`: no projection needed.
        match self.get_mut() {
            Self::Local(reader) => Pin::new(reader).poll_frame(cx),
            #[cfg(feature = "object-store")]
            Self::Bucket(reader) => Pin::new(reader).poll_frame(cx),
            #[cfg(not(feature = "object-store"))]
            Self::Bucket(_) => std::task::Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Local(reader) => reader.is_end_stream(),
            Self::Bucket(reader) => reader.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Local(reader) => reader.size_hint(),
            Self::Bucket(reader) => reader.size_hint(),
        }
    }
}

impl Objects for AnyObjects {
    type Reader = AnyReader;

    async fn stage(&self, body: impl Incoming, limit: u64) -> Result<Staged, StoreError> {
        objects!(self, o => o.stage(body, limit).await)
    }

    async fn read(&self, object: &str, len: u64, range: Span) -> Result<Self::Reader, StoreError> {
        match self {
            Self::Local(o) => Ok(AnyReader::Local(o.read(object, len, range).await?)),
            #[cfg(feature = "object-store")]
            Self::Bucket(o) => Ok(AnyReader::Bucket(o.read(object, len, range).await?)),
        }
    }

    async fn persist(&self, staged: &Staged) -> Result<(), StoreError> {
        objects!(self, o => o.persist(staged).await)
    }

    async fn discard(&self, object: &str) -> Result<(), StoreError> {
        objects!(self, o => o.discard(object).await)
    }

    async fn share(&self, object: &str, len: u64) -> Result<String, StoreError> {
        objects!(self, o => o.share(object, len).await)
    }

    async fn older_than(&self, age: Duration, now: SystemTime) -> Result<Vec<String>, StoreError> {
        objects!(self, o => o.older_than(age, now).await)
    }
}

/// The Table front's backend chosen: the local disk, Redis, or an object store.
#[derive(Debug, Clone)]
pub enum AnyTables {
    /// In a redb database on the local disk ([`LocalTables`](crate::local::LocalTables)).
    Local(crate::local::LocalTables),
    /// In Redis, shared by a fleet.
    #[cfg(feature = "redis")]
    Redis(ifmatch_redis::RedisTables),
    /// In an object store, shared by a fleet.
    #[cfg(feature = "bucket")]
    Bucket(ifmatch_bucket::BucketTables),
}

impl ifmatch_table::Tables for AnyTables {
    async fn create_table(&self, name: &str) -> Result<bool, TableError> {
        awaited!(AnyTables, self, t => t.create_table(name))
    }

    async fn delete_table(&self, name: &str) -> Result<bool, TableError> {
        awaited!(AnyTables, self, t => t.delete_table(name))
    }

    async fn tables(&self, after: &str, limit: usize) -> Result<Vec<String>, TableError> {
        awaited!(AnyTables, self, t => t.tables(after, limit))
    }

    async fn get(&self, table: &str, key: &EntityKey) -> Result<Option<Entity>, TableError> {
        awaited!(AnyTables, self, t => t.get(table, key))
    }

    async fn get_many(
        &self,
        table: &str,
        keys: &[EntityKey],
    ) -> Result<Vec<Option<Entity>>, TableError> {
        awaited!(AnyTables, self, t => t.get_many(table, keys))
    }

    async fn scan(
        &self,
        table: &str,
        scan: ifmatch_table::Scan<'_>,
    ) -> Result<Vec<Entity>, TableError> {
        awaited!(AnyTables, self, t => t.scan(table, scan))
    }

    async fn commit(&self, table: &str, changes: &[Change]) -> Result<(), TableError> {
        awaited!(AnyTables, self, t => t.commit(table, changes))
    }
}
