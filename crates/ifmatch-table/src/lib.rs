//! The Table service's dialect, written once for every backend and both fronts (native and
//! Worker): an entity's typed values ([`Value`], the EDM types) and the `$filter` of Query
//! Entities ([`Filter`]), parsed with the limits Azure sets and evaluated against an
//! [`Entity`]. Pure: no I/O, no clock.
//!
//! This crate grows into the Table front (issue "Table storage"); what is here now is the part
//! every other part reads: the values and the filter.

mod filter;
mod value;

pub use filter::{Filter, FilterError, MAX_COMPARISONS};
pub use value::{DateTime, Entity, Value};
