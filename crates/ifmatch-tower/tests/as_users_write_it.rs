//! The layer's promise in the axum apps a user writes from the README, over a real socket: no
//! lost update when the documents change behind the layer (a background job) or through another
//! route; create-only and 428 mode; the setups users write (the whole router, a
//! `ServiceBuilder`, `Router::layer` and `route_layer`, which must say at once why they cannot
//! check a write); a HEAD handler of its own; a sliding session cookie on a 304.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::{get, post};
use ifmatch_tower::ConditionalLayer;
use tower::Layer;

type Docs = Arc<Mutex<BTreeMap<String, String>>>;

/// A document store as the README's readers write it: a listing, documents, an append route.
fn routes(docs: Docs) -> Router {
    async fn list(State(docs): State<Docs>) -> String {
        let docs = docs.lock().unwrap();
        docs.keys().cloned().collect::<Vec<_>>().join("\n")
    }
    async fn read(State(docs): State<Docs>, Path(id): Path<String>) -> Result<String, StatusCode> {
        let docs = docs.lock().unwrap();
        docs.get(&id).cloned().ok_or(StatusCode::NOT_FOUND)
    }
    async fn write(State(docs): State<Docs>, Path(id): Path<String>, body: String) -> StatusCode {
        match docs.lock().unwrap().insert(id, body) {
            Some(_) => StatusCode::NO_CONTENT,
            None => StatusCode::CREATED,
        }
    }
    async fn create(State(docs): State<Docs>, body: String) -> (StatusCode, HeaderMap) {
        let mut docs = docs.lock().unwrap();
        let id = format!("n{}", docs.len());
        docs.insert(id.clone(), body);
        let mut headers = HeaderMap::new();
        headers.insert(header::LOCATION, format!("/docs/{id}").parse().unwrap());
        (StatusCode::CREATED, headers)
    }
    async fn append(State(docs): State<Docs>, Path(id): Path<String>, body: String) -> StatusCode {
        match docs.lock().unwrap().get_mut(&id) {
            Some(doc) => {
                doc.push_str(&body);
                StatusCode::NO_CONTENT
            }
            None => StatusCode::NOT_FOUND,
        }
    }
    Router::new()
        .route("/docs", get(list).post(create))
        .route("/docs/{id}", get(read).put(write))
        .route("/docs/{id}/append", post(append))
        .with_state(docs)
}

