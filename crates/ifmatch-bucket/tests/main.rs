//! The crate's tests, each file a module of this one test program (one link of the crate and
//! the tests' dependencies, not one a file): `cargo test -p ifmatch-bucket --test bucket FILE::`
//! runs one file's tests.

mod common;
mod dying;
#[path = "../../ifmatch-tower/tests/fleet/mod.rs"]
mod fleet;

mod conformance;
mod crash;
mod index;
mod layer_fleet;
mod resent;
mod scans;
mod versions;
