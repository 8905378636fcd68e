//! A client of the blob dialect (`ifmatch serve`, its Worker, Azurite, Azure) and the patterns
//! of Azure's concurrency docs, each a small typed API with its failure modes explicit:
//!
//! - [`update`]: read-modify-write with `If-Match`, exponential backoff with full jitter,
//!   create-only when the blob is missing;
//! - [`LeaseGuard`]: a lease renewed in the background, lost loudly, released on drop;
//! - [`Lock`]: a lease waited for, with a timeout;
//! - [`LeaderElection`]: whoever holds the lease leads, and learns when it no longer does;
//! - [`WorkQueue`]: items hidden by a lease while a worker processes them;
//! - [`ReadCache`]: conditional downloads (`If-None-Match`, 304).
//!
//! ```no_run
//! # async fn run() -> ifmatch_client::Result<()> {
//! use ifmatch_client::{Backoff, Client, update};
//! let client = Client::from_connection_string("UseDevelopmentStorage=true")?;
//! let counter = client.blob("jobs", "counter");
//! let done = update(&counter, &Backoff::default(), None, |old| {
//!     let n: u64 = old.and_then(|b| std::str::from_utf8(b).ok()?.parse().ok()).unwrap_or(0);
//!     Some((n + 1).to_string().into_bytes())
//! })
//! .await?;
//! println!("now {:?} after {} attempts", done.bytes, done.attempts);
//! # Ok(()) }
//! ```

mod cache;
mod client;
mod error;
pub mod https;
mod lease;
mod queue;
mod update;

pub use cache::ReadCache;
pub use client::{Blob, BlobClient, Client, Conditions};
pub use error::{Error, Result};
pub use ifmatch_core::backoff::Backoff;
pub use lease::{LeaderElection, LeaseGuard, Lock};
pub use queue::{Item, WorkQueue};
pub use update::{Updated, update};
