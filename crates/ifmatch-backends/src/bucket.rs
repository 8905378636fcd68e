//! Blob bytes in an object store (`--store URL`): S3 and what speaks it, Azure Blob, GCS, a
//! local directory or memory, through the `object_store` crate.
//!
//! Every upload is a new object under a random name (`{prefix}/objects/{uuid}`), so no two
//! writers ever race on one name and a record never names bytes that change. A body streams
//! through the hasher into one `PUT` when it is small, or a multipart upload otherwise, with
//! a bounded number of parts in memory; the object exists, durable, only once the store has
//! acknowledged its last byte, and a failed upload is aborted. Reads and ranges stream, and
//! check the object's length against the record's before any byte goes. Small objects are
//! kept in a byte cache: they never change, so it is never stale, on any instance.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use ifmatch_blob::{HashingBody, Objects, Staged, StoreError, check_len};
use ifmatch_blob::{Incoming, Span};
use object_store::path::Path;

use crate::byte_cache::{ByteCache, CACHED_OBJECT_MAX, byte_cache, slice};
use object_store::{
    ClientConfigKey, GetOptions, GetRange, ObjectStore, ObjectStoreExt, ObjectStoreScheme,
    PutPayload, RetryConfig, WriteMultipart,
};

/// Bodies up to this size go in one `PUT`; larger ones in multipart parts of this size.
const PART: usize = 8 << 20;
/// Parts of one upload in flight at once: with the one being filled, the memory an upload
/// holds is at most `(PARALLEL_PARTS + 1) * PART`.
const PARALLEL_PARTS: usize = 2;

/// Blob bytes in an object store.
#[derive(Debug, Clone)]
pub struct BucketObjects {
    store: Arc<dyn ObjectStore>,
    /// Where the objects are: `{prefix}/objects/`.
    objects: Path,
    cache: ByteCache,
}

/// The body of a read.
pub type BucketReader = StreamBody<BoxStream<'static, Result<Frame<Bytes>, StoreError>>>;

impl BucketObjects {
    /// Opens the store a URL names (see [`store_at`]), caching up to `cache_bytes` of small
    /// objects.
    pub fn open(url: &str, cache_bytes: u64) -> Result<Self, String> {
        let (store, prefix) = store_at(url)?;
        Ok(Self::new(store, prefix, cache_bytes))
    }

    /// Objects in `store` under `prefix`, caching up to `cache_bytes` of small ones.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: Path, cache_bytes: u64) -> Self {
        Self {
            store,
            objects: prefix.clone().join("objects"),
            cache: byte_cache(cache_bytes),
        }
    }

    fn path(&self, object: &str) -> Result<Path, StoreError> {
        // Names are the front's: a simple UUID. Anything else would be a damaged record.
        if object.is_empty()
            || !object
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(StoreError::corrupt(
                format_args!("object name {object:?}"),
                "not a name this store gives",
            ));
        }
        Ok(self.objects.clone().join(object))
    }
}

/// The store's errors as the front's: a missing object is [`StoreError::NotFound`]; anything
/// else is the store not answering as it should, so whether a change was made is unknown.
fn store_error(e: object_store::Error) -> StoreError {
    match e {
        object_store::Error::NotFound { path, .. } => {
            StoreError::not_found(format_args!("object {path}"))
        }
        e => StoreError::Unavailable(Box::new(e)),
    }
}

fn memory(bytes: Bytes) -> BucketReader {
    StreamBody::new(futures_util::stream::once(async move { Ok(Frame::data(bytes)) }).boxed())
}

impl Objects for BucketObjects {
    type Reader = BucketReader;

