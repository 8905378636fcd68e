//! The traits a backend implements: [`Records`] for metadata, [`Objects`] for bytes (the
//! clock and randomness are `ifmatch_azure::Env`'s; a backend's errors, `store_error.rs`).
//!
//! Records and objects are split so that they can live in different places: on one disk, or
//! records in a shared engine (Redis) beside bytes on a shared disk, or records in a Durable
//! Object beside bytes in R2. Every method returns a `Send` future so the native server can run
//! the front on a multi-threaded runtime; a single-threaded host (a Worker) wraps its futures.

use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http_body::Body;
use ifmatch_core::EntityTag;

use crate::body::Incoming;
use crate::record::Block;
use crate::record::Record;
pub use crate::store_error::StoreError;

pub use ifmatch_core::BoxError;

/// What a record is stored under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// A container's record.
    Container(String),
    /// A blob's record: container, then blob name.
    Blob(String, String),
}

impl std::fmt::Display for Key {
    /// What a log line and an error say: `container NAME` or `blob CONTAINER/NAME`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Container(c) => write!(f, "container {c}"),
            Self::Blob(c, b) => write!(f, "blob {c}/{b}"),
        }
    }
}

impl Key {
    /// The container this key belongs to.
    pub fn container(&self) -> &str {
        match self {
            Self::Container(c) | Self::Blob(c, _) => c,
        }
    }
}

/// A block to stage ([`Records::stage_block`]): under `key`'s set of uncommitted blocks of
/// `epoch`, unless the set holds `max` already.
#[derive(Debug, Clone, Copy)]
pub struct BlockToStage<'a> {
    /// The blob it is staged for.
    pub key: &'a Key,
    /// The staging set it joins (the record's [`Staging`](crate::record::Staging) epoch).
    pub epoch: u64,
    /// The block.
    pub block: &'a Block,
    /// The most entries the set may hold.
    pub max: usize,
}

/// A scan of a container's blob records ([`Records::list`]): those whose names start with
/// `prefix` and are not less than `from`, at most `limit` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan<'a> {
    /// The container.
    pub container: &'a str,
    /// What the names start with.
    pub prefix: &'a str,
    /// The least name.
    pub from: &'a str,
    /// The most records.
    pub limit: usize,
}

/// How [`Records::put`] may replace what is there (object_store's `PutMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// Only if there is no record yet; otherwise [`StoreError::AlreadyExists`].
    Create,
    /// Only if the current record has this generation; otherwise [`StoreError::Conflict`].
    Update(u64),
}

impl PutMode {
    /// Whether a put in this mode may replace `current`: the compare of every backend's
    /// compare-and-swap, so that all of them answer alike.
    /// `key` names the record, for the error.
    pub fn check(
        self,
        key: impl std::fmt::Display,
        current: Option<&Record>,
    ) -> Result<(), StoreError> {
        match (current, self) {
            (None, Self::Create) => Ok(()),
            (Some(_), Self::Create) => Err(StoreError::already_exists(key)),
            (Some(cur), Self::Update(generation)) if cur.generation == generation => Ok(()),
            (_, Self::Update(_)) => Err(StoreError::conflict(key)),
        }
    }
}

/// A body staged as an object, hashed while it streamed in, not yet named by any record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The object's name, for [`Content::object`](crate::record::Content::object).
    pub object: String,
    /// The project's strong ETag of the bytes.
    pub etag: EntityTag,
    /// The number of bytes.
    pub len: u64,
}

