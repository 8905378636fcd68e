//! A Tower layer for conditional requests (work in progress: the version backend).
//!
//! The layer will give any axum or hyper service strong SHA-256 ETags, 304 answers from a moka
//! cache without running the handler, and atomic `If-Match` / `If-Unmodified-Since` /
//! `If-None-Match` on writes. This first part is the version backend it stands on:
//! [`VersionStore`], with the per-key write lock in its contract, and [`MemoryVersions`].

mod store;

pub use store::{BoxError, MemoryGuard, MemoryVersions, VersionStore};
