//! The crate's tests, each file a module of this one test program (one link of the crate and
//! the tests' dependencies, not one a file): `cargo test -p ifmatch-tower --test tower FILE::`
//! runs one file's tests.

mod common;

mod as_users_write_it;
mod axum_probe;
mod changes_behind;
mod compression;
mod create_only;
mod go_reference;
mod head;
mod layer;
mod privacy;
mod ranges;
mod reads_never_wait;
mod related;
mod socket;
mod streams;
mod variants;
