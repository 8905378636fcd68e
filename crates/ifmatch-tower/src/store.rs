//! The version backend: where the layer learns and keeps each resource's current validators,
//! and the per-key lock that makes "check the preconditions, then write" one atomic step.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use ifmatch_core::precondition::Validators;
use tokio::sync::OwnedMutexGuard;

use crate::BoxError;

/// Where current validators live, and the write lock per key.
///
/// The lock is part of the contract so that a shared backend (Redis) can make a write atomic
/// across instances: while a [`VersionStore::Guard`] for a key is alive, no other caller of
/// [`VersionStore::lock`] with that key, in this process or another, gets one.
pub trait VersionStore: Send + Sync + 'static {
    /// Held for the duration of one write; dropping it releases the lock.
    type Guard: Send + 'static;

    /// The current validators of `key`, if known.
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Validators>, BoxError>> + Send;

    /// Records the current validators of `key`.
    fn set(
        &self,
        key: &str,
        validators: Validators,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// Forgets `key`: its version is unknown until learned again.
    fn forget(&self, key: &str) -> impl Future<Output = Result<(), BoxError>> + Send;

    /// Waits for, and takes, the write lock of `key`. Locks of different keys are independent.
    fn lock(&self, key: &str) -> impl Future<Output = Result<Self::Guard, BoxError>> + Send;
}

impl<T: VersionStore> VersionStore for Arc<T> {
    type Guard = T::Guard;

    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Validators>, BoxError>> + Send {
        T::get(self, key)
    }

    fn set(
        &self,
        key: &str,
        validators: Validators,
    ) -> impl Future<Output = Result<(), BoxError>> + Send {
        T::set(self, key, validators)
    }

    fn forget(&self, key: &str) -> impl Future<Output = Result<(), BoxError>> + Send {
        T::forget(self, key)
    }

    fn lock(&self, key: &str) -> impl Future<Output = Result<Self::Guard, BoxError>> + Send {
        T::lock(self, key)
    }
}

/// Versions in this process: a moka cache of validators (bounded, optionally expiring) and an
/// async mutex per key that is being written.
///
/// Right for one instance. With several instances, each has its own memory: use a shared
/// backend so that locks and versions hold across them.
#[derive(Debug, Clone)]
pub struct MemoryVersions {
    versions: moka::sync::Cache<String, Validators>,
    locks: Arc<Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>>,
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
            versions: builder.build(),
            locks: Arc::default(),
        }
    }
}

/// The write lock of one key in [`MemoryVersions`].
#[derive(Debug)]
pub struct MemoryGuard {
    _guard: OwnedMutexGuard<()>,
}

impl VersionStore for MemoryVersions {
    type Guard = MemoryGuard;

    async fn get(&self, key: &str) -> Result<Option<Validators>, BoxError> {
        Ok(self.versions.get(key))
    }

    async fn set(&self, key: &str, validators: Validators) -> Result<(), BoxError> {
        self.versions.insert(key.to_owned(), validators);
        Ok(())
    }

    async fn forget(&self, key: &str) -> Result<(), BoxError> {
        self.versions.invalidate(key);
        Ok(())
    }

    async fn lock(&self, key: &str) -> Result<MemoryGuard, BoxError> {
        let mutex = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(live) = locks.get(key).and_then(Weak::upgrade) {
                live
            } else {
                // Drop the entries of keys nobody holds any more, so the map stays as small
                // as the set of keys being written.
                if locks.len() > 1024 {
                    locks.retain(|_, weak| weak.strong_count() > 0);
                }
                let fresh = Arc::new(tokio::sync::Mutex::new(()));
                locks.insert(key.to_owned(), Arc::downgrade(&fresh));
                fresh
            }
        };
        Ok(MemoryGuard {
            _guard: mutex.lock_owned().await,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use ifmatch_core::strong_etag;

    use super::*;

    #[tokio::test]
    async fn remembers_and_forgets() {
        let store = MemoryVersions::default();
        assert_eq!(store.get("/a").await.unwrap(), None);
        let v = Validators::etag(strong_etag(b"a"));
        store.set("/a", v.clone()).await.unwrap();
        assert_eq!(store.get("/a").await.unwrap(), Some(v));
        store.forget("/a").await.unwrap();
        assert_eq!(store.get("/a").await.unwrap(), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_writer_per_key_and_keys_are_independent() {
        let store = MemoryVersions::default();
        let inside = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (store, inside) = (store.clone(), inside.clone());
                tokio::spawn(async move {
                    let _guard = store.lock("/same").await.unwrap();
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two holders of one key"
                    );
                    tokio::task::yield_now().await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        // Holding one key does not block another.
        let _a = store.lock("/a").await.unwrap();
        let b = tokio::time::timeout(Duration::from_secs(1), store.lock("/b")).await;
        assert!(b.is_ok(), "a different key waited");
    }

    #[tokio::test]
    async fn time_to_live_bounds_a_stale_version() {
        let store = MemoryVersions::new(10, Some(Duration::from_millis(50)));
        store
            .set("/a", Validators::etag(strong_etag(b"a")))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert_eq!(store.get("/a").await.unwrap(), None);
    }
}
