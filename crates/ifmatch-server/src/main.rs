//! `ifmatch`: Azure Blob Storage's concurrency controls in front of any storage.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ifmatch_azure::Accounts;
use ifmatch_azure::token::DevIssuer;
use ifmatch_server::arguments::{seconds, seconds_or_zero};
use ifmatch_server::https::Certificate;
use ifmatch_server::proxy::ProxyOptions;
use tokio::net::TcpListener;

#[global_allocator]
static ALLOCATOR: ifmatch_server::allocator::Allocator = ifmatch_server::allocator::Allocator;

#[derive(Parser)]
#[command(
    name = "ifmatch",
    version,
    about = "Conditional requests and leases for HTTP storage"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log as JSON lines (one object per event, the access log's fields included) instead of
    /// text.
    #[arg(long, global = true, env = "IFMATCH_LOG_JSON")]
    log_json: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the blob front: the Azure Blob REST dialect (containers, blobs, conditional
    /// headers, leases) over the local disk, or Redis and an object store.
    Serve(Serve),
    /// Put the conditional layer in front of any HTTP origin: strong ETags, 304s from the
    /// cache without reaching the origin, atomic If-Match / If-Unmodified-Since /
    /// If-None-Match on writes.
    Proxy(Proxy),
    /// Verify an embedded data directory: every record against its object (exists, length,
    /// SHA-256). Exits 1 on damage. Refuses to run beside a server using the directory.
    Check(Check),
    /// Run a command while holding a blob's lease (waiting for it), renewed in the background
    /// and released at exit: a lock for cron jobs on many machines.
    ///
    /// The command runs in a process group of its own, and the lease is released only once
    /// every process of the group has ended (the command's background jobs too): the command's
    /// exit status is then ifmatch's. If the lease is lost, or ifmatch gets SIGTERM, SIGINT or
    /// SIGHUP, the whole group gets SIGTERM, then SIGKILL after --grace; ifmatch exits 75
    /// (lost) or 128 + the signal (the lease released) once the group is gone. If ifmatch is
    /// killed outright, a watcher it started stops the group the same way, with a grace of at
    /// most a third of --duration: before the lease can expire. A process that leaves the group
    /// (setsid) is beyond this; the command cannot read from a terminal (it is not the
    /// terminal's foreground job). 73 when --timeout passed first.
    Lock(LockArgs),
    /// Wait to become leader (to hold a blob's lease), then run a command while leading; the
    /// same as `lock` without a timeout, with the same guarantees.
    Leader(LockArgs),
    /// Print a bearer token of the development issuer, which `ifmatch serve` over the same
    /// data directory takes, carrying the roles it is minted with: for code that authenticates
    /// with Entra ID (`DefaultAzureCredential`) to run against the server with a credential
    /// that returns it.
    Token(TokenArgs),
    /// The watcher `lock` starts (internal): stops a process group once its standard input
    /// ends.
    #[command(hide = true)]
    LockWatch(LockWatch),
    /// A process `serve` runs Cosmos scripts' engines in (internal): a run's steps as JSON
    /// lines on standard input, its answers on standard output, until the input ends.
    #[command(hide = true)]
    ScriptHost,
}

#[derive(clap::Args)]
struct TokenArgs {
    /// A role the token's principal holds: a built-in data role's name (`Storage Blob Data
    /// Reader`, `Cosmos DB Built-in Data Contributor`, ...) or id, or a custom role of the
    /// server's identity file. Repeat for several.
    #[arg(long)]
    role: Vec<String>,
    /// Where the roles hold: `/` (the account), `/blobServices/default/containers/{c}`,
    /// `/queueServices/default/queues/{q}`, `/tableServices/default/tables/{t}`, `/dbs/{d}`,
    /// `/dbs/{d}/colls/{c}`, or an Azure resource id.
    #[arg(long, default_value = "/")]
    scope: String,
    /// The principal's object id (`oid`). Default: a new one.
    #[arg(long)]
    principal: Option<String>,
    /// The audience (`aud`). Default: Storage's (`https://storage.azure.com`), or Cosmos
    /// DB's (`https://cosmos.azure.com`) when every role is a Cosmos DB one.
    #[arg(long)]
    audience: Option<String>,
    /// Seconds the token holds.
    #[arg(long, default_value_t = 3600)]
    lifetime: u64,
    /// The data directory of the server that is to take it.
    #[arg(long, env = "IFMATCH_DATA", default_value = "./data")]
    data: PathBuf,
    /// The --backend of the fleet that is to take it (Redis, a bucket): its development
    /// issuer is kept there, for every instance.
    #[arg(long, env = "IFMATCH_BACKEND")]
    backend: Option<String>,
    /// Print the development issuer's public keys (a JSON Web Key Set) instead of a token:
    /// what the Worker is given to take its tokens (`DEV_ISSUER_JWKS`).
    #[arg(long, conflicts_with_all = ["role", "principal", "audience"])]
    jwks: bool,
}

#[derive(clap::Args)]
struct LockWatch {
    /// Seconds between SIGTERM and SIGKILL.
    #[arg(long, value_parser = seconds_or_zero)]
    grace: Duration,
}

#[derive(clap::Args)]
struct LockArgs {
    /// The blob: `container/blob` below the connection string's endpoint, or its URL (with
    /// a SAS, or below the connection string's BlobEndpoint).
    #[arg(long)]
    blob: String,
    /// The account: a connection string, as Azure and Azurite give them.
    #[arg(
        long,
        env = "IFMATCH_CONNECTION_STRING",
        default_value = "UseDevelopmentStorage=true",
        hide_default_value = false
    )]
    connection_string: String,
    /// The lease's duration in seconds (15 to 60): how long after this process dies another
    /// may take it.
    #[arg(long, default_value_t = 15)]
    duration: u64,
    /// With `lock`: give up (exit 73) after this many seconds. Without it: wait.
    #[arg(long, value_parser = seconds)]
    timeout: Option<Duration>,
    /// Seconds the command's processes have between SIGTERM and SIGKILL when they must stop
    /// (a lost lease overlaps the next holder by at most this).
    #[arg(long, default_value = "10", value_parser = seconds_or_zero)]
    grace: Duration,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

