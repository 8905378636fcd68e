//! The stored responses: for each key (the request's path and query), the variants stored
//! under it (one per combination of the fields its `Vary` names), weighed by their bytes
//! against the store's capacity.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::stats::{CacheReport, Counters};
use crate::stored::entry::Stored;
use crate::tiers::collapse::CollapsedMisses;
use crate::tiers::disk::Disk;

/// The variants under one key, the most recently stored first.
type Variants = Arc<[Arc<Stored>]>;

/// The most variants one key keeps: a `Vary` on a field with many values (`User-Agent`) costs
/// this many entries at most, and so do the pieces of a representation stored as 206s.
const MAX_VARIANTS: usize = 16;

/// What a store is made with (see [`SharedCacheLayer`](crate::SharedCacheLayer)).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) memory: u64,
    pub(crate) max_object: u64,
    pub(crate) key_headers: Vec<http::HeaderName>,
    /// A field that names the range in place of `Range` (see
    /// [`SharedCacheLayer::range_field`](crate::SharedCacheLayer::range_field)).
    pub(crate) range_field: Option<http::HeaderName>,
    pub(crate) collapse_wait: Duration,
    /// The disk tier, if there is one.
    pub(crate) disk: Option<Arc<Disk>>,
}

/// The memory tier: the variants of each key, weighed by [`Weigh`], evicted (CLOCK-Pro, close
/// to S3-FIFO) when a shard of it is full. quick_cache rather than moka, which the layer's
/// smaller maps use: a miss stores a new key, and moka's insert (its write log, its frequency
/// sketch, its housekeeping on the request's thread, its table's rehashing) was 16% of a stored
/// miss's time; quick_cache's is a shard's lock and a slot.
type Entries =
    quick_cache::sync::Cache<String, Variants, Weigh, ifmatch_core::keyed::KeyHasher, Evictions>;

/// What the variants under a key weigh; fixed once stored (the vector is never changed in
/// place, and each body's length is known before it arrives).
#[derive(Debug, Clone, Copy)]
struct Weigh;

impl quick_cache::Weighter<String, Variants> for Weigh {
    fn weight(&self, key: &String, variants: &Variants) -> u64 {
        let held = variants.iter().map(|v| v.weight()).sum::<u64>();
        held + key.len() as u64 + 64
    }
}

/// Counts what the memory tier drops for room.
#[derive(Debug, Clone)]
struct Evictions(Arc<Counters>);

impl quick_cache::Lifecycle<String, Variants> for Evictions {
    type RequestState = ();

    fn on_evict(&self, _: &mut (), _: String, _: Variants) {
        Counters::add(&self.0.evictions, 1);
    }
}

pub(crate) struct Store {
    entries: Entries,
    settings: Settings,
    /// The keys being asked for.
    pub(crate) gates: Arc<CollapsedMisses>,
    /// What it did.
    pub(crate) counters: Arc<Counters>,
    /// Told of what it forgets because of a request or a purge (another instance's store,
    /// say).
    announce: OnceLock<Announce>,
    /// How many times it forgot something (see [`Store::forgotten`]).
    forgotten: crate::tiers::generations::Generations,
}

