//! The `ifmatch` server: the blob front of `ifmatch-blob` on hyper 1 and tokio, over the local
//! disk ([`local`]) or with records in Redis; and the reverse proxy ([`proxy`]).
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! let options = ifmatch_server::Options::default();
//! let front = ifmatch_server::open("./data", options.clone())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:10000").await?;
//! let stop = async { let _ = tokio::signal::ctrl_c().await; };
//! ifmatch_server::serve(listener, front, options, stop).await
//! # }
//! ```

mod accept;
pub mod allocator;
mod body_rate;
mod connections;
pub mod cosmos;
mod drain;
pub mod https;
mod huge_length;
mod interim;
pub mod lock;
pub mod metrics;
mod observe;
pub mod proxy;
pub mod tables;
mod whole_body;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use hyper::service::service_fn;
use ifmatch_azure::ErrorCode;
use ifmatch_azure::auth::ClientIp;
use ifmatch_azure::{Accounts, Env};
use ifmatch_blob::{DEFAULT_MAX_BODY, Front, Objects, Records};
use tokio::net::TcpListener;

use crate::accept::RequestBody;
pub use crate::accept::{Limits, bind_threads, raise_descriptor_limit};
use crate::metrics::Metrics;
use crate::observe::ObserveLayer;
pub use ifmatch_backends::local::LocalTables;
pub use ifmatch_backends::local::{DataDir, INLINE_MAX, LocalObjects, LocalRecords};
pub use ifmatch_backends::{AnyObjects, AnyRecords, AnyTables, Choice, Sizes, bucket, local};

pub use ifmatch_azure::SystemEnv;

/// The front as the server runs it: the local disk and the system clock.
pub type LocalFront = Front<LocalRecords, LocalObjects, SystemEnv>;

/// What `ifmatch serve` can be told.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// The largest blob accepted, in bytes.
    pub max_body: u64,
    /// How many records the metadata cache holds (a record that keeps a small blob's bytes
    /// counts once more per KiB of them).
    pub cache_capacity: u64,
    /// How many bytes of small objects (up to 4 MiB each) the byte cache holds.
    pub cache_bytes: u64,
    /// What the server tolerates of its clients.
    pub limits: Limits,
    /// How old an object no record names must be before the sweep discards it, and a
    /// temporary file before it is removed: far longer than any write takes between staging
    /// its bytes and committing its record.
    pub orphan_age: Duration,
    /// How often the sweep runs while serving.
    pub sweep_every: Duration,
    /// The storage accounts served and their keys (the development account by default).
    pub accounts: Accounts,
    /// Whether requests without credentials may do anything (development only).
    pub anonymous: bool,
    /// Where to answer `GET /metrics` (Prometheus text), on a listener of its own.
    pub metrics_listen: Option<SocketAddr>,
    /// Whether to log a line per request (target `ifmatch::access`, at INFO).
    pub access_log: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_body: DEFAULT_MAX_BODY,
            cache_capacity: 100_000,
            cache_bytes: 256 << 20,
            limits: Limits::default(),
            orphan_age: Duration::from_secs(3600),
            sweep_every: Duration::from_secs(600),
            accounts: Accounts::default(),
            anonymous: false,
            metrics_listen: None,
            access_log: false,
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

/// A front with the data directory it keeps its bytes in: what [`serve`] runs.
#[derive(Debug)]
pub struct BlobFront<R, O, E> {
    /// The front.
    pub front: Arc<Front<R, O, E>>,
    /// The data directory.
    pub dir: Arc<DataDir>,
    /// The Table service's tables, beside the records.
    pub tables: AnyTables,
    /// How old an orphan must be for the sweep [`serve`] runs before it accepts: zero for
    /// an embedded server (nothing can be in flight yet), [`Options::orphan_age`] for a shared
    /// directory (other instances are serving).
    pub first_sweep: Duration,
}

impl<R, O, E> Clone for BlobFront<R, O, E> {
    fn clone(&self) -> Self {
        Self {
            front: self.front.clone(),
            dir: self.dir.clone(),
            tables: self.tables.clone(),
            first_sweep: self.first_sweep,
        }
    }
}

/// Opens the data directory for one embedded server (creating it, locking it, checking its
/// mode, moving damaged records aside) and builds the front over it; [`serve`] sweeps what a
/// crash left before it accepts.
pub fn open(
    data: impl Into<PathBuf>,
    options: Options,
) -> io::Result<BlobFront<LocalRecords, LocalObjects, SystemEnv>> {
    open_with_env(data, options, SystemEnv)
}

