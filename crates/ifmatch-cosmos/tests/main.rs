//! The crate's tests, each file a module of this one test program (one link of the crate and
//! the tests' dependencies, not one a file): `cargo test -p ifmatch-cosmos --test cosmos FILE::`
//! runs one file's tests.

mod common;

mod computed;
mod group_commit;
mod protocol;
mod resource_tokens;
mod throughput;
