//! Records in files of two slots ([`record_file`]), with a compare-and-swap per key and a moka
//! cache in front.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::hash::{BuildHasher, Hash};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use ifmatch_blob::{Block, BlockToStage, Key, PutMode, Record, Records, Scan, StoreError};

use super::blocking::blocking;
use super::dir::{BlobFile, DataDir, read_record, sync_dir};
use super::record_file::{self, Failed, Slot};
use super::staged_file;

/// How many locks the keys (and, apart, the containers) are spread over.
const STRIPES: usize = 256;

/// The largest blob kept in its record file, bytes and all: a Put Blob of up to this many bytes
/// is one durable write of its record (one `fdatasync` over a blob that exists, two fsyncs for
/// a new one) where an object costs two more fsyncs and two more files created and removed. A
/// page: counters, leases' and locks' blobs, small documents.
pub const INLINE_MAX: u64 = 4096;

/// Records in files of two slots, with a compare-and-swap per key and a moka cache in front:
/// an update of a record is one write in place and one `fdatasync`.
///
/// The cache is exact, not a guess: this process is the only writer of the directory (the
/// lock), every write goes through the key's stripe lock and updates the cache under it, and a
/// miss fills the cache under that same lock. Deleting a container moves to a new epoch, which
/// makes every cached record of the old one unreachable at once.
///
/// A blob write holds its container's lock shared, a container's deletion holds it exclusive:
/// so no blob is ever committed into a container being deleted, and the deletion finds every
/// blob committed before it.
#[derive(Debug, Clone)]
pub struct LocalRecords {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: Arc<DataDir>,
    cache: moka::sync::Cache<(u64, Key), Loaded>,
    epoch: AtomicU64,
    keys: Box<[Mutex<()>]>,
    containers: Box<[RwLock<()>]>,
    hasher: std::hash::RandomState,
    /// Each listed container's blob names in order, so a scan reads only the records it
    /// returns: built from the container's files the first time it is listed (with its blob
    /// writes held off), then kept by every put and delete (this process is the only writer).
    /// Costs the names' memory, for the containers that were listed.
    names: Mutex<HashMap<String, BTreeSet<String>>>,
    /// See [`Records::inline_max`].
    inline_max: u64,
}

/// A record as the cache holds it: the record, and which slot of its file holds it (none for a
/// file written whole as JSON), so that the next update writes the other one.
#[derive(Debug, Clone)]
struct Loaded {
    record: Arc<Record>,
    slot: Option<Slot>,
}

impl LocalRecords {
    /// Records under `dir`, caching up to `capacity` of them (a record that keeps its blob's
    /// bytes counts once more per KiB of them), keeping blobs of up to `inline_max` bytes in
    /// their records ([`INLINE_MAX`] with the objects on the same disk; 0 to keep every blob's
    /// bytes in the objects).
    pub fn new(dir: Arc<DataDir>, capacity: u64, inline_max: u64) -> Self {
        let inner = Inner {
            dir,
            // A record weighs one, and one more per KiB of bytes it keeps: `capacity` bounds the
            // memory of the blobs kept inline as it bounds the records'.
            cache: moka::sync::Cache::builder()
                .max_capacity(capacity)
                .weigher(|_, loaded: &Loaded| {
                    let content = loaded.record.content.as_ref();
                    let kept = content.and_then(|c| c.inline.as_ref());
                    1 + kept.map_or(0, |bytes| bytes.len() as u32 / 1024)
                })
                .build(),
            epoch: AtomicU64::new(0),
            keys: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            containers: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            hasher: std::hash::RandomState::new(),
            names: Mutex::new(HashMap::new()),
            inline_max,
        };
        Self {
            inner: Arc::new(inner),
        }
    }
}

impl Inner {
    fn stripe_of(&self, value: impl Hash) -> usize {
        (self.hasher.hash_one(value) % STRIPES as u64) as usize
    }

    fn key_lock(&self, key: &Key) -> MutexGuard<'_, ()> {
        self.keys[self.stripe_of(key)]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn cache_key(&self, key: &Key) -> (u64, Key) {
        (self.epoch.load(Ordering::Acquire), key.clone())
    }