/// Serves `routes` with `layer` around the whole router, served as a service of its own, as the
/// README says.
async fn serve(layer: ConditionalLayer) -> (String, Docs) {
    use axum::response::IntoResponse;
    let docs = Docs::default();
    let app = tower::ServiceBuilder::new()
        .map_response(IntoResponse::into_response)
        .layer(layer)
        .service(routes(docs.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::ServiceExt::<axum::extract::Request>::into_make_service(app);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, docs)
}

async fn send(base: &str, method: &str, path: &str, fields: &[(&str, &str)], body: &str) -> u16 {
    let mut request = common::http()
        .request(method.parse().unwrap(), format!("{base}{path}"))
        .body(body.to_owned());
    for (name, value) in fields {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap().status().as_u16()
}

async fn tag_of(base: &str, path: &str) -> String {
    let response = common::http()
        .get(format!("{base}{path}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.headers()["etag"].to_str().unwrap().to_owned()
}

/// A background job, another service, a SQL console: the document changes behind the layer. A
/// write carrying the tag read before that change is refused, and the change stands (and the
/// layer, told so, no longer answers that tag with 304); so is one carrying the tag read before
/// an append through another route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_update_is_lost_to_a_change_the_layer_never_saw() {
    let (base, docs) = serve(ConditionalLayer::new()).await;
    assert_eq!(send(&base, "PUT", "/docs/a", &[], "v1").await, 201);
    let before = tag_of(&base, "/docs/a").await;
    // Read twice, so that the layer has all it could remember of `a`.
    assert_eq!(
        send(&base, "GET", "/docs/a", &[("if-none-match", &before)], "").await,
        304
    );

    docs.lock().unwrap().insert("a".into(), "by the job".into());
    // The refusal teaches the layer that what it remembered is stale: no 304 for that tag.
    stale_is_refused_and_forgotten(&base, &before, "the job").await;
    assert_eq!(docs.lock().unwrap()["a"], "by the job");

    let current = tag_of(&base, "/docs/a").await;
    assert_eq!(
        send(&base, "POST", "/docs/a/append", &[], "+more").await,
        204
    );
    stale_is_refused_and_forgotten(&base, &current, "the append").await;
    assert_eq!(docs.lock().unwrap()["a"], "by the job+more");
    let now = tag_of(&base, "/docs/a").await;
    assert_eq!(
        send(&base, "PUT", "/docs/a", &[("if-match", &now)], "v2").await,
        204
    );
}

/// A write of `/docs/a` with `tag`, from before `change`, is refused 412, and a read with it
/// is answered whole: no 304 for it either.
async fn stale_is_refused_and_forgotten(base: &str, tag: &str, change: &str) {
    let stale = send(base, "PUT", "/docs/a", &[("if-match", tag)], "lost").await;
    assert_eq!(stale, 412, "a write with the tag from before {change}");
    let read = send(base, "GET", "/docs/a", &[("if-none-match", tag)], "").await;
    assert_eq!(read, 200, "a read with the tag from before {change}");
}

/// A write refused for a tag the layer never gave (a made-up one, sent again and again) leaves
/// what the layer remembers: the application's current tag is the one it remembers, so its
/// 304s still come from memory, without the handler (which would now show a change made
/// behind the layer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_with_made_up_tags_do_not_make_the_layer_forget() {
    let (base, docs) = serve(ConditionalLayer::new()).await;
    assert_eq!(send(&base, "PUT", "/docs/a", &[], "v1").await, 201);
    let tag = tag_of(&base, "/docs/a").await;
    let made_up = [("if-match", "\"made-up\"")];
    for _ in 0..3 {
        assert_eq!(send(&base, "PUT", "/docs/a", &made_up, "lost").await, 412);
    }
    docs.lock()
        .unwrap()
        .insert("a".into(), "behind the layer".into());
    assert_eq!(
        send(&base, "GET", "/docs/a", &[("if-none-match", &tag)], "").await,
        304,
        "the 304 from memory"
    );
}

/// `If-None-Match: *` creates a document nobody has read, once; in 428 mode a blind write is
/// refused, a create-only one passes, and a POST to the collection goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_only_and_428_mode_let_new_documents_in() {
    for required in [false, true] {
        let layer = ConditionalLayer::new().require_precondition(required);
        let (base, docs) = serve(layer).await;
        let only = [("if-none-match", "*")];
        assert_eq!(send(&base, "PUT", "/docs/new", &only, "one").await, 201);
        assert_eq!(send(&base, "PUT", "/docs/new", &only, "two").await, 412);
        assert_eq!(docs.lock().unwrap()["new"], "one");
        let blind = send(&base, "PUT", "/docs/new", &[], "blind").await;
        assert_eq!(blind, if required { 428 } else { 204 }, "{required}");
        assert_eq!(send(&base, "POST", "/docs", &[], "posted").await, 201);
        assert_eq!(docs.lock().unwrap().len(), 2, "{required}");
    }
}

/// Of 32 concurrent creators of one document nobody has read, exactly one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_thirty_two_concurrent_creators_exactly_one_wins() {
    let (base, docs) = serve(ConditionalLayer::new()).await;
    let creators = (0..32).map(|i| {
        let base = base.clone();
        tokio::spawn(async move {
            let only = [("if-none-match", "*")];
            send(&base, "PUT", "/docs/race", &only, &format!("creator {i}")).await
        })
    });
    ifmatch_tower::conformance::one_won(creators).await;
    assert!(docs.lock().unwrap()["race"].starts_with("creator "));
}

