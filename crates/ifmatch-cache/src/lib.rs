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
//! A request's way, folder by folder, each floor reading only those below it:
//!
//! - `layer.rs`: the layer and what it can be told;
//! - `service.rs`: a request's way through the store to the inner service and back;
//! - `answer/`: the three ways a request is answered: `hit.rs` (a stored response served,
//!   whole, a part or a 304), `miss.rs` (the inner service's answer, stored on its way back),
//!   `revalidate.rs` (asking whether a stale response is current, in the foreground or not),
//!   and the stored response chosen by `Accept-Language` (`language.rs`) or `Accept-Encoding`
//!   (`coding.rs`);
//! - `tiers/`: where stored responses are kept: `memory.rs` (by key, weighed by their bytes),
//!   `disk.rs` (files that survive a restart whole or not at all) with `disk_writer.rs` (its
//!   writes, by a thread of its own from a bounded queue), `generations.rs` (what was forgotten
//!   while a miss was on its way) and `collapse.rs` (one request to the inner service for
//!   concurrent misses of one key);
//! - `policy.rs`: where this cache and the crate part, and why;
//! - `stored/`: one stored response: `entry.rs`, its body (`entry_body.rs`: read by every
//!   client from its first byte while it arrives; `tee.rs`: copied as it streams;
//!   `cached_body.rs`: the body of the cache's answers) and the head of a fresh hit, made by
//!   the policy once and reused (`hit_head.rs`);
//! - `rules/`: the rules a response is judged by, on their own: its keys and which requests
//!   it answers (`key.rs`), how long it is fresh and when a stale one may be served
//!   (`freshness.rs`), the crate's policy made when first needed (`lazy_policy.rs`),
//!   `CDN-Cache-Control` and `Surrogate-Control` (`targeted.rs`), the fields that would rewrite
//!   a stored request's target or method (`unkeyed.rs`), a byte range (`range.rs`),
//!   `If-Modified-Since` without a validator (`received.rs`), the weighted lists of `Accept-*`
//!   (`weights.rs`) and the `Cache-Status` field (`cache_status.rs`);
//! - `stats.rs`: what the cache did and holds, for an operator.
//!
//! [`ConditionalLayer`]: ifmatch_tower::ConditionalLayer

mod answer;
mod layer;
mod policy;
mod rules;
mod service;
mod stats;
mod stored;
mod tiers;

pub use layer::{SharedCacheHandle, SharedCacheLayer};
pub use rules::range::is_part_as_whole;
pub use service::SharedCache;
pub use stats::CacheReport;
pub use stored::cached_body::CachedBody;
pub use stored::entry_body::Reader;
pub use stored::tee::Tee;
pub use tiers::memory::Forgotten;
