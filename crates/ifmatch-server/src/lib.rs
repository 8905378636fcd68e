//! The `ifmatch` server: the blob front of `ifmatch-blob` on hyper 1 and tokio, over the local
//! disk ([`local`]).
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! let front = ifmatch_server::open("./data", ifmatch_server::Options::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:10000").await?;
//! ifmatch_server::serve(listener, front, async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```

pub mod local;
pub mod proxy;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use ifmatch_blob::{DEFAULT_MAX_BODY, Env, Front};
use tokio::net::TcpListener;

use crate::local::{DataDir, LocalObjects, LocalRecords};

/// The clock and the randomness of the operating system.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemEnv;

impl Env for SystemEnv {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn random_uuid(&self) -> uuid::Uuid {
        // Version 4 from the OS's CSPRNG (getrandom): lease ids are unguessable.
        uuid::Uuid::new_v4()
    }
}

/// The front as the server runs it: the local disk and the system clock.
pub type LocalFront = Front<LocalRecords, LocalObjects, SystemEnv>;

/// What `ifmatch serve` can be told.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// The largest blob accepted, in bytes.
    pub max_body: u64,
    /// How many records the metadata cache holds.
    pub cache_capacity: u64,
    /// How many bytes of small objects (up to 4 MiB each) the byte cache holds.
    pub cache_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_body: DEFAULT_MAX_BODY,
            cache_capacity: 100_000,
            cache_bytes: 256 << 20,
        }
    }
}

impl Options {
    /// These options with another body limit.
    pub fn max_body(mut self, bytes: u64) -> Self {
        self.max_body = bytes;
        self
    }
}

/// Opens the data directory (creating it, locking it, sweeping what a crash left) and builds
/// the front over it.
pub fn open(data: impl Into<PathBuf>, options: Options) -> io::Result<Arc<LocalFront>> {
    open_with_env(data, options, SystemEnv)
}

/// [`open`], with another clock and source of ids (tests move the clock instead of sleeping).
pub fn open_with_env<E: Env>(
    data: impl Into<PathBuf>,
    options: Options,
    env: E,
) -> io::Result<Arc<Front<LocalRecords, LocalObjects, E>>> {
    let dir = DataDir::open(data)?;
    let swept = dir.sweep_orphans()?;
    if swept > 0 {
        tracing::info!(swept, "removed objects no record named");
    }
    let records = LocalRecords::new(dir.clone(), options.cache_capacity);
    let front = Front::new(records, LocalObjects::new(dir, options.cache_bytes), env)
        .with_max_body(options.max_body);
    Ok(Arc::new(front))
}

/// The front of the distributed mode: records and leases in Redis, bytes on a shared disk.
pub type RedisFront = Front<ifmatch_redis::RedisRecords, LocalObjects, SystemEnv>;

/// Opens the front of the distributed mode: records and leases in the Redis at `backend`
/// (`redis://HOST:PORT/DB`), blob bytes under `data`, which every instance shares.
pub async fn open_redis(
    data: impl Into<PathBuf>,
    options: Options,
    backend: &str,
) -> io::Result<Arc<RedisFront>> {
    let dir = DataDir::open_shared(data)?;
    let connection = ifmatch_redis::connect(backend).await.map_err(|e| {
        io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("connecting to {backend}: {e}"),
        )
    })?;
    let records = ifmatch_redis::RedisRecords::new(connection, "ifmatch:");
    let front = Front::new(
        records,
        LocalObjects::new(dir, options.cache_bytes),
        SystemEnv,
    )
    .with_max_body(options.max_body);
    Ok(Arc::new(front))
}

/// How long requests in flight may take to finish after shutdown is asked for.
const DRAIN: Duration = Duration::from_secs(30);

/// Serves `front` on `listener` until `shutdown` completes, then stops accepting and lets the
/// requests in flight finish (up to 30 s).
pub async fn serve<R, O, E>(
    listener: TcpListener,
    front: Arc<Front<R, O, E>>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    R: ifmatch_blob::Records,
    O: ifmatch_blob::Objects,
    E: Env,
{
    serve_with(listener, shutdown, move |_| {
        let front = front.clone();
        service_fn(move |request: hyper::Request<Incoming>| {
            let front = front.clone();
            async move { Ok::<_, Infallible>(front.handle(request).await) }
        })
    })
    .await
}

/// The accept loop of every `ifmatch` mode: HTTP/1 and HTTP/2 on each connection, with the
/// service `service_for` makes for the client's address, until `shutdown` completes; then the
/// requests in flight may finish (up to 30 s).
pub(crate) async fn serve_with<F, S, B>(
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
    service_for: F,
) -> io::Result<()>
where
    F: Fn(SocketAddr) -> S,
    S: hyper::service::Service<hyper::Request<Incoming>, Response = hyper::Response<B>>
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, client) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service_for(client))
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight after {DRAIN:?}; stopping anyway");
    }
    Ok(())
}
