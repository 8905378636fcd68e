//! What `ifmatch serve` starts, and stops: the blob front on its listener, the Table service and
//! the Cosmos endpoint on theirs (over the same tables, with the same accounts), the metrics
//! page, the sweeps of orphans and of Cosmos items past their time to live; each listener
//! behind the same guards (`guards/`), observed the same way (`observe.rs`). Stopping stops
//! them all.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use http_body_util::Full;
use ifmatch_azure::{Answer, Client, Env, Named, WholeBody, answer_whole};
use ifmatch_blob::ErrorCode;
use ifmatch_blob::{Front, Objects, Records};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use crate::guards::accept::{self, Connections, Limits, RequestBody};
use crate::guards::drain;
use crate::metrics::{self, Metrics};
use crate::observe::ObserveLayer;
use crate::open::{Opened, Options};
use crate::{cosmos, queues, tables};
use ifmatch_azure::SystemEnv;

/// Discards the objects older than `age` that no record names, and the temporary files older
/// than that; never while damaged records (which may name objects) sit in `damaged/`.
pub async fn sweep<R: Records, O: Objects, E: Env>(served: &Opened<R, O, E>, age: Duration) {
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
    /// The blob front's: one per thread serving it, all on one address (see
    /// [`crate::bind_threads`]), each thread with a runtime of its own.
    pub blobs: Vec<std::net::TcpListener>,
    /// The Table service's, if it is served.
    pub tables: Option<TcpListener>,
    /// The Queue service's, if it is served.
    pub queues: Option<TcpListener>,
    /// The Cosmos DB endpoint's, if it is served, and its TLS when it is served over HTTPS.
    pub cosmos: Option<(TcpListener, Option<Arc<rustls::ServerConfig>>)>,
    /// The TLS of the blob, queue and table listeners, when they are served over HTTPS.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl From<Vec<std::net::TcpListener>> for Listeners {
    fn from(blobs: Vec<std::net::TcpListener>) -> Self {
        Self {
            blobs,
            tables: None,
            queues: None,
            cosmos: None,
            tls: None,
        }
    }
}

impl From<std::net::TcpListener> for Listeners {
    fn from(blobs: std::net::TcpListener) -> Self {
        Self::from(vec![blobs])
    }
}

/// The listener of the Table service or the Cosmos endpoint (the option `--{flag}`): the
/// address asked for, none for `off`, or port `port` on the blob listener's address when that
/// port is free (the emulators' layout).
pub async fn listen_beside(
    flag: &str,
    asked: Option<&str>,
    blobs: SocketAddr,
    port: u16,
) -> io::Result<Option<TcpListener>> {
    let address = match asked {
        Some("off") => return Ok(None),
        Some(text) => text.parse().map_err(|_| {
            let said = format!("--{flag} {text}: not an address or `off`");
            io::Error::new(io::ErrorKind::InvalidInput, said)
        })?,
        None => SocketAddr::new(blobs.ip(), port),
    };
    match TcpListener::bind(address).await {
        Ok(listener) => Ok(Some(listener)),
        Err(error) if asked.is_none() => {
            tracing::warn!(
                "{address} is not free ({error}): not listening for --{flag}; choose another \
                 address with --{flag}"
            );
            Ok(None)
        }
        Err(error) => {
            let said = format!("listening on {address} for --{flag}: {error}");
            Err(io::Error::new(error.kind(), said))
        }
    }
}

