//! The hasher of the maps the layers keep by key (`moka` and `quick_cache` maps, and the
//! standard library's).
//!
//! Their keys are request targets a client chose, hashed on every lookup and again, all of
//! them, whenever moka's table grows or sheds the room of removed entries: under a stream of
//! new URLs (every request a miss) SipHash, the standard library's default, was a tenth of the
//! proxy's time. foldhash (hashbrown's default) is seeded per process like SipHash, so a
//! client cannot choose keys that collide, and costs a fraction of it.

/// The hasher of every map by key.
pub type KeyHasher = foldhash::quality::RandomState;

/// An unbounded map by key (what is held or asked for now), hashed with [`KeyHasher`].
pub type HashMap<K, V> = std::collections::HashMap<K, V, KeyHasher>;
