//! Runnable examples of ifmatch: `cargo run -p examples --example axum-docs`,
//! `cargo run -p examples --example hyper-hello`, and `bench-app`, the app that
//! `scripts/bench-tower` measures.
