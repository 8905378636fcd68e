#![doc = include_str!("../README.md")]

mod body;
mod cache;
mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
mod encoding;
mod future;
mod keyed;
mod layer;
mod owned;
mod read;
mod read_answer;
mod recent;
mod refusal;
mod resource;
mod service;
pub mod shared_cache;
mod source;
mod store;
mod validators;
mod write;

pub use ifmatch_core::BoxError;

pub use body::ConditionalBody;
pub use future::ResponseFuture;
pub use ifmatch_core::precondition::Validators;
pub use layer::ConditionalLayer;
pub use service::Conditional;
pub use shared_cache::{
    CacheReport, CachedBody, Forgotten, SharedCache, SharedCacheHandle, SharedCacheLayer,
};
pub use source::{Current, Deferred, Uncertain, current_request, validators_of_answer};
pub use store::{MemoryGuard, MemoryVersions, VersionStore};
pub use write::INVALIDATES;
