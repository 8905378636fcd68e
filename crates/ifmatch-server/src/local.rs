//! The embedded default: records and objects on the local disk, under one data directory.
//!
//! ```text
//! DATA/.lock                                  held while a server uses DATA
//! DATA/containers/{container}/container.json  the container's record
//! DATA/containers/{container}/blobs/{h}.json  a blob's record; h = hex SHA-256 of its name
//! DATA/objects/{id}                           blob bytes, immutable, named by a random id
//! DATA/tmp/                                   files being written; emptied at start
//! ```
//!
//! Every file is written whole to `tmp/`, fsynced, renamed into place and its directory
//! fsynced: a crash leaves the old file or the new one, never a torn one. A blob's record holds
//! its ETag and names its object, which is on disk before the record is renamed into place, so
//! after any crash a blob's ETag is the SHA-256 of the bytes its record names. Objects that no
//! record names (uploads cut off, overwrites interrupted) are swept at start.
//!
//! File names never come from user input: containers are validated `[a-z0-9-]` names and blobs
//! are named by a hash, so no request can reach outside the data directory.
//!
//! We write files by hand rather than through `object_store`'s local store because durability
//! needs an fsync of the file and of its directory before a write is acknowledged, and the
//! compare-and-swap needs a lock held across read, compare and rename.

use std::collections::HashSet;
use std::fs::{self, File};
use std::hash::{BuildHasher, Hash};
use std::io::{self, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use ifmatch_blob::{
    BoxError, HashingBody, Key, Objects, PutMode, Record, Records, Staged, StoreError,
};
use pin_project_lite::pin_project;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncSeekExt, AsyncWriteExt};

/// How many locks the keys are spread over.
const STRIPES: usize = 256;

/// The read buffer of a streaming object read.
const READ_CHUNK: usize = 256 << 10;

/// An open data directory: locked against other servers for as long as it lives, or shared by
/// several (the distributed mode, where records live in Redis).
#[derive(Debug)]
pub struct DataDir {
    root: PathBuf,
    _lock: Option<File>,
}

/// Temporary files older than this, in a shared data directory, were left by a crash.
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(3600);

