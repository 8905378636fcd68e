//! The blob front of ifmatch: Azure Blob Storage's REST dialect for containers, blobs,
//! conditional headers and leases, written once over storage traits.
//!
//! The native server (`ifmatch serve`) and the Cloudflare Worker are thin adapters: each
//! supplies a [`Records`] store (metadata with a compare-and-swap per key), an [`Objects`] store
//! (blob bytes) and an [`Env`] (clock and randomness), and hands requests to [`Front::handle`].
//! The rules that are the blob dialect's are here (its preconditions in [`precondition`], its
//! leases in [`lease`]); accounts, credentials and error codes are every Azure dialect's
//! (`ifmatch-azure`), the conditions' model the core's.
//!
//! ```
//! use ifmatch_azure::ManualEnv;
//! use ifmatch_blob::{Front, memory::{MemoryObjects, MemoryRecords}};
//! use http::{Request, StatusCode};
//! use http_body_util::Full;
//! use bytes::Bytes;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // Anonymous access for the example; a real front checks Shared Key and SAS signatures.
//! let front = Front::new(MemoryRecords::default(), MemoryObjects::default(), ManualEnv::default())
//!     .with_anonymous_access(true);
//! let put = |uri: &str| {
//!     let request = Request::put(uri).header("x-ms-blob-type", "BlockBlob");
//!     request.body(Full::new(Bytes::from_static(b"hello"))).unwrap()
//! };
//! // Path-style, as the emulators serve: the account, the container, the blob.
//! let container = "/devstoreaccount1/box?restype=container";
//! assert_eq!(front.handle(put(container)).await.status(), StatusCode::CREATED);
//! let created = front.handle(put("/devstoreaccount1/box/greeting.txt")).await;
//! assert_eq!(created.status(), StatusCode::CREATED);
//!
//! // Create-only: a second PUT with `If-None-Match: *` finds the blob and answers 409.
//! let mut again = put("/devstoreaccount1/box/greeting.txt");
//! again.headers_mut().insert("if-none-match", "*".parse().unwrap());
//! let conflict = front.handle(again).await;
//! assert_eq!(conflict.status(), StatusCode::CONFLICT);
//! assert_eq!(conflict.headers()["x-ms-error-code"], "BlobAlreadyExists");
//! # }
//! ```

pub mod auth;
mod avro;
mod batch;
mod block_list;
mod body;
mod change;
pub mod change_feed;
mod checksums;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod container_protection;
pub mod copy_origin;
pub mod delegators;
mod enumeration;
mod error_code;
mod front;
mod hashing;
pub mod immutability;
pub mod lease;
pub mod management;
pub mod memory;
mod metadata;
mod operation;
pub mod page_blob;
pub mod precondition;
mod record;
pub mod record_name;
pub mod settings;
pub mod snapshot;
pub mod soft_delete;
mod store;
mod store_error;
pub mod tags;
pub mod version;

pub use body::{Incoming, ResponseBody};
pub use error_code::ErrorCode;
pub use front::{DEFAULT_MAX_BODY, Front};
pub use hashing::HashingBody;
pub use ifmatch_core::ByteRange;
pub use operation::{
    BlockListType, FindOptions, ListOptions, MAX_RESULTS, Operation, PageRangesOptions, Target,
};
pub use record::{
    Appended, Block, Content, Copied, Properties, PublicAccess, Record, Staging, unix_seconds,
};
pub use store::{
    BlockToStage, BoxError, Key, Objects, PutMode, Records, Scan, Span, Staged, StoreError,
    check_len, share_by_copy,
};
