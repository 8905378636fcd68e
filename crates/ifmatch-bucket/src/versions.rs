//! The Tower layer's version backend in an object store: versions every instance sees, and the
//! per-key write lock, with an expiry and a fencing token, each change one conditional PUT.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ifmatch_core::precondition::Validators;
use ifmatch_tower::{BoxError, VersionStore};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

/// Versions and write locks in a bucket, for [`ifmatch_tower::ConditionalLayer::versions`]: a
/// fleet of axum instances that shares nothing but its own bucket.
///
/// Per resource key, one small JSON object (named by the SHA-256 of the key, under a prefix)
/// holding the version, the lock (its holder's random token and when it expires) and the
/// fencing counter. Every change reads the object and writes it back only if its ETag is still
/// the one read (`If-Match`; create-only when there is none), starting over when another
/// instance wrote first:
///
/// - A lock is taken when the object holds none or an expired one, and the counter grows in
///   the same write: the counter is the guard's fencing token
///   ([`VersionStore::fencing_token`]).
/// - While the guard lives, a task renews the lock every third of its time to live; a crashed
///   or stalled instance loses it after [`BucketVersions::lock_ttl`].
/// - A version is recorded only in a write that finds the guard's token still holding the lock:
///   a writer whose lock expired cannot record over a newer write. Dropping the guard releases
///   the lock if it is still this guard's.
///
/// Expiry is judged by each instance's clock: keep the fleet's clocks within a fraction of
/// [`BucketVersions::lock_ttl`] (NTP does). The objects stay when a key is forgotten (their
/// counter keeps fencing tokens growing); each costs a few hundred bytes.
///
/// What it costs: a lock is one GET and one PUT (more under contention), a recorded version
/// one GET and one PUT, a renewal every `lock_ttl / 3` the same, a read of a version one GET.
#[derive(Clone)]
pub struct BucketVersions {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    lock_ttl: Duration,
    lock_wait: Duration,
    version_ttl: Option<Duration>,
}

impl std::fmt::Debug for BucketVersions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketVersions")
            .field("store", &self.store.to_string())
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
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
            .is_some_and(|lock| lock.token == token && lock.until > now)
    }
}

/// What a change of one key's object decided: write the entry back, or leave it as it is.
enum Decision<T> {
    Write(T),
    Keep(T),
}

/// The write lock of one key in [`BucketVersions`]; dropping it releases the lock.
#[derive(Debug)]
pub struct BucketGuard {
    key: String,
    token: String,
    fence: u64,
    /// Dropped with the guard: tells the renewing task to stop and release.
    _release: oneshot::Sender<()>,
}

/// Why [`BucketVersions`] could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VersionsError {
    /// The object store failed, or does not offer conditional puts.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// The lock stayed taken for longer than [`BucketVersions::lock_wait`].
    #[error("the write lock of {0:?} stayed taken")]
    LockTimeout(String),
    /// The guard's lock expired (the holder stalled longer than its time to live): someone
    /// else may have written since, so nothing was recorded.
    #[error("the write lock of {0:?} was lost")]
    LockLost(String),
    /// A stored entry did not parse.
    #[error("a stored version did not parse: {0}")]
    Corrupt(#[from] serde_json::Error),
}

