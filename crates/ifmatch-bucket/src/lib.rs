//! ifmatch's distributed mode with nothing but a bucket: what a fleet shares, kept in the
//! object store itself, every change one conditional PUT (`If-Match` on the object's ETag, or
//! create-only), retried when another instance wrote first. Optimistic concurrency with ETags,
//! the pattern ifmatch is about, applied to its own state.
//!
//! [`BucketVersions`] is the Tower layer's version backend (through
//! [`ifmatch_tower::Shared`]): versions every instance sees, and a per-key write lock that
//! expires when its holder dies, with a fencing token.
//!
//! Any [`ObjectStore`](object_store::ObjectStore) whose conditional puts are atomic serves:
//! S3 (with `aws_conditional_put=etag`), Azure Blob, Google Cloud Storage, R2, `ifmatch serve`
//! itself (through the Azure backend), or memory. The local filesystem backend of
//! `object_store` has no conditional update and is refused at the first write.

mod name;
mod object;
mod records;
mod tables;
#[cfg(feature = "testing")]
pub mod testing;
mod versions;

pub use records::BucketRecords;
pub use tables::BucketTables;
pub use versions::{BucketVersions, VersionsError};