#[derive(clap::Args)]
struct Check {
    /// The data directory.
    #[arg(long, env = "IFMATCH_DATA", default_value = "./data")]
    data: PathBuf,
}

/// How a write to a Redis --backend is acknowledged.
#[derive(clap::Args)]
struct ReplicaArgs {
    /// With a Redis --backend: acknowledge each write only once this many replicas have it
    /// (Redis's WAIT, within 1 s; a write not replicated in time is answered 503, its outcome
    /// unknown). 0, the default, acknowledges it once the master has it, and a failover may
    /// lose the last writes (docs/fleet.md).
    #[arg(long, env = "IFMATCH_REDIS_REPLICAS", default_value_t = 0)]
    redis_replicas: usize,
}

#[derive(clap::Args)]
struct Proxy {
    /// The address to listen on.
    #[arg(long, env = "IFMATCH_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// How many threads serve clients, each with its own runtime, listening socket
    /// (SO_REUSEPORT) and pool of origin connections; the cache, versions and write locks are
    /// shared. Default: one per core.
    #[arg(long, env = "IFMATCH_THREADS")]
    threads: Option<usize>,
    #[command(flatten)]
    options: ProxyOptions,
    /// Share versions and write locks with other proxies through Redis
    /// (`redis://HOST:PORT/DB`, `redis+sentinel://H1:P1,H2:P2/MASTER/DB` or
    /// `redis+cluster://H1:P1,H2:P2`). The 304 cache then trusts what it remembers for
    /// --cache-ttl (default 1 s): how long a write through another proxy may be answered 304
    /// with the old tag here.
    #[arg(long, env = "IFMATCH_BACKEND")]
    backend: Option<String>,
    #[command(flatten)]
    replicas: ReplicaArgs,
    /// With --backend: how long, in seconds, a write lock outlives a proxy that died holding
    /// it (a live proxy renews its locks).
    #[arg(long, env = "IFMATCH_LOCK_TTL", default_value = "10", value_parser = seconds)]
    lock_ttl: Duration,
    #[command(flatten)]
    limits: ifmatch_server::Limits,
}

