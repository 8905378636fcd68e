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

/// Issue 13, point 3: under `Router::layer` the layer never sends a GET to a write handler; an
/// application that wants writes checked without a GET first gives a version source.
#[tokio::test]
async fn under_router_layer_a_version_source_decides_and_no_handler_is_probed() {
    let (puts, gets) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let counted = (puts.clone(), gets.clone());
    let app = Router::new()
        .route(
            "/docs/{id}",
            get(move || {
                counted.1.fetch_add(1, Ordering::SeqCst);
                async { "v1" }
            })
            .put(move || {
                counted.0.fetch_add(1, Ordering::SeqCst);
                async { StatusCode::NO_CONTENT }
            }),
        )
        .layer(ConditionalLayer::new().version_source(|_| async {
            Ok(Some(ifmatch_tower::Validators::etag(
                ifmatch_core::strong_etag(b"v1"),
            )))
        }));
    let tag = ifmatch_core::strong_etag(b"v1").to_string();
    assert_eq!(
        put(&app, "\"stale\"").await,
        StatusCode::PRECONDITION_FAILED
    );
    assert_eq!(put(&app, &tag).await, StatusCode::NO_CONTENT);
    assert_eq!(
        puts.load(Ordering::SeqCst),
        1,
        "one write, and no probe ran the PUT handler"
    );
    assert_eq!(gets.load(Ordering::SeqCst), 0, "no GET handler ran either");
}