/// Who is told of what a store forgets.
pub(crate) type Announce = Box<dyn Fn(Forgotten<'_>) + Send + Sync>;

/// What a store forgot, as told to other stores that hold the same URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forgotten<'a> {
    /// Every answer under this key (the host, a space, the target).
    Key(&'a str),
    /// Every answer under keys that start with this.
    Prefix(&'a str),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("settings", &self.settings)
            .field("entries", &self.entries.len())
            .finish_non_exhaustive()
    }
}

impl Store {
    pub(crate) fn new(settings: Settings) -> Self {
        let counters = Arc::new(Counters::default());
        let entries = Entries::with_options(
            memory_options(settings.memory, settings.max_object),
            Weigh,
            ifmatch_core::keyed::KeyHasher::default(),
            Evictions(counters.clone()),
        );
        Self {
            entries,
            settings,
            gates: Arc::default(),
            counters,
            announce: OnceLock::new(),
            forgotten: crate::tiers::generations::Generations::new(),
        }
    }

    /// The request fields that set answers apart besides `Vary`.
    pub(crate) fn key_headers(&self) -> &[http::HeaderName] {
        &self.settings.key_headers
    }

    /// The field that names the range in place of `Range`, if any.
    pub(crate) fn range_field(&self) -> Option<&http::HeaderName> {
        self.settings.range_field.as_ref()
    }

    /// The largest body stored.
    pub(crate) fn max_object(&self) -> u64 {
        self.settings.max_object
    }

    /// How long a miss waits for another of its key.
    pub(crate) fn collapse_wait(&self) -> Duration {
        self.settings.collapse_wait
    }

    /// The variants stored under `key`, the most recent first.
    pub(crate) fn get(&self, key: &str) -> Option<Variants> {
        self.entries.get(key)
    }

    /// Stores `stored` under `key`, in place of `replaces` (the variant it was revalidated
    /// from) and of every variant the same request would select (same `Vary` fields).
    /// With a disk tier, it is queued to be written there too once its body is whole (see
    /// [`crate::tiers::disk_writer`]).
    pub(crate) fn put(&self, key: &str, stored: Arc<Stored>, replaces: Option<&Arc<Stored>>) {
        self.remember(key, stored.clone(), replaces);
        // A piece of a representation stays in memory: the disk tier holds whole ones.
        if let Some(disk) = &self.settings.disk
            && stored.piece.is_none()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let (disk, key) = (disk.clone(), key.to_owned());
            let generation = disk.generation(&key);
            runtime.spawn(async move {
                if let Some(body) = stored.body.complete().await {
                    disk.writer.write(&key, stored, body, generation);
                }
            });
        }
    }

    /// Puts `stored` in the memory tier (see [`Store::put`]).
    fn remember(&self, key: &str, stored: Arc<Stored>, replaces: Option<&Arc<Stored>>) {
        // Most keys hold nothing yet: a plain insert, cheaper than an entry's closure (which
        // always takes its shard's write lock and may wait for a placeholder). Another answer
        // stored at the same moment may be lost to it, never one a write forgot: there was
        // none to bring back.
        if !self.entries.contains_key(key) {
            self.entries.insert(key.to_owned(), Arc::from([stored]));
            return;
        }
        let joined = self.entries.entry(key, None, |_, current| {
            let mut variants = vec![stored.clone()];
            variants.extend(
                (current.iter())
                    .filter(|v| {
                        !replaces.is_some_and(|r| Arc::ptr_eq(r, v))
                            && !v.body.failed()
                            && !stored.supersedes(v)
                    })
                    .take(MAX_VARIANTS - 1)
                    .cloned(),
            );
            *current = Arc::from(variants);
            quick_cache::sync::EntryAction::Retain(())
        });
        if let quick_cache::sync::EntryResult::Vacant(slot) = joined {
            let _ = slot.insert(Arc::from([stored]));
        }
    }

    /// Has `tell` told of what it forgets from now on, because of a request or a purge (not
    /// of what [`Store::forget`] is told); once.
    pub(crate) fn announce_to(&self, tell: Announce) -> bool {
        self.announce.set(tell).is_ok()
    }

    /// Tells whoever [`Store::announce_to`] named of `forgotten`.
    pub(crate) fn announce(&self, forgotten: Forgotten<'_>) {
        if let Some(tell) = self.announce.get() {
            tell(forgotten);
        }
    }

    /// Forgets what another store forgot: how many keys.
    pub(crate) fn forget(&self, forgotten: Forgotten<'_>) -> u64 {
        match forgotten {
            Forgotten::Key(key) => {
                let stored = self.contains(key);
                self.invalidate(key);
                u64::from(stored)
            }
            Forgotten::Prefix(prefix) => self.invalidate_prefix(prefix),
        }
    }

    /// A number that changes whenever `key` is forgotten (by a write, a purge, another
    /// instance): an answer fetched before it changed may be older than what was forgotten,
    /// and is not stored after it.
    pub(crate) fn forgotten(&self, key: &str) -> u64 {
        self.forgotten.of(key)
    }

    /// Forgets everything stored under `key`, in both tiers.
    pub(crate) fn invalidate(&self, key: &str) {
        self.forgotten.bump(key);
        self.gates.close_key(key);
        match &self.settings.disk {
            Some(disk) => disk.invalidate(key, || {
                self.entries.remove(key);
            }),
            None => {
                self.entries.remove(key);
            }
        }
    }

    /// Forgets everything stored under keys that start with `prefix`, in both tiers: how
    /// many keys. It walks the whole store (an operator's purge, not a request's).
    pub(crate) fn invalidate_prefix(&self, prefix: &str) -> u64 {
        self.forgotten.bump_all();
        self.gates.close(prefix);
        let mut keys: std::collections::BTreeSet<String> = (self.entries.iter())
            .map(|(key, _)| key)
            .filter(|key| key.starts_with(prefix))
            .collect();
        let forget = |keys: &std::collections::BTreeSet<String>| {
            for key in keys {
                self.entries.remove(key.as_str());
            }
        };
        match &self.settings.disk {
            Some(disk) => {
                keys.extend(disk.keys_with_prefix(prefix));
                disk.invalidate_prefix(prefix, || forget(&keys));
            }
            None => forget(&keys),
        }
        keys.len() as u64
    }

    /// Whether anything is stored under `key`, in either tier.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
            || (self.settings.disk.as_ref()).is_some_and(|disk| disk.contains(key))
    }

    /// Brings what the disk tier holds of `key` back into memory when memory holds nothing
    /// of it: whether it did.
    pub(crate) async fn restore(&self, key: &str) -> bool {
        let Some(disk) = self.settings.disk.clone() else {
            return false;
        };
        if self.entries.contains_key(key) || !disk.contains(key) {
            return false;
        }
        let generation = disk.generation(key);
        let key = key.to_owned();
        let read = tokio::task::spawn_blocking(move || {
            let files = disk.files(&key);
            // The most recent last, so that it ends first.
            let found: Vec<Stored> = (files.iter().rev())
                .filter_map(|file| disk.read(&key, file))
                .collect();
            (disk, key, found)
        });
        let Ok((disk, key, found)) = read.await else {
            return false;
        };
        if found.is_empty() {
            return false;
        }
        let restored = disk.restore(&key, generation, || {
            for stored in found {
                self.remember(&key, Arc::new(stored), None);
            }
        });
        if restored {
            Counters::add(&self.counters.disk_hits, 1);
        }
        restored
    }

    /// Its counters, with what it holds.
    pub(crate) fn report(&self) -> CacheReport {
        let (entries, bytes) = (self.entries.len() as u64, self.entries.weight());
        let mut report = self.counters.report(entries, bytes);
        if let Some(disk) = &self.settings.disk {
            (report.disk_entries, report.disk_bytes) = disk.held();
            report.disk_indexing = disk.indexing();
            report.disk_writes = disk.writes.load(std::sync::atomic::Ordering::Relaxed);
            report.disk_errors = disk.errors.load(std::sync::atomic::Ordering::Relaxed);
            report.disk_skipped = (disk.writer.skipped).load(std::sync::atomic::Ordering::Relaxed);
        }
        report
    }
}

