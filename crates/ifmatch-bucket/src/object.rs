//! One JSON object changed by compare-and-swap: read it with the version its ETag names, write
//! it back only if the store still holds that version (`If-Match`; create-only when there was
//! none), and wait a short jittered while before reading again when another writer came first.
//! What every state of this crate is made of.
//!
//! A conditional put carries a stamp of its own, a random number in the object's metadata, so
//! that a put refused as conflicting can tell another writer's object from its own: object_store
//! resends a put whose connection closed before the answer, and when the first try had been
//! carried out, the resend is refused by the very object it made. Without the stamp that write
//! would be taken as lost, read again, and made a second time (a snapshot twice) or undone (its
//! index entry removed while its record stays).

use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use ifmatch_core::backoff::{Backoff, Waits};
use object_store::path::Path;
use object_store::{
    Attribute, Attributes, GetOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions,
    PutPayload, UpdateVersion,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The metadata name of a conditional put's stamp (see the module's note): a C# identifier,
/// as Azure's metadata names are.
const STAMP: &str = "ifmatch_write";

/// How many objects a listing reads at once.
pub(crate) const READS: usize = 32;

/// Where a type of this crate keeps its objects: a store, a prefix in it, and how long one of
/// its operations (requests, retries and waits included) may take.
#[derive(Clone)]
pub(crate) struct Bucket {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) prefix: Path,
    pub(crate) timeout: Duration,
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bucket")
            .field("store", &self.store.to_string())
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// `path` with `segments` joined on, in order.
pub(crate) fn joined<S: AsRef<str>>(path: &Path, segments: &[S]) -> Path {
    (segments.iter()).fold(path.clone(), |path, s| path.join(s.as_ref()))
}

impl Bucket {
    /// The path of `segments` under the prefix.
    pub(crate) fn path<S: AsRef<str>>(&self, segments: &[S]) -> Path {
        joined(&self.prefix, segments)
    }

    pub(crate) fn new(store: Arc<dyn ObjectStore>, prefix: &str, timeout: Duration) -> Self {
        Self {
            store,
            prefix: Path::from(prefix),
            timeout,
        }
    }

    /// `operation`, or the error `late` makes of the timeout once it took longer.
    pub(crate) async fn within<T, E>(
        &self,
        operation: impl Future<Output = Result<T, E>>,
        late: impl FnOnce(Duration) -> E,
    ) -> Result<T, E> {
        match tokio::time::timeout(self.timeout, operation).await {
            Ok(done) => done,
            Err(_) => Err(late(self.timeout)),
        }
    }
}

/// Why a read or a write of an object failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    /// The store failed, or does not offer conditional puts.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// The object's bytes did not parse, or a value did not encode.
    #[error("an object did not parse: {0}")]
    Corrupt(#[from] serde_json::Error),
}

