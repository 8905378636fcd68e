//! The crate's tests, each file a module of this one test program (one link of the crate and
//! the tests' dependencies, not one a file): `cargo test -p ifmatch-blob --test blob FILE::`
//! runs one file's tests.

mod common;

mod append;
mod change_feed;
mod container_protection;
mod copy;
mod deleted_containers;
mod immutability;
mod lease_table;
mod page_blobs;
mod precondition_table;
mod properties;
mod protocol;
mod snapshots;
mod soft_delete;
mod tags;
mod unserved_conditions;
mod versions;