    /// The current record and where it is in its file, from the cache or the file. Call with
    /// the key's lock held.
    fn load(&self, key: &Key) -> Result<Option<Loaded>, StoreError> {
        let cache_key = self.cache_key(key);
        if let Some(loaded) = self.cache.get(&cache_key) {
            return Ok(Some(loaded));
        }
        let path = self.dir.record_path(key);
        let loaded = match key {
            Key::Container(_) => read_record::<Record>(&path)?,
            Key::Blob(..) => read_record::<BlobFile>(&path)?.map(|(f, slot)| (f.record, slot)),
        };
        let loaded = loaded.map(|(record, slot)| Loaded {
            record: Arc::new(record),
            slot,
        });
        if let Some(loaded) = &loaded {
            self.cache.insert(cache_key, loaded.clone());
        }
        Ok(loaded)
    }

    fn put_blocking(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
        let container = &self.containers[self.stripe_of(key.container())];
        let _container = container.read().unwrap_or_else(|p| p.into_inner());
        let _key = self.key_lock(key);
        let current = self.load(key)?;
        mode.check(key, current.as_ref().map(|c| &*c.record))?;
        let path = self.dir.record_path(key);
        let payload = match key {
            Key::Container(c) => {
                fs::create_dir_all(self.dir.container_dir(c).join("blobs"))?;
                serde_json::to_vec(record).map_err(|e| StoreError::generic("local", e))?
            }
            Key::Blob(c, name) => {
                if !self.dir.record_path(&Key::Container(c.clone())).exists() {
                    return Err(StoreError::ContainerNotFound);
                }
                let file = BlobFile {
                    name: name.clone(),
                    record: record.clone(),
                };
                serde_json::to_vec(&file).map_err(|e| StoreError::generic("local", e))?
            }
        };
        let slot = current.and_then(|c| c.slot);
        let written = self.write(&path, slot, &payload);
        if written.as_ref().is_err_and(StoreError::may_have_landed) {
            // Whether the file holds the new record is unknown: the next read must look.
            self.cache.invalidate(&self.cache_key(key));
        }
        let loaded = Loaded {
            record: Arc::new(record.clone()),
            slot: Some(written?),
        };
        self.cache.insert(self.cache_key(key), loaded);
        if let Key::Blob(c, name) = key
            && let Some(names) = self.names().get_mut(c)
        {
            names.insert(name.clone());
        }
        Ok(())
    }

    /// Makes `payload` the record file's content, durably: over the other slot of the file
    /// whose current copy is in `slot` (one write, one `fdatasync`), or as a new file replacing
    /// it (a new record, one that outgrew its slots, or a file from before the slots).
    fn write(&self, path: &Path, slot: Option<Slot>, payload: &[u8]) -> Result<Slot, StoreError> {
        if let Some(current) = slot {
            match record_file::overwrite(path, current, payload) {
                Ok(Some(written)) => return Ok(written),
                Ok(None) => {}
                Err(Failed::Before(e)) => return Err(e.into()),
                Err(Failed::During(e)) => return Err(StoreError::Unavailable(Box::new(e))),
            }
        }
        let (file, written) = record_file::create(payload, slot);
        self.dir.write_atomic(path, &file)?;
        Ok(written)
    }