impl BucketVersions {
    /// Versions in `store`, under `prefix` (say `myapp/versions`). Locks live 10 s unless
    /// renewed, a writer waits at most 10 s for one, versions are kept a day.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> Self {
        Self {
            store,
            prefix: Path::from(prefix),
            lock_ttl: Duration::from_secs(10),
            lock_wait: Duration::from_secs(10),
            version_ttl: Some(Duration::from_secs(24 * 3600)),
        }
    }

    /// How long a lock outlives a holder that stopped renewing it (crashed, stalled, cut off
    /// from the store): how long its key stays unwritable after such a failure.
    pub fn lock_ttl(mut self, ttl: Duration) -> Self {
        self.lock_ttl = ttl.max(Duration::from_millis(300));
        self
    }

    /// How long a writer waits for a taken lock before giving up (the layer answers 503).
    pub fn lock_wait(mut self, wait: Duration) -> Self {
        self.lock_wait = wait;
        self
    }

    /// How long a version is trusted after it was recorded (`None`: until replaced). A
    /// forgotten version only costs a GET of the inner service to learn it again.
    pub fn version_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.version_ttl = ttl;
        self
    }

    /// The object of `key`: named by the SHA-256 of the key, so any key fits any store.
    fn path(&self, key: &str) -> Path {
        self.prefix
            .clone()
            .join(hex::encode(Sha256::digest(key.as_bytes())))
    }

    /// The entry of `key` and the version of its object (`None`: there is none yet).
    async fn read(&self, path: &Path) -> Result<(Entry, Option<UpdateVersion>), VersionsError> {
        match self.store.get(path).await {
            Ok(found) => {
                let version = UpdateVersion {
                    e_tag: found.meta.e_tag.clone(),
                    version: found.meta.version.clone(),
                };
                let bytes = found.bytes().await?;
                Ok((serde_json::from_slice(&bytes)?, Some(version)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok((Entry::default(), None)),
            Err(error) => Err(error.into()),
        }
    }

    /// Reads the entry of `key`, lets `decide` change it, and writes it back only if nobody
    /// wrote the object since it was read: one conditional PUT, tried again on a lost race.
    async fn change<T>(
        &self,
        key: &str,
        mut decide: impl FnMut(&mut Entry, u64) -> Decision<T>,
    ) -> Result<T, VersionsError> {
        let path = self.path(key);
        let mut pause = Duration::from_millis(1);
        loop {
            let (mut entry, version) = self.read(&path).await?;
            let outcome = match decide(&mut entry, now_millis()) {
                Decision::Keep(outcome) => return Ok(outcome),
                Decision::Write(outcome) => outcome,
            };
            let mode = version.map_or(PutMode::Create, PutMode::Update);
            let payload = PutPayload::from(serde_json::to_vec(&entry)?);
            match self
                .store
                .put_opts(&path, payload, PutOptions::from(mode))
                .await
            {
                Ok(_) => return Ok(outcome),
                Err(
                    object_store::Error::Precondition { .. }
                    | object_store::Error::AlreadyExists { .. },
                ) => {
                    // Another instance wrote first: read again, after a short wait so that a
                    // crowd of writers spreads out.
                    tokio::time::sleep(pause.mul_f64(0.5 + rand::random::<f64>())).await;
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// One try at the lock of `key`: the guard, or `None` when someone holds it.
    async fn attempt(&self, key: &str) -> Result<Option<BucketGuard>, VersionsError> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let ttl = millis(self.lock_ttl);
        let fence = self
            .change(key, |entry, now| match &entry.lock {
                Some(lock) if lock.until > now => Decision::Keep(None),
                _ => {
                    entry.fence += 1;
                    entry.lock = Some(Held {
                        token: token.clone(),
                        until: now.saturating_add(ttl),
                    });
                    Decision::Write(Some(entry.fence))
                }
            })
            .await?;
        let Some(fence) = fence else {
            return Ok(None);
        };
        let (release, released) = oneshot::channel();
        self.keep(key.to_owned(), token.clone(), released);
        Ok(Some(BucketGuard {
            key: key.to_owned(),
            token,
            fence,
            _release: release,
        }))
    }

    /// Keeps the lock of `key` alive until `release` fires, then releases it.
    fn keep(&self, key: String, token: String, mut release: oneshot::Receiver<()>) {
        let this = self.clone();
        let ttl = millis(self.lock_ttl);
        let period = self.lock_ttl / 3;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut release => break,
                    () = tokio::time::sleep(period) => {
                        let renewed = this.change(&key, |entry, now| {
                            if !entry.held_by(&token, now) {
                                return Decision::Keep(false);
                            }
                            if let Some(lock) = &mut entry.lock {
                                lock.until = now.saturating_add(ttl);
                            }
                            Decision::Write(true)
                        });
                        match renewed.await {
                            Ok(true) => {}
                            Ok(false) => {
                                tracing::warn!(key, "a write lock expired while held");
                                // Lost: nothing to renew or release. Wait for the drop.
                                let _ = release.await;
                                return;
                            }
                            Err(error) => tracing::debug!(%error, key, "renewing a lock failed"),
                        }
                    }
                }
            }
            let released = this.change(&key, |entry, now| {
                if entry.held_by(&token, now) {
                    entry.lock = None;
                    Decision::Write(())
                } else {
                    Decision::Keep(())
                }
            });
            if let Err(error) = released.await {
                tracing::debug!(%error, key, "release failed; the lock expires instead");
            }
        });
    }
}

fn now_millis() -> u64 {
    millis(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl VersionStore for BucketVersions {
    type Guard = BucketGuard;

    fn expire_after(self, ttl: Duration) -> Self {
        let ttl = self.version_ttl.map_or(ttl, |kept| kept.min(ttl));
        self.version_ttl(Some(ttl))
    }

    async fn get(&self, key: &str) -> Result<Option<Validators>, BoxError> {
        let (entry, _) = self.read(&self.path(key)).await?;
        let now = now_millis();
        Ok(entry
            .version
            .filter(|kept| kept.until.is_none_or(|until| until > now))
            .map(|kept| kept.validators))
    }

    async fn set(&self, guard: &BucketGuard, validators: Validators) -> Result<(), BoxError> {
        let ttl = self.version_ttl.map(millis);
        let recorded = self
            .change(&guard.key, |entry, now| {
                if !entry.held_by(&guard.token, now) {
                    return Decision::Keep(false);
                }
                entry.version = Some(Kept {
                    validators: validators.clone(),
                    until: ttl.map(|ttl| now.saturating_add(ttl)),
                });
                Decision::Write(true)
            })
            .await?;
        if recorded {
            Ok(())
        } else {
            Err(VersionsError::LockLost(guard.key.clone()).into())
        }
    }

    async fn forget(&self, key: &str) -> Result<(), BoxError> {
        self.change(key, |entry, _| match entry.version.take() {
            Some(_) => Decision::Write(()),
            None => Decision::Keep(()),
        })
        .await?;
        Ok(())
    }

    async fn lock(&self, key: &str) -> Result<BucketGuard, BoxError> {
        let deadline = tokio::time::Instant::now() + self.lock_wait;
        let mut pause = Duration::from_millis(2);
        loop {
            if let Some(guard) = self.attempt(key).await? {
                return Ok(guard);
            }
            if tokio::time::Instant::now() + pause > deadline {
                return Err(VersionsError::LockTimeout(key.to_owned()).into());
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    async fn try_lock(&self, key: &str) -> Result<Option<BucketGuard>, BoxError> {
        Ok(self.attempt(key).await?)
    }

    fn fencing_token(&self, guard: &BucketGuard) -> Option<u64> {
        Some(guard.fence)
    }
}
