//! The maps the layer keeps by key.
//!
//! Their keys are request targets a client chose, hashed on every lookup and again, all of
//! them, whenever moka's table grows or sheds the room of removed entries: under a stream of
//! new URLs (every request a miss) SipHash, the standard library's default, was a tenth of the
//! proxy's time. foldhash (hashbrown's default) is seeded per process like SipHash, so a
//! client cannot choose keys that collide, and costs a fraction of it.

/// The hasher of every map of the layer.
pub(crate) type KeyHasher = foldhash::quality::RandomState;

/// An unbounded map by key (what is held or asked for now), hashed with [`KeyHasher`].
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, KeyHasher>;

/// A bounded concurrent map of the layer, hashed with [`KeyHasher`].
pub(crate) type Map<K, V> = moka::sync::Cache<K, V, KeyHasher>;
