//! The blob front's records in an object store: each container's and each blob's record one
//! small JSON object, every change one conditional PUT on the object that holds it.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use ifmatch_blob::{Block, BlockToStage, Key, PutMode, Record, Records, Scan, StoreError};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use crate::index::{Entry, Index};
use crate::name;
use crate::object::{self, Bucket, Failure};

/// Blob and container records in a bucket, for a fleet of `ifmatch serve` instances that
/// shares nothing but the bucket (`--backend s3://...`).
///
/// Layout, under a prefix:
///
/// - `c/<container>`: the container's record, and the *incarnation* its blobs are kept under
///   (random, new each time the container is created). A deleted container leaves its object
///   with no record (a tombstone) until the name is created again.
/// - `b/<container>/<incarnation>/<name>`: a blob's record, and its own incarnation (new each
///   time the blob is created, kept while it is changed). A deleted blob leaves a tombstone
///   likewise.
/// - `live/c/<container>/<incarnation>` and `live/b/<container>/<incarnation>/<name>/<blob's
///   incarnation>`: the index of the living, one empty object each (see `index.rs`), which the
///   listings read: a listing reads the living, not the tombstones.
/// - `s/<container>/<incarnation>/<name>/<epoch>/`: a blob's staged blocks: a counter (`n`),
///   and one object per block, named by its number in the set (`b/<number>`).
///
/// Names are encoded so that the store's ordered listing lists blobs in name order (see
/// `name.rs`).
///
/// Each change reads the object and writes it back only if the store still holds what was read
/// (`If-Match` on its ETag, or create-only), reading again when another instance wrote first:
/// the compare of [`PutMode`] happens on what was read, and the write lands only if nothing
/// came between. What must change together lies in one object, or is made so by the
/// incarnation:
///
/// - a container's deletion is one write, the tombstone: its blobs' records, under an
///   incarnation no container has any more, are out of every read and listing at that instant.
///   Their objects are then removed and their records returned, so that the front discards
///   their bytes; a crash before the end leaves records nobody reads, whose bytes the orphan
///   sweep takes;
/// - a blob written into a container while it is deleted lands under the dead incarnation: as
///   if written just before the deletion, which took it;
/// - a Put Block List, a copy, a Put Blob is one record's write (the front stages the bytes
///   first).
///
/// Tombstones stay because an object store deletes unconditionally (object_store offers no
/// `If-Match` on a delete): removing one could remove a record created over it meanwhile. The
/// index's entries, one per life, can be removed safely, so listings pass the tombstones by.
///
/// What it costs, in store requests: reading a blob's record, 2 GETs (the container's, for its
/// incarnation, then the blob's); a change of a blob, those and a PUT, and one more PUT (its
/// entry) when it creates the blob, one more DELETE when it deletes it; a container's put or
/// delete likewise, less the first GET (and, for a delete, a listing of its blobs, a GET and
/// 2 DELETEs each); staging a block, 2 GETs and 2 PUTs; a listing, the container's GET, the
/// index's listing pages, and a GET per record listed (up to 32 at once). Lost races cost a GET and a PUT each.
#[derive(Clone, Debug)]
pub struct BucketRecords {
    bucket: Bucket,
}

/// What a record's object holds: the record, none once deleted, and the incarnation of its
/// life (for a container, what its blobs are kept under).
#[derive(Debug, Serialize, Deserialize)]
struct Slot {
    record: Option<Record>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    incarnation: String,
}

/// A slot's object as read: its record, and the version a conditional write names.
type Read = (Option<Slot>, Option<UpdateVersion>);

/// Where a record's slot is, and the index its lives are entered in.
struct At {
    slot: Path,
    index: Index,
    /// The slot's name in the index.
    segment: String,
}

impl At {
    /// The index entry of the slot's life `incarnation`.
    fn entry(&self, incarnation: &str) -> Path {
        self.index.entry(&[&self.segment], incarnation)
    }
}