#[derive(clap::Args)]
struct Serve {
    /// The address to listen on.
    #[arg(long, env = "IFMATCH_LISTEN", default_value = "127.0.0.1:10000")]
    listen: SocketAddr,
    /// How many threads serve the blob front, each with its own runtime and listening socket
    /// (SO_REUSEPORT); the records, caches and backends are shared. Default: one per core.
    #[arg(long, env = "IFMATCH_THREADS")]
    threads: Option<usize>,
    #[command(flatten)]
    options: ifmatch_server::Options,
    /// The Table service's address (a listener of its own, as the emulators have). Without
    /// it, port 10002 on --listen's address, skipped with a warning if that port is taken;
    /// `off`: no Table service.
    #[arg(long, env = "IFMATCH_TABLE_LISTEN")]
    table_listen: Option<String>,
    /// The Queue service's address (a listener of its own, as the emulators have). Without
    /// it, port 10001 on --listen's address, skipped with a warning if that port is taken;
    /// `off`: no Queue service.
    #[arg(long, env = "IFMATCH_QUEUE_LISTEN")]
    queue_listen: Option<String>,
    /// The Cosmos DB (NoSQL API, gateway mode) endpoint's address. Without it, port 8081 on
    /// --listen's address (the emulator's), skipped with a warning if that port is taken;
    /// `off`: no Cosmos endpoint.
    #[arg(long, env = "IFMATCH_COSMOS_LISTEN")]
    cosmos_listen: Option<String>,
    /// Serves every endpoint (blobs, queues, tables, Cosmos DB) over HTTPS: with --tls-cert
    /// and --tls-key when given, else with a self-signed certificate for localhost and the
    /// listen address, made on first start under the data directory (`tls/cert.pem`, printed
    /// at start: the file a client is told to trust). The SDKs send bearer tokens over HTTPS
    /// only.
    #[arg(long, env = "IFMATCH_HTTPS")]
    https: bool,
    /// Serves the Cosmos DB endpoint alone over HTTPS, as its emulator does (the certificate as
    /// --https has it).
    #[arg(long, env = "IFMATCH_COSMOS_HTTPS")]
    cosmos_https: bool,
    /// The certificate chain (PEM) of the endpoints served over HTTPS; implies --https.
    #[arg(long, env = "IFMATCH_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "IFMATCH_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The data directory: blobs, their records and leases, tables. Created if missing; one
    /// server at a time.
    #[arg(long, env = "IFMATCH_DATA", default_value = "./data")]
    data: PathBuf,
    /// Share records, leases and write ordering with other instances through Redis
    /// (`redis://HOST:PORT/DB`, `redis+sentinel://H1:P1,H2:P2/MASTER/DB` or
    /// `redis+cluster://H1:P1,H2:P2`); blob bytes stay under --data, which they all must share,
    /// unless --store puts them in an object store. Without it, records are in the data
    /// directory, for this one server.
    #[arg(long, env = "IFMATCH_BACKEND")]
    backend: Option<String>,
    #[command(flatten)]
    replicas: ReplicaArgs,
    /// Keep blob bytes in an object store: `s3://bucket/prefix`, `az://container/prefix`,
    /// `gs://bucket/prefix`, `file:///path`, `memory://`. Credentials and endpoints from the
    /// store's usual variables (`AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, `AWS_ACCESS_KEY_ID`, ...,
    /// `AZURE_STORAGE_*`, `GOOGLE_*`). With --backend, --data then holds only this
    /// instance's own state, never shared.
    #[arg(long, env = "IFMATCH_STORE")]
    store: Option<String>,
    /// The storage accounts and their base64 keys, `name:key[,key2]` separated by `;` (the
    /// first is the default account). Without it (or --accounts-file), the development
    /// account `devstoreaccount1` with its published key, as every Azure emulator serves.
    #[arg(long, env = "IFMATCH_ACCOUNTS", conflicts_with = "accounts_file")]
    accounts: Option<String>,
    /// A file of accounts, one `name:key[,key2]` per line (`#` starts a comment).
    #[arg(long, env = "IFMATCH_ACCOUNTS_FILE")]
    accounts_file: Option<PathBuf>,
    /// Whose Entra ID bearer tokens are taken and what their principals may do: a JSON file of
    /// trusted issuers (their keys as JWKS files), custom roles and role assignments (see
    /// docs/auth.md). The development issuer (`ifmatch token`) is trusted with or without it.
    #[arg(long, env = "IFMATCH_IDENTITY")]
    identity: Option<PathBuf>,
    /// The other servers copies may read their sources from (Put Blob From URL, Copy Blob,
    /// Put Block From URL, Append Block From URL): hosts (`host` or `host:port`) separated by
    /// commas, or `*` for any. None by default: a server that fetches any URL a client names
    /// reaches what only it may.
    #[arg(long, env = "IFMATCH_COPY_FROM")]
    copy_from: Option<String>,
}

