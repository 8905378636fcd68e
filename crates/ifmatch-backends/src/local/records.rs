//! Records in files of two slots ([`record_file`]), committed through the journal
//! ([`journal`]), with a compare-and-swap per key and a moka cache in front.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::hash::{BuildHasher, Hash};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ifmatch_blob::{Block, BlockToStage, Key, PutMode, Record, Records, Scan, StoreError};
use ifmatch_core::keyed::KeyHasher;

use super::blocking::blocking;
use super::dir::{BlobFile, DataDir, parse_record, read_record};
use super::files::{remove_file, sync_dir};
use super::journal::{Change, Journal};
use super::record_file::Slot;
use super::staged_file;

/// How many locks the keys (and, apart, the containers) are spread over.
const STRIPES: usize = 256;

/// The largest blob kept in its record file, bytes and all: a Put Blob of up to this many bytes
/// is one durable write of its record (one `fdatasync` over a blob that exists, two fsyncs for
/// a new one) where an object costs two more fsyncs and two more files created and removed. A
/// page: counters, leases' and locks' blobs, small documents.
pub const INLINE_MAX: u64 = 4096;

/// Records in files of two slots, with a compare-and-swap per key and a moka cache in front:
/// an update of a record is an entry in the journal, synced with the others that arrive with
/// it, then held in memory (where reads look first) until the checkpoint writes it in place.
///
/// The cache is exact, not a guess: this process is the only writer of the directory (the
/// lock), every write goes through the key's stripe lock and updates the cache under it, and a
/// miss fills the cache under that same lock. Deleting a container moves to a new epoch, which
/// leaves every cached record of the old one stale at once (each names the epoch it was read in).
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
    cache: moka::sync::Cache<Key, Loaded, KeyHasher>,
    epoch: AtomicU64,
    /// Held across a commit's wait for the journal: tokio's, so that the wait is a task's, not
    /// a thread's.
    keys: Box<[tokio::sync::Mutex<()>]>,
    containers: Box<[tokio::sync::RwLock<()>]>,
    journal: Journal,
    hasher: KeyHasher,
    /// Each listed container's blob names in order, so a scan reads only the records it
    /// returns: built from the container's files the first time it is listed (with its blob
    /// writes held off), then kept by every put and delete (this process is the only writer).
    /// Costs the names' memory, for the containers that were listed.
    names: Mutex<HashMap<String, BTreeSet<String>>>,
    /// See [`Records::inline_max`].
    inline_max: u64,
}

/// A record as the cache holds it: the record, which slot of its file holds it (none for a
/// file written whole as JSON), so that the next update writes the other one, and the epoch
/// it was read or written in (a record of an epoch before is no longer there).
#[derive(Debug, Clone)]
struct Loaded {
    record: Arc<Record>,
    slot: Option<Slot>,
    epoch: u64,
}

impl LocalRecords {
    /// Records under `dir`, caching up to `capacity` of them (a record that keeps its blob's
    /// bytes counts once more per KiB of them), keeping blobs of up to `inline_max` bytes in
    /// their records ([`INLINE_MAX`] with the objects on the same disk; 0 to keep every blob's
    /// bytes in the objects). Starts the writer of the directory's journal.
    pub fn new(dir: Arc<DataDir>, capacity: u64, inline_max: u64) -> io::Result<Self> {
        let journal = Journal::start(dir.root())?;
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
                .build_with_hasher(KeyHasher::default()),
            epoch: AtomicU64::new(0),
            keys: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
            containers: (0..STRIPES).map(|_| tokio::sync::RwLock::new(())).collect(),
            journal,
            hasher: KeyHasher::default(),
            names: Mutex::new(HashMap::new()),
            inline_max,
        };
        Ok(Self {
            inner: Arc::new(inner),
        })
    }
}

impl Inner {
    fn stripe_of(&self, value: impl Hash) -> usize {
        (self.hasher.hash_one(value) % STRIPES as u64) as usize
    }

    fn key_lock(&self, key: &Key) -> &tokio::sync::Mutex<()> {
        &self.keys[self.stripe_of(key)]
    }