/// [`open`], with another clock and source of ids (tests move the clock instead of sleeping).
pub fn open_with_env<E: Env>(
    data: impl Into<PathBuf>,
    options: Options,
    env: E,
) -> io::Result<BlobFront<LocalRecords, LocalObjects, E>> {
    let dir = DataDir::open(data)?;
    let records = LocalRecords::new(dir.clone(), options.cache_capacity, INLINE_MAX);
    let objects = LocalObjects::new(dir.clone(), options.cache_bytes);
    let path = dir.root().join("tables.redb");
    let tables = LocalTables::open(&path)
        .map_err(|e| io::Error::other(format!("opening {}: {e}", path.display())))?;
    let tables = AnyTables::Local(tables);
    Ok(blob_front(
        records,
        objects,
        tables,
        env,
        dir,
        &options,
        Duration::ZERO,
    ))
}

/// The front over the backends `choice` names (see [`Choice`]): the embedded default, or
/// records in Redis, bytes in an object store, or both. Orphans are swept at once only when
/// nothing else shares the objects.
pub async fn open_backends(
    choice: &Choice,
    options: Options,
) -> io::Result<BlobFront<AnyRecords, AnyObjects, SystemEnv>> {
    let sizes = Sizes {
        records_cache: options.cache_capacity,
        bytes_cache: options.cache_bytes,
        orphan_age: options.orphan_age,
    };
    let opened = choice.open(&sizes).await?;
    let first_sweep = if opened.shared {
        options.orphan_age
    } else {
        Duration::ZERO
    };
    Ok(blob_front(
        opened.records,
        opened.objects,
        opened.tables,
        SystemEnv,
        opened.dir,
        &options,
        first_sweep,
    ))
}

fn blob_front<R: Records, O: Objects, E: Env>(
    records: R,
    objects: O,
    tables: AnyTables,
    env: E,
    dir: Arc<DataDir>,
    options: &Options,
    first_sweep: Duration,
) -> BlobFront<R, O, E> {
    let front = Front::new(records, objects, env)
        .with_max_body(options.max_body)
        .with_accounts(options.accounts.clone())
        .with_anonymous_access(options.anonymous);
    BlobFront {
        front: Arc::new(front),
        dir,
        tables,
        first_sweep,
    }
}

/// Discards the objects older than `age` that no record names, and the temporary files older
/// than that; never while damaged records (which may name objects) sit in `damaged/`.
pub async fn sweep<R: Records, O: Objects, E: Env>(served: &BlobFront<R, O, E>, age: Duration) {
    if served.dir.has_damaged() {
        tracing::warn!(
            "not sweeping orphans: damaged records were moved to {}/damaged and may name \
             some objects (see `ifmatch check`)",
            served.dir.root().display()
        );
        return;
    }
    match served.front.sweep(age).await {
        Ok(0) => {}
        Ok(swept) => tracing::info!(swept, "removed objects no record named"),
        Err(error) => tracing::warn!(%error, "sweeping orphans"),
    }
    match served.dir.clean_tmp(age) {
        Ok(0) => {}
        Ok(removed) => tracing::info!(removed, "removed abandoned temporary files"),
        Err(error) => tracing::warn!(%error, "cleaning tmp/"),
    }
}

/// Where [`serve`] listens: the blob front, and the Table service when it has a listener.
#[derive(Debug)]
pub struct Listeners {
    /// The blob front's.
    pub blobs: TcpListener,
    /// The Table service's, if it is served.
    pub tables: Option<TcpListener>,
    /// The Cosmos DB endpoint's, if it is served, and its TLS when it is served over HTTPS.
    pub cosmos: Option<(TcpListener, Option<Arc<rustls::ServerConfig>>)>,
}

impl From<TcpListener> for Listeners {
    fn from(blobs: TcpListener) -> Self {
        Self {
            blobs,
            tables: None,
            cosmos: None,
        }
    }
}

