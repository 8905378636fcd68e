//! The accept loop of every `ifmatch` mode, and what keeps slow, idle or too many clients from
//! starving the others: a header timeout, an idle timeout, a body timeout with a floor on the
//! rate ([`crate::guards::body_rate`]), and a cap on connections that sheds idle ones first (uploads
//! waiting for their client among them).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, Version, header};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use pin_project_lite::pin_project;
use tokio::net::TcpListener;
use tokio_util::either::Either;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::arguments::seconds;
use crate::guards::body_rate::RateBody;
use crate::guards::connections::{BodyWaits, InFlight, State, Table, reap};
use crate::guards::huge_length::HugeLength;
use crate::guards::interim::{Interim, InterimIo, Open};
use crate::metrics::Metrics;
use ifmatch_core::FramePoll;

/// How long requests in flight may take to finish after shutdown is asked for.
const DRAIN: Duration = Duration::from_secs(30);

/// The most an HTTP/1 connection buffers of what its client sends.
const READ_BUFFER: usize = 64 << 10;

/// The most blocking threads of a server's serving runtimes together (tokio's default for one).
const BLOCKING_THREADS: usize = 512;

/// Descriptors kept for files (objects, records) when the cap on connections is derived from
/// the descriptor limit.
const FILE_DESCRIPTORS: u64 = 256;

/// What a server tolerates of its clients; the command line's options of `serve` and `proxy`
/// alike.
#[derive(Debug, Clone, Copy, clap::Args)]
#[non_exhaustive]
pub struct Limits {
    /// Seconds a client has to send a request's whole head, from when the connection starts
    /// waiting for it (on HTTP/1 this also closes kept-alive connections idle that long); a
    /// connection past it is closed within a quarter of it more (at most 5 s).
    #[arg(long, env = "IFMATCH_HEADER_TIMEOUT", default_value = "30", value_parser = seconds)]
    pub header_timeout: Duration,
    /// Seconds a connection may stay open with no request in flight (HTTP/1 and HTTP/2).
    #[arg(long, env = "IFMATCH_IDLE_TIMEOUT", default_value = "120", value_parser = seconds)]
    pub idle_timeout: Duration,
    /// Seconds an upload may send nothing before it is abandoned (nothing is committed); also
    /// the window of --min-body-rate.
    #[arg(long, env = "IFMATCH_BODY_TIMEOUT", default_value = "60", value_parser = seconds)]
    pub body_timeout: Duration,
    /// The least an upload must send, in bytes per second of waiting for it, over each
    /// --body-timeout: a client that trickles its body is cut off after one window.
    #[arg(long, env = "IFMATCH_MIN_BODY_RATE", default_value_t = 1024)]
    pub min_body_rate: u64,
    /// The most connections open at once (HTTP/1 and HTTP/2); at the cap a new connection
    /// closes the one idle the longest (no request in flight, or still sending its head); with
    /// none idle, the new one is closed. `serve` and `proxy` lower it to fit the descriptor
    /// limit, which they raise to its hard maximum at start.
    #[arg(long, env = "IFMATCH_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,
    /// The most concurrent requests (streams) on one HTTP/2 connection.
    #[arg(long, env = "IFMATCH_MAX_STREAMS", default_value_t = 256)]
    pub max_streams: u32,
    /// A `Content-Length` of 2^64 - 2 or more (which hyper refuses with an empty 431) reaches
    /// the service as 2^64 - 3, for it to refuse as too large in its own words (see
    /// [`crate::guards::huge_length`]): for a server that refuses what it cannot take, not a proxy.
    #[arg(skip)]
    pub huge_lengths_reach_service: bool,
    /// Each HTTP/1.1 request carries a sender of interim (1xx) responses to its client (see
    /// [`crate::guards::interim`]): for a proxy, which passes on its origin's.
    #[arg(skip)]
    pub interim_responses: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
            body_timeout: Duration::from_secs(60),
            min_body_rate: 1024,
            max_connections: 10_000,
            max_streams: 256,
            huge_lengths_reach_service: false,
            interim_responses: false,
        }
    }
}

/// Raises the soft limit on open descriptors to the hard one, and answers the cap on
/// connections that fits under it.
pub fn raise_descriptor_limit(wanted: usize) -> usize {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => {
            let fits = limit.saturating_sub(FILE_DESCRIPTORS).max(16);
            let cap = wanted.min(usize::try_from(fits).unwrap_or(usize::MAX));
            if cap < wanted {
                tracing::warn!(
                    descriptors = limit,
                    "at most {cap} connections fit under the descriptor limit"
                );
            }
            cap
        }
        Err(error) => {
            tracing::warn!(%error, "cannot read or raise the descriptor limit");
            wanted
        }
    }
}

