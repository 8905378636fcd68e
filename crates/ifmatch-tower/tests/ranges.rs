//! A handler that serves ranges itself. Its 206 is not the representation:
//! the conditions are checked against the whole representation's tag (the handler's own, or the
//! one the cache learned from a GET), never against a hash of the part.

use crate::common;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use ifmatch_tower::ConditionalLayer;

const BODY: &[u8] = b"0123456789abcdef";

/// Serves `Range: bytes=A-B` itself, with its own ETag when `tagged`.
async fn ranged(headers: HeaderMap, tagged: bool) -> impl IntoResponse {
    let mut out = HeaderMap::new();
    if tagged {
        out.insert(header::ETAG, "\"rev-1\"".parse().unwrap());
    }
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok()?.strip_prefix("bytes=")?.split_once('-'))
        .and_then(|(a, b)| Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?)));
    match range {
        Some((a, b)) => {
            let value = format!("bytes {a}-{b}/{}", BODY.len());
            out.insert(header::CONTENT_RANGE, value.parse().unwrap());
            (StatusCode::PARTIAL_CONTENT, out, BODY[a..=b].to_vec())
        }
        None => (StatusCode::OK, out, BODY.to_vec()),
    }
}

async fn serve() -> String {
    let app = Router::new()
        .route("/tagged", get(|h: HeaderMap| ranged(h, true)))
        .route("/hashed", get(|h: HeaderMap| ranged(h, false)))
        .layer(ConditionalLayer::new());
    common::serve(app).await
}

async fn fetch(base: &str, path: &str, headers: &[(&str, &str)]) -> u16 {
    let http = common::http();
    let mut request = http.get(format!("{base}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_is_checked_against_the_whole_representation() {
    let base = serve().await;
    // The handler's own tag, on a cold cache: the part's conditions use it.
    let range = ("range", "bytes=2-5");
    assert_eq!(
        fetch(&base, "/tagged", &[range, ("if-none-match", "\"rev-1\"")]).await,
        304
    );
    assert_eq!(
        fetch(&base, "/tagged", &[range, ("if-match", "\"rev-1\"")]).await,
        206
    );
    assert_eq!(
        fetch(&base, "/tagged", &[range, ("if-match", "\"rev-0\"")]).await,
        412
    );

    // The layer's tag, learned from a GET of the whole.
    let tag = ifmatch_core::strong_etag(BODY).to_string();
    assert_eq!(fetch(&base, "/hashed", &[]).await, 200);
    assert_eq!(
        fetch(&base, "/hashed", &[range, ("if-match", &tag)]).await,
        206
    );
    assert_eq!(
        fetch(&base, "/hashed", &[range, ("if-none-match", &tag)]).await,
        304
    );
    assert_eq!(
        fetch(&base, "/hashed", &[range, ("if-match", "\"other\"")]).await,
        412
    );
}
