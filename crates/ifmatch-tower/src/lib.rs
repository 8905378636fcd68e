//! A Tower layer for conditional requests (work in progress).
//!
//! [`ConditionalLayer`] gives any axum or hyper service strong SHA-256 ETags, 304 answers from
//! a moka cache without running the handler, and atomic `If-Match` / `If-Unmodified-Since` /
//! `If-None-Match` on writes against a pluggable version backend ([`VersionStore`]).

mod body;
mod cache;
mod future;
mod layer;
mod service;
mod store;

/// A boxed error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub use body::ConditionalBody;
pub use future::ResponseFuture;
pub use layer::{ConditionalLayer, KeyFn};
pub use service::Conditional;
pub use store::{MemoryGuard, MemoryVersions, VersionStore};
