//! A write that changes other resources: RFC 9111 4.4 is the floor (a 2xx to an unsafe method
//! invalidates its target and what its `Location` and `Content-Location` name); by default a
//! write forgets its target's ancestors (`/docs/a/append` forgets `/docs/a` and `/docs`); the
//! application relates any other (`relates`), and a handler names anything else its write
//! changed in `Ifmatch-Invalidates`. Old tags of those resources then get neither a 304 nor a
//! write. An axum app over a real socket, the layer around the whole router.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use ifmatch_tower::ConditionalLayer;

type Docs = Arc<Mutex<BTreeMap<String, String>>>;

/// The app; with `naming`, its handlers name what else their writes change.
async fn serve_with(layer: ConditionalLayer, naming: bool) -> String {
    async fn read(
        State((docs, _)): State<(Docs, bool)>,
        Path(id): Path<String>,
    ) -> Result<String, StatusCode> {
        let docs = docs.lock().unwrap();
        docs.get(&id).cloned().ok_or(StatusCode::NOT_FOUND)
    }
    async fn list(State((docs, _)): State<(Docs, bool)>) -> String {
        docs.lock()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }
    async fn write(
        State((docs, naming)): State<(Docs, bool)>,
        Path(id): Path<String>,
        body: String,
    ) -> (StatusCode, HeaderMap) {
        docs.lock().unwrap().insert(id.clone(), body);
        let mut headers = HeaderMap::new();
        if !naming {
            return (StatusCode::NO_CONTENT, headers);
        }
        // The listing changed too, and so did the raw view (RFC 9111 4.4).
        headers.insert("ifmatch-invalidates", "/docs".parse().unwrap());
        headers.insert(
            "content-location",
            format!("/docs/{id}?view=raw").parse().unwrap(),
        );
        (StatusCode::NO_CONTENT, headers)
    }
    async fn append(
        State((docs, naming)): State<(Docs, bool)>,
        Path(id): Path<String>,
        body: String,
    ) -> (StatusCode, HeaderMap) {
        docs.lock()
            .unwrap()
            .entry(id.clone())
            .or_default()
            .push_str(&body);
        let mut headers = HeaderMap::new();
        if naming {
            let named = format!("/docs/{id}").parse().unwrap();
            headers.insert("ifmatch-invalidates", named);
        }
        (StatusCode::NO_CONTENT, headers)
    }
    let docs = Docs::default();
    let stats = docs.clone();
    let app = Router::new()
        .route("/docs", get(list))
        .route("/docs/{id}", get(read).put(write))
        .route("/docs/{id}/append", post(append))
        .route(
            "/stats",
            get(move || async move { format!("{} documents", stats.lock().unwrap().len()) }),
        )
        .with_state((docs, naming));
    common::serve(common::around(layer, app)).await
}

async fn serve() -> String {
    serve_with(ConditionalLayer::new().forget_ancestors(false), true).await
}

use common::http;

async fn tag_of(base: &str, path: &str) -> String {
    let r = http().get(format!("{base}{path}")).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    r.headers()["etag"].to_str().unwrap().to_owned()
}

async fn status(base: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> u16 {
    let mut request = http()
        .request(method.parse().unwrap(), format!("{base}{path}"))
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let r = request.send().await.unwrap();
    assert!(
        r.headers().get("ifmatch-invalidates").is_none(),
        "the field stays inside"
    );
    r.status().as_u16()
}

/// A GET of `path` with `If-None-Match: tag`: its status.
async fn revalidated(base: &str, path: &str, tag: &str) -> u16 {
    status(base, "GET", path, &[("if-none-match", tag)], "").await
}

/// A PUT of `body` to `path` with `If-Match: tag`: its status.
async fn written_if(base: &str, path: &str, tag: &str, body: &str) -> u16 {
    status(base, "PUT", path, &[("if-match", tag)], body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_forgets_what_else_it_changed() {
    let base = serve().await;
    assert_eq!(status(&base, "PUT", "/docs/a", &[], "v1").await, 204);
    let (doc, listing, raw) = (
        tag_of(&base, "/docs/a").await,
        tag_of(&base, "/docs").await,
        tag_of(&base, "/docs/a?view=raw").await,
    );

    // An append through another URL changes /docs/a: its old tag is neither fresh nor current.
    assert_eq!(
        status(&base, "POST", "/docs/a/append", &[], "+more").await,
        204
    );
    assert_eq!(revalidated(&base, "/docs/a", &doc).await, 200);
    assert_eq!(written_if(&base, "/docs/a", &doc, "lost").await, 412);

    // A PUT of /docs/b changes the listing it names, and its raw view by Content-Location.
    let doc = tag_of(&base, "/docs/a").await;
    let listing_now = tag_of(&base, "/docs").await;
    assert_eq!(
        listing_now, listing,
        "the listing of one document did not change yet"
    );
    let raw_now = tag_of(&base, "/docs/a?view=raw").await;
    assert_ne!(raw_now, raw);
    assert_eq!(status(&base, "PUT", "/docs/b", &[], "b1").await, 204);
    assert_eq!(revalidated(&base, "/docs", &listing).await, 200);
    assert_eq!(written_if(&base, "/docs/a", &doc, "v3").await, 204);
    assert_eq!(
        revalidated(&base, "/docs/a?view=raw", &raw_now).await,
        200,
        "named by the write's Content-Location"
    );
}

/// Nothing named by the handlers: the ancestors a write changes are forgotten by default, and
/// the application relates the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_forgets_its_ancestors_and_what_the_application_relates() {
    let layer = ConditionalLayer::new().relates(|uri, _| {
        let documents = uri.path().starts_with("/docs/");
        documents.then(|| "/stats".to_owned()).into_iter().collect()
    });
    let base = serve_with(layer, false).await;
    assert_eq!(status(&base, "PUT", "/docs/a", &[], "v1").await, 204);
    let (doc, listing, stats) = (
        tag_of(&base, "/docs/a").await,
        tag_of(&base, "/docs").await,
        tag_of(&base, "/stats").await,
    );
    let revalidate = |path: &'static str, tag: String| {
        let base = base.clone();
        async move { status(&base, "GET", path, &[("if-none-match", &tag)], "").await }
    };
    assert_eq!(revalidate("/docs/a", doc.clone()).await, 304);
    assert_eq!(revalidate("/docs", listing.clone()).await, 304);

    // An append through another route changes /docs/a: no 304 for its old tag, no write.
    assert_eq!(
        status(&base, "POST", "/docs/a/append", &[], "+more").await,
        204
    );
    assert_eq!(revalidate("/docs/a", doc.clone()).await, 200);
    assert_eq!(written_if(&base, "/docs/a", &doc, "lost").await, 412);

    // A PUT of /docs/b changes the listing above it, and the statistics it is related to.
    assert_eq!(revalidate("/docs", listing.clone()).await, 304);
    assert_eq!(status(&base, "PUT", "/docs/b", &[], "b1").await, 204);
    assert_eq!(revalidate("/docs", listing).await, 200);
    assert_eq!(revalidate("/stats", stats).await, 200);
}