/// Serves `served` on `listeners` until `shutdown` completes, then stops accepting and lets
/// the requests in flight finish (up to 30 s): the blob front (a thread of its own for each of
/// its listeners), and the Table, Queue and Cosmos services over [`Opened::tables`] with the
/// same accounts, each when it has a listener. Sweeps orphans every [`Options::sweep_every`].
pub async fn serve<R, O, E>(
    listeners: impl Into<Listeners>,
    served: Opened<R, O, E>,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    R: Records,
    O: Objects,
    E: Env,
{
    let Listeners {
        blobs,
        tables,
        queues,
        cosmos,
        tls,
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
    let background = Background::start(&served, &options);
    let metrics = Arc::new(Metrics::default());
    let page = metrics_page(&options, &metrics, &served.front).await?;
    let observe = ObserveLayer::new(metrics.clone(), options.observe.access_log);
    let on = |listener, tls| Listening {
        listener,
        tls,
        limits: options.limits,
        metrics: metrics.clone(),
        observe: observe.clone(),
    };
    // What the dialects serve with: the accounts, anonymous access, and one budget for the
    // JSON bodies they read whole (`ifmatch_azure::inflight`).
    let serving = ifmatch_azure::Serving {
        accounts: options.accounts.clone(),
        anonymous: options.anonymous,
        inflight: Arc::default(),
    };
    let served_tables = served.tables;
    let mut dialects = Vec::new();
    if let Some((listener, tls)) = cosmos {
        let mut service = cosmos::CosmosEndpoint::new(served_tables.clone(), SystemEnv)
            .with_serving(serving.clone())
            .with_https(tls.is_some());
        if options.cosmos_throughput == crate::open::CosmosThroughput::Enforce {
            service = service.with_enforced_throughput(Arc::default());
        }
        let service = Arc::new(service);
        tokio::spawn(cosmos::sweep(
            service.clone(),
            stop.clone().cancelled_owned(),
        ));
        let stop = stop.clone().cancelled_owned();
        dialects.push(serve_whole!(on(listener, tls), stop, service));
    }
    if let Some(listener) = queues {
        let service = queues::QueueEndpoint::new(served_tables.clone(), SystemEnv)
            .with_serving(serving.clone());
        let stop = stop.clone().cancelled_owned();
        dialects.push(serve_whole!(
            on(listener, tls.clone()),
            stop,
            Arc::new(service)
        ));
    }
    if let Some(listener) = tables {
        let service = tables::TableEndpoint::new(served_tables, SystemEnv).with_serving(serving);
        let stop = stop.clone().cancelled_owned();
        dialects.push(serve_whole!(
            on(listener, tls.clone()),
            stop,
            Arc::new(service)
        ));
    }
    // The front answers any length past its limit 413, in Azure's words.
    let mut limits = options.limits;
    limits.huge_lengths_reach_service = true;
    let mut connections = Connections::new(limits, metrics.clone());
    let https = tls.is_some();
    connections.tls = tls;
    let serving = serve_blobs(blobs, served.front, &connections, &observe, https, &stop);
    let (served, ()) = tokio::join!(serving, stopped);
    connections.close();
    if let Some(page) = page {
        page.abort();
    }
    background.abort();
    for dialect in dialects {
        dialect.await.map_err(io::Error::other)??;
    }
    served
}

/// Serves the endpoint `$service` (an `Arc` of a JSON dialect's) with `$listening` until
/// `$stop`: each body read whole, each change in a task of its own (see [`whole`]). A macro
/// rather than a function: an endpoint's answer is known to be `Send` only where its type is.
macro_rules! serve_whole {
    ($listening:expr, $stop:expr, $service:expr) => {{
        let service = $service;
        tokio::spawn($listening.serve($stop, move |peer, observe| {
            observed(
                observe,
                peer,
                service.clone(),
                |service, request, client| {
                    Box::pin(whole(service.clone(), request, client, |s, r, c| {
                        tokio::spawn(async move { answer_whole(&*s, r, c).await })
                    }))
                },
            )
        }))
    }};
}
use serve_whole;

/// The blob front on threads of its own, one a listener of `blobs`, as nginx's workers: no
/// request's task moves between cores, no wake-up crosses threads (docs/figures.md). Each
/// thread ends once the changes it started have.
async fn serve_blobs<R: Records, O: Objects, E: Env>(
    blobs: Vec<std::net::TcpListener>,
    front: Arc<Front<R, O, E>>,
    connections: &Connections,
    observe: &ObserveLayer,
    https: bool,
    stop: &tokio_util::sync::CancellationToken,
) -> io::Result<()> {
    accept::on_threads(blobs, stop.clone().cancelled_owned(), || {
        let (front, connections, observe) = (front.clone(), connections.clone(), observe.clone());
        move |listener, stopped| async move {
            let changes = TaskTracker::new();
            let thread = Arc::new(ThreadFront {
                front,
                changes: changes.clone(),
            });
            let served = connections
                .accept(listener, stopped, |address| {
                    observed(
                        &observe,
                        Peer { address, https },
                        thread.clone(),
                        ThreadFront::handle,
                    )
                })
                .await;
            // A change runs to its end even after its client left, before the runtime goes.
            changes.close();
            changes.wait().await;
            served
        }
    })
    .await
}

/// The metrics page (`--metrics-listen`), when asked for: the server's counters and the
/// front's compare-and-swap retries.
async fn metrics_page<R: Records, O: Objects, E: Env>(
    options: &Options,
    metrics: &Arc<Metrics>,
    front: &Arc<Front<R, O, E>>,
) -> io::Result<Option<JoinHandle<io::Result<()>>>> {
    let Some(address) = options.observe.metrics_listen else {
        return Ok(None);
    };
    let (metrics, front) = (metrics.clone(), front.clone());
    let listener = TcpListener::bind(address).await?;
    let render = move || {
        let mut page = String::new();
        metrics.render(&mut page);
        metrics::counter(
            &mut page,
            "ifmatch_cas_retries_total",
            "Compare-and-swap attempts that lost a race with a concurrent change and started \
             over.",
            front.cas_retries(),
        );
        page
    };
    Ok(Some(tokio::spawn(accept::serve_metrics_page(
        listener, render,
    ))))
}

/// What runs beside the listeners until they stop: the orphans' sweep, the copies from other
/// servers started and not finished (`--copy-from`), and the change feed's publisher.
struct Background {
    tasks: Vec<JoinHandle<()>>,
}

impl Background {
    fn start<R: Records, O: Objects, E: Env>(served: &Opened<R, O, E>, options: &Options) -> Self {
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
        let mut tasks = vec![sweeper];
        if options.copy_origins.is_some() {
            tasks.push(every_second(
                served.clone(),
                "finish the copies started",
                |served| async move { served.front.run_copies().await.map(drop) },
            ));
        }
        // Changes kept in their records into the feed's chunks, every second (a pass over an
        // account that keeps no feed lists one empty container).
        tasks.push(every_second(
            served.clone(),
            "publish the change feed",
            |served| async move { served.front.publish_changes().await.map(drop) },
        ));
        Self { tasks }
    }

    fn abort(self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

/// Runs `work` on `served` every second (a late run delays the next, none piles up) until
/// the task is aborted; a failure is logged as what could not be done (`what`).
fn every_second<T, F, W>(served: T, what: &'static str, work: W) -> tokio::task::JoinHandle<()>
where
    T: Clone + Send + 'static,
    W: Fn(T) -> F + Send + 'static,
    F: Future<Output = Result<(), ifmatch_blob::StoreError>> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(error) = work(served.clone()).await {
                tracing::warn!(%error, "could not {what}");
            }
        }
    })
}

/// One listener and what it serves under: TLS if any, the limits on its clients, the metrics
/// its connections and requests count in, and how its requests are observed.
struct Listening {
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: Limits,
    metrics: Arc<Metrics>,
    observe: ObserveLayer,
}

impl Listening {
    /// Serves on the listener, under its limits, counted in its metrics, until `shutdown`:
    /// each client with the service `service_for` makes with this listener's observer.
    async fn serve<S: accept::ConnectionService>(
        self,
        shutdown: impl Future<Output = ()>,
        service_for: impl Fn(Peer, &ObserveLayer) -> S,
    ) -> io::Result<()> {
        let Self {
            listener,
            tls,
            limits,
            metrics,
            observe,
        } = self;
        let https = tls.is_some();
        accept::serve_over(listener, tls, limits, metrics, shutdown, move |address| {
            service_for(Peer { address, https }, &observe)
        })
        .await
    }
}

/// A client connection: its address, and whether it came over HTTPS.
#[derive(Debug, Clone, Copy)]
struct Peer {
    address: SocketAddr,
    https: bool,
}

/// The service of the connection of `peer`: each request answered by `answer` with `state`,
/// given what the server knows of its client (for the address range a shared access signature
/// may name, and its scheme), and observed.
fn observed<T, F, B>(
    observe: &ObserveLayer,
    peer: Peer,
    state: Arc<T>,
    answer: F,
) -> impl accept::ConnectionService<ResponseBody = B> + use<T, F, B>
where
    T: Send + Sync + 'static,
    F: Fn(&Arc<T>, http::Request<RequestBody>, Client) -> Reply<B> + Clone + Send + Sync + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let client = Client {
        ip: Some(peer.address.ip()),
        https: peer.https,
    };
    let service = move |request: http::Request<RequestBody>| answer(&state, request, client);
    observe.layer(service, peer.address.ip())
}

