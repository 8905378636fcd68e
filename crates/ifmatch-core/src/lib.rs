//! The conditional-request engine of ifmatch.
//!
//! Everything here is plain, synchronous and free of I/O: it never reads the clock (time is an
//! argument) and depends on no async runtime, so the same rules run in the Tower layer, the
//! native blob server, the Redis backend and a Cloudflare Worker (`wasm32-unknown-unknown`).
//!
//! | concern | where |
//! |---|---|
//! | entity-tags, lists, strong and weak comparison (RFC 9110 8.8.3) | [`EntityTag`], [`EntityTagList`] |
//! | the project's strong ETag: SHA-256 of the bytes, streamed | [`EtagHasher`], [`strong_etag`] |
//! | HTTP dates, whole seconds, three formats | [`date`] |
//! | RFC 9110 13.2 evaluation | [`precondition::rfc9110::evaluate`] |
//! | the conditions every dialect reads, one model | [`precondition::Conditions`] |
//! | the headers of a 304 (RFC 9110 15.4.5) | [`not_modified_headers`] |
//! | one `Range: bytes=` of a representation (RFC 9110 14.1.2) | [`ByteRange`] |
//! | what a layer and a shared cache inside it tell each other | [`cache_markers`] |
//! | the waits between tries of a write that lost a race | [`backoff::Backoff`] |
//!
//! # Example
//!
//! A revalidation, an optimistic-concurrency write that lost the race, and a create-only PUT:
//!
//! ```
//! use http::{HeaderMap, Method, header};
//! use ifmatch_core::precondition::{Outcome, Validators, rfc9110::{Target, evaluate}};
//! use ifmatch_core::strong_etag;
//!
//! let v1 = strong_etag(b"{\"count\":1}");
//! let v2 = strong_etag(b"{\"count\":2}");
//! let current = Validators::etag(v2.clone());
//!
//! let mut get = HeaderMap::new();
//! get.insert(header::IF_NONE_MATCH, v2.to_header_value());
//! assert_eq!(evaluate(&Method::GET, &get, Target::Current(&current)), Outcome::NotModified);
//!
//! let mut stale_put = HeaderMap::new();
//! stale_put.insert(header::IF_MATCH, v1.to_header_value());
//! assert_eq!(
//!     evaluate(&Method::PUT, &stale_put, Target::Current(&current)),
//!     Outcome::PreconditionFailed
//! );
//!
//! let mut create = HeaderMap::new();
//! create.insert(header::IF_NONE_MATCH, "*".parse().unwrap());
//! assert_eq!(evaluate(&Method::PUT, &create, Target::Absent), Outcome::Proceed);
//! assert_eq!(
//!     evaluate(&Method::PUT, &create, Target::Current(&current)),
//!     Outcome::PreconditionFailed
//! );
//! ```

pub mod backoff;
pub mod cache_markers;
mod credentials;
pub mod date;
mod etag;
mod hash;
mod header_list;
pub mod keyed;
mod not_modified;
pub mod owned;
pub mod precondition;
mod range;

pub use credentials::signs_request;
pub use etag::{EntityTag, EntityTagList, InvalidEntityTag};
pub use hash::{EtagHasher, strong_etag};
pub use header_list::header_list;
pub use not_modified::not_modified_headers;
pub use range::ByteRange;

/// The error of a body or a service that may fail in any way: what `http-body` and `tower`
/// users pass around, named once for every crate of ifmatch.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What [`http_body::Body::poll_frame`] returns, for bodies of [`bytes::Bytes`].
pub type FramePoll<E> = std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, E>>>;
