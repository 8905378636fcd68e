//! The blob front's records in an object store: each container's and each blob's record one
//! small JSON object, every change one conditional PUT on the object that holds it.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use ifmatch_blob::{Block, BlockToStage, Key, PutMode, Record, Records, Scan, StoreError};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};

use crate::name;
use crate::object::{self, Backoff, Bucket, Failure};

/// Blob and container records in a bucket, for a fleet of `ifmatch serve` instances that
/// shares nothing but the bucket (`--backend s3://...`).
///
/// Layout, under a prefix:
///
/// - `c/<container>`: the container's record, and the *incarnation* its blobs are kept under
///   (random, new each time the container is created). A deleted container leaves its object
///   with no record (a tombstone) until the name is created again.
/// - `b/<container>/<incarnation>/<name>`: a blob's record. A deleted blob leaves a tombstone
///   likewise.
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
/// `If-Match` on a delete): removing one could remove a record created over it meanwhile. A
/// listing reads past the tombstones in its range.
///
/// What it costs, in store requests: reading a blob's record, 2 GETs (the container's, for its
/// incarnation, then the blob's); a put or a delete of a blob, those and a PUT; a container's
/// put or delete, a GET and a PUT (and, for a delete, a listing of its blobs, a GET and a
/// DELETE each); staging a block, 2 GETs and 2 PUTs; a listing, the container's GET, the
/// listing's pages, and a GET per record listed. Lost races cost a GET and a PUT each.
#[derive(Clone, Debug)]
pub struct BucketRecords {
    bucket: Bucket,
}

/// What a record's object holds: the record, none once deleted; for a container, the
/// incarnation its blobs are kept under.
#[derive(Debug, Serialize, Deserialize)]
struct Slot {
    record: Option<Record>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    incarnation: String,
}

