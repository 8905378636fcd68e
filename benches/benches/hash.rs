//! Hashing throughput of the project's strong ETag, beside `sha2` called directly: the
//! difference is what the wrapper costs. `scripts/hash-ratio` sets the 1 MiB figure beside
//! `openssl speed` measured in the same run.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ifmatch_core::EtagHasher;
use sha2::{Digest, Sha256};

const SIZES: [(&str, usize); 4] = [
    ("4KiB", 4 << 10),
    ("64KiB", 64 << 10),
    ("1MiB", 1 << 20),
    ("16MiB", 16 << 20),
];

fn hashing(c: &mut Criterion) {
    let data: Vec<u8> = (0..16usize << 20).map(|i| (i * 131 % 251) as u8).collect();
    let mut group = c.benchmark_group("etag");
    for (name, size) in SIZES {
        let input = &data[..size];
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("ifmatch", name), input, |b, input| {
            b.iter(|| {
                let mut hasher = EtagHasher::new();
                hasher.update(black_box(input));
                hasher.finish()
            })
        });
        group.bench_with_input(BenchmarkId::new("sha2", name), input, |b, input| {
            b.iter(|| Sha256::digest(black_box(input)))
        });
    }
    // A body arrives in frames; hashing it frame by frame must cost no more than in one piece.
    let input = &data[..16 << 20];
    group.throughput(Throughput::Bytes(input.len() as u64));
    group.bench_function(BenchmarkId::new("ifmatch-16KiB-frames", "16MiB"), |b| {
        b.iter(|| {
            let mut hasher = EtagHasher::new();
            input
                .chunks(16 << 10)
                .for_each(|frame| hasher.update(black_box(frame)));
            hasher.finish()
        })
    });
    group.finish();
}

criterion_group!(benches, hashing);
criterion_main!(benches);