/// Metadata records with an atomic compare-and-swap per key.
pub trait Records: Send + Sync + 'static {
    /// The record under `key`. Shared, because a cache hands out the same record to every
    /// reader: a read costs no copy.
    fn get(
        &self,
        key: &Key,
    ) -> impl Future<Output = Result<Option<Arc<Record>>, StoreError>> + Send;

    /// Stores `record` under `key` as `mode` allows, atomically. A blob record whose container
    /// has no record fails with [`StoreError::ContainerNotFound`].
    fn put(
        &self,
        key: &Key,
        record: &Record,
        mode: PutMode,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Removes the record under `key` if its generation is `generation`. Removing a container
    /// removes its blobs' records too, and returns them so their objects can be discarded;
    /// removing a blob returns nothing (the caller holds the record it compared).
    fn delete(
        &self,
        key: &Key,
        generation: u64,
    ) -> impl Future<Output = Result<Vec<Record>, StoreError>> + Send;

    /// The blob records a [`Scan`] asks for, in name order. Fewer than its `limit` only when
    /// no more follow. The front builds its pages (markers, delimiters) from such scans, so a
    /// backend keeps its records ordered by name and a scan costs what it returns.
    fn list(
        &self,
        scan: Scan<'_>,
    ) -> impl Future<Output = Result<Vec<(String, Record)>, StoreError>> + Send;

    /// Appends the block to the blocks staged for its key under its epoch (the record's
    /// [`Staging`](crate::record::Staging)), durably, unless that set already holds `max` entries:
    /// then `Ok(false)` and nothing is written. One write of the block alone, whatever the set
    /// holds: the rules (leases, ids, what a commit takes) stay in the front.
    fn stage_block(
        &self,
        stage: BlockToStage<'_>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Every block staged for `key` under `epoch`, in the order they were staged (a block
    /// staged again under an id is there twice: the later counts). Empty when there is no such
    /// set.
    fn staged_blocks(
        &self,
        key: &Key,
        epoch: u64,
    ) -> impl Future<Output = Result<Vec<Block>, StoreError>> + Send;

    /// Forgets the blocks staged for `key` under `epoch`, once its record no longer names the
    /// set (committed, written whole, deleted): no read asks for them again, so one left behind
    /// by a crash costs room, never a wrong answer. A set that is not there is not an error.
    fn drop_staged(
        &self,
        key: &Key,
        epoch: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The largest blob this backend keeps in its record, bytes and all
    /// ([`Content::inline`](crate::record::Content::inline)): a Put Blob of at most this many bytes
    /// stages no object, so it costs one durable write where an object costs two more. 0, the
    /// default: every blob's bytes go to the objects.
    fn inline_max(&self) -> u64 {
        0
    }

    /// The names of every container, in any order: what the orphan sweep walks. A backend
    /// that cannot enumerate its containers answers [`StoreError::Unsupported`].
    fn containers(&self) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send {
        async { Err(StoreError::Unsupported("listing containers")) }
    }
}

/// The bytes of an object a read wants: a range of them, or all of them (`None`).
pub type Span = Option<Range<u64>>;

/// Blob bytes, stored as immutable objects.
pub trait Objects: Send + Sync + 'static {
    /// The body of a read.
    type Reader: Body<Data = Bytes, Error = StoreError> + Send + 'static;

    /// Streams `body` into a new object, hashing it on the way. More than `limit` bytes fail
    /// with [`StoreError::TooLarge`] and leave nothing. The object may not be durable before
    /// [`Objects::persist`]: no record may name it until that returned.
    fn stage(
        &self,
        body: impl Incoming,
        limit: u64,
    ) -> impl Future<Output = Result<Staged, StoreError>> + Send;

    /// Reads `range` (or all) of `object`, whose record says it holds `len` bytes. An object
    /// of another length fails with [`StoreError::Corrupt`] before any byte is sent: a read
    /// never serves bytes that do not match their record.
    fn read(
        &self,
        object: &str,
        len: u64,
        range: Span,
    ) -> impl Future<Output = Result<Self::Reader, StoreError>> + Send;

    /// Makes a staged object durable (on disk, its name too). Split from [`Objects::stage`] so
    /// that a write which lost its race while its body arrived is discarded before it costs
    /// the fsyncs. The default does nothing: for a backend whose `stage` is durable itself.
    fn persist(&self, staged: &Staged) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = staged;
        async { Ok(()) }
    }

    /// Removes an object no record names any more. A missing object is not an error.
    fn discard(&self, object: &str) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// A new, durable object with the bytes of `object` (whose record says it holds `len`),
    /// for a copy's record to own: each record then discards its own objects as it always
    /// does, and the sweep, which discards unnamed objects by their age, counts the new one's
    /// from now. A backend that can name the same bytes twice (a hard link, a server-side
    /// copy) copies none through the server; the default reads them and stages them again.
    fn share(
        &self,
        object: &str,
        len: u64,
    ) -> impl Future<Output = Result<String, StoreError>> + Send
    where
        Self: Sized,
    {
        share_by_copy(self, object, len)
    }

    /// The objects stored more than `age` ago, as of `now`: the candidates of the orphan
    /// sweep. A backend that cannot enumerate its objects answers
    /// [`StoreError::Unsupported`].
    fn older_than(
        &self,
        age: std::time::Duration,
        now: SystemTime,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send {
        let _ = (age, now);
        async { Err(StoreError::Unsupported("listing objects")) }
    }
}

/// [`Objects::share`] the long way, for any store: the bytes of `object` read and staged again
/// as a new object, made durable.
pub async fn share_by_copy<O: Objects>(
    store: &O,
    object: &str,
    len: u64,
) -> Result<String, StoreError> {
    // Its length told exactly, for a store that needs it before the bytes (R2).
    let reader = crate::body::ResponseBody::stream(store.read(object, len, None).await?, len);
    let staged = store.stage(reader, len).await?;
    if staged.len != len {
        let _ = store.discard(&staged.object).await;
        return Err(StoreError::corrupt(
            format_args!("object {object}"),
            format!("{} bytes where its record says {len}", staged.len),
        ));
    }
    if let Err(e) = store.persist(&staged).await {
        let _ = store.discard(&staged.object).await;
        return Err(e);
    }
    Ok(staged.object)
}

/// The check every [`Objects::read`] makes: the object holds the bytes its record says.
pub fn check_len(object: &str, actual: u64, expected: u64) -> Result<(), StoreError> {
    if actual == expected {
        return Ok(());
    }
    Err(StoreError::corrupt(
        format_args!("object {object}"),
        format!("it holds {actual} bytes where its record says {expected}"),
    ))
}
