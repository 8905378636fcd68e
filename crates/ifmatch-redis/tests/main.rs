//! The crate's tests, each file a module of this one test program (one link of the crate and
//! the tests' dependencies, not one a file): `cargo test -p ifmatch-redis --test redis FILE::`
//! runs one file's tests.

mod common;
#[path = "../../ifmatch-tower/tests/fleet/mod.rs"]
mod fleet;

mod cluster;
mod conformance;
mod failover;
mod layer_fleet;
mod replicas;
mod tables;
mod versions;