impl BucketRecords {
    /// Records in `store` under `prefix` (say `ifmatch/records`). Each operation is given up
    /// after 10 s.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> Self {
        let bucket = Bucket::new(store, prefix, Duration::from_secs(10));
        Self { bucket }
    }

    /// How long one operation (its GETs and PUTs, retries included) may take before it fails
    /// with [`StoreError::Unavailable`]. An operation given up may still land, as the error
    /// says.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.bucket.timeout = timeout;
        self
    }

    /// Checks that the store offers the conditional puts every change needs, with an object of
    /// its own under the prefix: a store without them (object_store's local filesystem) is
    /// refused with [`StoreError::Unsupported`], before the first write rather than at it.
    pub async fn check(&self) -> Result<(), StoreError> {
        self.within(async {
            let checked = object::check(&*self.bucket.store, &self.bucket.prefix).await;
            checked.map_err(|failure| store_error(&self.bucket.prefix, failure))
        })
        .await
    }

    /// `operation`, given up after [`BucketRecords::timeout`].
    async fn within<T>(
        &self,
        operation: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let late = |timeout| {
            let said = format!("the object store did not answer within {timeout:?}");
            StoreError::Unavailable(said.into())
        };
        self.bucket.within(operation, late).await
    }

    fn container_path(&self, container: &str) -> Path {
        self.bucket.path(&["c", &name::encode(container)])
    }

    /// The index of the containers' lives.
    fn containers_index(&self) -> Index {
        self.bucket.index(&["c"])
    }

    /// The index of the blobs' lives in a container's incarnation.
    fn blobs_index(&self, container: &str, incarnation: &str) -> Index {
        self.bucket
            .index(&["b", &name::encode(container), incarnation])
    }

    /// Where the blobs of a container's incarnation are.
    fn blobs_path(&self, container: &str, incarnation: &str) -> Path {
        self.bucket
            .path(&["b", &name::encode(container), incarnation])
    }

    /// Where the staged blocks of a container's incarnation are; of one blob's set, with
    /// `blob` and `epoch`.
    fn staged_path(&self, container: &str, incarnation: &str, set: Option<(&str, u64)>) -> Path {
        let path = self
            .bucket
            .path(&["s", &name::encode(container), incarnation]);
        match set {
            None => path,
            Some((blob, epoch)) => path.join(name::encode(blob)).join(format!("{epoch:016x}")),
        }
    }

    async fn read(&self, path: &Path) -> Result<Read, StoreError> {
        match object::read::<Slot>(&*self.bucket.store, path).await {
            Ok(Some((slot, version))) => Ok((Some(slot), Some(version))),
            Ok(None) => Ok((None, None)),
            Err(failure) => Err(store_error(path, failure)),
        }
    }

    async fn write_if(
        &self,
        path: &Path,
        slot: &Slot,
        version: Option<UpdateVersion>,
    ) -> Result<bool, StoreError> {
        let written = object::write_if(&*self.bucket.store, path, slot, version).await;
        let written = written.map_err(|failure| store_error(path, failure))?;
        Ok(written.is_some())
    }

    /// The incarnation of `container` while it has a record.
    async fn incarnation(&self, container: &str) -> Result<Option<String>, StoreError> {
        let (slot, _) = self.read(&self.container_path(container)).await?;
        Ok(slot
            .filter(|s| s.record.is_some())
            .map(|slot| slot.incarnation))
    }

    /// Where the record of `key` is: for a blob, while its container has a record.
    async fn at(&self, key: &Key) -> Result<Option<At>, StoreError> {
        Ok(match key {
            Key::Container(container) => Some(At {
                slot: self.container_path(container),
                index: self.containers_index(),
                segment: name::encode(container),
            }),
            Key::Blob(container, blob) => {
                let incarnation = self.incarnation(container).await?;
                incarnation.map(|i| At {
                    slot: self.blobs_path(container, &i).join(name::encode(blob)),
                    index: self.blobs_index(container, &i),
                    segment: name::encode(blob),
                })
            }
        })
    }

    /// Writes `record` at `key` if `mode` holds against the record there; a creation starts a
    /// life, entered in the index first.
    async fn put_unbounded(
        &self,
        key: &Key,
        record: &Record,
        mode: PutMode,
    ) -> Result<(), StoreError> {
        let mut waits = object::waits();
        loop {
            let at = (self.at(key).await?).ok_or(StoreError::ContainerNotFound)?;
            let (slot, version) = self.read(&at.slot).await?;
            let live = slot.filter(|s| s.record.is_some());
            mode.check(key, live.as_ref().and_then(|s| s.record.as_ref()))?;
            let created = live.is_none();
            let incarnation = live.map_or_else(object::incarnation, |s| s.incarnation);
            let entry = at.entry(&incarnation);
            if created {
                (at.index.add(&entry).await).map_err(|f| store_error(&entry, f))?;
            }
            let slot = Slot {
                record: Some(record.clone()),
                incarnation,
            };
            if self.write_if(&at.slot, &slot, version).await? {
                return Ok(());
            }
            if created {
                // A creation carried out, whose resend was refused and which another writer
                // changed before the refusal was checked (`object::write_if`), keeps its
                // incarnation, which no other creation has: it was done, and its entry stays.
                let (now, _) = self.read(&at.slot).await?;
                if now.is_some_and(|now| now.incarnation == slot.incarnation) {
                    return Ok(());
                }
                (at.index.remove(&entry).await).map_err(|f| store_error(&entry, f))?;
            }
            object::wait(&mut waits).await;
        }
    }

    /// Writes the tombstone of the record at `at` if its generation is `generation`, then
    /// removes the index entry of the life it ended; its slot as it was.
    async fn bury(&self, key: &Key, at: &At, generation: u64) -> Result<Slot, StoreError> {
        let mut waits = object::waits();
        loop {
            let (slot, version) = self.read(&at.slot).await?;
            let Some(slot) = slot.filter(|s| s.record.is_some()) else {
                return Err(StoreError::not_found(key));
            };
            PutMode::Update(generation).check(key, slot.record.as_ref())?;
            let tombstone = Slot {
                record: None,
                incarnation: String::new(),
            };
            if self.write_if(&at.slot, &tombstone, version).await? {
                let entry = at.entry(&slot.incarnation);
                (at.index.remove(&entry).await).map_err(|f| store_error(&entry, f))?;
                return Ok(slot);
            }
            object::wait(&mut waits).await;
        }
    }

    /// The record an index entry names, if its slot (in `slots`) confirms it is alive in the
    /// entry's incarnation; an entry it does not confirm is removed once it is a leftover.
    async fn confirmed(
        &self,
        index: &Index,
        slots: &Path,
        entry: &Entry,
    ) -> Result<Option<Record>, StoreError> {
        let (slot, _) = self.read(&entry.slot(slots)).await?;
        let found = slot.and_then(|s| Some((s.record?, s.incarnation)));
        let confirmed = index.confirm(entry, found).await;
        confirmed.map_err(|f| store_error(index.path(), f))
    }

    /// The name of the slot an entry of a one-level index names.
    fn named(index: &Index, entry: &Entry) -> Result<String, StoreError> {
        (entry.name())
            .ok_or_else(|| StoreError::corrupt(index.path(), "an index entry names no record"))
    }

    /// Removes what a deleted container's incarnation held: its blobs' objects, whose records
    /// it returns, their index and its staged blocks. Nobody reads them any more; a crash
    /// before the end leaves them to the orphan sweep.
    async fn sweep(&self, container: &str, incarnation: &str) -> Result<Vec<Record>, StoreError> {
        let blobs = self.blobs_path(container, incarnation);
        let index = self.blobs_index(container, incarnation);
        let records: Vec<Option<Record>> = (index.list(None))
            .map_err(|f| store_error(&blobs, f))
            .map_ok(|entry| {
                let (index, blobs) = (&index, &blobs);
                async move { self.confirmed(index, blobs, &entry).await }
            })
            .try_buffered(object::READS)
            .try_collect()
            .await?;
        self.remove_all(blobs).await?;
        self.remove_all(index.path().clone()).await?;
        self.remove_all(self.staged_path(container, incarnation, None))
            .await?;
        Ok(records.into_iter().flatten().collect())
    }

    /// Deletes every object under `path`.
    async fn remove_all(&self, path: Path) -> Result<(), StoreError> {
        let removed = object::remove_all(&*self.bucket.store, &path).await;
        removed.map_err(|f| store_error(&path, f))
    }

    async fn list_unbounded(&self, scan: Scan<'_>) -> Result<Vec<(String, Record)>, StoreError> {
        let Some(incarnation) = self.incarnation(scan.container).await? else {
            return Ok(Vec::new());
        };
        let blobs = self.blobs_path(scan.container, &incarnation);
        let index = self.blobs_index(scan.container, &incarnation);
        let start = scan.from.max(scan.prefix);
        // The store lists after an offset, in order: the open form of `start` sorts just
        // before its segment, and after every lesser name's.
        let offset = (!start.is_empty()).then(|| [name::open(start)]);
        let mut listing = index.list(offset.as_ref().map(|o| o.as_slice()));
        let mut out = Vec::new();
        let mut listed = false;
        while out.len() < scan.limit && !listed {
            // The next entries that may fill the page, their records read together.
            let mut next = Vec::new();
            while next.len() < scan.limit - out.len() {
                let entry = listing.try_next().await;
                let Some(entry) = entry.map_err(|f| store_error(&blobs, f))? else {
                    listed = true;
                    break;
                };
                let name = Self::named(&index, &entry)?;
                if name.as_str() < start {
                    // A store that lists from the start all the same (an emulator).
                    continue;
                }
                if !name.starts_with(scan.prefix) {
                    listed = true;
                    break;
                }
                next.push((name, entry));
            }
            let reads = next.into_iter().map(|(name, entry)| {
                let (index, blobs) = (&index, &blobs);
                async move {
                    let record = self.confirmed(index, blobs, &entry).await?;
                    Ok::<_, StoreError>(record.map(|record| (name, record)))
                }
            });
            let read: Vec<_> = futures_util::stream::iter(reads)
                .buffered(object::READS)
                .try_collect()
                .await?;
            out.extend(read.into_iter().flatten());
        }
        Ok(out)
    }

    async fn stage_unbounded(&self, stage: BlockToStage<'_>) -> Result<bool, StoreError> {
        let Key::Blob(container, blob) = stage.key else {
            return Err(StoreError::not_found(stage.key));
        };
        let incarnation =
            (self.incarnation(container).await?).ok_or(StoreError::ContainerNotFound)?;
        let set = self.staged_path(container, &incarnation, Some((blob, stage.epoch)));
        // The set's counter gives the block its place, and bounds the set.
        let counter = set.clone().join("n");
        let taken = object::take_number(&*self.bucket.store, &counter, stage.max as u64).await;
        let Some(number) = taken.map_err(|f| store_error(&counter, f))? else {
            return Ok(false);
        };
        let path = set.join("b").join(format!("{number:016x}"));
        let json = serde_json::to_vec(stage.block).map_err(|e| StoreError::corrupt(&path, e))?;
        (self.bucket.store.put(&path, PutPayload::from(json)).await)
            .map_err(|e| store_error(&path, e.into()))?;
        Ok(true)
    }

    async fn staged_unbounded(&self, key: &Key, epoch: u64) -> Result<Vec<Block>, StoreError> {
        let Key::Blob(container, blob) = key else {
            return Ok(Vec::new());
        };
        let Some(incarnation) = self.incarnation(container).await? else {
            return Ok(Vec::new());
        };
        let blocks = (self.staged_path(container, &incarnation, Some((blob, epoch)))).join("b");
        let paths = object::paths_under(&*self.bucket.store, &blocks).await;
        let mut paths = paths.map_err(|f| store_error(&blocks, f))?;
        // Named by their number: in the order they were staged, whatever order the store lists.
        paths.sort();
        let reads = paths.into_iter().map(|path| async move {
            let read = object::read::<Block>(&*self.bucket.store, &path).await;
            read.map_err(|f| store_error(&path, f))
        });
        let found: Vec<Option<(Block, UpdateVersion)>> = futures_util::stream::iter(reads)
            .buffered(16)
            .try_collect()
            .await?;
        Ok(found
            .into_iter()
            .flatten()
            .map(|(block, _)| block)
            .collect())
    }
}

