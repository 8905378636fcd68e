//! The backends a server uses, read once from the command line's URLs: records on the local
//! disk, in Redis (`--backend redis://HOST:PORT/DB`) or in an object store itself (`--backend
//! s3://bucket/prefix`), bytes on the local disk or in an object store (`--store
//! s3://bucket/prefix`, `az://`, `gs://`, `file://`, `memory://`; with a bucket backend and no
//! --store, in the same bucket), and opened together, with the data directory in the mode the
//! pair needs.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::any::{AnyObjects, AnyRecords, AnyTables};
use crate::local::{DataDir, INLINE_MAX, LocalObjects, LocalRecords, LocalTables};

/// Which backends to use: where records go, where bytes go, and the data directory.
#[derive(Debug, Clone)]
pub struct Choice {
    data: PathBuf,
    records: RecordsAt,
    objects: ObjectsAt,
    /// How many Redis replicas have each write before it is acknowledged.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    redis_replicas: usize,
}

/// Where records and leases go.
#[derive(Debug, Clone)]
enum RecordsAt {
    /// The data directory.
    Local,
    /// The Redis at this URL.
    #[cfg(feature = "redis")]
    Redis(String),
    /// The object store at this URL.
    #[cfg(feature = "bucket")]
    Bucket(String),
}

/// Where blob bytes go.
#[derive(Debug, Clone)]
enum ObjectsAt {
    /// The data directory.
    Local,
    /// The object store at this URL.
    #[cfg(feature = "object-store")]
    Store(String),
}

/// A URL that names no backend this build has.
#[derive(Debug, thiserror::Error)]
pub enum ChoiceError {
    /// Not a URL at all.
    #[error("{url}: {reason}")]
    Invalid {
        /// What was given.
        url: String,
        /// Why it is not a URL.
        reason: String,
    },
    /// A URL of a backend this build was made without, or of none.
    #[error("{url}: not {expected}")]
    Unknown {
        /// What was given.
        url: String,
        /// What was expected there.
        expected: &'static str,
    },
}

/// The sizes of the caches the backends keep, and how old an orphan must be before a shared
/// store's sweep may take it.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// How many records the local records' cache holds.
    pub records_cache: u64,
    /// How many bytes of small objects the byte cache holds.
    pub bytes_cache: u64,
    /// How old an unnamed object must be before a sweep of shared objects takes it.
    pub orphan_age: Duration,
}

impl Default for Sizes {
    fn default() -> Self {
        Self {
            records_cache: 100_000,
            bytes_cache: 256 << 20,
            orphan_age: Duration::from_secs(3600),
        }
    }
}

/// The backends, open.
#[derive(Debug)]
pub struct Opened {
    /// The records.
    pub records: AnyRecords,
    /// The objects.
    pub objects: AnyObjects,
    /// The Table front's tables: beside the records (the data directory's `tables.redb`, or
    /// the same Redis).
    pub tables: AnyTables,
    /// The data directory (all of the data, or this instance's local state).
    pub dir: Arc<DataDir>,
    /// Whether other instances may be writing the same objects: then an orphan is swept only
    /// once [`Sizes::orphan_age`] old, never at once.
    pub shared: bool,
}

impl Choice {
    /// Reads the choice: `records` is `None` (the data directory) or a Redis URL; `objects`
    /// is `None` (the data directory) or an object store's URL. Each URL is checked here, once.
    pub fn parse(
        data: impl Into<PathBuf>,
        records: Option<&str>,
        objects: Option<&str>,
    ) -> Result<Self, ChoiceError> {
        let records = match records {
            None => RecordsAt::Local,
            Some(url) => backend_url(url)?,
        };
        let objects = match objects {
            None => ObjectsAt::Local,
            Some(url) => store_url(url)?,
        };
        Ok(Self {
            data: data.into(),
            records,
            objects,
            redis_replicas: 0,
        })
    }

    /// Acknowledges each write to Redis only once `replicas` of its replicas have it (Redis's
    /// `WAIT`): a failover then loses no acknowledged write. Refused when the records are not
    /// in Redis.
    pub fn with_redis_replicas(self, replicas: usize) -> Result<Self, ChoiceError> {
        #[cfg(feature = "redis")]
        if let RecordsAt::Redis(_) = self.records {
            return Ok(Self {
                redis_replicas: replicas,
                ..self
            });
        }
        if replicas == 0 {
            return Ok(self);
        }
        Err(ChoiceError::Unknown {
            url: format!("--redis-replicas {replicas}"),
            expected: "a Redis --backend (redis://, redis+sentinel:// or redis+cluster://) for its \
                       replicas",
        })
    }