/// The body every request reaches a service with: `Incoming`, failing when the client sends
/// too little for [`Limits::body_timeout`] (see [`Limits::min_body_rate`]).
pub(crate) type RequestBody = RateBody<Incoming, BodyWaits>;

/// What a connection serves: a hyper service of the server's request body, whose future can
/// move between tasks, answering a body of `Bytes`.
pub(crate) trait ConnectionService:
    hyper::service::Service<
        Request<RequestBody>,
        Response = Response<Self::ResponseBody>,
        Future: Send + 'static,
        Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    > + Send
    + 'static
{
    /// The body of its responses.
    type ResponseBody: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + 'static;
}

impl<S, B> ConnectionService for S
where
    S: hyper::service::Service<Request<RequestBody>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static,
{
    type ResponseBody = B;
}

/// Serves HTTP/1 and HTTP/2 on `listener`, with the service `service_for` makes for each
/// client's address, under `limits`, until `shutdown` completes; then the requests in flight
/// may finish (up to 30 s).
/// Over TLS when `tls` is given: each connection's handshake in its own task, within the
/// header timeout.
pub(crate) async fn serve_over<S: ConnectionService>(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: Limits,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
    service_for: impl Fn(SocketAddr) -> S,
) -> io::Result<()> {
    let mut connections = Connections::new(limits, metrics);
    connections.tls = tls;
    let served = connections.accept(listener, shutdown, service_for).await;
    connections.close();
    served
}

/// Answers `GET /metrics` on `listener` with what `render` makes, and 404 to anything else,
/// until dropped (aborted). The same limits on clients as the data listener.
pub(crate) async fn serve_metrics_page(
    listener: TcpListener,
    render: impl Fn() -> String + Send + Sync + 'static,
) -> io::Result<()> {
    serve_aside(listener, move |method, target| {
        let asked = method == http::Method::GET && target.path() == "/metrics";
        crate::metrics::page_response(asked.then(&render))
    })
    .await
}

/// Serves a listener off the data path (`/metrics`, the admin's), under the default limits
/// and with counters of its own, until the task is dropped: each request is answered by
/// `answer` from its method and target alone (its body is never read).
pub(crate) async fn serve_aside<F>(listener: TcpListener, answer: F) -> io::Result<()>
where
    F: Fn(&http::Method, &http::Uri) -> Response<http_body_util::Full<Bytes>>
        + Send
        + Sync
        + 'static,
{
    let answer = Arc::new(answer);
    let own = Arc::new(Metrics::default());
    serve_over(
        listener,
        None,
        Limits::default(),
        own,
        std::future::pending(),
        |_| {
            let answer = answer.clone();
            hyper::service::service_fn(move |request: Request<RequestBody>| {
                let response = answer(request.method(), request.uri());
                async move { Ok::<_, std::convert::Infallible>(response) }
            })
        },
    )
    .await
}

/// The connections of one server, over all the threads it accepts on: the cap on connections
/// and the idle timeout count them all together.
#[derive(Debug, Clone)]
pub(crate) struct Connections {
    table: Arc<Table>,
    limits: Limits,
    metrics: Arc<Metrics>,
    /// The TLS of every connection, when served over HTTPS.
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    /// The task closing idle connections, on the runtime `new` was called on.
    reaper: Arc<tokio::task::AbortHandle>,
}

impl Connections {
    /// Connections under `limits`, counted in `metrics`. Must be called on a runtime: the
    /// reaper of idle connections runs there, until [`Connections::close`].
    pub(crate) fn new(limits: Limits, metrics: Arc<Metrics>) -> Self {
        let table = Arc::new(Table::default());
        let (header, idle) = (limits.header_timeout, limits.idle_timeout);
        let reaper = tokio::spawn(reap(table.clone(), header, idle)).abort_handle();
        Self {
            table,
            limits,
            metrics,
            tls: None,
            reaper: Arc::new(reaper),
        }
    }

    /// Stops the reaper of idle connections.
    pub(crate) fn close(&self) {
        self.reaper.abort();
    }