/// Every setup a user writes either checks writes against the document as it is now, or says
/// at the first conditional write what to change: never a silent 412 for every create.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_setup_checks_writes_or_says_why_not_at_once() {
    let only = [("if-none-match", "*")];
    // The whole router as the fallback service of an outer router (the one-liner that keeps
    // a `Router`), and with `ServiceBuilder`.
    let docs = Docs::default();
    let whole = ConditionalLayer::new().layer(routes(docs.clone()));
    let base = common::serve(Router::new().fallback_service(whole)).await;
    assert_eq!(send(&base, "PUT", "/docs/a", &only, "one").await, 201);
    docs.lock().unwrap().insert("a".into(), "by the job".into());
    assert_eq!(send(&base, "PUT", "/docs/a", &only, "two").await, 412);
    let docs = Docs::default();
    let whole = tower::ServiceBuilder::new()
        .layer(ConditionalLayer::new())
        .service(routes(docs.clone()));
    let base = common::serve(Router::new().fallback_service(whole)).await;
    assert_eq!(send(&base, "PUT", "/docs/a", &only, "one").await, 201);
    docs.lock().unwrap().insert("a".into(), "by the job".into());
    assert_eq!(send(&base, "PUT", "/docs/a", &only, "two").await, 412);

    // `Router::layer` and `route_layer` wrap each method's handler apart: a 500 that names the
    // fix, and no handler runs.
    for route_layer in [false, true] {
        let docs = Docs::default();
        let app = if route_layer {
            routes(docs.clone()).route_layer(ConditionalLayer::new())
        } else {
            routes(docs.clone()).layer(ConditionalLayer::new())
        };
        let base = common::serve(app).await;
        let response = common::http()
            .put(format!("{base}/docs/a"))
            .header("if-none-match", "*")
            .body("one")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 500, "route_layer: {route_layer}");
        let text = response.text().await.unwrap();
        assert!(text.contains("fallback_service"), "{text}");
        assert!(docs.lock().unwrap().is_empty());
        // Reads are served and tagged all the same.
        docs.lock().unwrap().insert("b".into(), "b".into());
        let tag = tag_of(&base, "/docs/b").await;
        let revalidated = send(&base, "GET", "/docs/b", &[("if-none-match", &tag)], "").await;
        assert_eq!(revalidated, 304);
    }
}

/// A HEAD with a handler of its own gets the GET's tag and length; a 304 made of the
/// handler's own answer keeps the session cookie it renews on every view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_handler_and_a_sliding_session() {
    async fn page() -> (HeaderMap, &'static str) {
        let mut headers = HeaderMap::new();
        let renewed = "session=s1; Max-Age=1800; HttpOnly";
        headers.insert(header::SET_COOKIE, renewed.parse().unwrap());
        (headers, "the page")
    }
    async fn head() -> StatusCode {
        StatusCode::OK
    }
    let routes = Router::new().route("/page", get(page).head(head));
    let app = Router::new().fallback_service(ConditionalLayer::new().layer(routes));
    let base = common::serve(app).await;
    let http = common::http();
    let got = http.get(format!("{base}/page")).send().await.unwrap();
    let tag = got.headers()["etag"].to_str().unwrap().to_owned();
    let headed = http.head(format!("{base}/page")).send().await.unwrap();
    assert_eq!(headed.headers()["etag"], tag.as_str());
    assert_eq!(headed.headers()["content-length"], "8");

    let again = http
        .get(format!("{base}/page"))
        .header("if-none-match", &tag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(
        again.headers()[header::SET_COOKIE],
        "session=s1; Max-Age=1800; HttpOnly",
        "the renewal is not lost to the 304"
    );
}

