//! Runnable examples of ifmatch: `cargo run -p examples --example axum-docs` and
//! `cargo run -p examples --example hyper-hello`.
