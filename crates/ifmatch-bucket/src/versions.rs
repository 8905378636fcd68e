//! The Tower layer's version backend in an object store: versions every instance sees, and the
//! per-key write lock, with an expiry and a fencing token, each change one conditional PUT.

use std::sync::Arc;
use std::time::Duration;

use ifmatch_core::precondition::Validators;
use ifmatch_tower::{BoxError, Recorded, SharedBackend};
use object_store::path::Path;
use object_store::{ObjectStore, UpdateVersion};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::object::{self, Bucket, Failure, now_millis};

/// Versions and write locks in a bucket, for [`ifmatch_tower::ConditionalLayer::versions`]
/// through [`ifmatch_tower::Shared`] (which keeps a live holder's lock renewed, and says how
/// long a writer waits and a lock outlives its holder): a fleet of axum instances that shares
/// nothing but its own bucket.
///
/// Per resource key, one small JSON object (named by the SHA-256 of the key, under a prefix)
/// holding the version, the lock (its holder's random token and when it expires) and the
/// fencing counter. Every step reads the object and writes it back only if its ETag is still
/// the one read (`If-Match`; create-only when there is none), starting over when another
/// instance wrote first: a lock is taken when the object holds none or an expired one, and the
/// counter grows in the same write (the fencing token); a version is recorded, a lock renewed
/// or released, only in a write that finds the token still holding the lock.
///
/// Expiry is judged by each instance's clock: keep the fleet's clocks within a fraction of the
/// lock's time to live (NTP does). The objects stay when a key is forgotten (their counter
/// keeps fencing tokens growing); each costs a few hundred bytes.
///
/// What it costs: each step is one GET and one PUT of the key's object (more under
/// contention), a read of a version one GET.
#[derive(Clone, Debug)]
pub struct BucketVersions {
    bucket: Bucket,
}

/// What the object of one key holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Entry {
    /// The current validators, while they are trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<Kept>,
    /// The write lock, if anyone took it (it may have expired).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lock: Option<Held>,
    /// How many locks were ever taken on the key: the last one's fencing token.
    #[serde(default)]
    fence: u64,
}

/// A recorded version, and until when it is trusted (Unix milliseconds; none: always).
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    validators: Validators,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    until: Option<u64>,
}

/// A lock: its holder's token, and when it expires unless renewed (Unix milliseconds).
#[derive(Debug, Serialize, Deserialize)]
struct Held {
    token: String,
    until: u64,
}

impl Entry {
    /// Whether `token` holds the lock at `now`.
    fn held_by(&self, token: &str, now: u64) -> bool {
        self.lock
            .as_ref()
            .is_some_and(|lock| lock.token == token && lock.until >= now)
    }
}

/// What a change of one key's object decided: write the entry back, or leave it as it is.
enum Decision<T> {
    Write(T),
    Keep(T),
}

/// Why [`BucketVersions`] could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VersionsError {
    /// The object store failed, or does not offer conditional puts.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// A stored entry did not parse.
    #[error("a stored version did not parse: {0}")]
    Corrupt(#[from] serde_json::Error),
    /// The store does not offer the conditional puts every step needs: a create-only put and
    /// an `If-Match` update (object_store's `LocalFileSystem` offers only the first).
    #[error(
        "the object store {store} does not offer conditional updates (`If-Match` puts), which \
         every step needs: use a store that does (S3, Azure Blob, Google Cloud Storage, R2, \
         `ifmatch serve`), or Redis ({0})",
        store = .1
    )]
    Unsupported(object_store::Error, String),
    /// The store did not answer within [`BucketVersions::timeout`].
    #[error("the object store did not answer within {0:?}")]
    Timeout(Duration),
}

