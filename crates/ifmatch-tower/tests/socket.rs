//! The layer in a real axum server on a loopback socket, driven by a real HTTP client.

mod common;

use axum::http::StatusCode;
use ifmatch_tower::ConditionalLayer;

async fn serve() -> String {
    let (base, _) = common::docs(ConditionalLayer::new(), StatusCode::NO_CONTENT).await;
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_real_socket() {
    let base = serve().await;
    let http = common::http();
    let url = format!("{base}/docs/a");
    assert_eq!(
        http.put(&url).body("v1").send().await.unwrap().status(),
        204
    );
    let r = http.get(&url).send().await.unwrap();
    let tag = r.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(tag, ifmatch_core::strong_etag(b"v1").to_string());
    assert_eq!(r.text().await.unwrap(), "v1");
    let r = http
        .get(&url)
        .header("if-none-match", &tag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    assert!(r.bytes().await.unwrap().is_empty());
    let r = http
        .put(&url)
        .header("if-match", "\"stale\"")
        .body("v2")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 412);
    let r = http
        .put(&url)
        .header("if-match", &tag)
        .body("v2")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let r = http
        .get(&url)
        .header("if-none-match", &tag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the write invalidated the cached version");
    assert_eq!(r.text().await.unwrap(), "v2");
    let r = http
        .put(&url)
        .header("if-match", &tag)
        .body("v3")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 412, "the old tag lost");
}