    async fn stage(&self, body: impl Incoming, limit: u64) -> Result<Staged, StoreError> {
        let object = uuid::Uuid::new_v4().simple().to_string();
        let path = self.path(&object)?;
        let mut body = std::pin::pin!(HashingBody::new(body, limit));
        // The first part's worth decides: one PUT, or a multipart upload.
        let mut first = Vec::new();
        let mut rest: Option<Bytes> = None;
        while let Some(frame) = body.frame().await {
            if let Ok(chunk) = frame?.into_data() {
                if first.len() + chunk.len() > PART {
                    rest = Some(chunk);
                    break;
                }
                first.extend_from_slice(&chunk);
            }
        }
        let Some(rest) = rest else {
            let (etag, len) = body.as_mut().finish();
            (self.store)
                .put(&path, PutPayload::from(first))
                .await
                .map_err(store_error)?;
            return Ok(Staged { object, etag, len });
        };
        let upload = self.store.put_multipart(&path).await.map_err(store_error)?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART);
        let streamed = async {
            writer.put(first.into());
            writer.put(rest);
            while let Some(frame) = body.frame().await {
                if let Ok(chunk) = frame?.into_data() {
                    writer
                        .wait_for_capacity(PARALLEL_PARTS)
                        .await
                        .map_err(store_error)?;
                    writer.put(chunk);
                }
            }
            Ok::<_, StoreError>(())
        }
        .await;
        match streamed {
            Ok(()) => {
                writer.finish().await.map_err(store_error)?;
            }
            Err(e) => {
                // Nothing of it stays; a store that misses the abort expires the parts.
                let _ = writer.abort().await;
                return Err(e);
            }
        }
        let (etag, len) = body.as_mut().finish();
        Ok(Staged { object, etag, len })
    }

    async fn read(&self, object: &str, len: u64, range: Span) -> Result<Self::Reader, StoreError> {
        if let Some(bytes) = self.cache.get(object) {
            return Ok(memory(slice(object, &bytes, len, range)?));
        }
        let range = range.unwrap_or(0..len);
        let path = self.path(object)?;
        let small = len <= CACHED_OBJECT_MAX;
        if range.is_empty() && !small {
            // Nothing to read, but the object's length is still checked.
            let meta = self.store.head(&path).await.map_err(store_error)?;
            check_len(object, meta.size, len)?;
            return Ok(memory(Bytes::new()));
        }
        // A small object is read whole, and cached.
        let options = GetOptions {
            range: (!small).then(|| GetRange::Bounded(range.clone())),
            ..GetOptions::default()
        };
        let got = self
            .store
            .get_opts(&path, options)
            .await
            .map_err(store_error)?;
        check_len(object, got.meta.size, len)?;
        if small {
            let bytes = got.bytes().await.map_err(store_error)?;
            let part = slice(object, &bytes, len, Some(range))?;
            self.cache.insert(object.to_owned(), bytes);
            return Ok(memory(part));
        }
        let stream = got
            .into_stream()
            .map_ok(Frame::data)
            .map_err(store_error)
            .boxed();
        Ok(StreamBody::new(stream))
    }

    /// A server-side copy: the store copies the bytes, the server none; the copy's time, which
    /// the sweep reads, is now.
    async fn share(&self, object: &str, len: u64) -> Result<String, StoreError> {
        let from = self.path(object)?;
        let meta = self.store.head(&from).await.map_err(store_error)?;
        check_len(object, meta.size, len)?;
        let name = uuid::Uuid::new_v4().simple().to_string();
        self.store
            .copy(&from, &self.path(&name)?)
            .await
            .map_err(store_error)?;
        Ok(name)
    }

    async fn discard(&self, object: &str) -> Result<(), StoreError> {
        self.cache.invalidate(object);
        match self.store.delete(&self.path(object)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_error(e)),
        }
    }

    async fn older_than(&self, age: Duration, now: SystemTime) -> Result<Vec<String>, StoreError> {
        let mut listed = self.store.list(Some(&self.objects));
        let mut out = Vec::new();
        while let Some(meta) = listed.next().await {
            let meta = meta.map_err(store_error)?;
            let stored = SystemTime::from(meta.last_modified);
            if now.duration_since(stored).unwrap_or_default() >= age
                && let Some(name) = meta.location.filename()
            {
                out.push(name.to_owned());
            }
        }
        Ok(out)
    }
}

/// The store a URL names, and the prefix under which things go in it: `s3://bucket/prefix`,
/// `az://container/prefix`, `gs://bucket/prefix`, `file:///path`, `memory://`. Credentials and
/// endpoints come from the store's usual environment variables (`AWS_*`, `AZURE_*`,
/// `GOOGLE_*`). A store that does not answer is given up on within seconds (the request
/// answers 503), not retried for minutes.
pub fn store_at(url: &str) -> Result<(Arc<dyn ObjectStore>, Path), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let (scheme, prefix) = ObjectStoreScheme::parse(&parsed).map_err(|e| e.to_string())?;
    let prefix = Path::parse(prefix).map_err(|e| e.to_string())?;
    let retry = RetryConfig {
        max_retries: 3,
        retry_timeout: Duration::from_secs(10),
        ..RetryConfig::default()
    };
    // Set key by key: a whole `ClientOptions` would replace what the environment set
    // (`AWS_ALLOW_HTTP`, ...).
    let timeouts = [
        (ClientConfigKey::ConnectTimeout, "5s"),
        (ClientConfigKey::Timeout, "120s"),
    ];
    // The clouds' builders share no trait, and each is built the same way.
    macro_rules! cloud {
        ($builder:ty, $client_key:path) => {{
            let builder = <$builder>::from_env().with_url(url).with_retry(retry);
            let builder = (timeouts.into_iter()).fold(builder, |b, (key, value)| {
                b.with_config($client_key(key), value)
            });
            Arc::new(builder.build().map_err(|e| e.to_string())?)
        }};
    }
    use object_store::{aws, azure, gcp};
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::AmazonS3 => {
            cloud!(aws::AmazonS3Builder, aws::AmazonS3ConfigKey::Client)
        }
        ObjectStoreScheme::MicrosoftAzure => {
            cloud!(azure::MicrosoftAzureBuilder, azure::AzureConfigKey::Client)
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            cloud!(gcp::GoogleCloudStorageBuilder, gcp::GoogleConfigKey::Client)
        }
        ObjectStoreScheme::Local => {
            let root = parsed
                .to_file_path()
                .map_err(|()| format!("{url}: not a local path"))?;
            std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
            let local = object_store::local::LocalFileSystem::new_with_prefix(&root)
                .map_err(|e| e.to_string())?;
            return Ok((Arc::new(local), Path::default()));
        }
        ObjectStoreScheme::Memory => Arc::new(object_store::memory::InMemory::new()),
        other => return Err(format!("{url}: {other:?} stores are not supported")),
    };
    Ok((store, prefix))
}
