//! The layer in a real axum server on a loopback socket, driven by a real HTTP client.

use crate::common;

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
    // A request to `url` with one field (`("", "")`: none) and a body for a PUT.
    let send = |method: &str, field: (&str, &str), body: &'static str| {
        let request = match method {
            "PUT" => http.put(&url).body(body),
            _ => http.get(&url),
        };
        let request = if field.0.is_empty() {
            request
        } else {
            request.header(field.0, field.1)
        };
        async move { request.send().await.unwrap() }
    };
    assert_eq!(send("PUT", ("", ""), "v1").await.status(), 204);
    let r = send("GET", ("", ""), "").await;
    let tag = r.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(tag, ifmatch_core::strong_etag(b"v1").to_string());
    assert_eq!(r.text().await.unwrap(), "v1");
    let r = send("GET", ("if-none-match", &tag), "").await;
    assert_eq!(r.status(), 304);
    assert!(r.bytes().await.unwrap().is_empty());
    let r = send("PUT", ("if-match", "\"stale\""), "v2").await;
    assert_eq!(r.status(), 412);
    let r = send("PUT", ("if-match", &tag), "v2").await;
    assert_eq!(r.status(), 204);
    let r = send("GET", ("if-none-match", &tag), "").await;
    assert_eq!(r.status(), 200, "the write invalidated the cached version");
    assert_eq!(r.text().await.unwrap(), "v2");
    let r = send("PUT", ("if-match", &tag), "v3").await;
    assert_eq!(r.status(), 412, "the old tag lost");
}