    fn container_lock(&self, container: &str) -> &tokio::sync::RwLock<()> {
        &self.containers[self.stripe_of(container)]
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The cached record of `key`, if one of this epoch is (looked up by reference: a read
    /// that hits copies no key).
    fn cached(&self, key: &Key) -> Option<Loaded> {
        let epoch = self.epoch();
        self.cache.get(key).filter(|loaded| loaded.epoch == epoch)
    }

    /// The current record and where it is in its file, from the cache or the file. Call with
    /// the key's lock held.
    fn load(&self, key: &Key) -> Result<Option<Loaded>, StoreError> {
        let epoch = self.epoch();
        if let Some(loaded) = self.cached(key) {
            return Ok(Some(loaded));
        }
        let path = self.dir.record_path(key);
        let loaded = match key {
            Key::Container(_) => self.read::<Record>(&path)?,
            Key::Blob(..) => self
                .read::<BlobFile>(&path)?
                .map(|(f, slot)| (f.record, slot)),
        };
        let loaded = loaded.map(|(record, slot)| Loaded {
            record: Arc::new(record),
            slot,
            epoch,
        });
        if let Some(loaded) = &loaded {
            self.cache.insert(key.clone(), loaded.clone());
        }
        Ok(loaded)
    }

    /// The record file at `path` as the last commit left it: the update the journal holds for
    /// it, else the file.
    fn read<T: serde::de::DeserializeOwned>(
        &self,
        path: &Path,
    ) -> Result<Option<(T, Option<Slot>)>, StoreError> {
        match self.journal.held(path) {
            Some((payload, slot)) => Ok(Some((parse_record(&payload, path)?, Some(slot)))),
            None => read_record(path),
        }
    }

    /// Commits `record` under `key` if `mode` allows it: see [`Records::put`].
    async fn put(
        self: &Arc<Self>,
        key: &Key,
        record: &Record,
        mode: PutMode,
    ) -> Result<(), StoreError> {
        let _container = self.container_lock(key.container()).read().await;
        let _key = self.key_lock(key).lock().await;
        let epoch = self.epoch();
        let current = match self.cached(key) {
            Some(loaded) => Some(loaded),
            None => {
                let (this, key) = (self.clone(), key.clone());
                blocking(move || this.load(&key)).await?
            }
        };
        mode.check(key, current.as_ref().map(|c| &*c.record))?;
        let change = Change::Put {
            path: self.dir.record_path(key),
            payload: self.payload(key, record)?,
            current: current.and_then(|c| c.slot),
        };
        let written = self.journal.commit(change).await;
        if written.as_ref().is_err_and(StoreError::may_have_landed) {
            // Whether the file holds the new record is unknown: the next read must look.
            self.cache.invalidate(key);
        }
        let loaded = Loaded {
            record: Arc::new(record.clone()),
            slot: written?,
            epoch,
        };
        self.cache.insert(key.clone(), loaded);
        if let Key::Blob(c, name) = key
            && let Some(names) = self.names().get_mut(c)
        {
            names.insert(name.clone());
        }
        Ok(())
    }

    /// What the record file of `key` holds for `record`: its JSON, with the blob's name.
    fn payload(&self, key: &Key, record: &Record) -> Result<Vec<u8>, StoreError> {
        let payload = match key {
            Key::Container(_) => serde_json::to_vec(record),
            Key::Blob(c, name) => {
                let container = Key::Container(c.clone());
                let known = self.cached(&container).is_some();
                if !known && !self.dir.record_path(&container).exists() {
                    return Err(StoreError::ContainerNotFound);
                }
                serde_json::to_vec(&BlobFile {
                    name: name.clone(),
                    record: record.clone(),
                })
            }
        };
        payload.map_err(|e| StoreError::generic("local", e))
    }

    fn names(&self) -> MutexGuard<'_, HashMap<String, BTreeSet<String>>> {
        self.names.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn delete_blocking(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
        let container = self.container_lock(key.container());
        let (_shared, _exclusive);
        match key {
            Key::Blob(..) => _shared = container.blocking_read(),
            Key::Container(_) => _exclusive = container.blocking_write(),
        }
        let _key = self.key_lock(key).blocking_lock();
        let current = self.load(key)?.ok_or_else(|| StoreError::not_found(key))?;
        PutMode::Update(generation).check(key, Some(&current.record))?;
        match key {
            Key::Blob(c, name) => {
                let path = self.dir.record_path(key);
                let deleted = self
                    .journal
                    .commit_blocking(Change::Delete { path: path.clone() });
                self.cache.invalidate(key);
                // A deletion that failed may have left the file: its name stays listed.
                let gone = deleted.is_ok() || !path.exists();
                if gone && let Some(names) = self.names().get_mut(c) {
                    names.remove(name);
                }
                deleted.map(|_| vec![])
            }
            Key::Container(c) => {
                // Journaled first: a replay removes the directory after the changes of its
                // records that the journal holds before the deletion, and before any after.
                let path = self.dir.container_dir(c);
                let deletion = Change::DeleteDir { path: path.clone() };
                self.journal.commit_blocking(deletion)?;
                // One rename takes the container and all its blobs out of sight at once; no
                // blob write can run meanwhile (the exclusive lock).
                let trash = self.dir.tmp_path();
                let renamed = fs::rename(&path, &trash);
                self.epoch.fetch_add(1, Ordering::AcqRel);
                self.names().remove(c);
                // Journaled, so done at the next start if not now.
                renamed.map_err(|e| StoreError::Unavailable(Box::new(e)))?;
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
                let _key = self.key_lock(&key).blocking_lock();
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
        let _exclusive = self.container_lock(container).blocking_write();
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
        let _container = self.container_lock(key.container()).blocking_read();
        let _key = self.key_lock(key).blocking_lock();
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
        if let Some(loaded) = inner.cached(key) {
            return Ok(Some(loaded.record));
        }
        let (this, key) = (inner.clone(), key.clone());
        blocking(move || {
            let _key = this.key_lock(&key).blocking_lock();
            Ok(this.load(&key)?.map(|loaded| loaded.record))
        })
        .await
    }

    async fn put(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
        // A task of its own, which runs to its end if the caller goes: a commit sent to the
        // journal is then always applied to the cache too, under the key's lock (a put dropped
        // while its entry waited left the cache holding the record before it).
        let (this, key, record) = (self.inner.clone(), key.clone(), record.clone());
        let put = tokio::spawn(async move { this.put(&key, &record, mode).await });
        put.await.map_err(io::Error::other)?
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
        blocking(move || Ok(remove_file(&path)?)).await
    }

    async fn containers(&self) -> Result<Vec<String>, StoreError> {
        let this = self.inner.clone();
        blocking(move || this.containers_blocking()).await
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, UNIX_EPOCH};

    use ifmatch_blob::Content;
    use ifmatch_core::strong_etag;

    use super::*;
    use crate::local::record_file;

    fn counter(n: u64) -> Record {
        let bytes = bytes::Bytes::from(n.to_le_bytes().to_vec());
        let when = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let content = Content::inline(bytes.clone(), None);
        Record::blob(strong_etag(&bytes), when, content).with_generation(n)
    }

    async fn open_with_container(path: &std::path::Path) -> LocalRecords {
        open_caching(path, 100).await
    }

    /// The records under `path`, caching up to `capacity`, with the container `c`.
    async fn open_caching(path: &std::path::Path, capacity: u64) -> LocalRecords {
        let records =
            LocalRecords::new(DataDir::open(path).unwrap(), capacity, INLINE_MAX).unwrap();
        let when = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let record = Record::container(strong_etag(b"c"), when).with_generation(1);
        let _ = records
            .put(&Key::Container("c".into()), &record, PutMode::Create)
            .await;
        records
    }

    fn copy_dir(from: &Path, to: &Path) {
        fs::create_dir_all(to).unwrap();
        for entry in fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let to = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_dir(&entry.path(), &to);
            } else {
                fs::copy(entry.path(), to).unwrap();
            }
        }
    }

    /// A power cut: the record files as the last checkpoint left them (what was written since
    /// was in the page cache only), the journal as it was synced.
    fn cut_power(data: &Path, checkpointed: &Path, journal: &[u8]) {
        fs::remove_dir_all(data.join("containers")).unwrap();
        copy_dir(checkpointed, &data.join("containers"));
        fs::write(data.join("journal"), journal).unwrap();
    }

    /// A scan of the container `c`, up to 100 blobs.
    fn all_of_c() -> Scan<'static> {
        Scan {
            container: "c",
            prefix: "",
            from: "",
            limit: 100,
        }
    }

    /// The generation the record file of `blob(n)` holds on disk (not what the journal holds).
    fn on_disk_of(records: &LocalRecords, n: u64) -> Option<u64> {
        let file = read_record::<BlobFile>(&records.inner.dir.record_path(&blob(n))).unwrap();
        file.map(|(file, _)| file.record.generation)
    }

    fn blob(n: u64) -> Key {
        Key::Blob("c".into(), format!("k{n}"))
    }

    /// Every commit acknowledged since the last checkpoint is in the journal: after a power
    /// cut that lost every record file written since, the replay gives each record its last
    /// acknowledged copy, deletions and new records included, from 20 writers at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_power_cut_loses_no_commit_the_journal_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        {
            let records = open_with_container(dir.path()).await;
            for n in 0..20 {
                let record = counter(1);
                records
                    .put(&blob(n), &record, PutMode::Create)
                    .await
                    .unwrap();
            }
        }
        // Closed, so checkpointed: the files hold every record.
        let checkpointed = tempfile::tempdir().unwrap();
        copy_dir(&dir.path().join("containers"), checkpointed.path());
        let records = open_with_container(dir.path()).await;
        let writers: Vec<_> = (0..20)
            .map(|n| {
                let records = records.clone();
                tokio::spawn(async move {
                    for g in 2..=6 {
                        let update = PutMode::Update(g - 1);
                        records.put(&blob(n), &counter(g), update).await.unwrap();
                    }
                    if n % 2 == 0 {
                        records.delete(&blob(n), 6).await.unwrap();
                    }
                    let new = blob(100 + n);
                    records
                        .put(&new, &counter(1), PutMode::Create)
                        .await
                        .unwrap();
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
        let journal = fs::read(dir.path().join("journal")).unwrap();
        drop(records);
        cut_power(dir.path(), checkpointed.path(), &journal);
        let data = DataDir::open(dir.path()).unwrap();
        let records = LocalRecords::new(data, 100, INLINE_MAX).unwrap();
        let generation = |key: Key| {
            let records = records.clone();
            async move { records.get(&key).await.unwrap().map(|r| r.generation) }
        };
        for n in 0..20 {
            let expected = (n % 2 == 1).then_some(6);
            assert_eq!(generation(blob(n)).await, expected, "k{n}");
            assert_eq!(generation(blob(100 + n)).await, Some(1), "k{}", 100 + n);
        }
        let scan = all_of_c();
        assert_eq!(records.list(scan).await.unwrap().len(), 30);
    }

    /// A power cut in the middle of a group's write leaves its entries torn: the replay stops
    /// before them (none was acknowledged) and keeps every entry before.
    #[tokio::test]
    async fn a_torn_last_entry_is_passed_over_and_those_before_it_replayed() {
        let dir = tempfile::tempdir().unwrap();
        {
            let records = open_with_container(dir.path()).await;
            let (key, record) = (blob(0), counter(1));
            records.put(&key, &record, PutMode::Create).await.unwrap();
        }
        let checkpointed = tempfile::tempdir().unwrap();
        copy_dir(&dir.path().join("containers"), checkpointed.path());
        let records = open_with_container(dir.path()).await;
        for g in 2..=6 {
            let update = PutMode::Update(g - 1);
            records.put(&blob(0), &counter(g), update).await.unwrap();
        }
        let journal = fs::read(dir.path().join("journal")).unwrap();
        drop(records);
        // The journal's room past its entries is zeros.
        let end = journal.iter().rposition(|&b| b != 0).unwrap() + 1;
        let mut flipped = journal.clone();
        flipped[end - 1] ^= 1;
        let mut garbage = journal.clone();
        let never = b"ifmE and the rest of an entry never written whole";
        garbage[end..end + never.len()].copy_from_slice(never);
        let cases = [
            (&journal[..end - 10], 5),
            (&flipped[..], 5),
            (&garbage[..], 6),
            (&journal[..], 6),
        ];
        for (journal, expected) in cases {
            cut_power(dir.path(), checkpointed.path(), journal);
            let data = DataDir::open(dir.path()).unwrap();
            let records = LocalRecords::new(data, 100, INLINE_MAX).unwrap();
            let got = records.get(&blob(0)).await.unwrap().unwrap();
            assert_eq!(got.generation, expected);
        }
    }

    /// A container's deletion is journaled: after a power cut that lost the rename of its
    /// directory, the replay removes it, and a container made again under its name after holds
    /// only its own blobs.
    #[tokio::test]
    async fn a_power_cut_keeps_a_container_deleted_and_its_successor_whole() {
        let dir = tempfile::tempdir().unwrap();
        let container = Key::Container("c".into());
        {
            let records = open_with_container(dir.path()).await;
            for n in 0..3 {
                let (key, record) = (blob(n), counter(1));
                records.put(&key, &record, PutMode::Create).await.unwrap();
            }
        }
        let checkpointed = tempfile::tempdir().unwrap();
        copy_dir(&dir.path().join("containers"), checkpointed.path());
        for again in [false, true] {
            // As checkpointed, with nothing journaled since.
            cut_power(dir.path(), checkpointed.path(), &[]);
            let records = open_with_container(dir.path()).await;
            let generation = records.get(&container).await.unwrap().unwrap().generation;
            let removed = records.delete(&container, generation).await.unwrap();
            assert_eq!(removed.len(), 3);
            if again {
                let when = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
                let record = Record::container(strong_etag(b"c"), when).with_generation(1);
                records
                    .put(&container, &record, PutMode::Create)
                    .await
                    .unwrap();
                let (key, record) = (blob(7), counter(1));
                records.put(&key, &record, PutMode::Create).await.unwrap();
            }
            let journal = fs::read(dir.path().join("journal")).unwrap();
            drop(records);
            cut_power(dir.path(), checkpointed.path(), &journal);
            let data = DataDir::open(dir.path()).unwrap();
            let records = LocalRecords::new(data, 100, INLINE_MAX).unwrap();
            let exists = records.get(&container).await.unwrap().is_some();
            assert_eq!(exists, again);
            if again {
                let scan = all_of_c();
                let names: Vec<_> = records.list(scan).await.unwrap();
                let names: Vec<_> = names.into_iter().map(|(name, _)| name).collect();
                assert_eq!(names, ["k7"]);
            }
        }
    }

    /// A put whose caller goes while its entry waits for the journal still runs to its end:
    /// the cache and the file agree on what was committed, so the next compare-and-swap is
    /// checked against it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_put_dropped_in_flight_leaves_the_cache_and_the_file_agreeing() {
        let dir = tempfile::tempdir().unwrap();
        let records = open_with_container(dir.path()).await;
        let key = blob(0);
        records
            .put(&key, &counter(1), PutMode::Create)
            .await
            .unwrap();
        let path = records.inner.dir.record_path(&key);
        for round in 0..300 {
            let current = records.get(&key).await.unwrap().unwrap().generation;
            let record = counter(current + 1);
            let put = records.put(&key, &record, PutMode::Update(current));
            // Polled until it waits (for its lock, the journal or the disk), then dropped.
            let wait = Duration::from_micros(20 * (round % 10));
            let _ = tokio::time::timeout(wait, put).await;
            // The put still in flight holds the key's lock to its end; the two agree under it.
            let _key = records.inner.key_lock(&key).lock().await;
            let cached = records.inner.cached(&key);
            let cached = cached.map_or(0, |loaded| loaded.record.generation);
            let (file, _) = records.inner.read::<BlobFile>(&path).unwrap().unwrap();
            // Nothing cached (a failed write's) is read from the file next.
            if cached != 0 {
                assert_eq!(cached, file.record.generation, "round {round}");
            }
        }
    }

    /// An update that fits its file's slots is held in memory until a checkpoint writes it:
    /// the file keeps the copy before, and every read (with no cache, each one a miss), a
    /// compare-and-swap, a listing and a container's deletion get the update; a blob deleted
    /// is not brought back by the checkpoint; closing writes the rest.
    #[tokio::test]
    async fn updates_are_held_until_a_checkpoint_and_read_from_there() {
        let dir = tempfile::tempdir().unwrap();
        let records = open_caching(dir.path(), 0).await;
        let container = Key::Container("c".into());
        for n in 0..3 {
            records
                .put(&blob(n), &counter(1), PutMode::Create)
                .await
                .unwrap();
            for g in 2..=5 {
                let update = PutMode::Update(g - 1);
                records.put(&blob(n), &counter(g), update).await.unwrap();
            }
        }
        let on_disk = |n| on_disk_of(&records, n);
        assert_eq!(on_disk(0), Some(1), "held, not written");
        assert_eq!(records.get(&blob(0)).await.unwrap().unwrap().generation, 5);
        let stale = records.put(&blob(1), &counter(6), PutMode::Update(4)).await;
        assert!(
            matches!(stale, Err(StoreError::Conflict { .. })),
            "{stale:?}"
        );
        records
            .put(&blob(1), &counter(6), PutMode::Update(5))
            .await
            .unwrap();
        records.delete(&blob(2), 5).await.unwrap();
        let scan = all_of_c();
        let listed: Vec<_> = records.list(scan).await.unwrap();
        let listed: Vec<_> = listed
            .iter()
            .map(|(name, r)| (name.as_str(), r.generation))
            .collect();
        assert_eq!(listed, [("k0", 5), ("k1", 6)]);
        drop(records);
        let records = open_caching(dir.path(), 0).await;
        let on_disk = |n| on_disk_of(&records, n);
        assert_eq!(
            (on_disk(0), on_disk(1), on_disk(2)),
            (Some(5), Some(6), None)
        );
        // Four updates held, one write: to the slot that did not hold the durable copy, which
        // a write torn there would leave.
        let mut torn = fs::read(records.inner.dir.record_path(&blob(0))).unwrap();
        let half = torn.len() / 2;
        torn[half + 60] ^= 0x20;
        let (payload, _) = record_file::read(&torn).unwrap();
        let kept: BlobFile = serde_json::from_slice(payload).unwrap();
        assert_eq!(kept.record.generation, 1);
        records
            .put(&blob(0), &counter(6), PutMode::Update(5))
            .await
            .unwrap();
        assert_eq!(on_disk(0), Some(5), "held, not written");
        let removed = records.delete(&container, 1).await.unwrap();
        let mut removed: Vec<_> = removed.iter().map(|r| r.generation).collect();
        removed.sort();
        assert_eq!(
            removed,
            [6, 6],
            "the deleted container's records as last committed"
        );
    }

    /// A record file removed behind the server's back while an update of it is held does not
    /// stop the checkpoint (which would leave the journal refusing every commit after it): the
    /// other held updates are written and the journal starts its next generation.
    #[tokio::test]
    async fn a_held_records_file_gone_stops_no_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let records = open_with_container(dir.path()).await;
        for n in 0..2 {
            let (key, update) = (blob(n), PutMode::Update(1));
            records
                .put(&key, &counter(1), PutMode::Create)
                .await
                .unwrap();
            records.put(&key, &counter(2), update).await.unwrap();
        }
        fs::remove_file(records.inner.dir.record_path(&blob(0))).unwrap();
        // Closing checkpoints.
        drop(records);
        let replayed = crate::local::journal::recover(dir.path()).unwrap();
        assert_eq!(
            replayed, 0,
            "the checkpoint went through: nothing left to replay"
        );
        let records = open_with_container(dir.path()).await;
        assert_eq!(records.get(&blob(0)).await.unwrap(), None);
        assert_eq!(records.get(&blob(1)).await.unwrap().unwrap().generation, 2);
    }

    /// A checkpoint starts a new generation: the entries before it, still in the journal's
    /// room, are never replayed again (a blob deleted since stays deleted).
    #[tokio::test]
    async fn entries_before_a_checkpoint_are_not_replayed() {
        let dir = tempfile::tempdir().unwrap();
        {
            let records = open_with_container(dir.path()).await;
            records
                .put(&blob(0), &counter(1), PutMode::Create)
                .await
                .unwrap();
            for g in 2..=9 {
                let update = PutMode::Update(g - 1);
                records.put(&blob(0), &counter(g), update).await.unwrap();
            }
        }
        for _ in 0..2 {
            let records = open_with_container(dir.path()).await;
            if records.get(&blob(0)).await.unwrap().is_some() {
                records.delete(&blob(0), 9).await.unwrap();
            }
            assert_eq!(records.get(&blob(0)).await.unwrap(), None);
        }
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
        let records = open_with_container(dir.path()).await;
        let when = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
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
