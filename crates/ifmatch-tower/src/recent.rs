//! The resources a thread found last, in front of the layer's moka cache: a repeat read of a
//! hot resource finds it without moka's lookup, which also records the read, reads the clock
//! and sends the read to moka's log.
//!
//! What a thread holds here is valid while nothing was forgotten or learned since: every
//! change to the cache (a write forgets its key, a read learns a new one) moves the cache's
//! epoch, and a resource found at an older epoch is looked up in moka again. A read that finds
//! a resource here is ordered before any change that moved the epoch after it looked, as a
//! read that found it in moka an instant before the write forgot it. Moka still learns which
//! resources are hot: one read in [`SAMPLE`] found here is looked up there as well.

use std::cell::RefCell;
use std::hash::BuildHasher;
use std::sync::Arc;

use crate::resource::Resource;

/// Slots per thread, one per key hash: a miss costs a moka lookup, nothing more.
const SLOTS: usize = 16;

/// One read in this many found here is also looked up in moka, so that its eviction policy
/// sees the resource as read.
pub(crate) const SAMPLE: u32 = 64;

struct Slot {
    /// The cache the resource came from (its id), and its epoch then.
    cache: u64,
    epoch: u64,
    resource: Arc<Resource>,
}

#[derive(Default)]
struct Recent {
    slots: [Option<Slot>; SLOTS],
    hits: u32,
}

thread_local! {
    static RECENT: RefCell<Recent> = RefCell::default();
}

fn slot_of(key: &str) -> usize {
    (foldhash::fast::FixedState::with_seed(0).hash_one(key) as usize) % SLOTS
}

/// What this thread found under `key` in `cache` at `epoch`, the cache's epoch now; and
/// whether moka should see this read all the same.
pub(crate) fn find(cache: u64, epoch: u64, key: &str) -> Option<(Arc<Resource>, bool)> {
    RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        let slot = recent.slots[slot_of(key)].as_ref()?;
        if slot.cache != cache || slot.epoch != epoch || &**slot.resource.key() != key {
            return None;
        }
        let resource = slot.resource.clone();
        recent.hits = recent.hits.wrapping_add(1);
        Some((resource, recent.hits % SAMPLE == 0))
    })
}

/// Keeps `resource`, found in `cache` at `epoch` (read before the lookup).
pub(crate) fn keep(cache: u64, epoch: u64, resource: &Arc<Resource>) {
    RECENT.with(|recent| {
        recent.borrow_mut().slots[slot_of(resource.key())] = Some(Slot {
            cache,
            epoch,
            resource: resource.clone(),
        });
    });
}