/// The stack of the thread a script host runs engines on (as the server's own script threads).
const SCRIPT_STACK: usize = 16 << 20;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // A script's run is held to its memory by what its thread holds.
    ifmatch_cosmos::script::measure_memory_with(ifmatch_server::allocator::held);
    if let Command::ScriptHost = cli.command {
        return script_host();
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(cli))
}

/// Serves script engines' steps on standard input and output, on a thread of [`SCRIPT_STACK`].
fn script_host() -> anyhow::Result<()> {
    let host = std::thread::Builder::new()
        .name("ifmatch-script".into())
        .stack_size(SCRIPT_STACK)
        .spawn(|| {
            let input = std::io::stdin().lock();
            ifmatch_cosmos::script::serve_steps(input, std::io::stdout().lock())
        })?;
    let served = host
        .join()
        .map_err(|_| anyhow::anyhow!("the script host panicked"))?;
    Ok(served?)
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    // The TLS of the object stores' clients (reqwest's, through object_store), which take the
    // process's provider: ring, as every other TLS of this binary.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // With transparent huge pages on `always` (common on servers), the kernel backs each of
    // the allocator's arenas touched by a thread with 2 MiB pages: streaming 10 MiB through the
    // proxy raised peak RSS by 12 MiB instead of 1. Memory is what an operator sizes for, so
    // this process keeps to 4 KiB pages, as Redis does.
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_thp_disable(true) {
        eprintln!(
            "ifmatch: could not turn transparent huge pages off ({e}); memory may grow in 2 MiB steps"
        );
    }
    // The access log is on or off by its flag, whatever the level asked for the rest.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info".into())
        .add_directive("ifmatch::access=info".parse()?);
    let log = tracing_subscriber::fmt().with_env_filter(filter);
    if cli.log_json {
        log.json().flatten_event(true).init();
    } else {
        log.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .init();
    }
    match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Proxy(args) => proxy(args).await,
        Command::Check(args) => check(args),
        Command::Lock(args) => lock(args, true).await,
        Command::Leader(args) => lock(args, false).await,
        Command::Token(args) => token(args).await,
        Command::LockWatch(args) => {
            std::process::exit(ifmatch_server::lock::watch(args.grace).await)
        }
        Command::ScriptHost => unreachable!("served before the runtime starts"),
    }
}

async fn lock(args: LockArgs, with_timeout: bool) -> anyhow::Result<()> {
    let blob = ifmatch_server::lock::blob(&args.connection_string, &args.blob)?;
    let timeout = args.timeout.filter(|_| with_timeout);
    let duration = Duration::from_secs(args.duration);
    let code =
        ifmatch_server::lock::run(&blob, duration, timeout, args.grace, &args.command).await?;
    std::process::exit(code);
}

async fn token(args: TokenArgs) -> anyhow::Result<()> {
    use ifmatch_azure::token::Carried;
    let choice = ifmatch_server::Choice::parse(&args.data, args.backend.as_deref(), None)?;
    let issuer = ifmatch_server::identity::dev_issuer(&choice, &args.data).await?;
    if args.jwks {
        println!("{}", issuer.jwks());
        return Ok(());
    }
    let cosmos = !args.role.is_empty() && args.role.iter().all(|r| r.starts_with("Cosmos"));
    let audience = args.audience.unwrap_or_else(|| match cosmos {
        true => "https://cosmos.azure.com".into(),
        false => ifmatch_azure::auth::STORAGE_AUDIENCE.into(),
    });
    let roles = (args.role.iter())
        .map(|role| Carried {
            role: role.clone(),
            scope: args.scope.clone(),
        })
        .collect();
    let principal = (args.principal).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let lifetime = Duration::from_secs(args.lifetime);
    let now = std::time::SystemTime::now();
    println!(
        "{}",
        issuer.mint(&principal, &audience, roles, now, lifetime)
    );
    Ok(())
}

fn check(args: Check) -> anyhow::Result<()> {
    let data = args.data.display();
    let report = ifmatch_server::local::check::check(&args.data)
        .with_context(|| format!("checking {data}"))?;
    for damage in &report.damage {
        println!("DAMAGED {damage}");
    }
    println!(
        "{data}: {} containers, {} blobs ({} bytes) verified, {} damaged, {} orphaned objects",
        report.containers,
        report.blobs,
        report.bytes,
        report.damage.len(),
        report.orphans
    );
    if !report.damage.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}