/// A front's answer on its way, boxed where it is made: a front's future may hold the state of
/// every operation it runs (the blob front boxes each operation's where its dispatch picks it,
/// and holds the request's head and body besides; the JSON dialects' hold theirs), and every
/// future that wraps it (the access log's, the connection's tracking, hyper's slot for the
/// request in flight) would otherwise move all of it on every request (the figures:
/// docs/figures.md). Boxed by the front's own call, not around it: a future that awaits another
/// keeps the request it was given beside the one it gave. The proxy's future, 1 KiB, is not
/// boxed. It names the operation beside the answer, for the observer.
type Reply<B> = Pin<Box<dyn Future<Output = Named<http::Response<B>>> + Send>>;

/// The answer of the Table service or the Cosmos endpoint, its body read whole first (up to
/// the endpoint's limit). A change runs to its end in a task of its own, which `spawn`
/// starts, even if its client goes away (and hyper drops this future): a Cosmos commit may
/// carry other requests' commits with its own (`ifmatch_cosmos`'s group commit). (`spawn` is
/// the caller's, where the endpoint's type is known, and so that its answer is `Send`.)
async fn whole<E: WholeBody>(
    endpoint: Arc<E>,
    request: http::Request<RequestBody>,
    client: Client,
    spawn: impl FnOnce(Arc<E>, http::Request<RequestBody>, Client) -> JoinHandle<Named<Answer>>,
) -> Named<http::Response<Full<Bytes>>> {
    let (answer, operation) = match *request.method() {
        Method::GET | Method::HEAD => answer_whole(&*endpoint, request, client).await,
        _ => match spawn(endpoint, request, client).await {
            Ok(named) => named,
            Err(_) => {
                let mut answer = http::Response::new(Bytes::new());
                *answer.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
                (answer, None)
            }
        },
    };
    (answer.map(Full::new), operation)
}

