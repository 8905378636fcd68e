//! Turns of one instance's writes to a key: one at a time per key (per stripe of keys, so
//! memory stays bounded whatever the keys), waited for without a runtime (the fronts run on
//! tokio and in a Worker). They spare work that a compare-and-swap would refuse anyway; the
//! compare-and-swap still decides, between instances too. A turn may hold what its holder
//! keeps from one turn to the next (`T`): what the last write of the stripe left.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher, Hash};

use futures_util::lock::{Mutex, MutexGuard};

/// The stripes of turns, each holding a `T`.
#[derive(Debug)]
pub struct Turns<T = ()>(Box<[Mutex<T>]>);

impl<T: Default> Default for Turns<T> {
    fn default() -> Self {
        Self((0..64).map(|_| Mutex::new(T::default())).collect())
    }
}

impl<T> Turns<T> {
    /// Waits for this instance's turn at `key`, held until the guard drops.
    pub async fn take(&self, key: &(impl Hash + ?Sized)) -> MutexGuard<'_, T> {
        self.stripe(key).lock().await
    }

    /// This instance's turn at `key` if no one has it now.
    pub fn try_take(&self, key: &(impl Hash + ?Sized)) -> Option<MutexGuard<'_, T>> {
        self.stripe(key).try_lock()
    }

    fn stripe(&self, key: &(impl Hash + ?Sized)) -> &Mutex<T> {
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
        &self.0[(hash % self.0.len() as u64) as usize]
    }
}