/// A failure of the store as the front's error: a store that offers no conditional puts is
/// refused as such; anything else of the store may be retried.
fn store_error(path: &Path, failure: Failure) -> StoreError {
    match failure {
        Failure::Store(object_store::Error::NotImplemented { .. }) => StoreError::Unsupported(
            "conditional updates (`If-Match` puts) of this object store, which every change \
                 needs: use S3, Azure Blob, Google Cloud Storage, R2 or Redis",
        ),
        Failure::Store(error) => StoreError::Unavailable(Box::new(error)),
        Failure::Corrupt(error) => StoreError::corrupt(path, error),
    }
}

impl Records for BucketRecords {
    async fn get(&self, key: &Key) -> Result<Option<Arc<Record>>, StoreError> {
        self.within(async {
            let Some(at) = self.at(key).await? else {
                return Ok(None);
            };
            let (slot, _) = self.read(&at.slot).await?;
            Ok(slot.and_then(|s| s.record).map(Arc::new))
        })
        .await
    }

    async fn put(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
        self.within(self.put_unbounded(key, record, mode)).await
    }

    async fn delete(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
        self.within(async {
            let at = (self.at(key).await?).ok_or_else(|| StoreError::not_found(key))?;
            let buried = self.bury(key, &at, generation).await?;
            match key {
                Key::Container(c) => self.sweep(c, &buried.incarnation).await,
                Key::Blob(..) => Ok(Vec::new()),
            }
        })
        .await
    }

