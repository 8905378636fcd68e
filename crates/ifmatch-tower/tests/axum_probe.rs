//! axum's `Router::layer` wraps each method's handler on its own: the layer must learn versions
//! from GETs, and must never send a GET to the service that wraps a write handler.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Request, StatusCode};
use ifmatch_tower::ConditionalLayer;
use tower::ServiceExt;

fn app(puts: Arc<AtomicUsize>) -> Router {
    Router::new()
        .route(
            "/docs/{id}",
            get(|| async { "v1" }).put(move || {
                puts.fetch_add(1, Ordering::SeqCst);
                async { StatusCode::NO_CONTENT }
            }),
        )
        .layer(ConditionalLayer::new())
}

async fn put(app: &Router, tag: &str) -> StatusCode {
    let request = Request::put("/docs/a")
        .header("if-match", tag)
        .body(Body::from("v2"))
        .unwrap();
    app.clone().oneshot(request).await.unwrap().status()
}

#[tokio::test]
async fn a_write_never_runs_for_a_version_it_cannot_check() {
    let puts = Arc::new(AtomicUsize::new(0));
    let app = app(puts.clone());
    let tag = ifmatch_core::strong_etag(b"v1").to_string();
    // No GET yet: the version is unknown, and the PUT wrapper cannot ask for it.
    assert_eq!(put(&app, &tag).await, StatusCode::PRECONDITION_FAILED);
    assert_eq!(
        puts.load(Ordering::SeqCst),
        0,
        "no handler ran, and no GET reached the PUT handler"
    );
    // A GET teaches the version; the same write now goes through, once.
    let r = app
        .clone()
        .oneshot(Request::get("/docs/a").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(r.headers()["etag"], tag.as_str());
    assert_eq!(put(&app, &tag).await, StatusCode::NO_CONTENT);
    assert_eq!(puts.load(Ordering::SeqCst), 1);
    // The write made the version unknown again (its answer carried no ETag): fail closed.
    assert_eq!(put(&app, &tag).await, StatusCode::PRECONDITION_FAILED);
    assert_eq!(
        put(&app, "\"stale\"").await,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(puts.load(Ordering::SeqCst), 1);
}
