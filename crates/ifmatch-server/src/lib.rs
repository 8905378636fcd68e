//! The `ifmatch` server: the blob front of `ifmatch-blob` on hyper 1 and tokio, over the local
//! disk ([`local`]) or with records in Redis; and the reverse proxy ([`proxy`]).
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! let options = ifmatch_server::Options::default();
//! let front = ifmatch_server::open("./data", options.clone())?;
//! // Two threads serve, each with a runtime and a listening socket of its own on the address.
//! let listeners = ifmatch_server::bind_threads("127.0.0.1:10000".parse().unwrap(), 2)?;
//! let stop = async { let _ = tokio::signal::ctrl_c().await; };
//! ifmatch_server::serve(listeners, front, options, stop).await
//! # }
//! ```

pub mod allocator;
pub mod arguments;

pub mod copy_origins;
pub mod cosmos;
mod guards;

pub mod https;
pub mod identity;

pub mod lock;
pub mod metrics;
mod observe;
mod open;
pub mod proxy;
pub mod queues;
pub mod script_hosts;
mod serve;
pub mod tables;

pub use crate::guards::accept::{Limits, bind_threads, raise_descriptor_limit};
#[cfg(feature = "fleet")]
pub use ifmatch_backends::bucket;
pub use ifmatch_backends::local::LocalTables;
pub use ifmatch_backends::local::{DataDir, INLINE_MAX, LocalObjects, LocalRecords};
pub use ifmatch_backends::{AnyObjects, AnyRecords, AnyTables, Choice, Sizes, local};

pub use crate::observe::ObserveOptions;
pub use crate::open::{
    CosmosThroughput, LocalFront, Opened, Options, open, open_backends, open_with_env,
};
pub use crate::serve::{Listeners, listen_beside, serve, sweep};
pub use ifmatch_azure::SystemEnv;
