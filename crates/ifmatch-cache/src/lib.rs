//! A shared HTTP cache (RFC 9111) as a Tower layer: responses stored whole, served while fresh
//! without the inner service, revalidated with their validators when stale, invalidated by
//! unsafe methods.
//!
//! The rules of storing and reusing (storability, `Cache-Control` of requests and responses,
//! freshness from `s-maxage`, `max-age`, `Expires` and heuristics, `Vary`, `Authorization`, `Age`,
//! the revalidation request and the update of stored headers by a 304) are
//! [`http_cache_semantics`]'s, in its shared-cache mode, but where `policy.rs` says why not;
//! this module stores, looks up and plumbs.
//!
//! Put it inside [`ConditionalLayer`]: the outer layer answers the
//! client's own conditions (304, 412) from what this one serves, and keeps writes atomic.
//!
//! ```
//! use ifmatch_cache::SharedCacheLayer;
//! use ifmatch_tower::ConditionalLayer;
//! use tower::ServiceBuilder;
//! # async fn handler(_: http::Request<http_body_util::Empty<bytes::Bytes>>)
//! #     -> Result<http::Response<http_body_util::Full<bytes::Bytes>>, std::convert::Infallible> {
//! #     Ok(http::Response::new(http_body_util::Full::new(bytes::Bytes::from_static(b"hi"))))
//! # }
//! let service = ServiceBuilder::new()
//!     .layer(ConditionalLayer::new())
//!     .layer(SharedCacheLayer::new().memory(64 << 20))
//!     .service_fn(handler);
//! # let _ = service;
//! ```
//!
//! - `layer.rs`: the layer and what it can be told;
//! - `service.rs`: a request's way through the store to the inner service and back;
//! - `key.rs`: the keys a response is stored under, and which requests it answers;
//! - `miss.rs`: a miss's answer, stored on its way back;
//! - `hit.rs`: a hit, a stored response served (whole, a part, or a 304);
//! - `hit_head.rs`: the head of a fresh hit, made by the policy once and reused;
//! - `entry.rs`: one stored response;
//! - `memory.rs`: the memory tier, the stored responses by key, weighed by their bytes;
//! - `disk.rs`: the disk tier, whose files survive a restart whole or not at all;
//! - `disk_writer.rs`: its writes, by a thread of its own from a bounded queue;
//! - `stats.rs`: what the cache did and holds, for an operator;
//! - `cache_status.rs`: the `Cache-Status` field of each answer;
//! - `cached_body.rs`: the body of the cache's answers;
//! - `entry_body.rs`: a stored body, read by every client from its first byte while it arrives;
//! - `collapse.rs`: one request to the inner service for concurrent misses of one key;
//! - `range.rs`: a byte range of a stored response, for a request with `Range`;
//! - `language.rs`: a response chosen by `Accept-Language`, reused for the same first choice;
//! - `coding.rs`: a response chosen by `Accept-Encoding`, reused for requests that take its coding;
//! - `weights.rs`: the weighted lists those two read;
//! - `received.rs`: `If-Modified-Since` against a stored response with no validator;
//! - `revalidate.rs`: asking whether a stale response is current, in the foreground or not;
//! - `freshness.rs`: how long a response is fresh, and when a stale one may be served;
//! - `targeted.rs`: `CDN-Cache-Control` and `Surrogate-Control`, this cache's own directives;
//! - `unkeyed.rs`: fields that would rewrite a stored request's target or method, removed;
//! - `policy.rs`: where this cache and the crate part, and why;
//! - `lazy_policy.rs`: the crate's policy made when first needed, the usual response judged
//!   without it.

//!
//! [`ConditionalLayer`]: ifmatch_tower::ConditionalLayer

mod cache_status;
mod cached_body;
mod coding;
mod collapse;
mod disk;
mod disk_writer;
mod entry;
mod entry_body;
mod freshness;
mod generations;
mod hit;
mod hit_head;
mod key;
mod language;
mod layer;
mod lazy_policy;
mod memory;
mod miss;
mod policy;
mod range;
mod received;
mod revalidate;
mod service;
mod stats;
mod targeted;
mod tee;
mod unkeyed;
mod weights;

pub use cached_body::CachedBody;
pub use entry_body::Reader;
pub use layer::{SharedCacheHandle, SharedCacheLayer};
pub use memory::Forgotten;
pub use range::is_part_as_whole;
pub use service::SharedCache;
pub use stats::CacheReport;
pub use tee::Tee;
