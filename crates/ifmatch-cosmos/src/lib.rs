//! Azure Cosmos DB's NoSQL API in gateway mode, the dialect the official SDKs speak: an
//! account, its databases, their containers and the documents in them, each with an `_etag`
//! that a write replaces and `If-Match` / `If-None-Match` test (412 when someone wrote first,
//! 304 when nothing changed). Written once for every backend: documents are kept through the
//! Table front's [`Tables`](ifmatch_table::Tables), a compare-and-swap over keys in order,
//! which every backend (local disk, Redis, Durable Objects) already offers. Pure: no I/O but
//! the backend's, no clock but the [`Env`](ifmatch_azure::Env)'s.

pub mod address;
pub mod auth;
pub mod charge;
pub mod computed;
pub mod document;
pub mod endpoint;
pub mod failure;
mod feed_entries;
pub mod front;
pub mod hashed_key;
pub mod patch;
mod policies;
pub mod query;
pub mod ranges;
pub mod resource_token;
pub mod script;
pub mod sql;
pub mod throughput;
mod ttl;
mod unique;
mod versions;
mod yield_now;

pub use endpoint::{EMULATOR_ACCOUNT, EMULATOR_KEY, Endpoint, MAX_BODY, connection_string};