    /// What was chosen, for the log line of a start: `data: DIR[, backend: URL][, store: URL]`.
    pub fn describe(&self) -> String {
        #[cfg_attr(
            not(any(feature = "redis", feature = "object-store")),
            allow(unused_mut)
        )]
        let mut out = format!("data: {}", self.data.display());
        match &self.records {
            RecordsAt::Local => {}
            #[cfg(feature = "redis")]
            RecordsAt::Redis(url) => out.push_str(&format!(", backend: {url}")),
            #[cfg(feature = "bucket")]
            RecordsAt::Bucket(url) => out.push_str(&format!(", backend: {url}")),
        }
        #[cfg(feature = "object-store")]
        if let ObjectsAt::Store(url) = &self.objects {
            out.push_str(&format!(", store: {url}"));
        }
        out
    }

    /// Refuses a data directory the choice would use the other way (its records in it for
    /// one server, or objects shared through Redis), changing nothing and reaching no backend.
    pub fn check_data(&self) -> io::Result<()> {
        #[cfg(feature = "redis")]
        let shared = matches!(
            (&self.records, &self.objects),
            (RecordsAt::Redis(_), ObjectsAt::Local)
        );
        #[cfg(not(feature = "redis"))]
        let shared = false;
        DataDir::check_mode(&self.data, shared)
    }

    /// The tables a fleet shares (in Redis, in a bucket), opened alone, without the data
    /// directory; `None` when the tables are the data directory's own (one server's).
    pub async fn shared_tables(&self) -> io::Result<Option<AnyTables>> {
        match &self.records {
            RecordsAt::Local => Ok(None),
            #[cfg(feature = "redis")]
            RecordsAt::Redis(url) => Ok(Some(redis(url, self.redis_replicas).await?.1)),
            #[cfg(feature = "bucket")]
            RecordsAt::Bucket(url) => {
                let (store, prefix) = bucket_at(url)?;
                Ok(Some(bucket(url, &store, &prefix).await?.1))
            }
        }
    }

    /// Opens the backends. The data directory is opened as the pair needs: whole and locked
    /// for one embedded server; shared by every instance when records are in Redis and bytes
    /// on its disk; this instance's local state alone when bytes are in an object store.
    pub async fn open(&self, sizes: &Sizes) -> io::Result<Opened> {
        // Every pair but the embedded one's may have other instances writing its objects.
        let shared = !matches!(
            (&self.records, &self.objects),
            (RecordsAt::Local, ObjectsAt::Local)
        );
        let (records, objects, tables, dir) = match (&self.records, &self.objects) {
            (RecordsAt::Local, ObjectsAt::Local) => {
                let dir = DataDir::open(&self.data)?;
                let records = LocalRecords::new(dir.clone(), sizes.records_cache, INLINE_MAX)?;
                let objects = LocalObjects::new(dir.clone(), sizes.bytes_cache);
                let tables = local_tables(&dir)?;
                (
                    AnyRecords::Local(records),
                    AnyObjects::Local(objects),
                    tables,
                    dir,
                )
            }
            #[cfg(feature = "object-store")]
            (RecordsAt::Local, ObjectsAt::Store(url)) => {
                let objects = open_store(url, sizes)?;
                let dir = DataDir::open(&self.data)?;
                // The bytes go to the store, small ones too: what the operator chose it for.
                let records = LocalRecords::new(dir.clone(), sizes.records_cache, 0)?;
                let tables = local_tables(&dir)?;
                (AnyRecords::Local(records), objects, tables, dir)
            }
            #[cfg(feature = "redis")]
            (RecordsAt::Redis(url), ObjectsAt::Local) => {
                let dir = DataDir::open_shared(&self.data, sizes.orphan_age)?;
                let (records, tables) = redis(url, self.redis_replicas).await?;
                let objects = LocalObjects::new(dir.clone(), sizes.bytes_cache);
                (records, AnyObjects::Local(objects), tables, dir)
            }
            #[cfg(feature = "bucket")]
            (RecordsAt::Bucket(url), objects) => {
                let (store, prefix) = bucket_at(url)?;
                let (records, tables) = bucket(url, &store, &prefix).await?;
                // The bytes in the same bucket, unless --store names another place.
                let objects = match objects {
                    ObjectsAt::Store(other) => open_store(other, sizes)?,
                    ObjectsAt::Local => AnyObjects::Bucket(crate::bucket::BucketObjects::new(
                        store,
                        prefix,
                        sizes.bytes_cache,
                    )),
                };
                let dir = DataDir::open(&self.data)?;
                (records, objects, tables, dir)
            }
            #[cfg(all(feature = "redis", feature = "object-store"))]
            (RecordsAt::Redis(url), ObjectsAt::Store(store)) => {
                let objects = open_store(store, sizes)?;
                let dir = DataDir::open(&self.data)?;
                let (records, tables) = redis(url, self.redis_replicas).await?;
                (records, objects, tables, dir)
            }
        };
        Ok(Opened {
            records,
            objects,
            tables,
            dir,
            shared,
        })
    }
}