impl BucketVersions {
    /// Versions in `store`, under `prefix` (say `myapp/versions`). Each step is given up after
    /// 5 s.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> Self {
        let bucket = Bucket::new(store, prefix, Duration::from_secs(5));
        Self { bucket }
    }

    /// How long one step (a lock, a record, a read: its GETs and PUTs, retries included) may
    /// take before it fails: a store that does not answer fails the request at once (the layer
    /// answers 503) instead of holding it through the client's retries, and service resumes
    /// when the store is back. A step given up may still land: a lock taken so expires
    /// unrenewed, as a crashed holder's does.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.bucket.timeout = timeout;
        self
    }

    /// Checks that the store offers what every step needs, with a create-only put, an
    /// `If-Match` update and a delete of an object of its own under the prefix: call it at
    /// start-up, so that a store without conditional updates is refused before the first write
    /// rather than at it ([`VersionsError::Unsupported`]).
    pub async fn check(&self) -> Result<(), VersionsError> {
        let checked = self.within(async {
            let checked = object::check(&*self.bucket.store, &self.bucket.prefix).await;
            checked.map_err(|failure| self.failure(failure))
        });
        checked.await
    }

    /// A store's error, as [`VersionsError::Unsupported`] when it says conditional puts are not
    /// offered.
    fn refusal(&self, error: object_store::Error) -> VersionsError {
        match error {
            object_store::Error::NotImplemented { .. } => {
                VersionsError::Unsupported(error, self.bucket.store.to_string())
            }
            error => error.into(),
        }
    }

    /// `step`, given up after [`BucketVersions::timeout`].
    async fn within<T>(
        &self,
        step: impl Future<Output = Result<T, VersionsError>>,
    ) -> Result<T, VersionsError> {
        self.bucket.within(step, VersionsError::Timeout).await
    }

    /// The object of `key`: named by the SHA-256 of the key, so any key fits any store.
    fn path(&self, key: &str) -> Path {
        self.bucket
            .path(&[hex::encode(Sha256::digest(key.as_bytes()))])
    }

    /// The entry of `key` and the version of its object (`None`: there is none yet).
    async fn read_entry(
        &self,
        path: &Path,
    ) -> Result<(Entry, Option<UpdateVersion>), VersionsError> {
        let found = object::read::<Entry>(&*self.bucket.store, path).await;
        let found = found.map_err(|failure| self.failure(failure))?;
        Ok(found.map_or_else(Default::default, |(entry, version)| (entry, Some(version))))
    }

    /// Reads the entry of `key`, lets `decide` change it, and writes it back only if nobody
    /// wrote the object since it was read: one conditional PUT, tried again on a lost race.
    async fn change<T>(
        &self,
        key: &str,
        decide: impl FnMut(&mut Entry, u64) -> Decision<T>,
    ) -> Result<T, VersionsError> {
        self.within(self.change_unbounded(key, decide)).await
    }

    async fn change_unbounded<T>(
        &self,
        key: &str,
        mut decide: impl FnMut(&mut Entry, u64) -> Decision<T>,
    ) -> Result<T, VersionsError> {
        let path = self.path(key);
        let mut waits = object::waits();
        loop {
            let (mut entry, version) = self.read_entry(&path).await?;
            let outcome = match decide(&mut entry, now_millis()) {
                Decision::Keep(outcome) => return Ok(outcome),
                Decision::Write(outcome) => outcome,
            };
            let written = object::write_if(&*self.bucket.store, &path, &entry, version).await;
            if written.map_err(|failure| self.failure(failure))?.is_some() {
                return Ok(outcome);
            }
            // Another instance wrote first: read again.
            object::wait(&mut waits).await;
        }
    }

    /// A failure of the store, as [`VersionsError::Unsupported`] when it says conditional puts
    /// are not offered.
    fn failure(&self, failure: Failure) -> VersionsError {
        match failure {
            Failure::Store(error) => self.refusal(error),
            Failure::Corrupt(error) => VersionsError::Corrupt(error),
        }
    }
}

impl SharedBackend for BucketVersions {
    async fn acquire(&self, key: &str, token: &str, ttl_ms: u64) -> Result<Option<u64>, BoxError> {
        let fence = self.change(key, |entry, now| match &entry.lock {
            // Held through the millisecond of its expiry: clocks read in whole milliseconds
            // (the taker's rounded down), a lock never frees before its time to live.
            Some(lock) if lock.until >= now => Decision::Keep(None),
            _ => {
                entry.fence += 1;
                entry.lock = Some(Held {
                    token: token.to_owned(),
                    until: now.saturating_add(ttl_ms),
                });
                Decision::Write(Some(entry.fence))
            }
        });
        Ok(fence.await?)
    }

    async fn renew(&self, key: &str, token: &str, ttl_ms: u64) -> Result<bool, BoxError> {
        let renewed = self.change(key, |entry, now| {
            if !entry.held_by(token, now) {
                return Decision::Keep(false);
            }
            if let Some(lock) = &mut entry.lock {
                lock.until = now.saturating_add(ttl_ms);
            }
            Decision::Write(true)
        });
        Ok(renewed.await?)
    }

    async fn release(&self, key: &str, token: &str) -> Result<(), BoxError> {
        let released = self.change(key, |entry, now| {
            if entry.held_by(token, now) {
                entry.lock = None;
                Decision::Write(())
            } else {
                Decision::Keep(())
            }
        });
        Ok(released.await?)
    }

    async fn record(&self, key: &str, token: &str, version: &Recorded) -> Result<bool, BoxError> {
        let recorded = self.change(key, |entry, now| {
            if !entry.held_by(token, now) {
                return Decision::Keep(false);
            }
            entry.version = Some(Kept {
                validators: version.validators.clone(),
                until: version.keep_ms.map(|keep| now.saturating_add(keep)),
            });
            Decision::Write(true)
        });
        Ok(recorded.await?)
    }

    async fn read(&self, key: &str) -> Result<Option<Validators>, BoxError> {
        let (entry, _) = self.within(self.read_entry(&self.path(key))).await?;
        let now = now_millis();
        Ok(entry
            .version
            .filter(|kept| kept.until.is_none_or(|until| until > now))
            .map(|kept| kept.validators))
    }

    async fn forget(&self, key: &str) -> Result<(), BoxError> {
        let forgotten = self.change(key, |entry, _| match entry.version.take() {
            Some(_) => Decision::Write(()),
            None => Decision::Keep(()),
        });
        Ok(forgotten.await?)
    }
}
