//! What `ifmatch proxy` can be told, and why a proxy cannot be made.

use std::net::SocketAddr;
use std::time::Duration;

use http::Uri;
use http::header::HeaderName;
use ipnet::IpNet;

use crate::arguments::{hop, seconds, seconds_or_zero};
use crate::observe::ObserveOptions;

/// What `ifmatch proxy` can be told: its command line's options, each declared here once.
#[derive(Debug, Clone, clap::Args)]
#[non_exhaustive]
pub struct ProxyOptions {
    /// The origin, `http://host:port[/prefix]` or `https://host:port[/prefix]`.
    #[arg(long, env = "IFMATCH_UPSTREAM")]
    pub upstream: Uri,
    /// A PEM file of CA certificates to trust for an https:// upstream, besides the system's
    /// (a private CA, a storage emulator's own certificate).
    #[arg(long, env = "IFMATCH_UPSTREAM_CA")]
    pub upstream_ca: Option<std::path::PathBuf>,
    /// How long the origin may take to connect and to send its response head, in seconds;
    /// then 504.
    #[arg(long, env = "IFMATCH_TIMEOUT", default_value = "30", value_parser = seconds)]
    pub timeout: Duration,
    /// Forward the client's Host header instead of the origin's authority.
    #[arg(long, env = "IFMATCH_PRESERVE_HOST")]
    pub preserve_host: bool,
    /// Responses without an ETag are hashed up to this many bytes; larger ones stream
    /// through untagged.
    #[arg(long, env = "IFMATCH_HASH_LIMIT", default_value_t = 1 << 20)]
    pub hash_limit: usize,
    /// How many resources the 304 cache remembers (each with up to 8 variants).
    #[arg(long, env = "IFMATCH_CACHE_CAPACITY", default_value_t = 10_000)]
    pub cache_capacity: u64,
    /// The bytes the shared cache's stored responses may take, in memory (0: store nothing).
    #[arg(long, env = "IFMATCH_CACHE_MEMORY", default_value_t = 256 << 20)]
    pub cache_memory: u64,
    /// The largest response the shared cache stores, in bytes; larger ones stream through.
    #[arg(long, env = "IFMATCH_CACHE_MAX_OBJECT", default_value_t = 16 << 20)]
    pub cache_max_object: u64,
    /// How long a request that misses the shared cache waits for a request of the same URL
    /// already on its way to the origin, in seconds, before it goes itself (0: never waits).
    #[arg(long, env = "IFMATCH_CACHE_COLLAPSE_WAIT", default_value = "5", value_parser = seconds_or_zero)]
    pub cache_collapse_wait: Duration,
    /// A disk tier for the shared cache in this directory (made if missing): answers are
    /// written there once whole and read back after memory let them go or a restart; a kill
    /// at any moment leaves every file whole or absent.
    #[arg(long, env = "IFMATCH_CACHE_DIR")]
    pub cache_dir: Option<std::path::PathBuf>,
    /// The bytes the disk tier's files may take.
    #[arg(long, env = "IFMATCH_CACHE_DISK_SIZE", default_value_t = 1 << 30)]
    pub cache_disk_size: u64,
    /// How long the 304 cache trusts what it remembers, in seconds (the bound on staleness
    /// when the origin changes behind the proxy's back). Without it: until evicted.
    #[arg(long, env = "IFMATCH_CACHE_TTL", value_parser = seconds)]
    pub cache_ttl: Option<Duration>,
    /// Answer 428 Precondition Required to writes without If-Match, If-None-Match or
    /// If-Unmodified-Since.
    #[arg(long, env = "IFMATCH_REQUIRE_PRECONDITION")]
    pub require_precondition: bool,
    /// A request header whose value is part of the cache key (repeat for several), e.g.
    /// Authorization to separate users; responses marked private are then remembered too.
    #[arg(
        long = "key-header",
        env = "IFMATCH_KEY_HEADERS",
        value_delimiter = ','
    )]
    pub key_headers: Vec<HeaderName>,
    /// A hop whose forwarding fields (Forwarded, X-Forwarded-For, X-Forwarded-Proto, ...) are
    /// believed, as an address or CIDR (repeat for several): a TLS terminator or load balancer
    /// in front. Every other client's are dropped; the proxy sends the origin its own. What a
    /// trusted hop says of how it was reached (X-Forwarded-Proto, -Host, -Port, ...) becomes
    /// part of the cache key.
    #[arg(
        long = "trusted-proxy",
        env = "IFMATCH_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_parser = hop
    )]
    pub trusted_proxies: Vec<IpNet>,
    /// Answer GET /metrics (Prometheus text) on the proxy's own port instead of forwarding
    /// it (see --metrics-listen for a port of its own).
    #[arg(long, env = "IFMATCH_METRICS")]
    pub metrics: bool,
    /// Its metrics and access log.
    #[command(flatten)]
    pub observe: ObserveOptions,
    /// Where to answer purges of the shared cache (`POST /purge?url=...` or `?prefix=...`),
    /// on a listener of its own, off the data path (keep it off the public network).
    #[arg(long, env = "IFMATCH_ADMIN_LISTEN")]
    pub admin_listen: Option<SocketAddr>,
    /// With a shared version backend (`--backend`): send each write's fencing token (a number
    /// that grows with every lock of the resource) to the origin in this header, e.g.
    /// Ifmatch-Fencing-Token, so an origin that refuses lower tokens cannot take the late
    /// write of a proxy whose lock expired.
    #[arg(long, env = "IFMATCH_FENCING_HEADER")]
    pub fencing_header: Option<HeaderName>,
}

impl ProxyOptions {
    /// The defaults for `upstream`, those of the command line: 30 s timeout, the origin's
    /// `Host`, a 1 MiB hashing limit, 10,000 resources, no expiry, no 428, path-and-query
    /// keys, no metrics.
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
            trusted_proxies: Vec::new(),
            metrics: false,
            observe: ObserveOptions::default(),
            admin_listen: None,
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