impl DataDir {
    /// Opens (creating if missing) and locks `root`, and empties its `tmp/`.
    pub fn open(root: impl Into<PathBuf>) -> io::Result<Arc<Self>> {
        let root = Self::create(root.into())?;
        let lock = File::create(root.join(".lock"))?;
        lock.try_lock().map_err(|_| {
            io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is in use by another ifmatch server", root.display()),
            )
        })?;
        Self::clean_tmp(&root, std::time::Duration::ZERO)?;
        Ok(Arc::new(Self {
            root,
            _lock: Some(lock),
        }))
    }

    /// Opens (creating if missing) `root` to share it with other servers: no lock, and only
    /// temporary files older than an hour are removed (younger ones may be uploads in flight
    /// on another server). Objects no record names are never swept here, since the records
    /// are elsewhere.
    pub fn open_shared(root: impl Into<PathBuf>) -> io::Result<Arc<Self>> {
        let root = Self::create(root.into())?;
        Self::clean_tmp(&root, STALE_TMP)?;
        Ok(Arc::new(Self { root, _lock: None }))
    }

    fn create(root: PathBuf) -> io::Result<PathBuf> {
        for dir in ["containers", "objects", "tmp"] {
            fs::create_dir_all(root.join(dir))?;
        }
        Ok(root)
    }

    fn clean_tmp(root: &Path, older_than: std::time::Duration) -> io::Result<()> {
        for entry in fs::read_dir(root.join("tmp"))? {
            let entry = entry?;
            let age = entry.metadata()?.modified()?.elapsed().unwrap_or_default();
            if age < older_than {
                continue;
            }
            let path = entry.path();
            // Another server may remove it first.
            let removed = if path.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            match removed {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn tmp_path(&self) -> PathBuf {
        self.root
            .join("tmp")
            .join(uuid::Uuid::new_v4().simple().to_string())
    }

    fn container_dir(&self, container: &str) -> PathBuf {
        self.root.join("containers").join(container)
    }

    fn record_path(&self, key: &Key) -> PathBuf {
        match key {
            Key::Container(c) => self.container_dir(c).join("container.json"),
            Key::Blob(c, name) => {
                let file = format!("{}.json", hex::encode(Sha256::digest(name.as_bytes())));
                self.container_dir(c).join("blobs").join(file)
            }
        }
    }

    fn object_path(&self, object: &str) -> Result<PathBuf, StoreError> {
        // Object names are ours (a simple UUID); anything else is not an object of this store.
        let ours = object.len() == 32 && object.bytes().all(|b| b.is_ascii_hexdigit());
        ours.then(|| self.root.join("objects").join(object))
            .ok_or(StoreError::NotFound)
    }

    /// Writes `bytes` to `path` all or nothing: temp file, fsync, rename, fsync the directory.
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.tmp_path();
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        if let Err(e) = fs::rename(&tmp, path) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        sync_dir(path.parent().expect("records live in a directory"))
    }

    /// Removes objects that no record names: what a crash or a lost race left behind.
    /// Call before serving.
    pub fn sweep_orphans(&self) -> io::Result<usize> {
        let mut named = HashSet::new();
        for container in fs::read_dir(self.root.join("containers"))? {
            let blobs = container?.path().join("blobs");
            let Ok(entries) = fs::read_dir(&blobs) else {
                continue;
            };
            for entry in entries {
                if let Some((_, record)) = read_blob_file(&entry?.path())? {
                    named.extend(record.content.map(|c| c.object));
                }
            }
        }
        let mut swept = 0;
        for entry in fs::read_dir(self.root.join("objects"))? {
            let entry = entry?;
            if !named.contains(entry.file_name().to_string_lossy().as_ref()) {
                fs::remove_file(entry.path())?;
                swept += 1;
            }
        }
        Ok(swept)
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[derive(serde::Serialize, serde::Deserialize)]
struct BlobFile {
    name: String,
    record: Record,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(io::Error::other),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn read_blob_file(path: &Path) -> io::Result<Option<(String, Record)>> {
    Ok(read_json::<BlobFile>(path)?.map(|f| (f.name, f.record)))
}

/// Records as JSON files, with a compare-and-swap per key and a moka cache in front.
///
/// The cache is exact, not a guess: this process is the only writer of the directory (the
/// lock), every write goes through the key's stripe lock and updates the cache under it, and a
/// miss fills the cache under that same lock. Deleting a container moves to a new epoch, which
/// makes every cached record of the old one unreachable at once.
#[derive(Debug, Clone)]
pub struct LocalRecords {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: Arc<DataDir>,
    cache: moka::sync::Cache<(u64, Key), Arc<Record>>,
    epoch: AtomicU64,
    stripes: Box<[Mutex<()>]>,
    hasher: std::hash::RandomState,
}

impl LocalRecords {
    /// Records under `dir`, caching up to `capacity` of them.
    pub fn new(dir: Arc<DataDir>, capacity: u64) -> Self {
        let inner = Inner {
            dir,
            cache: moka::sync::Cache::new(capacity),
            epoch: AtomicU64::new(0),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hasher: std::hash::RandomState::new(),
        };
        Self {
            inner: Arc::new(inner),
        }
    }
}

impl Inner {
    fn stripe(&self, key: &Key) -> std::sync::MutexGuard<'_, ()> {
        let mut h = self.hasher.build_hasher();
        key.hash(&mut h);
        let i = (std::hash::Hasher::finish(&h) % STRIPES as u64) as usize;
        self.stripes[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn cache_key(&self, key: &Key) -> (u64, Key) {
        (self.epoch.load(Ordering::Acquire), key.clone())
    }

    /// The current record, from the cache or the file. Call with the key's stripe held.
    fn load(&self, key: &Key) -> io::Result<Option<Arc<Record>>> {
        let cache_key = self.cache_key(key);
        if let Some(record) = self.cache.get(&cache_key) {
            return Ok(Some(record));
        }
        let path = self.dir.record_path(key);
        let record = match key {
            Key::Container(_) => read_json::<Record>(&path)?,
            Key::Blob(..) => read_blob_file(&path)?.map(|(_, r)| r),
        };
        let record = record.map(Arc::new);
        if let Some(record) = &record {
            self.cache.insert(cache_key, record.clone());
        }
        Ok(record)
    }

    fn put_blocking(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
        let _guard = self.stripe(key);
        let current = self.load(key)?;
        mode.check(current.as_deref())?;
        let path = self.dir.record_path(key);
        let bytes = match key {
            Key::Container(c) => {
                fs::create_dir_all(self.dir.container_dir(c).join("blobs"))?;
                serde_json::to_vec(record).map_err(io::Error::other)?
            }
            Key::Blob(c, name) => {
                if !self.dir.record_path(&Key::Container(c.clone())).exists() {
                    return Err(StoreError::ContainerNotFound);
                }
                let file = BlobFile {
                    name: name.clone(),
                    record: record.clone(),
                };
                serde_json::to_vec(&file).map_err(io::Error::other)?
            }
        };
        match self.dir.write_atomic(&path, &bytes) {
            // The container was deleted between the check and the rename.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::ContainerNotFound);
            }
            result => result?,
        }
        self.cache
            .insert(self.cache_key(key), Arc::new(record.clone()));
        Ok(())
    }

    fn delete_blocking(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
        let _guard = self.stripe(key);
        let current = self.load(key)?.ok_or(StoreError::NotFound)?;
        PutMode::Update(generation).check(Some(&current))?;
        match key {
            Key::Blob(..) => {
                let path = self.dir.record_path(key);
                fs::remove_file(&path)?;
                sync_dir(path.parent().expect("records live in a directory"))?;
                self.cache.invalidate(&self.cache_key(key));
                Ok(vec![])
            }
            Key::Container(c) => {
                // One rename takes the container and all its blobs out of sight at once.
                let trash = self.dir.tmp_path();
                fs::rename(self.dir.container_dir(c), &trash)?;
                sync_dir(&self.dir.root.join("containers"))?;
                self.epoch.fetch_add(1, Ordering::AcqRel);
                let mut removed = Vec::new();
                if let Ok(entries) = fs::read_dir(trash.join("blobs")) {
                    for entry in entries {
                        removed.extend(read_blob_file(&entry?.path())?.map(|(_, r)| r));
                    }
                }
                fs::remove_dir_all(&trash)?;
                Ok(removed)
            }
        }
    }

    fn list_blocking(
        &self,
        container: &str,
        prefix: &str,
    ) -> Result<Vec<(String, Record)>, StoreError> {
        let blobs = self.dir.container_dir(container).join("blobs");
        let entries = match fs::read_dir(&blobs) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::ContainerNotFound);
            }
            Err(e) => return Err(e.into()),
        };
        let mut out = Vec::new();
        for entry in entries {
            // A record deleted while we list is simply not listed.
            if let Some((name, record)) = read_blob_file(&entry?.path())?
                && name.starts_with(prefix)
            {
                out.push((name, record));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(io::Error::other)?
}

impl Records for LocalRecords {
    async fn get(&self, key: &Key) -> Result<Option<Arc<Record>>, StoreError> {
        let inner = &self.inner;
        if let Some(record) = inner.cache.get(&inner.cache_key(key)) {
            return Ok(Some(record));
        }
        let (this, key) = (inner.clone(), key.clone());
        blocking(move || {
            let _guard = this.stripe(&key);
            Ok(this.load(&key)?)
        })
        .await
    }

    async fn put(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
        let (this, key, record) = (self.inner.clone(), key.clone(), record.clone());
        blocking(move || this.put_blocking(&key, &record, mode)).await
    }

    async fn delete(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
        let (this, key) = (self.inner.clone(), key.clone());
        blocking(move || this.delete_blocking(&key, generation)).await
    }

    async fn list(
        &self,
        container: &str,
        prefix: &str,
    ) -> Result<Vec<(String, Record)>, StoreError> {
        let (this, container, prefix) =
            (self.inner.clone(), container.to_owned(), prefix.to_owned());
        blocking(move || this.list_blocking(&container, &prefix)).await
    }
}

/// Objects no larger than this are read whole and kept in the byte cache.
const CACHED_OBJECT_MAX: u64 = 4 << 20;

/// Blob bytes as files, with the bytes of small, recently read objects in a moka cache.
///
/// Objects are immutable and their names are never reused, so a cached object can never be
/// stale: the cache needs no invalidation for correctness, only to free memory on discard.
#[derive(Debug, Clone)]
pub struct LocalObjects {
    dir: Arc<DataDir>,
    cache: moka::sync::Cache<String, Bytes>,
}

impl LocalObjects {
    /// Objects under `dir`, caching up to `cache_bytes` of their bytes.
    pub fn new(dir: Arc<DataDir>, cache_bytes: u64) -> Self {
        let cache = moka::sync::Cache::builder()
            .max_capacity(cache_bytes)
            .weigher(|_: &String, bytes: &Bytes| u32::try_from(bytes.len()).unwrap_or(u32::MAX))
            .build();
        Self { dir, cache }
    }
}

impl Objects for LocalObjects {
    type Reader = ObjectReader;

    async fn stage<B>(&self, body: B, limit: u64) -> Result<Staged, StoreError>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let tmp = self.dir.tmp_path();
        let written = write_object(&tmp, body, limit).await;
        let (etag, len) = match written {
            Ok(done) => done,
            Err(e) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                return Err(e);
            }
        };
        let object = uuid::Uuid::new_v4().simple().to_string();
        let path = self.dir.object_path(&object)?;
        tokio::fs::rename(&tmp, &path).await?;
        let objects = self.dir.root.join("objects");
        blocking(move || Ok(sync_dir(&objects)?)).await?;
        Ok(Staged { object, etag, len })
    }

    async fn read(
        &self,
        object: &str,
        range: Option<Range<u64>>,
    ) -> Result<ObjectReader, StoreError> {
        let slice = |bytes: Bytes| {
            let range = range.clone().unwrap_or(0..bytes.len() as u64);
            ObjectReader::memory(bytes.slice(range.start as usize..range.end as usize))
        };
        if let Some(bytes) = self.cache.get(object) {
            return Ok(slice(bytes));
        }
        let path = self.dir.object_path(object)?;
        let (this, name) = (self.clone(), object.to_owned());
        // One trip to the blocking pool: open, and for a small object read it whole.
        let opened = blocking(move || {
            let mut file = match File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(StoreError::NotFound),
                Err(e) => return Err(e.into()),
            };
            let len = file.metadata()?.len();
            if len > CACHED_OBJECT_MAX {
                return Ok(Err((file, len)));
            }
            let mut bytes = Vec::with_capacity(len as usize);
            io::Read::read_to_end(&mut file, &mut bytes)?;
            let bytes = Bytes::from(bytes);
            this.cache.insert(name, bytes.clone());
            Ok(Ok(bytes))
        })
        .await?;
        match opened {
            Ok(bytes) => Ok(slice(bytes)),
            Err((file, len)) => {
                let mut file = tokio::fs::File::from_std(file);
                let range = range.unwrap_or(0..len);
                if range.start > 0 {
                    file.seek(io::SeekFrom::Start(range.start)).await?;
                }
                let remaining = range.end.saturating_sub(range.start);
                Ok(ObjectReader::file(file, remaining))
            }
        }
    }

    async fn discard(&self, object: &str) -> Result<(), StoreError> {
        self.cache.invalidate(object);
        match tokio::fs::remove_file(self.dir.object_path(object)?).await {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}

/// Streams `body` into a new file at `path`, hashing it on the way; fsyncs before returning.
async fn write_object<B>(
    path: &Path,
    body: B,
    limit: u64,
) -> Result<(ifmatch_core::EntityTag, u64), StoreError>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let mut file = tokio::fs::File::create(path).await?;
    let mut body = std::pin::pin!(HashingBody::new(body, limit));
    while let Some(frame) = body.frame().await {
        if let Ok(chunk) = frame?.into_data() {
            file.write_all(&chunk).await?;
        }
    }
    file.sync_all().await?;
    Ok(body.as_mut().finish())
}

pin_project! {
    /// A stored object's bytes on their way out: from the byte cache, or streaming from its
    /// file in chunks of at most 256 KiB.
    #[derive(Debug)]
    pub struct ObjectReader {
        #[pin]
        inner: Source,
    }
}

pin_project! {
    #[project = SourceProjection]
    #[derive(Debug)]
    enum Source {
        Memory { bytes: Option<Bytes> },
        File { #[pin] file: tokio::fs::File, buf: BytesMut, remaining: u64 },
    }
}

impl ObjectReader {
    fn memory(bytes: Bytes) -> Self {
        let bytes = (!bytes.is_empty()).then_some(bytes);
        Self {
            inner: Source::Memory { bytes },
        }
    }

    fn file(file: tokio::fs::File, remaining: u64) -> Self {
        Self {
            inner: Source::File {
                file,
                buf: BytesMut::new(),
                remaining,
            },
        }
    }
}

impl Body for ObjectReader {
    type Data = Bytes;
    type Error = StoreError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, StoreError>>> {
        let (file, buf, remaining) = match self.project().inner.project() {
            SourceProjection::Memory { bytes } => {
                return Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b))));
            }
            SourceProjection::File {
                file,
                buf,
                remaining,
            } => (file, buf, remaining),
        };
        if *remaining == 0 {
            return Poll::Ready(None);
        }
        let want = (*remaining).min(READ_CHUNK as u64) as usize;
        if buf.capacity() < want {
            buf.reserve(READ_CHUNK.max(want));
        }
        let mut limited = BufMut::limit(&mut *buf, want);
        match tokio_util::io::poll_read_buf(file, cx, &mut limited) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(Ok(0)) => {
                let e = io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "object shorter than its record",
                );
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(Ok(n)) => {
                *remaining -= n as u64;
                Poll::Ready(Some(Ok(Frame::data(buf.split().freeze()))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Source::Memory { bytes } => bytes.is_none(),
            Source::File { remaining, .. } => *remaining == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Source::Memory { bytes } => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            Source::File { remaining, .. } => SizeHint::with_exact(*remaining),
        }
    }
}
