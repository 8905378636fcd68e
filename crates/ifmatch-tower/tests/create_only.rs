//! The create-only pattern with the README's setup (the layer around the whole router): a
//! conditional write asks the application for the resource, so `If-None-Match: *` creates a
//! document nobody has read, in 428 mode too (32 racing creators: `as_users_write_it.rs`); with the
//! layer trusting its memory, a 404 that speaks only for a variant or a user is not taken for
//! the resource's absence. Over a real socket.

use crate::common;

use axum::http::StatusCode;
use bytes::Bytes;
use ifmatch_tower::ConditionalLayer;

async fn app(layer: ConditionalLayer) -> (String, common::Docs) {
    common::docs(layer, StatusCode::CREATED).await
}

async fn status(request: reqwest::RequestBuilder) -> u16 {
    request.send().await.unwrap().status().as_u16()
}

async fn fetch(base: &str, path: &str, headers: &[(&str, &str)]) -> u16 {
    let mut request = common::http().get(format!("{base}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    status(request).await
}

async fn create(base: &str, path: &str, body: &str) -> u16 {
    let request = common::http()
        .put(format!("{base}{path}"))
        .header("if-none-match", "*")
        .body(body.to_owned());
    status(request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_lets_if_none_match_star_create_once() {
    for required in [false, true] {
        let layer = ConditionalLayer::new().require_precondition(required);
        let (base, docs) = app(layer).await;
        let mode = if required { "428 mode" } else { "default" };
        // Nobody has read it: the layer asks the application, which answers 404.
        assert_eq!(
            create(&base, "/docs/never-read", "x").await,
            201,
            "{mode}: absent, created"
        );
        assert_eq!(create(&base, "/docs/never-read", "y").await, 412, "{mode}");
        assert_eq!(docs.lock().unwrap()["never-read"], "x", "{mode}");

        assert_eq!(fetch(&base, "/docs/a", &[]).await, 404);
        assert_eq!(create(&base, "/docs/a", "first").await, 201, "{mode}");
        assert_eq!(create(&base, "/docs/a", "second").await, 412, "{mode}");
        assert_eq!(docs.lock().unwrap()["a"], "first", "{mode}");
        if required {
            let blind = common::http().put(format!("{base}/docs/b")).body("blind");
            assert_eq!(status(blind).await, 428);
        }

        // Deleted through the layer and found missing again: created again.
        let read = common::http()
            .get(format!("{base}/docs/a"))
            .send()
            .await
            .unwrap();
        let etag = read.headers()["etag"].to_str().unwrap().to_owned();
        let delete = common::http()
            .delete(format!("{base}/docs/a"))
            .header("if-match", etag);
        assert_eq!(status(delete).await, 204, "{mode}");
        assert_eq!(fetch(&base, "/docs/a", &[]).await, 404);
        assert_eq!(create(&base, "/docs/a", "third").await, 201, "{mode}");
        assert_eq!(docs.lock().unwrap()["a"], "third", "{mode}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_for_a_variant_or_a_user_says_nothing_of_the_resource() {
    // With the layer trusting its memory and unable to ask (it wraps each method's handler
    // apart), a 404 it saw for a query or for one user (an app may hide a document from a
    // user) is not taken for the resource's absence.
    let trusting = ConditionalLayer::new().every_change_passes_through();
    let (base, docs) = common::docs_per_method(trusting, StatusCode::CREATED).await;
    docs.lock()
        .unwrap()
        .insert("kept".into(), Bytes::from_static(b"kept"));
    assert_eq!(fetch(&base, "/docs/missing?view=raw", &[]).await, 404);
    assert_eq!(create(&base, "/docs/missing", "x").await, 412, "a query");
    let someone = [("authorization", "Bearer someone")];
    assert_eq!(fetch(&base, "/docs/missing", &someone).await, 404);
    assert_eq!(create(&base, "/docs/missing", "x").await, 412, "one user");
    assert_eq!(create(&base, "/docs/kept", "lost").await, 412);
    assert_eq!(docs.lock().unwrap()["kept"], "kept");
    assert!(!docs.lock().unwrap().contains_key("missing"));
    // Asked (the default), the application says what it says to the writer.
    let (base, docs) = app(ConditionalLayer::new()).await;
    docs.lock()
        .unwrap()
        .insert("kept".into(), Bytes::from_static(b"kept"));
    assert_eq!(create(&base, "/docs/kept", "lost").await, 412);
    assert_eq!(create(&base, "/docs/missing", "x").await, 201);
    assert_eq!(docs.lock().unwrap()["kept"], "kept");
}
