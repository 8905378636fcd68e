//! Compression keeps strong tags honest (RFC 9110 8.8.3: a strong tag names one byte sequence): no two
//! different byte sequences ever leave with the same strong tag, revalidation and conditional
//! writes work with the tag each client was shown, over a real socket with tower-http's
//! `CompressionLayer` inside the layer (the default: the gzip bytes get their own tag,
//! unmarked, and the same bytes the same tag whatever the `Accept-Encoding`) and outside it
//! (with `mark_encodings`, the option for that order).

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use ifmatch_tower::ConditionalLayer;
use tower_http::compression::CompressionLayer;

type Doc = Arc<Mutex<String>>;

async fn read(State(doc): State<Doc>) -> String {
    doc.lock().unwrap().clone()
}

async fn write(State(doc): State<Doc>, body: String) -> StatusCode {
    *doc.lock().unwrap() = body;
    StatusCode::NO_CONTENT
}

fn routes() -> Router {
    let doc = Doc::new(Mutex::new(
        "a document long enough to be compressed. ".repeat(20),
    ));
    Router::new()
        .route("/doc", get(read).put(write))
        .with_state(doc)
}

/// What one client is sent: status, ETag, Content-Encoding, Vary, the bytes.
async fn fetch(
    base: &str,
    accept: &str,
    extra: &[(&str, &str)],
) -> (u16, String, String, String, Vec<u8>) {
    let mut request = common::http().get(format!("{base}/doc"));
    if !accept.is_empty() {
        request = request.header("accept-encoding", accept);
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let field = |name: &str| {
        response
            .headers()
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (etag, encoding, vary) = (field("etag"), field("content-encoding"), field("vary"));
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap().to_vec();
    (status, etag, encoding, vary, bytes)
}

async fn put(base: &str, accept: &str, if_match: &str, body: &str) -> u16 {
    let mut request = common::http()
        .put(format!("{base}/doc"))
        .header("if-match", if_match)
        .body(body.to_owned());
    if !accept.is_empty() {
        request = request.header("accept-encoding", accept);
    }
    request.send().await.unwrap().status().as_u16()
}

const ACCEPTS: [&str; 6] = [
    "",
    "gzip",
    "br",
    "gzip, br",
    "br;q=1.0, gzip;q=0.5",
    "identity",
];

/// `marked`: whether tags are marked per `Accept-Encoding` (else the same bytes must carry the
/// same tag, whoever asked).
async fn strong_tags_stay_unique(app: Router, order: &str, marked: bool) {
    let base = common::serve(app).await;
    for round in 0..2 {
        // Every Accept-Encoding, twice (cold and warm cache): one tag never names two bodies.
        let mut bodies: HashMap<String, Vec<u8>> = HashMap::new();
        let mut tags: HashMap<Vec<u8>, String> = HashMap::new();
        let mut shown: Vec<(&str, String)> = Vec::new();
        for _ in 0..2 {
            for accept in ACCEPTS {
                let (status, etag, encoding, vary, bytes) = fetch(&base, accept, &[]).await;
                assert_eq!(status, 200, "{order} {accept:?}");
                assert!(etag.starts_with('"'), "{order}: a strong tag: {etag}");
                assert!(
                    vary.to_ascii_lowercase().contains("accept-encoding"),
                    "{order} {accept:?}: Vary names Accept-Encoding: {vary:?}"
                );
                if accept.contains("gzip") || accept.contains("br") {
                    assert!(!encoding.is_empty(), "{order} {accept:?}: compressed");
                }
                if let Some(known) = bodies.insert(etag.clone(), bytes.clone()) {
                    assert_eq!(known, bytes, "{order}: {etag} names two different bodies");
                }
                if let Some(known) = tags.insert(bytes.clone(), etag.clone())
                    && !marked
                {
                    assert_eq!(known, etag, "{order} {accept:?}: the same bytes, two tags");
                }
                if !marked {
                    assert!(!etag.contains("+ae"), "{order}: unmarked: {etag}");
                }
                shown.push((accept, etag));
            }
        }
        let identity = &shown[0].1;
        let gzip = &shown[1].1;
        assert_ne!(identity, gzip, "{order}: gzip and identity bytes, one tag");

        // Each client revalidates with the tag it was shown: 304 with that same tag.
        for (accept, etag) in &shown[..ACCEPTS.len()] {
            let (status, again, _, _, body) =
                fetch(&base, accept, &[("if-none-match", etag)]).await;
            assert_eq!(status, 304, "{order} {accept:?} {etag}");
            assert_eq!(&again, etag, "{order} {accept:?}");
            assert!(body.is_empty());
        }

        // A conditional write with the tag a gzip reader was shown is a write to the version
        // it read; the same tag afterwards is stale.
        let body = format!("version {round}, long enough to be compressed. ").repeat(20);
        assert!(
            (200..300).contains(&put(&base, "gzip", gzip, &body).await),
            "{order}: If-Match with the gzip reader's tag"
        );
        assert_eq!(put(&base, "gzip", gzip, "lost").await, 412, "{order}");
        assert_eq!(put(&base, "", identity, "lost").await, 412, "{order}");
        let (_, _, _, _, now) = fetch(&base, "", &[]).await;
        assert_eq!(now, body.as_bytes(), "{order}: no stale write landed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compression_outside_the_layer_never_shares_a_strong_tag() {
    let app = common::around(ConditionalLayer::new().mark_encodings(true), routes())
        .layer(CompressionLayer::new());
    strong_tags_stay_unique(app, "compression outside", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compression_inside_the_layer_never_shares_a_strong_tag() {
    let app = common::around(
        ConditionalLayer::new(),
        routes().layer(CompressionLayer::new()),
    );
    strong_tags_stay_unique(app, "compression inside", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_is_never_joined_to_encoded_bytes() {
    // If-Range with the tag of a gzip answer can never select a part (parts are sent
    // unencoded): the handler's ranges are checked against the plain tag, which differs.
    async fn ranged(headers: axum::http::HeaderMap) -> axum::response::Response {
        use axum::response::IntoResponse;
        let body = "0123456789".repeat(10);
        let etag = "\"v1\"";
        let range_holds = headers
            .get("if-range")
            .is_none_or(|v| v.to_str().unwrap() == etag);
        if headers.contains_key("range") && range_holds {
            return (
                StatusCode::PARTIAL_CONTENT,
                [("etag", etag), ("content-range", "bytes 0-3/100")],
                "0123",
            )
                .into_response();
        }
        ([("etag", etag)], body).into_response()
    }
    let app = Router::new()
        .route("/doc", get(ranged))
        .layer(ConditionalLayer::new().mark_encodings(true))
        .layer(CompressionLayer::new());
    let base = common::serve(app).await;
    let (_, gzip, encoding, _, _) = fetch(&base, "gzip", &[]).await;
    assert_eq!(encoding, "gzip");
    assert_ne!(
        gzip, "\"v1\"",
        "the handler's tag is marked for a gzip reader"
    );
    let (status, _, _, _, _) = fetch(
        &base,
        "gzip",
        &[("range", "bytes=0-3"), ("if-range", gzip.as_str())],
    )
    .await;
    assert_eq!(
        status, 200,
        "the whole representation, not an unencoded part"
    );
    let (status, etag, _, _, _) = fetch(&base, "gzip", &[("if-none-match", gzip.as_str())]).await;
    assert_eq!(
        (status, etag.as_str()),
        (304, gzip.as_str()),
        "the handler's own tag revalidates"
    );
}