    fn names(&self) -> MutexGuard<'_, HashMap<String, BTreeSet<String>>> {
        self.names.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn delete_blocking(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
        let container = &self.containers[self.stripe_of(key.container())];
        let (_shared, _exclusive);
        match key {
            Key::Blob(..) => _shared = container.read().unwrap_or_else(|p| p.into_inner()),
            Key::Container(_) => _exclusive = container.write().unwrap_or_else(|p| p.into_inner()),
        }
        let _key = self.key_lock(key);
        let current = self.load(key)?.ok_or_else(|| StoreError::not_found(key))?;
        PutMode::Update(generation).check(key, Some(&current.record))?;
        match key {
            Key::Blob(..) => {
                let path = self.dir.record_path(key);
                fs::remove_file(&path)?;
                self.cache.invalidate(&self.cache_key(key));
                if let Key::Blob(c, name) = key
                    && let Some(names) = self.names().get_mut(c)
                {
                    names.remove(name);
                }
                sync_dir(path.parent().expect("records live in a directory"))
                    .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
                Ok(vec![])
            }
            Key::Container(c) => {
                // One rename takes the container and all its blobs out of sight at once; no
                // blob write can run meanwhile (the exclusive lock).
                let trash = self.dir.tmp_path();
                fs::rename(self.dir.container_dir(c), &trash)?;
                self.epoch.fetch_add(1, Ordering::AcqRel);
                self.names().remove(c);
                sync_dir(&self.dir.containers_dir())
                    .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
                let mut removed = Vec::new();
                if let Ok(entries) = fs::read_dir(trash.join("blobs")) {
                    for entry in entries {
                        match read_record::<BlobFile>(&entry?.path()) {
                            Ok(file) => removed.extend(file.map(|(f, _)| f.record)),
                            // Its object stays, and the sweep knows nothing names it.
                            Err(error) => tracing::warn!(%error, "deleting a container"),
                        }
                    }
                }
                if let Err(error) = fs::remove_dir_all(&trash) {
                    // It is out of sight in tmp/, which the next cleaning empties.
                    tracing::warn!(%error, trash = %trash.display(), "removing a deleted container");
                }
                Ok(removed)
            }
        }
    }

    fn list_blocking(
        &self,
        container: &str,
        prefix: &str,
        from: &str,
        limit: usize,
    ) -> Result<Vec<(String, Record)>, StoreError> {
        self.index(container)?;
        let mut start = from.max(prefix).to_owned();
        let mut out = Vec::new();
        loop {
            let want = limit - out.len();
            let names: Vec<String> = match self.names().get(container) {
                Some(names) => (names.range(start.clone()..))
                    .take_while(|name| name.starts_with(prefix))
                    .take(want)
                    .cloned()
                    .collect(),
                // Deleted meanwhile.
                None => return Err(StoreError::ContainerNotFound),
            };
            let scanned = names.len();
            if let Some(last) = names.last() {
                start = format!("{last}\0");
            }
            for name in names {
                let key = Key::Blob(container.to_owned(), name);
                let _key = self.key_lock(&key);
                // A record deleted since is not listed; the scan goes on to fill the page.
                if let Some(loaded) = self.load(&key)?
                    && let Key::Blob(_, name) = key
                {
                    out.push((name, loaded.record.as_ref().clone()));
                }
            }
            if scanned < want || out.len() == limit {
                return Ok(out);
            }
        }
    }

    /// Builds `container`'s index of names if it has none yet: reads every record file, with
    /// the container's blob writes held off meanwhile.
    fn index(&self, container: &str) -> Result<(), StoreError> {
        if self.names().contains_key(container) {
            return Ok(());
        }
        let lock = &self.containers[self.stripe_of(container)];
        let _exclusive = lock.write().unwrap_or_else(|p| p.into_inner());
        if self.names().contains_key(container) {
            return Ok(());
        }
        let entries = match fs::read_dir(self.dir.container_dir(container).join("blobs")) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::ContainerNotFound);
            }
            Err(e) => return Err(e.into()),
        };
        if !self
            .dir
            .record_path(&Key::Container(container.to_owned()))
            .exists()
        {
            return Err(StoreError::ContainerNotFound);
        }
        let mut names = BTreeSet::new();
        for entry in entries {
            if let Some((file, _)) = read_record::<BlobFile>(&entry?.path())? {
                names.insert(file.name);
            }
        }
        self.names().insert(container.to_owned(), names);
        Ok(())
    }

    fn stage_blocking(
        &self,
        key: &Key,
        epoch: u64,
        block: &Block,
        max: usize,
    ) -> Result<bool, StoreError> {
        let path = self
            .dir
            .staged_path(key, epoch)
            .ok_or_else(|| StoreError::not_found(key))?;
        // Held shared, as a blob write: a container's deletion does not run meanwhile.
        let container = &self.containers[self.stripe_of(key.container())];
        let _container = container.read().unwrap_or_else(|p| p.into_inner());
        let _key = self.key_lock(key);
        let container = self.dir.container_dir(key.container());
        if !container.join("container.json").exists() {
            return Err(StoreError::ContainerNotFound);
        }
        let staged = path.parent().expect("staged files live in a directory");
        match fs::create_dir(staged) {
            Ok(()) => sync_dir(&container)?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e.into()),
        }
        match staged_file::append(&path, block, max)? {
            None => Ok(false),
            Some(created) => {
                if created {
                    // The block is acknowledged: the name of the file that holds it must last.
                    sync_dir(staged).map_err(|e| StoreError::Unavailable(Box::new(e)))?;
                }
                Ok(true)
            }
        }
    }

    fn containers_blocking(&self) -> Result<Vec<String>, StoreError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(self.dir.containers_dir())? {
            let entry = entry?;
            if entry.path().join("container.json").exists() {
                out.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(out)
    }
}

