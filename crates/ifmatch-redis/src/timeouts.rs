//! How long the connection waits for Redis, whatever the link.

use std::time::Duration;

/// How long a request waits for Redis before it fails.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// How long a write waits for its replicas before it is answered as of unknown outcome.
pub const REPLICA_TIMEOUT: Duration = Duration::from_secs(1);
