//! Where ifmatch's fronts keep what they store: one home for every backend, as object_store
//! keeps its stores behind features, so a library user takes the backend without the binary.
//!
//! - memory: [`memory`] (records, objects and a manual clock, beside the traits in
//!   `ifmatch-blob`, for tests and examples);
//! - the local disk, always: [`local`] (records and objects under one data directory,
//!   durable, the embedded default of `ifmatch serve`);
//! - object stores, feature `object-store`: [`bucket`] (blob bytes in S3, Azure, GCS, a
//!   directory or memory, through `object_store`);
//! - Redis, feature `redis`: records and leases shared by a fleet (`ifmatch-redis`);
//! - the Durable Object and R2 are the Worker's own (`wasm/`): they need its runtime.
//!
//! [`Choice`] reads which of them to use from URLs, once, and [`Choice::open`] opens them as
//! [`AnyRecords`], [`AnyObjects`] and, for the Table front, [`AnyTables`].
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use ifmatch_backends::{Choice, Sizes};
//! // The embedded default: records and bytes under ./data.
//! let choice = Choice::parse("./data", None, None).map_err(std::io::Error::other)?;
//! let opened = choice.open(&Sizes::default()).await?;
//! # let _ = opened;
//! # Ok(()) }
//! ```

mod any;
#[cfg(feature = "object-store")]
pub mod bucket;
mod byte_cache;
mod choice;
pub mod local;

pub use any::{AnyObjects, AnyReader, AnyRecords, AnyTables};
pub use choice::{Choice, ChoiceError, Opened, Sizes};
pub use ifmatch_blob::memory;
#[cfg(feature = "redis")]
pub use ifmatch_redis::{RedisRecords, RedisTables};
