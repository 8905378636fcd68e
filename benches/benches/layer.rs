//! The Tower layer's cost per request, in process (no sockets): the same axum app with the
//! layer off and on, for a plain 200 with a 4 KiB body, and for a conditional GET that the
//! layer answers 304 from its cache.

use std::hint::black_box;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, header};
use http_body_util::BodyExt;
use ifmatch_tower::ConditionalLayer;
use tower::ServiceExt;

fn app(layer: bool) -> Router {
    let body = Bytes::from(
        (0..4096u32)
            .map(|i| b'a' + (i % 26) as u8)
            .collect::<Vec<u8>>(),
    );
    let router = Router::new().route("/doc", get(move || std::future::ready(body.clone())));
    let router = if layer {
        router.layer(ConditionalLayer::new())
    } else {
        router
    };
    // What `axum::serve` does: turn the routes into services once, not on every request.
    router.with_state(())
}

async fn round_trip(app: &Router, if_none_match: Option<&str>) -> usize {
    let mut request = Request::get("/doc");
    if let Some(tag) = if_none_match {
        request = request.header(header::IF_NONE_MATCH, tag);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16() as usize;
    status
        + response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .len()
}

fn layer(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (off, on) = (app(false), app(true));
    let tag = runtime.block_on(async {
        let response = on
            .clone()
            .oneshot(Request::get("/doc").body(Body::empty()).unwrap())
            .await
            .unwrap();
        response.headers()[header::ETAG]
            .to_str()
            .unwrap()
            .to_owned()
    });
    let mut group = c.benchmark_group("layer");
    group.bench_function("plain GET 4 KiB, layer off", |b| {
        b.iter(|| runtime.block_on(round_trip(black_box(&off), None)))
    });
    group.bench_function("plain GET 4 KiB, layer on", |b| {
        b.iter(|| runtime.block_on(round_trip(black_box(&on), None)))
    });
    group.bench_function("conditional GET, layer off (200)", |b| {
        b.iter(|| runtime.block_on(round_trip(black_box(&off), Some(&tag))))
    });
    group.bench_function("conditional GET, layer on (304 from cache)", |b| {
        b.iter(|| runtime.block_on(round_trip(black_box(&on), Some(&tag))))
    });
    group.finish();
}

criterion_group!(benches, layer);
criterion_main!(benches);
