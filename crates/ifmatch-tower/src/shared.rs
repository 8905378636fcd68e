//! Versions and write locks shared by a fleet, over any backend that can do a few steps
//! atomically (a Redis script, a conditional PUT on an object): how a writer waits for a lock,
//! how a live holder keeps it, when a dead one loses it, and that a late holder records
//! nothing, live here once; a backend implements the steps ([`SharedBackend`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ifmatch_core::BoxError;
use ifmatch_core::backoff::Backoff;
use ifmatch_core::precondition::Validators;
use tokio::sync::oneshot;

use crate::store::VersionStore;

/// The longest wait between two tries of a taken lock.
const LOCK_WAIT_CAP: Duration = Duration::from_millis(20);

/// The steps of a backend shared by a fleet, each atomic in the backend. A lock is named by
/// the random token of its holder; it expires `ttl_ms` milliseconds after it was taken or last
/// renewed (milliseconds, as Redis's `PX` and a clock's Unix time count them).
pub trait SharedBackend: Send + Sync + 'static {
    /// Takes the lock of `key` for `token`, if nobody holds it (or its holder's expired), and
    /// counts one more lock taken on the key: that count (the fencing token), or `None` when
    /// the lock is held.
    fn acquire(
        &self,
        key: &str,
        token: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<Option<u64>, BoxError>> + Send;

    /// Extends the lock of `key` to `ttl_ms` from now if `token` still holds it: whether it does.
    fn renew(
        &self,
        key: &str,
        token: &str,
        ttl_ms: u64,
    ) -> impl Future<Output = Result<bool, BoxError>> + Send;

    /// Frees the lock of `key` if `token` holds it.
    fn release(&self, key: &str, token: &str) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// Records `version` as the version of `key` if `token` holds the lock: whether it
    /// recorded.
    fn record(
        &self,
        key: &str,
        token: &str,
        version: &Recorded,
    ) -> impl Future<Output = Result<bool, BoxError>> + Send;

    /// The version of `key`, if one is recorded and still kept.
    fn read(&self, key: &str) -> impl Future<Output = Result<Option<Validators>, BoxError>> + Send;

    /// Forgets the version of `key`.
    fn forget(&self, key: &str) -> impl Future<Output = Result<(), BoxError>> + Send;
}

/// A version for [`SharedBackend::record`] to keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The resource's current validators.
    pub validators: Validators,
    /// How long the backend keeps them, in milliseconds (`None`: until replaced).
    pub keep_ms: Option<u64>,
}

/// A [`VersionStore`] over a [`SharedBackend`]: versions every instance sees, and a per-key
/// write lock that expires when its holder dies, with a fencing token.
///
/// - While a guard lives, a task renews its lock every third of [`Shared::lock_ttl`], so a
///   live writer keeps it however long its write takes; a crashed or stalled instance loses it
///   after that time, and the key is writable again.
/// - A version is recorded only if the guard still holds the lock: a writer whose lock
///   expired cannot record over a newer write. Dropping the guard releases the lock if it is
///   still this guard's.
/// - A writer waits for a taken lock at most [`Shared::lock_wait`], then gets
///   [`SharedError::LockTimeout`] (the layer answers 503).
#[derive(Debug)]
pub struct Shared<B> {
    backend: Arc<B>,
    lock_ttl: Duration,
    lock_wait: Duration,
    version_ttl: Option<Duration>,
}

impl<B> Clone for Shared<B> {
    fn clone(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            lock_ttl: self.lock_ttl,
            lock_wait: self.lock_wait,
            version_ttl: self.version_ttl,
        }
    }
}

/// The write lock of one key in a [`Shared`] store; dropping it releases the lock.
#[derive(Debug)]
pub struct SharedGuard {
    key: String,
    token: String,
    fence: u64,
    /// Dropped with the guard: tells the renewing task to stop and release.
    _release: oneshot::Sender<()>,
}

/// Why a [`Shared`] store could not do what was asked (besides its backend's failures).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SharedError {
    /// The lock stayed taken for longer than [`Shared::lock_wait`].
    #[error("the write lock of {0:?} stayed taken")]
    LockTimeout(String),
    /// The guard's lock expired (the holder stalled longer than its time to live): someone
    /// else may have written since, so nothing was recorded.
    #[error("the write lock of {0:?} was lost")]
    LockLost(String),
}

