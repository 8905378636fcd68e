//! Nanoseconds per precondition evaluation, for the requests that dominate real traffic.

use std::hint::black_box;
use std::time::{Duration, UNIX_EPOCH};

use criterion::{Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue, Method, header};
use ifmatch_blob::precondition as blob;
use ifmatch_core::date::to_http_date;
use ifmatch_core::precondition::{
    Validators,
    rfc9110::{Target, evaluate},
};
use ifmatch_core::strong_etag;

fn evaluation(c: &mut Criterion) {
    let tag = strong_etag(b"the current representation");
    let lm = to_http_date(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let current = Validators::new(Some(tag.clone()), Some(lm));

    let mut revalidate = HeaderMap::new();
    revalidate.insert(header::IF_NONE_MATCH, tag.to_header_value());
    revalidate.insert(
        header::IF_MODIFIED_SINCE,
        HeaderValue::from_static("Tue, 14 Nov 2023 22:13:20 GMT"),
    );
    revalidate.insert(header::ACCEPT, HeaderValue::from_static("application/json"));

    let mut stale_write = HeaderMap::new();
    stale_write.insert(
        header::IF_MATCH,
        strong_etag(b"an older one").to_header_value(),
    );

    let plain = HeaderMap::new();

    let mut group = c.benchmark_group("evaluate");
    for (name, method, headers) in [
        ("conditional GET, 304", Method::GET, &revalidate),
        ("unconditional GET", Method::GET, &plain),
        ("stale If-Match PUT, 412", Method::PUT, &stale_write),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let target = Target::Current(black_box(&current));
                evaluate(black_box(&method), black_box(headers), target)
            })
        });
    }
    group.bench_function("blob dialect conditional read, 304", |b| {
        b.iter(|| {
            blob::evaluate(
                blob::Operation::Read,
                black_box(&revalidate),
                Some(black_box(&current)),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, evaluation);
criterion_main!(benches);
