//! The create-only pattern with the README's one-line setup (issue 30, point 3): a GET that
//! answered 404 teaches the layer that the key is absent, so `If-None-Match: *` creates, in
//! 428 mode too; with no knowledge at all, or a 404 that speaks only for a variant or a user,
//! it still fails closed. Over a real socket, axum's per-method routing.

mod common;

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
        assert_eq!(
            create(&base, "/docs/never-read", "x").await,
            412,
            "{mode}: nothing known, fails closed"
        );
        assert!(docs.lock().unwrap().is_empty(), "{mode}");

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
async fn of_sixteen_racing_creators_exactly_one_wins() {
    let (base, docs) = app(ConditionalLayer::new()).await;
    assert_eq!(fetch(&base, "/docs/race", &[]).await, 404);
    let racers = (0..16).map(|i| {
        let base = base.clone();
        tokio::spawn(async move { create(&base, "/docs/race", &format!("racer {i}")).await })
    });
    let mut statuses = Vec::new();
    for racer in racers {
        statuses.push(racer.await.unwrap());
    }
    statuses.sort_unstable();
    assert_eq!(
        statuses.iter().filter(|&&s| s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|&s| s == 201 || s == 412),
        "{statuses:?}"
    );
    let winner = docs.lock().unwrap()["race"].clone();
    assert!(winner.starts_with(b"racer "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_for_a_variant_or_a_user_says_nothing_of_the_resource() {
    let (base, docs) = app(ConditionalLayer::new()).await;
    docs.lock()
        .unwrap()
        .insert("kept".into(), Bytes::from_static(b"kept"));
    // The handler answers 404 to these although `kept` exists (a query it does not know, a
    // user it hides the document from, as an app may).
    assert_eq!(fetch(&base, "/docs/missing?view=raw", &[]).await, 404);
    assert_eq!(create(&base, "/docs/missing", "x").await, 412, "a query");
    assert_eq!(
        fetch(
            &base,
            "/docs/missing",
            &[("authorization", "Bearer someone")]
        )
        .await,
        404
    );
    assert_eq!(create(&base, "/docs/missing", "x").await, 412, "one user");
    assert_eq!(create(&base, "/docs/kept", "lost").await, 412);
    assert_eq!(docs.lock().unwrap()["kept"], "kept");
    assert!(!docs.lock().unwrap().contains_key("missing"));
}
