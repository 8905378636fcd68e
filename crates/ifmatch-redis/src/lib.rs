//! ifmatch's distributed mode: many instances share blob records, leases, versions and write
//! locks through Redis.
//!
//! [`RedisRecords`] implements `ifmatch-blob`'s [`Records`](ifmatch_blob::Records): every
//! change is one compare-and-swap on the server (a Lua script comparing the record's
//! generation), and the rules stay in `ifmatch-core`. Blob bytes stay in the storage all
//! instances share.
//!
//! [`RedisVersions`] is the Tower layer's version backend (through
//! [`ifmatch_tower::Shared`]): versions every instance sees, and a per-key write lock that
//! expires when its holder dies, with a fencing token.
//!
//! [`share_invalidations`] makes what one instance's shared cache forgets (a write, a purge)
//! forgotten by every instance's.
//!
//! [`connect`] gives a connection that reconnects by itself: while Redis is away, requests
//! fail at once with [`StoreError::Unavailable`](ifmatch_blob::StoreError) (the front answers
//! 503 `ServerBusy`), nothing is written half-way, and service resumes when Redis is back. To a
//! Redis under Sentinel (`redis+sentinel://`), it follows the master through a failover; to a
//! Redis Cluster (`redis+cluster://`), it sends each script to its slot's primary; with
//! [`Redis::with_replicas`], a write is acknowledged only once that many replicas have it.

mod cluster;
mod connection;
#[cfg(feature = "shared-cache")]
mod invalidations;
mod records;
mod tables;
#[cfg(feature = "testing")]
pub mod testing;
mod url;
mod versions;

pub use connection::{REPLICA_TIMEOUT, Redis, TIMEOUT, connect};
#[cfg(feature = "shared-cache")]
pub use invalidations::share_invalidations;
pub use records::RedisRecords;
pub use tables::RedisTables;
pub use versions::RedisVersions;