/// A compressor inside the layer: each representation has its own strong tag, and while the
/// document is unchanged a write carrying the tag of either passes, whatever the writer's
/// `Accept-Encoding`; after a change, neither does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_representations_tag_is_current_until_the_document_changes() {
    let docs = Docs::default();
    docs.lock()
        .unwrap()
        .insert("a".into(), "long enough to be compressed. ".repeat(20));
    let compressed = routes(docs.clone()).layer(tower_http::compression::CompressionLayer::new());
    let app = Router::new().fallback_service(ConditionalLayer::new().layer(compressed));
    let base = common::serve(app).await;
    let read = async |accept: &'static str| {
        let url = format!("{base}/docs/a");
        let sent = common::http()
            .get(url)
            .header("accept-encoding", accept)
            .send();
        sent.await.unwrap().headers()["etag"]
            .to_str()
            .unwrap()
            .to_owned()
    };
    let (gzip, identity) = (read("gzip").await, read("identity").await);
    assert_ne!(gzip, identity, "two byte sequences, two strong tags");
    // An identity writer holding the gzip reader's tag: the same version.
    let write = |accept: &'static str, tag: String, body: String| {
        let base = base.clone();
        async move {
            let fields = [("accept-encoding", accept), ("if-match", tag.as_str())];
            send(&base, "PUT", "/docs/a", &fields, &body).await
        }
    };
    assert_eq!(
        write("identity", gzip.clone(), "v2. ".repeat(30)).await,
        204
    );
    assert_eq!(write("identity", gzip.clone(), "lost".into()).await, 412);
    assert_eq!(write("gzip", identity.clone(), "lost".into()).await, 412);
    let (gzip, identity) = (read("gzip").await, read("identity").await);
    assert_eq!(write("gzip", identity, "v3. ".repeat(30)).await, 204);
    assert_eq!(write("identity", gzip, "lost".into()).await, 412);
    assert!(docs.lock().unwrap()["a"].starts_with("v3. "));
}

/// A handler that answers from what it holds in memory answers the same `Bytes` until a write
/// replaces them, and the layer's asking reuses their tag without hashing them again: the tag
/// of bytes replaced never answers for the new ones. Each round, a write with the tag before
/// the last change is refused and one with the current tag goes through; the document ends
/// with the last write.
#[tokio::test]
async fn a_tag_reused_for_the_same_bytes_never_outlives_them() {
    use axum::body::Bytes;
    type Held = Arc<Mutex<Bytes>>;
    async fn read(State(held): State<Held>) -> Bytes {
        held.lock().unwrap().clone()
    }
    async fn write(State(held): State<Held>, body: Bytes) -> StatusCode {
        // A copy of its own: the request's buffer is not kept.
        *held.lock().unwrap() = Bytes::copy_from_slice(&body);
        StatusCode::NO_CONTENT
    }
    use axum::response::IntoResponse;
    let held: Held = Arc::new(Mutex::new(Bytes::from(vec![b'0'; 4096])));
    let routes = Router::new()
        .route("/doc", get(read).put(write))
        .with_state(held.clone());
    let app = tower::ServiceBuilder::new()
        .map_response(IntoResponse::into_response)
        .layer(ConditionalLayer::new())
        .service(routes);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::ServiceExt::<axum::extract::Request>::into_make_service(app);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut before = tag_of(&base, "/doc").await;
    let first = format!("{}{}", "1", "x".repeat(4095));
    assert_eq!(
        send(&base, "PUT", "/doc", &[("if-match", &before)], &first).await,
        204
    );
    for round in 2..100 {
        let now = tag_of(&base, "/doc").await;
        assert_ne!(now, before, "round {round}");
        // Twice each: the second asking finds the tag of the bytes the first one hashed.
        for _ in 0..2 {
            let refused = send(&base, "PUT", "/doc", &[("if-match", &before)], "stale").await;
            assert_eq!(
                refused, 412,
                "round {round}: a write with the tag before the last change"
            );
        }
        let content = format!("{round}{}", "x".repeat(4095));
        assert_eq!(
            send(&base, "PUT", "/doc", &[("if-match", &now)], &content).await,
            204,
            "round {round}"
        );
        before = now;
    }
    assert!(held.lock().unwrap().starts_with(b"99x"));
}
