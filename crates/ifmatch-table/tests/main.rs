//! The crate's tests, each file a module of this one test program (one link of the crate and
//! the tests' dependencies, not one a file): `cargo test -p ifmatch-table --test table FILE::`
//! runs one file's tests.

mod batch;
mod conformance;
mod endpoint;
mod front;