    /// Serves HTTP/1 and HTTP/2 on `listener` until `shutdown` completes, then lets the
    /// requests in flight finish (up to 30 s).
    pub(crate) async fn accept<S: ConnectionService>(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
        service_for: impl Fn(SocketAddr) -> S,
    ) -> io::Result<()> {
        let Self {
            table,
            limits,
            metrics,
            tls,
            ..
        } = self;
        let limits = *limits;
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            // The header timeout is the connection table's (see `reap`): hyper's arms a timer
            // for every request.
            .header_read_timeout(None)
            // hyper's read buffer grows to about 400 KiB under a fast upload, and each chunk it
            // hands on is copied once more into the file's buffer: about 1 MiB per upload in
            // flight. At 64 KiB (still eight times the largest head Azure allows) an upload holds
            // about a tenth of that (`scripts/bench-memory`).
            .max_buf_size(READ_BUFFER);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.max_streams)
            .keep_alive_interval(Some(limits.idle_timeout.min(Duration::from_secs(60))))
            .keep_alive_timeout(Duration::from_secs(20));
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
            if !table.make_room(limits.max_connections) {
                tracing::debug!(%client, "refused a connection: every connection is busy");
                metrics.connection_refused();
                continue;
            }
            metrics.connection_opened();
            let _ = stream.set_nodelay(true);
            let state = table.open();
            let interim = Arc::new(Interim::default());
            let service = Tracked {
                inner: service_for(client),
                state: state.clone(),
                limits,
                interim: interim.clone(),
            };
            let lowered = limits.huge_lengths_reach_service.then(|| state.clone());
            let (table, metrics) = (table.clone(), metrics.clone());
            let (builder, watcher, tls) = (builder.clone(), graceful.watcher(), tls.clone());
            tokio::spawn(async move {
                let served = async {
                    // One type of stream, plain or TLS, so that hyper's connection is made
                    // once a service and not twice.
                    let stream = match tls {
                        None => Either::Left(stream),
                        // The handshake is part of the head: a client that does not finish it
                        // in the header timeout is dropped.
                        Some(tls) => {
                            let accepting = tokio_rustls::TlsAcceptor::from(tls).accept(stream);
                            match tokio::time::timeout(limits.header_timeout, accepting).await {
                                Ok(Ok(stream)) => Either::Right(stream),
                                Ok(Err(error)) => return Err(error.into()),
                                Err(_) => return Ok(()),
                            }
                        }
                    };
                    let stream = InterimIo::new(HugeLength::new(stream, lowered), interim);
                    let connection =
                        builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                    watcher.watch(connection.into_owned()).await
                };
                tokio::select! {
                    // In order: no random pick for each poll of the connection.
                    biased;
                    ended = served => if let Err(error) = ended {
                        tracing::debug!(%error, "connection ended with an error");
                    },
                    () = state.close_asked() => {}
                }
                table.remove(&state);
                metrics.connection_closed();
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
}

/// Listening sockets on `address` for `threads` accept loops, all with `SO_REUSEPORT`: the
/// kernel spreads new connections over them. Fails, as a single listener would, when another
/// socket already listens there (a plain bind is tried first: sockets of the same user that
/// set `SO_REUSEPORT` would otherwise share the port silently). Must be called on a runtime.
pub fn bind_threads(address: SocketAddr, threads: usize) -> io::Result<Vec<std::net::TcpListener>> {
    let address = std::net::TcpListener::bind(address)?.local_addr()?;
    (0..threads.max(1))
        .map(|_| {
            let socket = match address {
                SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
                SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
            };
            socket.set_reuseaddr(true)?;
            socket.set_reuseport(true)?;
            socket.bind(address)?;
            socket.listen(1024)?.into_std()
        })
        .collect()
}

/// Runs one server per listener, each on a thread of its own with a single-threaded runtime
/// (no task moves between cores, no wakeup crosses threads), until `shutdown` completes;
/// `per_thread` makes each thread's server, which gets its listener and the signal to stop.
/// Answers the first error of any of them, after stopping the others.
pub(crate) async fn on_threads<M, G, Fut>(
    listeners: Vec<std::net::TcpListener>,
    shutdown: impl Future<Output = ()>,
    mut per_thread: M,
) -> io::Result<()>
where
    M: FnMut() -> G,
    G: FnOnce(TcpListener, WaitForCancellationFutureOwned) -> Fut + Send + 'static,
    Fut: Future<Output = io::Result<()>>,
{
    let stop = CancellationToken::new();
    // Dropped before the end (its caller's task aborted), this still stops every thread.
    let _stop_when_dropped = stop.clone().drop_guard();
    let (ended, mut ends) = tokio::sync::mpsc::unbounded_channel();
    let mut running = 0;
    // Each runtime has a pool of blocking threads (file reads and writes, fsyncs): together no
    // more than tokio's default for one runtime.
    let blocking = (BLOCKING_THREADS / listeners.len().max(1)).max(1);
    for (n, listener) in listeners.into_iter().enumerate() {
        let serve = per_thread();
        let (stopped, ended) = (stop.clone().cancelled_owned(), ended.clone());
        let thread = std::thread::Builder::new().name(format!("ifmatch-serve-{n}"));
        let spawned = thread.spawn(move || {
            let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .max_blocking_threads(blocking)
                    .build()?;
                listener.set_nonblocking(true)?;
                runtime.block_on(async { serve(TcpListener::from_std(listener)?, stopped).await })
            }));
            let _ = ended.send(served.unwrap_or_else(|_| Err(io::Error::other("panicked"))));
        });
        match spawned {
            Ok(_) => running += 1,
            Err(error) => {
                stop.cancel();
                ends.close();
                return Err(error);
            }
        }
    }
    let mut first = tokio::select! {
        () = shutdown => Ok(()),
        Some(served) = ends.recv() => {
            running -= 1;
            served.and(Err(io::Error::other("a serving thread stopped")))
        }
    };
    stop.cancel();
    for _ in 0..running {
        if let Some(served) = ends.recv().await {
            first = first.and(served);
        }
    }
    first
}

