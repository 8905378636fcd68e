//! How many times each key was forgotten: a number per key that a write, a purge or another
//! instance's invalidation moves, so that what was fetched or read before it moved is not put
//! back after it. Keys share 1,024 slots by hash: a write to another key of the same slot,
//! one in 1,024, costs what is in flight for this one only its storing.

use std::sync::atomic::{AtomicU64, Ordering};

const SLOTS: usize = 1024;

/// The generations of the keys, by slot.
#[derive(Debug)]
pub(crate) struct Generations {
    slots: Box<[AtomicU64]>,
    hasher: ifmatch_core::keyed::KeyHasher,
}

impl Generations {
    pub(crate) fn new() -> Self {
        Self {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            hasher: ifmatch_core::keyed::KeyHasher::default(),
        }
    }

    fn slot(&self, key: &str) -> &AtomicU64 {
        let hash = std::hash::BuildHasher::hash_one(&self.hasher, key);
        &self.slots[usize::try_from(hash % SLOTS as u64).unwrap_or(0)]
    }

    /// The generation of `key` now: what is started now for it must find it unchanged.
    pub(crate) fn of(&self, key: &str) -> u64 {
        self.slot(key).load(Ordering::Acquire)
    }

    /// Moves `key`'s generation.
    pub(crate) fn bump(&self, key: &str) {
        self.slot(key).fetch_add(1, Ordering::AcqRel);
    }

    /// Whether `a` and `b` share a slot: forgetting one moves the other (a test picks keys
    /// that do not).
    #[cfg(test)]
    pub(crate) fn share_slot(&self, a: &str, b: &str) -> bool {
        std::ptr::eq(self.slot(a), self.slot(b))
    }

    /// Moves every key's generation (a prefix's keys are not known by slot).
    pub(crate) fn bump_all(&self) {
        for slot in &self.slots {
            slot.fetch_add(1, Ordering::AcqRel);
        }
    }
}