    async fn list(&self, scan: Scan<'_>) -> Result<Vec<(String, Record)>, StoreError> {
        self.within(self.list_unbounded(scan)).await
    }

    async fn stage_block(&self, stage: BlockToStage<'_>) -> Result<bool, StoreError> {
        self.within(self.stage_unbounded(stage)).await
    }

    async fn staged_blocks(&self, key: &Key, epoch: u64) -> Result<Vec<Block>, StoreError> {
        self.within(self.staged_unbounded(key, epoch)).await
    }

    async fn drop_staged(&self, key: &Key, epoch: u64) -> Result<(), StoreError> {
        self.within(async {
            let Key::Blob(container, blob) = key else {
                return Ok(());
            };
            let Some(incarnation) = self.incarnation(container).await? else {
                return Ok(());
            };
            let set = self.staged_path(container, &incarnation, Some((blob, epoch)));
            self.remove_all(set).await
        })
        .await
    }

    async fn containers(&self) -> Result<Vec<String>, StoreError> {
        self.within(async {
            let containers = self.bucket.path(&["c"]);
            let index = self.containers_index();
            let names: Vec<Option<String>> = (index.list(None))
                .map_err(|f| store_error(&containers, f))
                .map_ok(|entry| {
                    let (index, containers) = (&index, &containers);
                    async move {
                        let name = Self::named(index, &entry)?;
                        let record = self.confirmed(index, containers, &entry).await?;
                        Ok(record.map(|_| name))
                    }
                })
                .try_buffered(object::READS)
                .try_collect()
                .await?;
            Ok(names.into_iter().flatten().collect())
        })
        .await
    }
}