/// The memory tier's shape for `memory` bytes: shards of their own lock (up to 16), each of
/// which holds at least a key of two whole `max_object` answers (a key too heavy for its shard
/// is not kept, as it is not when heavier than the whole tier).
fn memory_options(memory: u64, max_object: u64) -> quick_cache::Options {
    let per_shard = 2 * max_object.max(1 << 20) + 64 * 1024;
    let shards = (memory / per_shard).clamp(1, 16);
    let shards = if shards.is_power_of_two() {
        shards
    } else {
        shards.next_power_of_two() / 2
    };
    quick_cache::OptionsBuilder::new()
        .shards(shards as usize)
        .weight_capacity(memory)
        .estimated_items_capacity((memory / 8192).clamp(64, 1 << 20) as usize)
        .build()
        .expect("a weight capacity and an items estimate are given")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tiers::disk::tests::stored;

    static SMALL: [u8; 4096] = [b's'; 4096];
    static LARGE: [u8; 1 << 20] = [b'l'; 1 << 20];

    fn store(memory: u64, max_object: u64) -> Store {
        Store::new(Settings {
            memory,
            max_object,
            key_headers: Vec::new(),
            range_field: None,
            collapse_wait: Duration::from_secs(1),
            disk: None,
        })
    }

    #[test]
    fn the_memory_tier_holds_its_capacity_and_counts_what_it_lets_go() {
        let store = store(1 << 20, 64 << 10);
        for n in 0..1000 {
            store.put(&format!("h /k{n}"), Arc::new(stored(&SMALL, "")), None);
        }
        let report = store.report();
        assert!(report.bytes <= 1 << 20, "{report:?}");
        assert!(report.entries > 50 && report.entries < 1000, "{report:?}");
        assert_eq!(report.evictions + report.entries, 1000, "{report:?}");
    }

    #[test]
    fn an_answer_as_large_as_the_largest_object_is_kept_in_a_small_tier() {
        let store = store(4 << 20, 1 << 20);
        store.put("h /large", Arc::new(stored(&LARGE, "")), None);
        assert_eq!(store.get("h /large").unwrap().len(), 1);
        assert_eq!(store.report().evictions, 0);
    }

    #[test]
    fn a_key_keeps_one_answer_per_variant_the_newest_first() {
        let store = store(1 << 20, 64 << 10);
        let (gzip, plain) = (
            Arc::new(stored(&SMALL, "gzip")),
            Arc::new(stored(&SMALL, "")),
        );
        store.put("h /v", gzip.clone(), None);
        store.put("h /v", plain.clone(), None);
        let newer = Arc::new(stored(&SMALL, "gzip"));
        store.put("h /v", newer.clone(), None);
        let held = store.get("h /v").unwrap();
        assert_eq!(held.len(), 2);
        assert!(Arc::ptr_eq(&held[0], &newer) && Arc::ptr_eq(&held[1], &plain));
        store.invalidate("h /v");
        assert!(store.get("h /v").is_none() && !store.contains("h /v"));
    }

    #[test]
    fn what_is_forgotten_changes_its_keys_number_and_mostly_no_others() {
        let store = store(1 << 20, 64 << 10);
        let before: Vec<u64> = (0..100)
            .map(|n| store.forgotten(&format!("h /k{n}")))
            .collect();
        store.invalidate("h /k0");
        let changed = |store: &Store, before: &[u64]| -> Vec<usize> {
            (0..100)
                .filter(|&n| store.forgotten(&format!("h /k{n}")) != before[n])
                .collect()
        };
        // Another key shares its stripe once in 1,024: one of 99 rarely does.
        let after_write = changed(&store, &before);
        assert!(
            after_write.contains(&0) && after_write.len() <= 3,
            "{after_write:?}"
        );
        let before: Vec<u64> = (0..100)
            .map(|n| store.forgotten(&format!("h /k{n}")))
            .collect();
        store.invalidate_prefix("h /unrelated/");
        assert_eq!(changed(&store, &before).len(), 100, "a purge: every key");
    }
}