impl Records for LocalRecords {
    async fn get(&self, key: &Key) -> Result<Option<Arc<Record>>, StoreError> {
        let inner = &self.inner;
        if let Some(loaded) = inner.cache.get(&inner.cache_key(key)) {
            return Ok(Some(loaded.record));
        }
        let (this, key) = (inner.clone(), key.clone());
        blocking(move || {
            let _key = this.key_lock(&key);
            Ok(this.load(&key)?.map(|loaded| loaded.record))
        })
        .await
    }

    async fn put(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
        let (this, key, record) = (self.inner.clone(), key.clone(), record.clone());
        blocking(move || this.put_blocking(&key, &record, mode)).await
    }

    fn inline_max(&self) -> u64 {
        self.inner.inline_max
    }

    async fn delete(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
        let (this, key) = (self.inner.clone(), key.clone());
        blocking(move || this.delete_blocking(&key, generation)).await
    }

    async fn list(&self, scan: Scan<'_>) -> Result<Vec<(String, Record)>, StoreError> {
        let this = self.inner.clone();
        let container = scan.container.to_owned();
        let (prefix, from, limit) = (scan.prefix.to_owned(), scan.from.to_owned(), scan.limit);
        blocking(move || this.list_blocking(&container, &prefix, &from, limit)).await
    }

    async fn stage_block(&self, stage: BlockToStage<'_>) -> Result<bool, StoreError> {
        let (key, epoch, block, max) = (stage.key, stage.epoch, stage.block, stage.max);
        let (this, key, block) = (self.inner.clone(), key.clone(), block.clone());
        blocking(move || this.stage_blocking(&key, epoch, &block, max)).await
    }

