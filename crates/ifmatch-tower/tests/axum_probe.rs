//! axum's `Router::layer` wraps each method's handler on its own: the layer must never send a
//! GET to the service that wraps a write handler. It cannot learn the resource's current version
//! there, so a conditional write is refused loudly, with the fix, unless the application gives a
//! version source or promises that every change passes through the layer (then what it learned
//! from GETs decides).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use ifmatch_tower::ConditionalLayer;
use tower::ServiceExt;

fn app(puts: Arc<AtomicUsize>, layer: ConditionalLayer) -> Router {
    Router::new()
        .route(
            "/docs/{id}",
            get(|| async { "v1" }).put(move || {
                puts.fetch_add(1, Ordering::SeqCst);
                async { StatusCode::NO_CONTENT }
            }),
        )
        .layer(layer)
}

async fn put(app: &Router, tag: &str) -> StatusCode {
    put_text(app, tag).await.0
}

async fn put_text(app: &Router, tag: &str) -> (StatusCode, String) {
    let mut request = Request::put("/docs/a");
    if !tag.is_empty() {
        request = request.header("if-match", tag);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from("v2")).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn read(app: &Router) -> String {
    let r = app
        .clone()
        .oneshot(Request::get("/docs/a").body(Body::empty()).unwrap())
        .await
        .unwrap();
    r.headers()["etag"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_conditional_write_it_cannot_check_is_refused_loudly_with_the_fix() {
    let puts = Arc::new(AtomicUsize::new(0));
    let app = app(puts.clone(), ConditionalLayer::new());
    let tag = ifmatch_core::strong_etag(b"v1").to_string();
    for round in ["before any GET", "after a GET"] {
        let (status, text) = put_text(&app, &tag).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{round}");
        assert!(text.contains("fallback_service"), "{round}: {text}");
        assert!(text.contains("version_source"), "{round}: {text}");
        assert_eq!(puts.load(Ordering::SeqCst), 0, "{round}: no handler ran");
        assert_eq!(read(&app).await, tag);
    }
    // A blind write needs no version: it passes.
    assert_eq!(put(&app, "").await, StatusCode::NO_CONTENT);
    assert_eq!(puts.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn trusting_its_memory_a_write_is_judged_by_what_gets_taught() {
    let puts = Arc::new(AtomicUsize::new(0));
    let app = app(
        puts.clone(),
        ConditionalLayer::new().every_change_passes_through(),
    );
    let tag = ifmatch_core::strong_etag(b"v1").to_string();
    // No GET yet: the version is unknown, and the PUT wrapper cannot ask for it.
    let (status, text) = put_text(&app, &tag).await;
    assert_eq!(status, StatusCode::PRECONDITION_FAILED);
    assert!(text.contains("not known"), "{text}");
    assert_eq!(
        puts.load(Ordering::SeqCst),
        0,
        "no handler ran, and no GET reached the PUT handler"
    );
    // A GET teaches the version; the same write now goes through, once.
    assert_eq!(read(&app).await, tag);
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

/// Under `Router::layer` the layer never sends a GET to a write handler; an
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