/// The value of the JSON object at `path` and the version a conditional write names; `None`
/// when there is no such object.
pub(crate) async fn read<T: DeserializeOwned>(
    store: &dyn ObjectStore,
    path: &Path,
) -> Result<Option<(T, UpdateVersion)>, Failure> {
    match store.get(path).await {
        Ok(found) => {
            let version = UpdateVersion {
                e_tag: found.meta.e_tag.clone(),
                version: found.meta.version.clone(),
            };
            let bytes = found.bytes().await?;
            Ok(Some((serde_json::from_slice(&bytes)?, version)))
        }
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// Writes `value` at `path` if the object is still at `version` (none: if there is still no
/// object): the version written, or `None` when another writer came first (read again).
pub(crate) async fn write_if<T: Serialize>(
    store: &dyn ObjectStore,
    path: &Path,
    value: &T,
    version: Option<UpdateVersion>,
) -> Result<Option<UpdateVersion>, Failure> {
    let stamp = format!("{:016x}", rand::random::<u64>());
    let options = PutOptions {
        mode: version.map_or(PutMode::Create, PutMode::Update),
        attributes: Attributes::from_iter([(Attribute::Metadata(STAMP.into()), stamp.clone())]),
        ..PutOptions::default()
    };
    let payload = PutPayload::from(serde_json::to_vec(value)?);
    match store.put_opts(path, payload, options).await {
        Ok(put) => Ok(Some(UpdateVersion {
            e_tag: put.e_tag,
            version: put.version,
        })),
        Err(
            object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. },
        ) => landed(store, path, &stamp).await,
        Err(error) => Err(error.into()),
    }
}

/// The version of the object at `path` if it is the one the put stamped `stamp` made: that put
/// was carried out, and its resend refused by it; `None` when another writer's object is there.
async fn landed(
    store: &dyn ObjectStore,
    path: &Path,
    stamp: &str,
) -> Result<Option<UpdateVersion>, Failure> {
    let head = GetOptions {
        head: true,
        ..GetOptions::default()
    };
    let found = match store.get_opts(path, head).await {
        Ok(found) => found,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    let ours = found.attributes.get(&Attribute::Metadata(STAMP.into()));
    Ok(ours
        .is_some_and(|ours| ours.as_ref() == stamp)
        .then(|| UpdateVersion {
            e_tag: found.meta.e_tag.clone(),
            version: found.meta.version.clone(),
        }))
}

/// Moves the counter at `path` (none yet: 0) up by one, unless it has reached `max`: the
/// number it held, or `None` when it is full. A lost race reads it again.
pub(crate) async fn take_number(
    store: &dyn ObjectStore,
    path: &Path,
    max: u64,
) -> Result<Option<u64>, Failure> {
    let mut waits = waits();
    loop {
        let (count, version) = match read::<u64>(store, path).await? {
            Some((count, version)) => (count, Some(version)),
            None => (0, None),
        };
        if count >= max {
            return Ok(None);
        }
        if write_if(store, path, &(count + 1), version)
            .await?
            .is_some()
        {
            return Ok(Some(count));
        }
        wait(&mut waits).await;
    }
}

/// The longest wait between two tries of one change.
const RETRY_WAIT_CAP: Duration = Duration::from_millis(50);

/// The waits between tries of one change: jittered, so that a crowd of writers on one object
/// spreads out, capped doubling up to 50 ms ([`wait`] waits the next).
pub(crate) fn waits() -> Waits {
    Backoff::up_to(RETRY_WAIT_CAP).waits()
}

/// Waits the next of `waits` before one more try.
pub(crate) async fn wait(waits: &mut Waits) {
    tokio::time::sleep(waits.next().unwrap_or(RETRY_WAIT_CAP)).await;
}

/// The paths of every object under `path`, in the order the store lists them.
pub(crate) async fn paths_under(
    store: &dyn ObjectStore,
    path: &Path,
) -> Result<Vec<Path>, Failure> {
    let listing = store.list(Some(path)).map_ok(|meta| meta.location);
    Ok(listing.try_collect().await?)
}

/// Deletes every object under `path` (unconditionally: only what nobody reads any more).
pub(crate) async fn remove_all(store: &dyn ObjectStore, path: &Path) -> Result<(), Failure> {
    let locations = store.list(Some(path)).map_ok(|meta| meta.location).boxed();
    store
        .delete_stream(locations)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    Ok(())
}

/// Tries what every change needs of `store` on an object of its own under `prefix`: a
/// create-only put, an `If-Match` update (each stamped, as every write is), a delete. Fails as the
/// store does: a store without conditional updates (object_store's local filesystem) with
/// `NotImplemented`.
pub(crate) async fn check(store: &dyn ObjectStore, prefix: &Path) -> Result<(), Failure> {
    let probe = prefix
        .clone()
        .join(format!("probe-{:016x}", rand::random::<u64>()));
    let created = write_if(store, &probe, &(), None).await?;
    let updated = match created {
        Some(version) => write_if(store, &probe, &(), Some(version)).await,
        None => Ok(None),
    };
    store.delete(&probe).await?;
    updated?;
    Ok(())
}

/// A new incarnation: what a container's or a table's contents are kept under from its
/// creation to its deletion, so that one write (its tombstone) takes them all out of sight.
pub(crate) fn incarnation() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// This instance's clock, in Unix milliseconds: what lock, version and intent ages are judged
/// by.
pub(crate) fn now_millis() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.as_millis()).unwrap_or(u64::MAX)
}