    async fn staged_blocks(&self, key: &Key, epoch: u64) -> Result<Vec<Block>, StoreError> {
        let Some(path) = self.inner.dir.staged_path(key, epoch) else {
            return Ok(Vec::new());
        };
        blocking(move || match fs::read(&path) {
            Ok(bytes) => Ok(staged_file::blocks(&bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        })
        .await
    }

    async fn drop_staged(&self, key: &Key, epoch: u64) -> Result<(), StoreError> {
        let Some(path) = self.inner.dir.staged_path(key, epoch) else {
            return Ok(());
        };
        // No read asks for the set again: a file a crash brings back costs room, not answers.
        blocking(move || match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        })
        .await
    }

    async fn containers(&self) -> Result<Vec<String>, StoreError> {
        let this = self.inner.clone();
        blocking(move || this.containers_blocking()).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use ifmatch_blob::Content;
    use ifmatch_core::strong_etag;

    use super::*;

    fn counter(n: u64) -> Record {
        let bytes = bytes::Bytes::from(n.to_le_bytes().to_vec());
        let when = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let content = Content::inline(bytes.clone(), None);
        Record::blob(strong_etag(&bytes), when, content).with_generation(n)
    }

    async fn open_with_container(path: &std::path::Path) -> LocalRecords {
        let records = LocalRecords::new(DataDir::open(path).unwrap(), 100, INLINE_MAX);
        let when = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let record = Record::container(strong_etag(b"c"), when).with_generation(1);
        let _ = records
            .put(&Key::Container("c".into()), &record, PutMode::Create)
            .await;
        records
    }

    /// An update writes the slot that does not hold the current record: a crash that tears it
    /// leaves the record acknowledged before, which the next update then replaces.
    #[tokio::test]
    async fn a_torn_update_leaves_the_record_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let key = Key::Blob("c".into(), "n".into());
        let path = {
            let records = open_with_container(dir.path()).await;
            records
                .put(&key, &counter(1), PutMode::Create)
                .await
                .unwrap();
            records
                .put(&key, &counter(2), PutMode::Update(1))
                .await
                .unwrap();
            records.inner.dir.record_path(&key)
        };
        let generation = |records: &LocalRecords| {
            let (records, key) = (records.clone(), key.clone());
            async move { records.get(&key).await.unwrap().unwrap().generation }
        };
        let mut file = fs::read(&path).unwrap();
        let slot = file.len() / 2;
        // Generation 2 is in the second slot; a crash tore its payload.
        file[slot + 60] ^= 0x20;
        fs::write(&path, &file).unwrap();
        {
            let records = open_with_container(dir.path()).await;
            assert_eq!(generation(&records).await, 1);
            let stale = records.put(&key, &counter(3), PutMode::Update(2)).await;
            assert!(
                matches!(stale, Err(StoreError::Conflict { .. })),
                "{stale:?}"
            );
            records
                .put(&key, &counter(3), PutMode::Update(1))
                .await
                .unwrap();
        }
        let records = open_with_container(dir.path()).await;
        assert_eq!(generation(&records).await, 3);
        assert_eq!(
            fs::read(&path).unwrap().len(),
            file.len(),
            "updated in place"
        );
    }

    /// A record file written whole as JSON, as before the slots, is read, and its next update
    /// gives it slots.
    #[tokio::test]
    async fn a_record_written_whole_as_json_is_read_and_moves_to_slots() {
        let dir = tempfile::tempdir().unwrap();
        let key = Key::Blob("c".into(), "n".into());
        let records = open_with_container(dir.path()).await;
        let path = records.inner.dir.record_path(&key);
        let file = BlobFile {
            name: "n".into(),
            record: counter(7),
        };
        fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
        drop(records);
        let records = open_with_container(dir.path()).await;
        assert_eq!(records.get(&key).await.unwrap().unwrap().generation, 7);
        records
            .put(&key, &counter(8), PutMode::Update(7))
            .await
            .unwrap();
        let bytes = fs::read(&path).unwrap();
        assert_eq!(&bytes[..4], b"ifmR");
        let (payload, _) = record_file::read(&bytes).unwrap();
        let file: BlobFile = serde_json::from_slice(payload).unwrap();
        assert_eq!((file.name.as_str(), file.record.generation), ("n", 8));
    }

    /// The cache weighs the bytes a record keeps: at a capacity of 100, it holds a hundred
    /// bare records but only about twenty that keep 4 KiB each.
    #[tokio::test]
    async fn the_cache_counts_kept_bytes_against_its_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let records = LocalRecords::new(DataDir::open(dir.path()).unwrap(), 100, INLINE_MAX);
        let when = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let container = Key::Container("c".into());
        let record = Record::container(strong_etag(b"c"), when).with_generation(1);
        records
            .put(&container, &record, PutMode::Create)
            .await
            .unwrap();
        let records = &records;
        let fill = |keep: usize| async move {
            for n in 0..100 {
                let bytes = bytes::Bytes::from(vec![n as u8; keep]);
                let content = Content::inline(bytes.clone(), None);
                let record = Record::blob(strong_etag(&bytes), when, content).with_generation(1);
                let key = Key::Blob("c".into(), format!("{keep}-{n}"));
                records.put(&key, &record, PutMode::Create).await.unwrap();
            }
            let cache = &records.inner.cache;
            cache.run_pending_tasks();
            assert!(cache.weighted_size() <= 100, "{}", cache.weighted_size());
            let kept = |r: &Record| r.content.as_ref()?.inline.as_ref().map(|b| b.len());
            cache
                .iter()
                .filter(|(_, l)| kept(&l.record) == Some(keep))
                .count()
        };
        assert!(fill(0).await >= 95, "bare records fill the capacity");
        let held = fill(INLINE_MAX as usize).await;
        assert!(
            held <= 20,
            "{held} records of 4 KiB held at a capacity of 100"
        );
    }
}
