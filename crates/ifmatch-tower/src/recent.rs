//! The resources a thread found last, in front of the layer's moka cache: a repeat read of a
//! hot resource finds it without moka's lookup, which also records the read, reads the clock
//! and sends the read to moka's log.
//!
//! What a thread holds here is valid while nothing was forgotten since: every forget (a write
//! forgets its key and the keys related to it; a response that varies anew forgets its key)
//! moves the cache's epoch, and a resource found at an older epoch is looked up in moka again.
//! A resource learned anew needs no move: it can only take the place of one moka let go of
//! (for room), and what a thread still holds of that one is as current as it, until a forget. A read that finds
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

/// The resource `key` names in `cache`, whose epoch is `epoch` now: the one this thread found
/// last if nothing changed since, otherwise what `look_up` (moka's lookup) finds, kept for the
/// next read. One read in [`SAMPLE`] found here is looked up all the same.
pub(crate) fn find(
    cache: u64,
    epoch: u64,
    key: &str,
    look_up: impl Fn(&str) -> Option<Arc<Resource>>,
) -> Option<Arc<Resource>> {
    RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        let at = slot_of(key);
        if let Some(slot) = &recent.slots[at]
            && slot.cache == cache
            && slot.epoch == epoch
            && &**slot.resource.key() == key
        {
            let resource = slot.resource.clone();
            recent.hits = recent.hits.wrapping_add(1);
            if recent.hits % SAMPLE == 0 {
                look_up(key);
            }
            return Some(resource);
        }
        let resource = look_up(key)?;
        recent.slots[at] = Some(Slot {
            cache,
            epoch,
            resource: resource.clone(),
        });
        Some(resource)
    })
}
