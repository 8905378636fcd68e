//! What `ifmatch proxy` can be told, and why a proxy cannot be made.

use std::net::SocketAddr;
use std::time::Duration;

use http::Uri;
use http::header::HeaderName;

/// What `ifmatch proxy` can be told.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProxyOptions {
    /// The origin: `http://host:port` or `https://host:port`, optionally with a path prefix.
    pub upstream: Uri,
    /// A PEM file of certificates an `https://` origin's may be issued by, besides the
    /// system's trusted roots.
    pub upstream_ca: Option<std::path::PathBuf>,
    /// How long the origin may take to answer (to connect, and then to send its head).
    pub timeout: Duration,
    /// Sends the client's `Host` to the origin instead of the origin's own authority.
    pub preserve_host: bool,
    /// Bodies up to this many bytes are hashed to tag them; larger ones stream through.
    pub hash_limit: usize,
    /// How many resources the 304 cache remembers.
    pub cache_capacity: u64,
    /// The bytes the shared cache's stored responses may take.
    pub cache_memory: u64,
    /// The largest response the shared cache stores; larger ones stream through.
    pub cache_max_object: u64,
    /// How long a miss waits for a request of the same key already on its way to the origin.
    pub cache_collapse_wait: Duration,
    /// The shared cache's disk tier, if any: its directory.
    pub cache_dir: Option<std::path::PathBuf>,
    /// The bytes the disk tier's files may take.
    pub cache_disk_size: u64,
    /// How long the 304 cache trusts what it remembers.
    pub cache_ttl: Option<Duration>,
    /// Answers 428 to writes without a precondition.
    pub require_precondition: bool,
    /// Request headers whose values are part of the cache key, with the path and query.
    pub key_headers: Vec<HeaderName>,
    /// The hops whose forwarding fields (`Forwarded`, `X-Forwarded-*`, ...) are believed;
    /// every other client's are dropped.
    pub trusted_proxies: super::forwarded_headers::TrustedHops,
    /// Answers `GET /metrics` itself instead of forwarding it.
    pub metrics: bool,
    /// Where to answer `GET /metrics` on a listener of its own, off the data path.
    pub metrics_listen: Option<SocketAddr>,
    /// Where to answer purges of the shared cache (`POST /purge`), off the data path.
    pub admin_listen: Option<SocketAddr>,
    /// Whether to log a line per request (target `ifmatch::access`, at INFO).
    pub access_log: bool,
    /// Sends each write's fencing token to the origin in this header (with a version backend
    /// whose locks expire: Redis).
    pub fencing_header: Option<HeaderName>,
}

impl ProxyOptions {
    /// The defaults for `upstream`: 30 s timeout, the origin's `Host`, a 1 MiB hashing limit,
    /// 10,000 resources, no expiry, no 428, path-and-query keys, no metrics.
    pub fn new(upstream: Uri) -> Self {
        Self {
            upstream,
            upstream_ca: None,
            timeout: Duration::from_secs(30),
            preserve_host: false,
            hash_limit: 1 << 20,
            cache_capacity: 10_000,
            cache_memory: 256 << 20,
            cache_max_object: 16 << 20,
            cache_collapse_wait: Duration::from_secs(5),
            cache_dir: None,
            cache_disk_size: 1 << 30,
            cache_ttl: None,
            require_precondition: false,
            key_headers: Vec::new(),
            trusted_proxies: super::forwarded_headers::TrustedHops::default(),
            metrics: false,
            metrics_listen: None,
            admin_listen: None,
            access_log: false,
            fencing_header: None,
        }
    }
}

/// Why a proxy cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// A malformed `--upstream`.
    #[error("the upstream must be an http:// or https:// URL with a host: {0}")]
    BadUpstream(String),
    /// A `--upstream-ca` file that cannot be read, or holds no certificate.
    #[error("the upstream's CA file {0} cannot be used: {1}")]
    UpstreamCa(std::path::PathBuf, String),
    /// TLS to the origin cannot be set up.
    #[error("TLS to the upstream cannot be set up: {0}")]
    Tls(String),
    /// A cache directory that cannot be made or read.
    #[error("the cache directory {0} cannot be used: {1}")]
    CacheDir(std::path::PathBuf, #[source] std::io::Error),
}
