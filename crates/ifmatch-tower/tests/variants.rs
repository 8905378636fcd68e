//! One resource, one representation per user (`Vary: Authorization`). A
//! user's `If-Match` of his own tag is checked against his own variant: it passes while nobody
//! has written, and another user's tag never lets him write.

use crate::common;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::get;
use ifmatch_tower::ConditionalLayer;

type Doc = Arc<Mutex<String>>;

async fn serve() -> String {
    async fn read(State(doc): State<Doc>, headers: HeaderMap) -> (HeaderMap, String) {
        let user = headers
            .get(header::AUTHORIZATION)
            .map_or("anonymous", |v| v.to_str().unwrap())
            .to_owned();
        let mut out = HeaderMap::new();
        out.insert(header::VARY, "authorization".parse().unwrap());
        (out, format!("{} as seen by {user}", doc.lock().unwrap()))
    }
    async fn write(State(doc): State<Doc>, body: String) -> StatusCode {
        *doc.lock().unwrap() = body;
        StatusCode::NO_CONTENT
    }
    let app = Router::new()
        .route("/doc", get(read).put(write))
        .with_state(Doc::new(Mutex::new("v1".into())));
    common::serve(common::around(ConditionalLayer::new(), app)).await
}

use common::http;

async fn read(base: &str, user: &str) -> String {
    let asked = http()
        .get(format!("{base}/doc"))
        .header("authorization", user);
    let r = asked.send().await.unwrap();
    r.headers()["etag"].to_str().unwrap().to_owned()
}

async fn write(base: &str, user: &str, tag: &str, body: &'static str) -> u16 {
    let user = Some(("authorization", user));
    common::put_if_match(format!("{base}/doc"), tag, user, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_writes_with_his_own_tag() {
    let base = serve().await;
    let alice = read(&base, "Bearer alice").await;
    let bob = read(&base, "Bearer bob").await;
    assert_ne!(alice, bob);
    assert_eq!(
        write(&base, "Bearer alice", &bob, "by alice with bob's tag").await,
        412
    );
    assert_eq!(
        write(&base, "Bearer bob", &bob, "v2 by bob").await,
        204,
        "bob's own tag"
    );
    assert_eq!(
        write(&base, "Bearer alice", &alice, "lost update").await,
        412
    );
    let alice = read(&base, "Bearer alice").await;
    assert_eq!(
        write(&base, "Bearer alice", &alice, "v3 by alice").await,
        204
    );
}
