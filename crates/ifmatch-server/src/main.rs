//! `ifmatch`: Azure Blob Storage's concurrency controls in front of any storage.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ifmatch_blob::DEFAULT_MAX_BODY;
use tokio::net::TcpListener;

#[derive(Parser)]
#[command(
    name = "ifmatch",
    version,
    about = "Conditional requests and leases for HTTP storage"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the blob front: the Azure Blob REST dialect (containers, blobs, conditional
    /// headers, leases) over the local disk.
    Serve(Serve),
}

#[derive(clap::Args)]
struct Serve {
    /// The address to listen on.
    #[arg(long, env = "IFMATCH_LISTEN", default_value = "127.0.0.1:10000")]
    listen: SocketAddr,
    /// The data directory: blobs, their records and leases. Created if missing; one server
    /// at a time.
    #[arg(long, env = "IFMATCH_DATA", default_value = "./data")]
    data: PathBuf,
    /// The largest blob accepted, in bytes; larger uploads answer 413.
    #[arg(long, env = "IFMATCH_MAX_BODY", default_value_t = DEFAULT_MAX_BODY)]
    max_body: u64,
    /// How many blob and container records the metadata cache holds.
    #[arg(long, env = "IFMATCH_CACHE_CAPACITY", default_value_t = 100_000)]
    cache_capacity: u64,
    /// How many bytes of blob content (blobs up to 4 MiB) the byte cache holds.
    #[arg(long, env = "IFMATCH_CACHE_BYTES", default_value_t = 256 << 20)]
    cache_bytes: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    match Cli::parse().command {
        Command::Serve(args) => serve(args).await,
    }
}

async fn serve(args: Serve) -> anyhow::Result<()> {
    let mut options = ifmatch_server::Options::default().max_body(args.max_body);
    options.cache_capacity = args.cache_capacity;
    options.cache_bytes = args.cache_bytes;
    let front = ifmatch_server::open(&args.data, options)
        .with_context(|| format!("opening the data directory {}", args.data.display()))?;
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    tracing::info!(
        "ifmatch listening on http://{} (data: {})",
        listener.local_addr()?,
        args.data.display()
    );
    ifmatch_server::serve(listener, front, shutdown_signal()).await?;
    tracing::info!("ifmatch stopped");
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