/// What `ifmatch serve` is told, as the server's options; `issuer` is the development issuer
/// of its backends.
fn serve_options(args: &Serve, issuer: &DevIssuer) -> anyhow::Result<ifmatch_server::Options> {
    let mut options = args.options.clone();
    options.limits.max_connections =
        ifmatch_server::raise_descriptor_limit(options.limits.max_connections);
    if let Some(hosts) = &args.copy_from {
        let allowed = ifmatch_blob::copy_origin::Allowed::parse(hosts)
            .map_err(|e| anyhow::anyhow!("--copy-from: {e}"))?;
        options.copy_origins = Some(ifmatch_server::copy_origins::HttpOrigins::new(allowed)?);
    }
    options.accounts = match (&args.accounts, &args.accounts_file) {
        (Some(text), _) => Accounts::parse(text).map_err(|e| anyhow::anyhow!("--accounts: {e}"))?,
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Accounts::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        }
        (None, None) => Accounts::default(),
    };
    let identity = ifmatch_server::identity::identity(issuer, args.identity.as_deref())?;
    options.accounts = options
        .accounts
        .with_identity(std::sync::Arc::new(identity));
    Ok(options)
}

/// The TLS of the endpoints served over HTTPS (`cosmos`: of the Cosmos endpoint, which
/// --cosmos-https serves so alone), if asked for: the operator's certificate, or one made and
/// kept under the data directory for localhost and the listen address.
fn https(args: &Serve, address: std::net::SocketAddr, cosmos: bool) -> anyhow::Result<Tls> {
    let certificate = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Certificate::Given(cert.clone(), key.clone()),
        _ if args.https || cosmos && args.cosmos_https => {
            let names = vec!["localhost".to_owned(), address.ip().to_string()];
            Certificate::SelfSigned(args.data.join("tls"), names)
        }
        _ => return Ok(None),
    };
    let (config, path) = certificate.config().context("the HTTPS certificate")?;
    tracing::info!("HTTPS with the certificate {}", path.display());
    Ok(Some(config))
}

/// The scheme of endpoints served with `tls`.
fn scheme_of(tls: &Tls) -> &'static str {
    if tls.is_some() { "https" } else { "http" }
}

/// The TLS a listener is served with, if any.
type Tls = Option<std::sync::Arc<rustls::ServerConfig>>;

async fn serve(args: Serve) -> anyhow::Result<()> {
    // The backends, from their URLs, parsed once: one way to open them, whichever they are.
    let choice =
        ifmatch_server::Choice::parse(&args.data, args.backend.as_deref(), args.store.as_deref())?
            .with_redis_replicas(args.replicas.redis_replicas)?;
    let what = choice.describe();
    // A data directory used the other way is refused before any backend is reached.
    choice
        .check_data()
        .with_context(|| format!("opening {what}"))?;
    let issuer = ifmatch_server::identity::dev_issuer(&choice, &args.data)
        .await
        .with_context(|| format!("the development issuer of {what}"))?;
    let options = serve_options(&args, &issuer)?;
    if let Some(identity) = options.accounts.identity() {
        tokio::spawn(ifmatch_server::identity::keep_keys(identity));
    }
    let blobs = ifmatch_server::bind_threads(args.listen, threads(args.threads))
        .with_context(|| format!("listening on {}", args.listen))?;
    let address = blobs[0].local_addr()?;
    let tables =
        ifmatch_server::listen_beside("table-listen", args.table_listen.as_deref(), address, 10002)
            .await?;
    let queues =
        ifmatch_server::listen_beside("queue-listen", args.queue_listen.as_deref(), address, 10001)
            .await?;
    let cosmos = ifmatch_server::listen_beside(
        "cosmos-listen",
        args.cosmos_listen.as_deref(),
        address,
        8081,
    )
    .await?;
    let tls = https(&args, address, false)?;
    let scheme = scheme_of(&tls);
    let table_address = tables.as_ref().map(TcpListener::local_addr).transpose()?;
    let table_endpoint = table_address.map(|a| format!("{scheme}://{a}"));
    let queue_address = queues.as_ref().map(TcpListener::local_addr).transpose()?;
    let queue_endpoint = queue_address.map(|a| format!("{scheme}://{a}"));
    for account in options.accounts.iter() {
        println!(
            "{}",
            options.accounts.connection_string_with(
                account,
                &format!("{scheme}://{address}"),
                table_endpoint.as_deref(),
                queue_endpoint.as_deref()
            )
        );
    }
    let cosmos = match cosmos {
        Some(listener) => {
            let address = listener.local_addr()?;
            let tls = https(&args, address, true)?;
            let endpoint = format!("{}://{address}", scheme_of(&tls));
            println!("{}", ifmatch_cosmos::connection_string(&endpoint));
            // Scripts' engines in processes of this binary: one whose script overflows the
            // engine's stack ends its run, not the server.
            let program = std::env::current_exe().context("finding this binary for scripts")?;
            ifmatch_cosmos::script::run_engines_in(ifmatch_server::script_hosts::ScriptHosts::new(
                program,
            ));
            Some((listener, tls))
        }
        None => None,
    };
    if options.anonymous {
        tracing::warn!(
            "--anonymous: requests without credentials may change anything; for development only"
        );
    }
    let served = ifmatch_server::open_backends(&choice, options.clone())
        .await
        .with_context(|| format!("opening {what}"))?;
    match table_address {
        Some(tables) => tracing::info!(
            "ifmatch listening on {scheme}://{address}, tables on {scheme}://{tables} ({what})"
        ),
        None => tracing::info!("ifmatch listening on {scheme}://{address} ({what})"),
    }
    let listeners = ifmatch_server::Listeners {
        blobs,
        tables,
        queues,
        cosmos,
        tls,
    };
    ifmatch_server::serve(listeners, served, options, shutdown_signal()).await?;
    tracing::info!("ifmatch stopped");
    Ok(())
}

