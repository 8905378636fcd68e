//! ifmatch's distributed mode with nothing but a bucket: what a fleet shares, kept in the
//! object store itself, every change one conditional PUT (`If-Match` on the object's ETag, or
//! create-only), retried when another instance wrote first. Optimistic concurrency with ETags,
//! the pattern ifmatch is about, applied to its own state.
//!
//! - [`BucketRecords`]: the blob front's records, leases and staged blocks
//!   (`ifmatch serve --backend s3://...`);
//! - [`BucketTables`]: the Table front's entities and the Cosmos front's documents, a commit of
//!   several made atomic by an intent;
//! - [`BucketVersions`]: the Tower layer's version backend (through [`ifmatch_tower::Shared`]):
//!   versions every instance sees, and a per-key write lock that expires when its holder dies,
//!   with a fencing token.
//!
//! Any [`ObjectStore`](object_store::ObjectStore) whose conditional puts are atomic serves:
//! S3 (with `aws_conditional_put=etag`, object_store's default), Azure Blob, Google Cloud
//! Storage, R2, `ifmatch serve` itself (through the Azure backend), or memory. The local
//! filesystem backend of `object_store` has no conditional update: [`BucketRecords::check`] and
//! [`BucketVersions::check`] refuse it at start (`ifmatch serve` calls the first), and every
//! change fails on it with the same error.

mod index;
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