/// The service of a connection: counts its requests in flight, refuses HTTP/1.1 requests
/// without exactly one `Host` (RFC 9112 3.2), puts the body's rate floor on request bodies,
/// and gives each HTTP/1.1 request a sender of interim responses.
struct Tracked<S> {
    inner: S,
    state: Arc<State>,
    limits: Limits,
    interim: Arc<Interim>,
}

impl<S, B> hyper::service::Service<Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<Request<RequestBody>, Response = Response<B>>,
    B: Body<Data = Bytes>,
{
    type Response = Response<ServerBody<B>>;
    type Error = S::Error;
    type Future = TrackedFuture<S::Future, B>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        if request.version() == Version::HTTP_2 {
            self.state.speaks_http2();
        }
        if request.version() == Version::HTTP_11
            && request.headers().get_all(header::HOST).iter().count() != 1
        {
            self.state.request_refused();
            let refused = refuse(
                StatusCode::BAD_REQUEST,
                "exactly one Host header is required\n",
            );
            return TrackedFuture::Refused {
                response: Some(refused),
            };
        }
        let in_flight = self.state.request_started();
        let (window, rate) = (self.limits.body_timeout, self.limits.min_body_rate);
        let floor = (rate.saturating_mul(window.as_secs())).max(1);
        let waits = self.state.body_waits();
        let mut request = request.map(|body| RateBody::new(body, window, floor, waits));
        let interim = self.limits.interim_responses && request.version() == Version::HTTP_11;
        let interim = interim.then(|| {
            let (sender, open) = self.interim.open();
            request.extensions_mut().insert(sender);
            open
        });
        TrackedFuture::Served {
            future: self.inner.call(request),
            in_flight: Some(in_flight),
            interim,
        }
    }
}

pin_project! {
    /// The future of a [`Tracked`] request: a refusal ready at once, or the service's future,
    /// whose response body takes over the request's in-flight mark. Not boxed: every request
    /// goes through it.
    #[project = TrackedProjection]
    pub(crate) enum TrackedFuture<F, B> {
        /// Refused before any service saw it.
        Refused { response: Option<Response<ServerBody<B>>> },
        /// The service's answer, on its way; its interim responses end when it comes.
        Served { #[pin] future: F, in_flight: Option<InFlight>, interim: Option<Open> },
    }
}

impl<F, B, E> Future for TrackedFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ServerBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            TrackedProjection::Refused { response } => {
                Poll::Ready(Ok(response.take().expect("polled after completion")))
            }
            TrackedProjection::Served {
                future,
                in_flight,
                interim,
            } => {
                let Poll::Ready(response) = future.poll(cx) else {
                    if let Some(open) = interim {
                        open.register(cx.waker());
                    }
                    return Poll::Pending;
                };
                interim.take();
                let response = response?;
                let in_flight = in_flight.take();
                Poll::Ready(Ok(
                    response.map(|body| ServerBody::Served { body, in_flight })
                ))
            }
        }
    }
}

fn refuse<B>(status: StatusCode, text: &'static str) -> Response<ServerBody<B>> {
    let mut response = Response::new(ServerBody::Refused {
        text: Some(Bytes::from_static(text.as_bytes())),
    });
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
        .headers_mut()
        .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
    response
}

pin_project! {
    /// A service's response body, which marks the request done when it ends or is dropped; or
    /// the text of a request refused before any service saw it.
    #[project = ServerBodyProjection]
    pub(crate) enum ServerBody<B> {
        /// The service's answer.
        Served { #[pin] body: B, in_flight: Option<InFlight> },
        /// A refusal.
        Refused { text: Option<Bytes> },
    }
}

impl<B: Body<Data = Bytes>> Body for ServerBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll<Self::Error> {
        match self.project() {
            ServerBodyProjection::Served { body, in_flight } => {
                let frame = std::task::ready!(body.poll_frame(cx));
                if frame.is_none() {
                    in_flight.take();
                }
                Poll::Ready(frame)
            }
            ServerBodyProjection::Refused { text } => {
                Poll::Ready(text.take().map(|t| Ok(Frame::data(t))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Served { body, .. } => body.is_end_stream(),
            Self::Refused { text } => text.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Served { body, .. } => body.size_hint(),
            Self::Refused { text } => {
                SizeHint::with_exact(text.as_ref().map_or(0, |t| t.len() as u64))
            }
        }
    }
}
