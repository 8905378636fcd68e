#![doc = include_str!("../README.md")]

mod body;
mod cache;
pub use ifmatch_core::cache_markers;
mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
mod encoding;
mod future;
mod layer;
mod read;
mod read_answer;
mod recent;
mod refusal;
mod resource;
mod service;
mod shared;
pub mod source;
mod store;
mod validators;
mod write;

pub use ifmatch_core::BoxError;

pub use body::ConditionalBody;
pub use future::ResponseFuture;
pub use ifmatch_core::precondition::Validators;
pub use layer::ConditionalLayer;
pub use service::Conditional;
pub use shared::{Recorded, Shared, SharedBackend, SharedError, SharedGuard};
pub use source::Current;
pub use store::{MemoryGuard, MemoryVersions, VersionStore};
pub use write::INVALIDATES;
