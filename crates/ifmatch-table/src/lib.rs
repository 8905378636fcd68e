//! The Table service's dialect, written once for every backend and both fronts (native and
//! Worker): an entity's typed values ([`Value`], the EDM types) and the `$filter` of Query
//! Entities ([`Filter`]), parsed with the limits Azure sets and evaluated against an
//! [`Entity`]. Pure: no I/O, no clock.
//!
//! This crate grows into the Table front (issue "Table storage"); what is here now is the part
//! every other part reads: the values, the filter, and what a backend offers ([`Tables`]: a
//! compare-and-swap over one or many entities of a table, all or none), with the in-memory
//! backend and the backends' conformance suite (feature `conformance`).

pub mod auth;
mod base;

mod clock;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod endpoint;
mod error_code;
mod filter;
pub mod front;
pub mod odata;
mod prefer;
mod scoped;
mod store;
mod value;
pub mod write;

pub use base::Base;
pub use clock::Clock;
pub use endpoint::Endpoint;
pub use error_code::ErrorCode;
pub use filter::{Filter, FilterError, MAX_COMPARISONS};
pub use scoped::Scoped;
pub use store::{
    Change, EntityKey, Expected, MemoryTables, Scan, TableError, Tables, satisfied_by, satisfies,
};
pub use value::{DateTime, Entity, Value};
