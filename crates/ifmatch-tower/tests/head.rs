//! HEAD answers with the GET's length (RFC 9110 9.3.2), and a route's own
//! HEAD handler never gives the empty body's tag nor replaces what GETs taught the cache.

use crate::common;

use axum::Router;
use axum::http::{HeaderMap, header};
use axum::routing::get;
use ifmatch_tower::ConditionalLayer;

async fn serve() -> String {
    let app = Router::new()
        .route(
            "/tagged",
            get(|| async {
                let mut headers = HeaderMap::new();
                headers.insert(header::ETAG, "\"v7\"".parse().unwrap());
                (headers, "hello, tagged")
            }),
        )
        .route("/plain", get(|| async { "hello, plain" }))
        .route(
            "/own-head",
            get(|| async { "the body of GET" }).head(|| async {
                let mut headers = HeaderMap::new();
                headers.insert(header::CONTENT_LENGTH, "15".parse().unwrap());
                headers
            }),
        )
        .layer(ConditionalLayer::new());
    common::serve(app).await
}

use common::http;

fn length(r: &reqwest::Response) -> Option<String> {
    r.headers()
        .get(header::CONTENT_LENGTH)
        .map(|v| v.to_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_has_the_gets_length_and_own_head_handlers_teach_nothing() {
    let base = serve().await;
    for (path, len, tag) in [
        ("/tagged", "13", "\"v7\"".to_owned()),
        (
            "/plain",
            "12",
            ifmatch_core::strong_etag(b"hello, plain").to_string(),
        ),
    ] {
        let r = http().head(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(length(&r).as_deref(), Some(len), "{path}");
        assert_eq!(r.headers()[header::ETAG].to_str().unwrap(), tag, "{path}");
    }

    let url = format!("{base}/own-head");
    let get = http().get(&url).send().await.unwrap();
    let tag = get.headers()[header::ETAG].to_str().unwrap().to_owned();
    assert_eq!(
        tag,
        ifmatch_core::strong_etag(b"the body of GET").to_string()
    );
    let head = http().head(&url).send().await.unwrap();
    let empty = ifmatch_core::strong_etag(b"").to_string();
    assert_ne!(
        head.headers()
            .get(header::ETAG)
            .map(|v| v.to_str().unwrap()),
        Some(empty.as_str()),
        "the HEAD handler's empty body is not the representation"
    );
    let again = http()
        .get(&url)
        .header("if-none-match", &tag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304, "the GET's tag still revalidates");
}
