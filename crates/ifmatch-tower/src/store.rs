//! The version backend: where the layer learns and keeps each resource's current validators,
//! and the per-key lock that makes "check the preconditions, then write" one atomic step.

use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use ifmatch_core::precondition::Validators;
use tokio::sync::OwnedMutexGuard;

use ifmatch_core::BoxError;

/// Where current validators live, and the write lock per key.
///
/// The lock is part of the contract so that a shared backend (Redis) can make a write atomic
/// across instances: while a [`VersionStore::Guard`] for a key is alive, no other caller of
/// [`VersionStore::lock`] with that key, in this process or another, gets one.
///
/// A version is only ever recorded under the key's lock ([`VersionStore::set`] takes the
/// guard), so a backend whose locks expire can refuse to record for a holder that lost its
/// lock, and [`VersionStore::fencing_token`] lets an origin refuse such a holder's late write.
pub trait VersionStore: Send + Sync + 'static {
    /// Held for the duration of one write; dropping it releases the lock.
    type Guard: Send + Sync + 'static;

    /// The current validators of `key`, if known. (Validators with neither tag nor date say
    /// the resource is known not to exist: a backend stores them as it stores any.)
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Validators>, BoxError>> + Send;

    /// Records the current validators of the key `guard` locks. Fails, recording nothing, when
    /// the guard no longer holds the lock (it expired and someone else may have written).
    fn set(
        &self,
        guard: &Self::Guard,
        validators: Validators,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// Forgets `key`: its version is unknown until learned again.
    fn forget(&self, key: &str) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// Waits for, and takes, the write lock of `key`. Locks of different keys are independent.
    fn lock(&self, key: &str) -> impl Future<Output = Result<Self::Guard, BoxError>> + Send;

    /// Takes the write lock of `key` if it is free, without waiting; `None` when someone holds
    /// it. Reads use it to learn a version without ever queueing behind a write. The default
    /// waits as [`VersionStore::lock`] does: a backend should answer at once.
    fn try_lock(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<Self::Guard>, BoxError>> + Send {
        let lock = self.lock(key);
        async move { lock.await.map(Some) }
    }

    /// A number that grows with every lock taken on the guard's key, if the backend keeps one:
    /// an origin that remembers the highest it has seen can refuse the write of a holder whose
    /// lock expired (a fencing token). `None` where locks cannot expire.
    fn fencing_token(&self, guard: &Self::Guard) -> Option<u64> {
        let _ = guard;
        None
    }

    /// This store, keeping each version at most `ttl` after it was recorded. The layer calls
    /// it with its [`time_to_live`](crate::ConditionalLayer::time_to_live), so that a version
    /// is trusted no longer than the 304 cache trusts what it remembers: a change made behind
    /// the layer's back is bounded the same way for reads and for writes. The default keeps
    /// versions as they are (a store that cannot expire them says so in its docs).
    fn expire_after(self, ttl: Duration) -> Self
    where
        Self: Sized,
    {
        let _ = ttl;
        self
    }
}

/// What the layer records for a resource a GET found missing (404 or 410): validators with
/// neither tag nor date, which it never records for one that exists (a version is learned only
/// from an `ETag`). A store keeps it as any version; a write that creates the resource
/// replaces or forgets it, so `If-None-Match: *` can create only while nobody has.
pub(crate) fn absent() -> Validators {
    Validators::new(None, None)
}

/// Whether `version` is [`absent`]: the resource is known not to exist.
pub(crate) fn is_absent(version: &Validators) -> bool {
    version.etag.is_none() && version.last_modified.is_none()
}

impl<T: VersionStore> VersionStore for Arc<T> {
    type Guard = T::Guard;

    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Validators>, BoxError>> + Send {
        T::get(self, key)
    }

    fn set(
        &self,
        guard: &Self::Guard,
        validators: Validators,
    ) -> impl Future<Output = Result<(), BoxError>> + Send {
        T::set(self, guard, validators)
    }

    fn forget(&self, key: &str) -> impl Future<Output = Result<(), BoxError>> + Send {
        T::forget(self, key)
    }

    fn lock(&self, key: &str) -> impl Future<Output = Result<Self::Guard, BoxError>> + Send {
        T::lock(self, key)
    }

    fn try_lock(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<Self::Guard>, BoxError>> + Send {
        T::try_lock(self, key)
    }

    fn fencing_token(&self, guard: &Self::Guard) -> Option<u64> {
        T::fencing_token(self, guard)
    }
}

/// Versions in this process: a moka cache of validators (bounded, optionally expiring) and an
/// async mutex per key that is being written.
///
/// Right for one instance. With several instances, each has its own memory: use a shared
/// backend so that locks and versions hold across them.
#[derive(Debug, Clone)]
pub struct MemoryVersions {
    versions: moka::sync::Cache<String, Validators, ifmatch_core::keyed::KeyHasher>,
    locks: Arc<Mutex<ifmatch_core::keyed::HashMap<String, Weak<tokio::sync::Mutex<()>>>>>,
}

impl Default for MemoryVersions {
    fn default() -> Self {
        Self::new(100_000, None)
    }
}

impl MemoryVersions {
    /// Remembers up to `capacity` keys, each for at most `time_to_live` when given.
    pub fn new(capacity: u64, time_to_live: Option<Duration>) -> Self {
        let mut builder = moka::sync::Cache::builder().max_capacity(capacity);
        if let Some(ttl) = time_to_live {
            builder = builder.time_to_live(ttl);
        }
        Self {
            versions: builder.build_with_hasher(ifmatch_core::keyed::KeyHasher::default()),
            locks: Arc::default(),
        }
    }
}

/// The write lock of one key in [`MemoryVersions`].
#[derive(Debug)]
pub struct MemoryGuard {
    key: String,
    _guard: OwnedMutexGuard<()>,
}

impl VersionStore for MemoryVersions {
    type Guard = MemoryGuard;

    async fn get(&self, key: &str) -> Result<Option<Validators>, BoxError> {
        Ok(self.versions.get(key))
    }

    async fn set(&self, guard: &MemoryGuard, validators: Validators) -> Result<(), BoxError> {
        self.versions.insert(guard.key.clone(), validators);
        Ok(())
    }

    async fn forget(&self, key: &str) -> Result<(), BoxError> {
        self.versions.invalidate(key);
        Ok(())
    }

    fn expire_after(self, ttl: Duration) -> Self {
        let capacity = self.versions.policy().max_capacity().unwrap_or(100_000);
        let versions = moka::sync::Cache::builder()
            .max_capacity(capacity)
            .time_to_live(ttl)
            .build_with_hasher(ifmatch_core::keyed::KeyHasher::default());
        for (key, validators) in &self.versions {
            versions.insert(String::clone(&key), validators);
        }
        Self {
            versions,
            locks: self.locks,
        }
    }

    async fn lock(&self, key: &str) -> Result<MemoryGuard, BoxError> {
        Ok(MemoryGuard {
            key: key.to_owned(),
            _guard: self.mutex(key).lock_owned().await,
        })
    }

    async fn try_lock(&self, key: &str) -> Result<Option<MemoryGuard>, BoxError> {
        Ok(self
            .mutex(key)
            .try_lock_owned()
            .ok()
            .map(|guard| MemoryGuard {
                key: key.to_owned(),
                _guard: guard,
            }))
    }
}

impl MemoryVersions {
    /// The mutex of `key`, shared by everyone holding or waiting for it.
    fn mutex(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(live) = locks.get(key).and_then(Weak::upgrade) {
            return live;
        }
        // Drop the entries of keys nobody holds any more, so the map stays as small as the set
        // of keys being written.
        if locks.len() > 1024 {
            locks.retain(|_, weak| weak.strong_count() > 0);
        }
        let fresh = Arc::new(tokio::sync::Mutex::new(()));
        locks.insert(key.to_owned(), Arc::downgrade(&fresh));
        fresh
    }
}

#[cfg(test)]
mod tests {
    use ifmatch_core::strong_etag;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memory_versions_conform() {
        crate::conformance::versions(&MemoryVersions::default()).await;
    }

    #[tokio::test]
    async fn time_to_live_bounds_a_stale_version() {
        let store = MemoryVersions::new(10, Some(Duration::from_millis(50)));
        let guard = store.lock("/a").await.unwrap();
        store
            .set(&guard, Validators::etag(strong_etag(b"a")))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert_eq!(store.get("/a").await.unwrap(), None);
    }
}
