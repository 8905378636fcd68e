//! Criterion benchmarks of ifmatch; see `benches/`. Run with `cargo bench -p ifmatch-benches`.