/// Serves `served` on `listeners` until `shutdown` completes, then stops accepting and lets
/// the requests in flight finish (up to 30 s): the blob front, and the Table service over
/// [`BlobFront::tables`] with the same accounts when it has a listener. Sweeps orphans every
/// [`Options::sweep_every`].
pub async fn serve<R, O, E>(
    listeners: impl Into<Listeners>,
    served: BlobFront<R, O, E>,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    R: Records,
    O: Objects,
    E: Env,
{
    let Listeners {
        blobs: listener,
        tables,
        cosmos,
    } = listeners.into();
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = {
        let stop = stop.clone();
        async move {
            shutdown.await;
            stop.cancel();
        }
    };
    sweep(&served, served.first_sweep).await;
    let sweeper = {
        let (served, age, every) = (served.clone(), options.orphan_age, options.sweep_every);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                sweep(&served, age).await;
            }
        })
    };
    let metrics = Arc::new(Metrics::default());
    let page = match options.metrics_listen {
        Some(address) => {
            let (metrics, front) = (metrics.clone(), served.front.clone());
            let listener = TcpListener::bind(address).await?;
            Some(tokio::spawn(accept::serve_metrics_page(
                listener,
                move || {
                    let mut page = String::new();
                    metrics.render(&mut page);
                    metrics::counter(
                        &mut page,
                        "ifmatch_cas_retries_total",
                        "Compare-and-swap attempts that lost a race with a concurrent change and \
                     started over.",
                        front.cas_retries(),
                    );
                    page
                },
            )))
        }
        None => None,
    };
    let (front, access_log, served_tables) = (served.front, options.access_log, served.tables);
    // The front answers any length past its limit 413, in Azure's words.
    let mut limits = options.limits;
    limits.huge_lengths_reach_service = true;
    let observe = ObserveLayer::new(metrics.clone(), access_log);
    let cosmos_server = cosmos.map(|(listener, tls)| {
        let service = cosmos::CosmosEndpoint::new(served_tables.clone(), SystemEnv)
            .with_accounts(&options.accounts)
            .with_anonymous_access(options.anonymous)
            .with_https(tls.is_some());
        let service = Arc::new(service);
        tokio::spawn(cosmos::sweep(
            service.clone(),
            stop.clone().cancelled_owned(),
        ));
        let stop = stop.clone().cancelled_owned();
        let (limits, metrics, observe) = (options.limits, metrics.clone(), observe.clone());
        tokio::spawn(serve_observed(
            (listener, tls, limits, metrics, observe),
            stop,
            service,
            |service, request| async move { cosmos::handle(&service, request).await },
        ))
    });
    let table_server = tables.map(|listener| {
        let service = tables::TableEndpoint::new(served_tables, SystemEnv)
            .with_accounts(options.accounts.clone())
            .with_anonymous_access(options.anonymous);
        let stop = stop.clone().cancelled_owned();
        let (limits, metrics, observe) = (options.limits, metrics.clone(), observe.clone());
        tokio::spawn(serve_observed(
            (listener, None, limits, metrics, observe),
            stop,
            Arc::new(service),
            |service, request| async move { tables::handle(&service, request).await },
        ))
    });
    let serving = serve_observed(
        (listener, None, limits, metrics, observe),
        stop.clone().cancelled_owned(),
        front,
        |front, request| async move { handle_blob(&front, request).await },
    );
    let (served, ()) = tokio::join!(serving, stopped);
    if let Some(page) = page {
        page.abort();
    }
    sweeper.abort();
    if let Some(tables) = table_server {
        tables.await.map_err(io::Error::other)??;
    }
    if let Some(cosmos) = cosmos_server {
        cosmos.await.map_err(io::Error::other)??;
    }
    served
}

/// Serves on a listener, under its limits, counted in its metrics and observed, until
/// `shutdown`: each request marked with its client's address (for the address range a shared
/// access signature may name) and answered by `answer` with `state`.
async fn serve_observed<T, F, A, B>(
    (listener, tls, limits, metrics, observe): (
        TcpListener,
        Option<Arc<rustls::ServerConfig>>,
        Limits,
        Arc<Metrics>,
        ObserveLayer,
    ),
    shutdown: impl Future<Output = ()>,
    state: Arc<T>,
    answer: F,
) -> io::Result<()>
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>, http::Request<RequestBody>) -> A + Copy + Send + Sync + 'static,
    A: Future<Output = http::Response<B>> + Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    accept::serve_over(listener, tls, limits, metrics, shutdown, move |client| {
        let state = state.clone();
        let service = service_fn(move |mut request: http::Request<RequestBody>| {
            request.extensions_mut().insert(ClientIp(client.ip()));
            // Boxed: a front's future holds the state of every operation it may run (the
            // blob front's, 16 KiB), and every future that wraps it (this one, the access
            // log's, the connection's tracking, hyper's slot for the request in flight) would
            // otherwise move all of it on every request (the figures: docs/figures.md). Here
            // rather than in `Observe`, which would still move it twice before boxing it. The
            // proxy's future, 1 KiB, is not boxed.
            let reply = Box::pin(answer(state.clone(), request));
            async move { Ok::<_, Infallible>(reply.await) }
        });
        observe.layer(service, client.ip())
    })
    .await
}

/// The front's answer to `request`: a read at once; a change in a task of its own.
async fn handle_blob<R, O, E>(
    front: &Arc<Front<R, O, E>>,
    request: http::Request<RequestBody>,
) -> http::Response<ifmatch_blob::ResponseBody<O::Reader>>
where
    R: Records,
    O: Objects,
    E: Env,
{
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        return front.handle(request).await;
    }
    // A body the front refuses unread comes back, to be read while the answer goes (see
    // `drain`).
    let (parts, body) = request.into_parts();
    let (body, leftover) = drain::keep(body, &parts.headers);
    let request = http::Request::from_parts(parts, body);
    // A change runs to its end in a task of its own even if the client goes away (and hyper
    // drops this future): a staged object is then committed or discarded, never left behind.
    let change = tokio::spawn({
        let front = front.clone();
        async move { front.handle(request).await }
    });
    let answer = change
        .await
        .unwrap_or_else(|_| front.error(ErrorCode::InternalError));
    // The answer goes at once; what is left of the body is read meanwhile.
    tokio::spawn(leftover.drain());
    answer
}