/// How many threads serve clients: as many as asked, or one per core.
fn threads(asked: Option<usize>) -> usize {
    asked.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    })
}

async fn proxy(args: Proxy) -> anyhow::Result<()> {
    let mut limits = args.limits;
    limits.max_connections = ifmatch_server::raise_descriptor_limit(limits.max_connections);
    #[cfg_attr(not(feature = "fleet"), allow(unused_mut))]
    let mut options = args.options;
    let upstream = options.upstream.clone();
    let at = (args.listen, threads(args.threads));
    match &args.backend {
        None => {
            let proxy = ifmatch_server::proxy::Proxy::new(&options)?;
            serve_proxy(proxy, at, limits, format!("upstream: {upstream}")).await?;
        }
        #[cfg(feature = "fleet")]
        Some(backend) => {
            options.cache_ttl = options.cache_ttl.or(Some(Duration::from_secs(1)));
            let connection = ifmatch_redis::connect(backend)
                .await
                .with_context(|| format!("connecting to {backend}"))?
                .with_replicas(args.replicas.redis_replicas)
                .await
                .with_context(|| format!("connecting to {backend}"))?;
            let versions =
                ifmatch_redis::RedisVersions::new(connection.clone(), "ifmatch:versions:");
            let versions = ifmatch_tower::Shared::new(versions).lock_ttl(args.lock_ttl);
            let proxy = ifmatch_server::proxy::Proxy::with_versions(&options, versions)?;
            // What one instance's cache forgets (a write, a purge), every instance forgets.
            let channel = "ifmatch:invalidations";
            ifmatch_redis::share_invalidations(connection, channel, proxy.cache().clone());
            let serving = format!("upstream: {upstream}, backend: {backend}");
            serve_proxy(proxy, at, limits, serving).await?;
        }
        #[cfg(not(feature = "fleet"))]
        Some(backend) => anyhow::bail!(
            "--backend {backend}: this build has no Redis (built without the `fleet` feature)"
        ),
    }
    tracing::info!("ifmatch stopped");
    Ok(())
}

/// Serves `proxy` on `threads` threads listening on `listen` until a signal. Bound once the
/// proxy is ready (its disk tier cleared of what a kill left half written), so that whoever
/// sees the port open sees the proxy it serves.
async fn serve_proxy<V: ifmatch_tower::VersionStore + Clone>(
    proxy: ifmatch_server::proxy::Proxy<V>,
    (listen, threads): (SocketAddr, usize),
    limits: ifmatch_server::Limits,
    serving: String,
) -> anyhow::Result<()> {
    let listeners = ifmatch_server::bind_threads(listen, threads)
        .with_context(|| format!("listening on {listen}"))?;
    let address = listeners[0].local_addr()?;
    tracing::info!("ifmatch proxy listening on http://{address} ({serving})");
    ifmatch_server::proxy::serve_threads(listeners, proxy, limits, shutdown_signal()).await?;
    Ok(())
}

/// SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing requests in flight");
}