/// The blob front as one serving thread has it: the changes its runtime runs are tracked, so
/// that the thread stops only when each has ended.
struct ThreadFront<R, O, E> {
    front: Arc<Front<R, O, E>>,
    changes: TaskTracker,
}

impl<R: Records, O: Objects, E: Env> ThreadFront<R, O, E> {
    /// The front's answer to `request`: a read at once; a change in a task of its own.
    fn handle(
        self: &Arc<Self>,
        request: http::Request<RequestBody>,
        client: Client,
    ) -> Reply<ifmatch_blob::ResponseBody<O::Reader>> {
        let front = self.front.clone();
        if matches!(*request.method(), Method::GET | Method::HEAD) {
            return Box::pin(Front::handle_by(front, request, client));
        }
        // A body the front refuses unread comes back, to be read while the answer goes (see
        // `drain`).
        let (parts, body) = request.into_parts();
        let (body, leftover) = drain::keep(body, &parts.headers);
        let request = http::Request::from_parts(parts, body);
        // A change runs to its end in a task of its own even if the client goes away (and
        // hyper drops this future): a staged object is then committed or discarded, never
        // left behind.
        let change = (self.changes).spawn(Front::handle_by(front.clone(), request, client));
        Box::pin(async move {
            let answer = change
                .await
                .unwrap_or_else(|_| (front.error(ErrorCode::InternalError), None));
            // The answer goes at once; what is left of the body is read meanwhile.
            tokio::spawn(leftover.drain());
            answer
        })
    }
}