impl<B: SharedBackend> Shared<B> {
    /// Versions and locks in `backend`. Locks live 10 s unless renewed, a writer waits at most
    /// 10 s for one, versions are kept a day.
    pub fn new(backend: B) -> Self {
        Self {
            backend: Arc::new(backend),
            lock_ttl: Duration::from_secs(10),
            lock_wait: Duration::from_secs(10),
            version_ttl: Some(Duration::from_secs(24 * 3600)),
        }
    }

    /// How long a lock outlives a holder that stopped renewing it (crashed, stalled, cut off
    /// from the backend): how long its key stays unwritable after such a failure.
    pub fn lock_ttl(mut self, ttl: Duration) -> Self {
        self.lock_ttl = ttl.max(Duration::from_millis(30));
        self
    }

    /// How long a writer waits for a taken lock before giving up (the layer answers 503).
    pub fn lock_wait(mut self, wait: Duration) -> Self {
        self.lock_wait = wait;
        self
    }

    /// How long the backend keeps a version (`None`: until replaced). A forgotten version only
    /// costs a GET of the inner service to learn it again.
    pub fn version_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.version_ttl = ttl;
        self
    }

    /// One try at the lock of `key`: the guard, or `None` when someone holds it.
    async fn attempt(&self, key: &str) -> Result<Option<SharedGuard>, BoxError> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let Some(fence) = self
            .backend
            .acquire(key, &token, millis(self.lock_ttl))
            .await?
        else {
            return Ok(None);
        };
        let (release, released) = oneshot::channel();
        self.keep(key.to_owned(), token.clone(), released);
        Ok(Some(SharedGuard {
            key: key.to_owned(),
            token,
            fence,
            _release: release,
        }))
    }

    /// Keeps the lock of `key` alive until `release` fires, then releases it.
    fn keep(&self, key: String, token: String, mut release: oneshot::Receiver<()>) {
        let (backend, ttl) = (self.backend.clone(), self.lock_ttl);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut release => break,
                    () = tokio::time::sleep(ttl / 3) => {
                        match backend.renew(&key, &token, millis(ttl)).await {
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
            if let Err(error) = backend.release(&key, &token).await {
                tracing::debug!(%error, key, "release failed; the lock expires instead");
            }
        });
    }
}

/// `duration` in whole milliseconds (saturating).
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl<B: SharedBackend> VersionStore for Shared<B> {
    type Guard = SharedGuard;

    fn expire_after(self, ttl: Duration) -> Self {
        let ttl = self.version_ttl.map_or(ttl, |kept| kept.min(ttl));
        self.version_ttl(Some(ttl))
    }

    async fn get(&self, key: &str) -> Result<Option<Validators>, BoxError> {
        self.backend.read(key).await
    }

    async fn set(&self, guard: &SharedGuard, validators: Validators) -> Result<(), BoxError> {
        let (key, token) = (&guard.key, &guard.token);
        let version = Recorded {
            validators,
            keep_ms: self.version_ttl.map(millis),
        };
        if self.backend.record(key, token, &version).await? {
            Ok(())
        } else {
            Err(SharedError::LockLost(key.clone()).into())
        }
    }

    async fn forget(&self, key: &str) -> Result<(), BoxError> {
        self.backend.forget(key).await
    }

    async fn lock(&self, key: &str) -> Result<SharedGuard, BoxError> {
        let deadline = tokio::time::Instant::now() + self.lock_wait;
        let mut waits = Backoff::up_to(LOCK_WAIT_CAP).waits();
        loop {
            if let Some(guard) = self.attempt(key).await? {
                return Ok(guard);
            }
            let wait = waits.next().unwrap_or(LOCK_WAIT_CAP);
            if tokio::time::Instant::now() + wait > deadline {
                return Err(SharedError::LockTimeout(key.to_owned()).into());
            }
            tokio::time::sleep(wait).await;
        }
    }

    async fn try_lock(&self, key: &str) -> Result<Option<SharedGuard>, BoxError> {
        self.attempt(key).await
    }

    fn fencing_token(&self, guard: &SharedGuard) -> Option<u64> {
        Some(guard.fence)
    }
}
