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
//! [`connect`] gives a connection manager that reconnects by itself: while Redis is away,
//! requests fail at once with [`StoreError::Unavailable`](ifmatch_blob::StoreError) (the front
//! answers 503 `ServerBusy`), nothing is written half-way, and service resumes when Redis is
//! back.

#[cfg(feature = "shared-cache")]
mod invalidations;
mod records;
mod tables;
#[cfg(feature = "testing")]
pub mod testing;
mod versions;

use std::time::Duration;

#[cfg(feature = "shared-cache")]
pub use invalidations::share_invalidations;
pub use records::RedisRecords;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
pub use tables::RedisTables;
pub use versions::RedisVersions;

/// How long a request waits for Redis before it fails.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// Connects to the Redis at `url` (`redis://HOST:PORT/DB`), with a manager that reconnects in
/// the background after a failure and never makes a request wait longer than [`TIMEOUT`].
pub async fn connect(url: &str) -> redis::RedisResult<ConnectionManager> {
    let client = redis::Client::open(url)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(TIMEOUT))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(500));
    ConnectionManager::new_with_config(client, config).await
}
