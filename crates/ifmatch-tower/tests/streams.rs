//! A body that streams passes through at once, untagged: server-sent events
//! reach the client as they are sent, and a slow stream's head is not held back. `skip` opts a
//! route out without changing how other answers are remembered.

use crate::common;

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::header;
use axum::routing::get;
use futures_util::StreamExt;
use ifmatch_tower::ConditionalLayer;

async fn serve() -> String {
    let app = Router::new()
        .route(
            "/events",
            get(|| async {
                // One event now, one a second later.
                let events = futures_util::stream::iter(0..2).then(|i| async move {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    Ok::<_, std::io::Error>(format!("data: event {i}\n\n"))
                });
                (
                    [(header::CONTENT_TYPE, "text/event-stream")],
                    Body::from_stream(events),
                )
            }),
        )
        .route(
            "/slow",
            get(|| async {
                let chunks = futures_util::stream::iter(0..3).then(|i| async move {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    Ok::<_, std::io::Error>(format!("chunk {i}\n"))
                });
                Body::from_stream(chunks)
            }),
        )
        .route("/skipped", get(|| async { "not mine to tag" }))
        .route("/tagged", get(|| async { "tag me" }))
        .layer(ConditionalLayer::new().skip(|uri, _| uri.path() == "/skipped"));
    common::serve(app).await
}

use common::http;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_pass_through_at_once() {
    let base = serve().await;
    let start = Instant::now();
    let r = http().get(format!("{base}/events")).send().await.unwrap();
    assert!(r.headers().get(header::ETAG).is_none());
    let mut body = r.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    let first_at = start.elapsed();
    assert!(String::from_utf8_lossy(&first).contains("event 0"));
    assert!(
        first_at < Duration::from_millis(500),
        "the first event waited {first_at:?}"
    );

    let start = Instant::now();
    let r = http().get(format!("{base}/slow")).send().await.unwrap();
    let head_at = start.elapsed();
    assert!(
        head_at < Duration::from_millis(250),
        "the head waited {head_at:?}"
    );
    assert!(r.headers().get(header::ETAG).is_none());
    assert_eq!(r.text().await.unwrap(), "chunk 0\nchunk 1\nchunk 2\n");
    println!("first event after {first_at:?}, slow stream's head after {head_at:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_opts_a_route_out_and_nothing_else() {
    let base = serve().await;
    let skipped = http().get(format!("{base}/skipped")).send().await.unwrap();
    assert!(skipped.headers().get(header::ETAG).is_none());
    let tagged = http().get(format!("{base}/tagged")).send().await.unwrap();
    assert_eq!(
        tagged.headers()[header::ETAG].to_str().unwrap(),
        ifmatch_core::strong_etag(b"tag me").to_string()
    );
}
