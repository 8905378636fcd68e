//! No cached answer reaches a user it was not made for (RFC 9111 3.5): the layer
//! outermost with authentication inside it (the README's order) and the other way round, over
//! a real socket, with `Authorization` and `Cookie`.

use crate::common;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ifmatch_tower::ConditionalLayer;

/// Alice's token or cookie pass; anything else is 401.
async fn auth(request: Request, next: Next) -> Response {
    let headers = request.headers();
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let cookie = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
    if bearer == Some("Bearer alice-token") || cookie == Some("session=alice") {
        return next.run(request).await;
    }
    StatusCode::UNAUTHORIZED.into_response()
}

/// A private document, with a field and a cookie that are Alice's alone.
async fn document() -> (HeaderMap, &'static str) {
    let mut headers = HeaderMap::new();
    headers.insert("x-user", "alice".parse().unwrap());
    headers.insert(header::SET_COOKIE, "seen=1; HttpOnly".parse().unwrap());
    (headers, "alice's diary")
}

async fn serve(app: Router) -> String {
    common::serve(app).await
}

async fn get_with(base: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let http = common::http();
    let mut request = http.get(format!("{base}/diary"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

async fn no_304_for_other_credentials(app: Router, order: &str) {
    let base = serve(app).await;
    for alice in [
        ("authorization", "Bearer alice-token"),
        ("cookie", "session=alice"),
    ] {
        let first = get_with(&base, &[alice]).await;
        assert_eq!(first.status(), 200, "{order}");
        let tag = first.headers()["etag"].to_str().unwrap().to_owned();
        let inm = ("if-none-match", tag.as_str());
        let others: [&[(&str, &str)]; 5] = [
            &[inm],
            &[inm, ("authorization", "Bearer mallory")],
            &[inm, ("authorization", "Bearer alice-token-but-longer")],
            &[inm, ("cookie", "session=bob")],
            &[
                inm,
                ("cookie", "session=alice; extra=1"),
                ("authorization", "Bearer x"),
            ],
        ];
        for headers in others {
            let r = get_with(&base, headers).await;
            assert_eq!(r.status(), 401, "{order}: {headers:?} after {alice:?}");
        }
        // Alice herself still revalidates cheaply, and her 304 replays nothing of hers.
        let again = get_with(&base, &[alice, inm]).await;
        assert_eq!(again.status(), 304, "{order}");
        assert!(again.headers().get("x-user").is_none(), "{order}");
        assert!(again.headers().get(header::SET_COOKIE).is_none(), "{order}");
        assert_eq!(again.headers()["etag"].to_str().unwrap(), tag);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_outside_authentication_never_answers_304_to_other_credentials() {
    let app = Router::new()
        .route("/diary", get(document))
        .layer(middleware::from_fn(auth))
        .layer(ConditionalLayer::new().key_fn(|uri, _| Some(uri.path().to_owned())));
    no_304_for_other_credentials(app, "layer outermost").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_inside_authentication_never_answers_304_to_other_credentials() {
    let app = Router::new()
        .route("/diary", get(document))
        .layer(ConditionalLayer::new().key_fn(|uri, _| Some(uri.path().to_owned())))
        .layer(middleware::from_fn(auth));
    no_304_for_other_credentials(app, "authentication outermost").await;
}

/// RFC 9110 13.2.1: preconditions are evaluated after authentication, so a request whose
/// credentials the application refuses gets the application's 401, never a 412 that would
/// tell a stranger whether a guessed tag is current: with authentication outside the layer,
/// and inside it (the layer's GET for the current version carries the write's credentials,
/// and the application's refusal of it is the answer).
async fn refused_writes_get_the_applications_answer(app: Router, order: &str) {
    let base = serve(app).await;
    let alice = ("authorization", "Bearer alice-token");
    let tag = get_with(&base, &[alice]).await.headers()["etag"]
        .to_str()
        .unwrap()
        .to_owned();
    let put = |headers: Vec<(&'static str, String)>| {
        let mut request = common::http().put(format!("{base}/diary")).body("x");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move { request.send().await.unwrap().status() }
    };
    for guess in [tag.clone(), "\"stale\"".to_owned()] {
        let status = put(vec![("if-match", guess.clone())]).await;
        assert_eq!(status, 401, "{order}: {guess}");
        let header = ("if-none-match", tag.clone());
        assert_eq!(
            get_with(&base, &[(header.0, &header.1)]).await.status(),
            401,
            "{order}"
        );
    }
    let stale = put(vec![
        ("if-match", "\"stale\"".to_owned()),
        (alice.0, alice.1.to_owned()),
    ])
    .await;
    assert_eq!(stale, 412, "{order}: Alice's stale write");
    let current = put(vec![("if-match", tag), (alice.0, alice.1.to_owned())]).await;
    assert_eq!(current, 204, "{order}: Alice's current write");
}

async fn write() -> StatusCode {
    StatusCode::NO_CONTENT
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_authentication_outside_a_refused_write_is_401_not_412() {
    let routes = Router::new().route("/diary", get(document).put(write));
    let app = common::around(ConditionalLayer::new(), routes).layer(middleware::from_fn(auth));
    refused_writes_get_the_applications_answer(app, "authentication outside").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_authentication_inside_a_refused_write_is_401_not_412() {
    let routes = Router::new()
        .route("/diary", get(document).put(write))
        .layer(middleware::from_fn(auth));
    let app = common::around(ConditionalLayer::new(), routes);
    refused_writes_get_the_applications_answer(app, "authentication inside").await;
}
