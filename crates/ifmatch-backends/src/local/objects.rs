//! Blob bytes as files, written and read back checked, with a byte cache for small ones.

use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;
use ifmatch_blob::{BoxError, HashingBody, Objects, Staged, StoreError, check_len};
use ifmatch_blob::{Incoming, Span};
use tokio::io::{AsyncSeekExt, AsyncWriteExt};

use super::blocking::blocking;
use super::dir::DataDir;
use super::files::{TempFile, sync_dir};
use super::reader::ObjectReader;
use crate::byte_cache::{ByteCache, CACHED_OBJECT_MAX, byte_cache, slice};

/// Blob bytes as files, with the bytes of small, recently read objects in the byte cache.
#[derive(Debug, Clone)]
pub struct LocalObjects {
    dir: Arc<DataDir>,
    cache: ByteCache,
}

impl LocalObjects {
    /// Objects under `dir`, caching up to `cache_bytes` of their bytes.
    pub fn new(dir: Arc<DataDir>, cache_bytes: u64) -> Self {
        let cache = byte_cache(cache_bytes);
        Self { dir, cache }
    }
}

impl Objects for LocalObjects {
    type Reader = ObjectReader;

    async fn stage(&self, body: impl Incoming, limit: u64) -> Result<Staged, StoreError> {
        // Removed on any failure, and if this future is dropped half-way. Renamed into
        // `objects/` before it is durable: no record names it until `persist` (and an object
        // a crash left behind unnamed is an orphan, which the sweep removes).
        let tmp = TempFile(self.dir.tmp_path());
        let (etag, len) = write_object(&tmp.0, body, limit).await?;
        let object = uuid::Uuid::new_v4().simple().to_string();
        let path = self.dir.object_path(&object)?;
        tokio::fs::rename(&tmp.0, &path).await?;
        std::mem::forget(tmp);
        Ok(Staged { object, etag, len })
    }

    /// The file's bytes, then its name: two fsyncs, the least that lets a record name it. (A
    /// writeback error from before this open is still reported here: Linux reports an error
    /// nobody has seen to the next fsync, whichever descriptor makes it.)
    async fn persist(&self, staged: &Staged) -> Result<(), StoreError> {
        let path = self.dir.object_path(&staged.object)?;
        let objects = self.dir.objects_dir();
        blocking(move || {
            fs::File::open(&path)?.sync_all()?;
            Ok(sync_dir(&objects)?)
        })
        .await
    }

    async fn read(&self, object: &str, len: u64, range: Span) -> Result<Self::Reader, StoreError> {
        let slice = |bytes: Bytes| -> Result<ObjectReader, StoreError> {
            Ok(ObjectReader::memory(slice(
                object,
                &bytes,
                len,
                range.clone(),
            )?))
        };
        if let Some(bytes) = self.cache.get(object) {
            return slice(bytes);
        }
        let path = self.dir.object_path(object)?;
        let (this, name) = (self.clone(), object.to_owned());
        // One trip to the blocking pool: open, and for a small object read it whole.
        let opened = blocking(move || {
            let mut file = match File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(StoreError::not_found(format_args!("object {name}")));
                }
                Err(e) => return Err(e.into()),
            };
            let actual = file.metadata()?.len();
            check_len(&name, actual, len)?;
            if actual > CACHED_OBJECT_MAX {
                return Ok(Err(file));
            }
            let mut bytes = Vec::with_capacity(actual as usize);
            io::Read::read_to_end(&mut file, &mut bytes)?;
            let bytes = Bytes::from(bytes);
            check_len(&name, bytes.len() as u64, len)?;
            this.cache.insert(name, bytes.clone());
            Ok(Ok(bytes))
        })
        .await?;
        match opened {
            Ok(bytes) => slice(bytes),
            Err(file) => {
                let mut file = tokio::fs::File::from_std(file);
                let range = range.unwrap_or(0..len);
                if range.start > 0 {
                    file.seek(io::SeekFrom::Start(range.start)).await?;
                }
                Ok(ObjectReader::file(file, range.end - range.start))
            }
        }
    }

    /// A hard link: the same bytes under a second name, none copied (objects are never
    /// written after `persist`), its time set to now so that the sweep, which discards unnamed
    /// objects by their age, leaves the copy's record the time to name it. Where the file
    /// system will not link (no hard links; a file linked as often as it may be, `EMLINK`),
    /// the bytes are copied.
    async fn share(&self, object: &str, len: u64) -> Result<String, StoreError> {
        match self.link(object, len).await {
            Err(StoreError::Io(error)) => {
                tracing::debug!(%object, %error, "no hard link: the bytes are copied");
                ifmatch_blob::share_by_copy(self, object, len).await
            }
            linked => linked,
        }
    }

    async fn discard(&self, object: &str) -> Result<(), StoreError> {
        self.cache.invalidate(object);
        match tokio::fs::remove_file(self.dir.object_path(object)?).await {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    async fn older_than(&self, age: Duration, now: SystemTime) -> Result<Vec<String>, StoreError> {
        let objects = self.dir.objects_dir();
        blocking(move || {
            let mut out = Vec::new();
            for entry in fs::read_dir(objects)? {
                let entry = entry?;
                let Ok(modified) = entry.metadata().and_then(|m| m.modified()) else {
                    continue; // removed meanwhile
                };
                if now.duration_since(modified).unwrap_or_default() >= age {
                    out.push(entry.file_name().to_string_lossy().into_owned());
                }
            }
            Ok(out)
        })
        .await
    }
}

impl LocalObjects {
    /// A second name for `object`'s file, with its own time, made durable (see
    /// [`Objects::share`]).
    async fn link(&self, object: &str, len: u64) -> Result<String, StoreError> {
        let from = self.dir.object_path(object)?;
        let name = uuid::Uuid::new_v4().simple().to_string();
        let to = self.dir.object_path(&name)?;
        let objects = self.dir.objects_dir();
        let shared = name.clone();
        let source = object.to_owned();
        blocking(move || {
            match fs::hard_link(&from, &to) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(StoreError::not_found(format_args!("object {source}")));
                }
                result => result?,
            }
            let checked = (|| {
                let file = File::options().write(true).open(&to)?;
                check_len(&source, file.metadata()?.len(), len)?;
                file.set_modified(SystemTime::now())?;
                Ok::<_, StoreError>(sync_dir(&objects)?)
            })();
            if checked.is_err() {
                let _ = fs::remove_file(&to);
            }
            checked.map(|()| shared)
        })
        .await
    }
}

/// Streams `body` into a new file at `path`, hashing it on the way. Returns once every write's
/// error was seen (flushed) and the file's length is what was hashed; not fsynced (see
/// [`LocalObjects::persist`]).
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
    // tokio's File writes in the background: without this flush the last write's error
    // (ENOSPC) is lost, and `sync_all` does not report it.
    file.flush().await?;
    let (etag, len) = body.as_mut().finish();
    let written = file.metadata().await?.len();
    if written != len {
        return Err(StoreError::Io(io::Error::other(format!(
            "wrote {written} bytes of {len}"
        ))));
    }
    Ok((etag, len))
}