/// A slot's object as read: its record, and the version a conditional write names.
type Read = (Option<Slot>, Option<UpdateVersion>);

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
        self.bucket
            .prefix
            .clone()
            .join("c")
            .join(name::encode(container))
    }

    /// Where the blobs of a container's incarnation are.
    fn blobs_path(&self, container: &str, incarnation: &str) -> Path {
        let path = self
            .bucket
            .prefix
            .clone()
            .join("b")
            .join(name::encode(container));
        path.join(incarnation)
    }

    /// Where the staged blocks of a container's incarnation are; of one blob's set, with
    /// `blob` and `epoch`.
    fn staged_path(&self, container: &str, incarnation: &str, set: Option<(&str, u64)>) -> Path {
        let path = self
            .bucket
            .prefix
            .clone()
            .join("s")
            .join(name::encode(container));
        let path = path.join(incarnation);
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

    /// The path of a blob's record, while its container has one.
    async fn blob_path(&self, container: &str, blob: &str) -> Result<Option<Path>, StoreError> {
        let incarnation = self.incarnation(container).await?;
        Ok(incarnation.map(|i| self.blobs_path(container, &i).join(name::encode(blob))))
    }

    async fn put_container(
        &self,
        key: &Key,
        record: &Record,
        mode: PutMode,
    ) -> Result<(), StoreError> {
        let path = self.container_path(key.container());
        let mut backoff = Backoff::default();
        loop {
            let (slot, version) = self.read(&path).await?;
            let (current, incarnation) = match slot {
                Some(Slot {
                    record: Some(current),
                    incarnation,
                }) => (Some(current), incarnation),
                _ => (None, object::incarnation()),
            };
            mode.check(key, current.as_ref())?;
            let slot = Slot {
                record: Some(record.clone()),
                incarnation,
            };
            if self.write_if(&path, &slot, version).await? {
                return Ok(());
            }
            backoff.wait().await;
        }
    }

    async fn put_blob(
        &self,
        key: &Key,
        blob: &str,
        record: &Record,
        mode: PutMode,
    ) -> Result<(), StoreError> {
        let mut backoff = Backoff::default();
        loop {
            let path = (self.blob_path(key.container(), blob).await?)
                .ok_or(StoreError::ContainerNotFound)?;
            let (slot, version) = self.read(&path).await?;
            mode.check(key, slot.and_then(|s| s.record).as_ref())?;
            let slot = Slot {
                record: Some(record.clone()),
                incarnation: String::new(),
            };
            if self.write_if(&path, &slot, version).await? {
                return Ok(());
            }
            backoff.wait().await;
        }
    }

    /// Writes the tombstone of the record at `path` if its generation is `generation`; its
    /// slot as it was.
    async fn bury(&self, key: &Key, path: &Path, generation: u64) -> Result<Slot, StoreError> {
        let mut backoff = Backoff::default();
        loop {
            let (slot, version) = self.read(path).await?;
            let Some(slot) = slot.filter(|s| s.record.is_some()) else {
                return Err(StoreError::not_found(key));
            };
            PutMode::Update(generation).check(key, slot.record.as_ref())?;
            let tombstone = Slot {
                record: None,
                incarnation: String::new(),
            };
            if self.write_if(path, &tombstone, version).await? {
                return Ok(slot);
            }
            backoff.wait().await;
        }
    }

    /// Removes what a deleted container's incarnation held: its blobs' objects, whose records
    /// it returns, and its staged blocks. Nobody reads them any more; a crash before the end
    /// leaves them to the orphan sweep.
    async fn sweep(&self, container: &str, incarnation: &str) -> Result<Vec<Record>, StoreError> {
        let blobs = self.blobs_path(container, incarnation);
        let found = object::paths_under(&*self.bucket.store, &blobs).await;
        let found = found.map_err(|f| store_error(&blobs, f))?;
        let mut records = Vec::with_capacity(found.len());
        for path in &found {
            if let (
                Some(Slot {
                    record: Some(record),
                    ..
                }),
                _,
            ) = self.read(path).await?
            {
                records.push(record);
            }
        }
        self.remove_all(blobs).await?;
        self.remove_all(self.staged_path(container, incarnation, None))
            .await?;
        Ok(records)
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
        let start = scan.from.max(scan.prefix);
        // The store lists after an offset, in order: the open form of `start` sorts just
        // before its segment, and after every lesser name's.
        let listing = if start.is_empty() {
            self.bucket.store.list(Some(&blobs))
        } else {
            let offset = blobs.clone().join(name::open(start));
            self.bucket.store.list_with_offset(Some(&blobs), &offset)
        };
        let mut listing = listing.map_err(|e| store_error(&blobs, e.into()));
        let mut out = Vec::new();
        while out.len() < scan.limit
            && let Some(meta) = listing.try_next().await?
        {
            let segment = meta.location.filename().unwrap_or_default();
            let name = name::decode(segment).ok_or_else(|| {
                StoreError::corrupt(&meta.location, "not the name of a blob record")
            })?;
            if name.as_str() < start {
                // A store that lists from the start all the same (an emulator).
                continue;
            }
            if !name.starts_with(scan.prefix) {
                break;
            }
            if let (
                Some(Slot {
                    record: Some(record),
                    ..
                }),
                _,
            ) = self.read(&meta.location).await?
            {
                out.push((name, record));
            }
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
            let path = match key {
                Key::Container(c) => Some(self.container_path(c)),
                Key::Blob(c, blob) => self.blob_path(c, blob).await?,
            };
            let Some(path) = path else { return Ok(None) };
            let (slot, _) = self.read(&path).await?;
            Ok(slot.and_then(|s| s.record).map(Arc::new))
        })
        .await
    }

    async fn put(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
        self.within(async {
            match key {
                Key::Container(_) => self.put_container(key, record, mode).await,
                Key::Blob(_, blob) => self.put_blob(key, blob, record, mode).await,
            }
        })
        .await
    }

    async fn delete(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
        self.within(async {
            match key {
                Key::Container(c) => {
                    let buried = self.bury(key, &self.container_path(c), generation).await?;
                    self.sweep(c, &buried.incarnation).await
                }
                Key::Blob(c, blob) => {
                    let path = (self.blob_path(c, blob).await?)
                        .ok_or_else(|| StoreError::not_found(key))?;
                    self.bury(key, &path, generation).await?;
                    Ok(Vec::new())
                }
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
            let containers = self.bucket.prefix.clone().join("c");
            let found = object::paths_under(&*self.bucket.store, &containers).await;
            let found = found.map_err(|f| store_error(&containers, f))?;
            let mut names = Vec::new();
            for path in found {
                let live = matches!(
                    self.read(&path).await?,
                    (
                        Some(Slot {
                            record: Some(_),
                            ..
                        }),
                        _
                    )
                );
                let name = path.filename().and_then(name::decode);
                if let (true, Some(name)) = (live, name) {
                    names.push(name);
                }
            }
            Ok(names)
        })
        .await
    }
}