/// A backend's URL, checked: Redis (`redis://`, `rediss://`, `redis+unix://`, `unix://`), or
/// an object store that keeps the records itself (`s3://`, `az://`, `gs://`, `memory://`).
fn backend_url(url: &str) -> Result<RecordsAt, ChoiceError> {
    // A list of Sentinels or of a cluster's nodes is no URL authority `url` parses
    // (`H1:P1,H2:P2`): the Redis crate's connection reads it (`ifmatch_redis::connect`).
    #[cfg(feature = "redis")]
    if url.starts_with("redis+sentinel://") || url.starts_with("redis+cluster://") {
        return Ok(RecordsAt::Redis(url.to_owned()));
    }
    let parsed = parse(url)?;
    #[cfg(feature = "redis")]
    if matches!(parsed.scheme(), "redis" | "rediss" | "redis+unix" | "unix") {
        return Ok(RecordsAt::Redis(url.to_owned()));
    }
    #[cfg(feature = "bucket")]
    if object_store::ObjectStoreScheme::parse(&parsed).is_ok() {
        return Ok(RecordsAt::Bucket(url.to_owned()));
    }
    let _ = parsed;
    unknown(
        url,
        "a Redis URL (redis://HOST:PORT/DB) of a build with Redis, or an object \
                   store URL (s3://, az://, gs://) of a build with buckets",
    )
}

/// An object store's URL, checked against the schemes `object_store` knows.
fn store_url(url: &str) -> Result<ObjectsAt, ChoiceError> {
    let parsed = parse(url)?;
    #[cfg(feature = "object-store")]
    if object_store::ObjectStoreScheme::parse(&parsed).is_ok() {
        return Ok(ObjectsAt::Store(url.to_owned()));
    }
    let _ = parsed;
    unknown(
        url,
        "an object store URL (s3://, az://, gs://, file://, memory://) of a build \
                   with object stores",
    )
}

/// `url` refused: a URL of none of the kinds `expected` names.
fn unknown<T>(url: &str, expected: &'static str) -> Result<T, ChoiceError> {
    let url = url.to_owned();
    Err(ChoiceError::Unknown { url, expected })
}

fn parse(url: &str) -> Result<url::Url, ChoiceError> {
    url::Url::parse(url).map_err(|e| ChoiceError::Invalid {
        url: url.to_owned(),
        reason: e.to_string(),
    })
}

/// The object store at `url`, with the byte cache in front of it.
#[cfg(feature = "object-store")]
fn open_store(url: &str, sizes: &Sizes) -> io::Result<AnyObjects> {
    let store = crate::bucket::BucketObjects::open(url, sizes.bytes_cache)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("--store {url}: {e}")))?;
    Ok(AnyObjects::Bucket(store))
}

/// The records and the tables in the Redis at `url`, under the `ifmatch:` prefix, each write
/// acknowledged once on `replicas` replicas.
#[cfg(feature = "redis")]
async fn redis(url: &str, replicas: usize) -> io::Result<(AnyRecords, AnyTables)> {
    let refused = |e: &dyn std::fmt::Display| {
        io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("connecting to {url}: {e}"),
        )
    };
    let connection = ifmatch_redis::connect(url).await.map_err(|e| refused(&e))?;
    let connection = (connection.with_replicas(replicas).await).map_err(|e| refused(&e))?;
    let tables = ifmatch_redis::RedisTables::new(connection.clone(), "ifmatch:");
    let records = ifmatch_redis::RedisRecords::new(connection, "ifmatch:");
    Ok((AnyRecords::Redis(records), AnyTables::Redis(tables)))
}

/// The object store a bucket `--backend` names, and the prefix under which it keeps all.
#[cfg(feature = "bucket")]
fn bucket_at(
    url: &str,
) -> io::Result<(Arc<dyn object_store::ObjectStore>, object_store::path::Path)> {
    crate::bucket::store_at(url)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("--backend {url}: {e}")))
}

/// The records and the tables in the object store `store` (named by `url`), under `prefix`'s
/// `records/` and `tables/`, once the store is seen to offer conditional puts.
#[cfg(feature = "bucket")]
async fn bucket(
    url: &str,
    store: &Arc<dyn object_store::ObjectStore>,
    prefix: &object_store::path::Path,
) -> io::Result<(AnyRecords, AnyTables)> {
    let under = |part: &str| prefix.clone().join(part).to_string();
    let records = ifmatch_bucket::BucketRecords::new(store.clone(), &under("records"));
    // A store busy or slow to answer (just started, or still serving what a killed instance
    // sent it) is asked again for a minute; one that answers without conditional puts is
    // refused at once.
    let refused = |e| io::Error::new(io::ErrorKind::InvalidInput, format!("--backend {url}: {e}"));
    let mut tries = 6;
    loop {
        match records.check().await {
            Ok(()) => break,
            Err(error @ ifmatch_blob::StoreError::Unavailable(_)) if tries > 1 => {
                tries -= 1;
                tracing::warn!("--backend {url}: {error}; asking again");
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            Err(error) => return Err(refused(error)),
        }
    }
    let tables = ifmatch_bucket::BucketTables::new(store.clone(), &under("tables"));
    Ok((AnyRecords::Bucket(records), AnyTables::Bucket(tables)))
}

/// The tables in the data directory's `tables.redb`.
fn local_tables(dir: &DataDir) -> io::Result<AnyTables> {
    let path = dir.root().join("tables.redb");
    let tables = LocalTables::open(&path)
        .map_err(|e| io::Error::other(format!("opening {}: {e}", path.display())))?;
    Ok(AnyTables::Local(tables))
}
