//! A change made behind the layer's back (a job, another service) never
//! lets a write with the old tag through, once the application said so (`invalidate`) or once
//! `time_to_live` has passed: both forget the version, not only the 304 cache. An axum app as
//! the README builds it, over a real socket.

use crate::common;

use std::time::Duration;

use axum::http::StatusCode;
use bytes::Bytes;
use ifmatch_tower::ConditionalLayer;

async fn serve(layer: ConditionalLayer) -> (String, common::Docs) {
    common::docs(layer, StatusCode::NO_CONTENT).await
}

/// Writes document `a` behind the layer's back.
fn change(rows: &common::Docs, value: &'static [u8]) {
    rows.lock()
        .unwrap()
        .insert("a".into(), Bytes::from_static(value));
}

async fn put_if_match(base: &str, tag: &str, body: &'static str) -> u16 {
    common::put_if_match(format!("{base}/docs/a"), tag, None, body).await
}

async fn read_tag(base: &str) -> String {
    let http = common::http();
    let r = http.get(format!("{base}/docs/a")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.headers()["etag"].to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidate_forgets_the_version_too() {
    let layer = ConditionalLayer::new();
    let (base, rows) = serve(layer.clone()).await;
    change(&rows, b"v1");
    let t1 = read_tag(&base).await;
    // A job changes the row behind the layer, and says so.
    change(&rows, b"v2 by a job");
    layer.invalidate("/docs/a").await;
    assert_eq!(put_if_match(&base, &t1, "lost update").await, 412);
    assert_eq!(&rows.lock().unwrap()["a"][..], b"v2 by a job");
    // A client that reads again writes.
    let t2 = read_tag(&base).await;
    assert_eq!(put_if_match(&base, &t2, "v3").await, 204);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_to_live_expires_the_version_too() {
    let layer = ConditionalLayer::new().time_to_live(Duration::from_millis(200));
    let (base, rows) = serve(layer).await;
    change(&rows, b"v1");
    let t1 = read_tag(&base).await;
    // Changed behind the layer, nobody told it: after the time to live, the old tag is refused.
    change(&rows, b"v2 by a job");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(put_if_match(&base, &t1, "lost update").await, 412);
    assert_eq!(&rows.lock().unwrap()["a"][..], b"v2 by a job");
}

/// A write whose `If-Match` is stale is refused with one rendering of the resource: the layer
/// asks the application for the current version once, and asks again only for another
/// representation than the one it rendered (a tag of the gzip bytes, say), never for the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_write_renders_the_resource_once() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let renders = Arc::new(AtomicUsize::new(0));
    let body = Arc::new(std::sync::Mutex::new(Bytes::from_static(b"v1")));
    let read = {
        let (renders, body) = (renders.clone(), body.clone());
        async move || {
            renders.fetch_add(1, Ordering::SeqCst);
            body.lock().unwrap().clone()
        }
    };
    let write = {
        let body = body.clone();
        async move |new: Bytes| {
            *body.lock().unwrap() = new;
            StatusCode::NO_CONTENT
        }
    };
    let app = axum::Router::new().route("/docs/a", axum::routing::get(read).put(write));
    let base = common::serve(common::around(ConditionalLayer::new(), app)).await;
    let t1 = read_tag(&base).await;
    assert_eq!(put_if_match(&base, &t1, "v2").await, 204);
    let before = renders.load(Ordering::SeqCst);
    assert_eq!(put_if_match(&base, &t1, "lost update").await, 412);
    let rendered = renders.load(Ordering::SeqCst) - before;
    assert_eq!(
        rendered, 1,
        "the GET handler ran {rendered} times for one 412"
    );
    assert_eq!(&body.lock().unwrap()[..], b"v2");
}
