//! What every shared version backend must give a fleet, as scenarios its tests run (included
//! with `#[path]` by `ifmatch-redis`, `ifmatch-bucket` and `examples/fleet_versions.rs`): two instances of one axum app, each
//! behind the layer around its whole router, sharing one database (a map both read and write)
//! and one backend for the layer's versions and write locks, as a fleet behind a load
//! balancer runs.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use ifmatch_tower::{ConditionalLayer, VersionStore};
use tower::Layer;

pub type Docs = Arc<Mutex<BTreeMap<String, String>>>;

fn routes(docs: Docs) -> Router {
    async fn read(State(docs): State<Docs>, Path(id): Path<String>) -> Result<String, StatusCode> {
        let docs = docs.lock().unwrap();
        docs.get(&id).cloned().ok_or(StatusCode::NOT_FOUND)
    }
    async fn write(State(docs): State<Docs>, Path(id): Path<String>, body: String) -> StatusCode {
        // A database round trip: long enough for a write on the other instance to come between,
        // were the lock not shared.
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        match docs.lock().unwrap().insert(id, body) {
            Some(_) => StatusCode::NO_CONTENT,
            None => StatusCode::CREATED,
        }
    }
    Router::new()
        .route("/docs/{id}", get(read).put(write))
        .with_state(docs)
}

/// Two instances over `docs`, each with one of `versions` as its layer's version backend, with
/// a compressor inside the layer when `compressed`: their base URLs.
pub async fn fleet_of<V: VersionStore + Clone>(
    versions: [V; 2],
    docs: &Docs,
    compressed: bool,
) -> [String; 2] {
    let mut bases = Vec::new();
    for versions in versions {
        let layer = ConditionalLayer::new().versions(versions);
        let mut routes = routes(docs.clone());
        if compressed {
            routes = routes.layer(tower_http::compression::CompressionLayer::new());
        }
        let app = Router::new().fallback_service(layer.layer(routes));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        bases.push(format!("http://{}", listener.local_addr().unwrap()));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    }
    [bases[0].clone(), bases[1].clone()]
}

/// One client per thread (a client made anew reads the system's certificates; one kept past
/// its runtime would hold connections of a runtime that is gone, and a thread ends with it).
fn http() -> reqwest::Client {
    thread_local! {
        static CLIENT: reqwest::Client = reqwest::Client::builder().no_proxy().build().unwrap();
    }
    CLIENT.with(Clone::clone)
}

pub async fn put(base: &str, path: &str, condition: (&str, &str), body: String) -> u16 {
    let response = http()
        .put(format!("{base}{path}"))
        .header(condition.0, condition.1)
        .body(body)
        .send()
        .await
        .unwrap();
    response.status().as_u16()
}

pub async fn read(base: &str, path: &str) -> (String, String) {
    let response = http().get(format!("{base}{path}")).send().await.unwrap();
    let tag = response.headers()["etag"].to_str().unwrap().to_owned();
    (tag, response.text().await.unwrap())
}

/// One instance over a database of its own, with `versions` as its layer's version backend:
/// its base URL and its database.
pub async fn one_instance<V: VersionStore + Clone>(versions: V) -> (String, Docs) {
    let docs = Docs::default();
    let layer = ConditionalLayer::new().versions(versions);
    let app = Router::new().fallback_service(layer.layer(routes(docs.clone())));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, docs)
}

/// Of 32 creators spread over both instances, one wins; a write carrying a tag read before a
/// change behind the layer is refused by both; 32 clients read-modify-write one counter
/// through both and lose no increment.
pub async fn loses_no_update_and_creates_once<V: VersionStore + Clone>(versions: [V; 2]) {
    let docs = Docs::default();
    let [a, b] = fleet_of(versions, &docs, false).await;

    // Of 32 creators over both instances, one wins.
    let creators = (0..32).map(|i| {
        let base = if i % 2 == 0 { a.clone() } else { b.clone() };
        tokio::spawn(
            async move { put(&base, "/docs/c", ("if-none-match", "*"), format!("{i}")).await },
        )
    });
    ifmatch_tower::conformance::one_won(creators).await;

    // Read through A; a job changes the document; neither instance takes the old tag.
    let (tag, _) = read(&a, "/docs/c").await;
    docs.lock().unwrap().insert("c".into(), "by the job".into());
    for base in [&a, &b] {
        assert_eq!(
            put(base, "/docs/c", ("if-match", &tag), "lost".into()).await,
            412
        );
    }
    assert_eq!(docs.lock().unwrap()["c"], "by the job");

    // 32 clients add one each to a counter, read-modify-write with If-Match, retrying on 412.
    docs.lock().unwrap().insert("n".into(), "0".into());
    let clients = (0..32).map(|i| {
        let base = if i % 2 == 0 { a.clone() } else { b.clone() };
        tokio::spawn(async move {
            loop {
                let (tag, value) = read(&base, "/docs/n").await;
                let next = (value.parse::<u64>().unwrap() + 1).to_string();
                match put(&base, "/docs/n", ("if-match", &tag), next).await {
                    204 => return,
                    412 => continue,
                    other => panic!("{other}"),
                }
            }
        })
    });
    for client in clients {
        client.await.unwrap();
    }
    assert_eq!(docs.lock().unwrap()["n"], "32", "no increment lost");
}

/// With a compressor inside the layer, a tag of either representation read on one instance is
/// current on the other until the document changes.
pub async fn either_representation_is_current_on_either_instance<V: VersionStore + Clone>(
    versions: [V; 2],
) {
    let docs = Docs::default();
    let long = |version: &str| format!("{version}, long enough to be compressed. ").repeat(20);
    docs.lock().unwrap().insert("a".into(), long("v1"));
    let [a, b] = fleet_of(versions, &docs, true).await;
    let read = |base: String, accept: &'static str| async move {
        let response = http()
            .get(format!("{base}/docs/a"))
            .header("accept-encoding", accept)
            .send()
            .await
            .unwrap();
        response.headers()["etag"].to_str().unwrap().to_owned()
    };
    let write = |base: String, accept: &'static str, tag: String, body: String| async move {
        let response = http()
            .put(format!("{base}/docs/a"))
            .header("accept-encoding", accept)
            .header("if-match", tag)
            .body(body)
            .send()
            .await
            .unwrap();
        response.status().as_u16()
    };
    // A gzip reader on A, an identity writer on B, which never served the gzip bytes.
    let gzip = read(a.clone(), "gzip").await;
    let identity = read(a.clone(), "identity").await;
    assert_ne!(gzip, identity);
    assert_eq!(
        write(b.clone(), "identity", gzip.clone(), long("v2")).await,
        204
    );
    // Changed: neither old tag passes, on either instance.
    for base in [&a, &b] {
        for tag in [&gzip, &identity] {
            let status = write(base.clone(), "identity", tag.clone(), "lost".into()).await;
            assert_eq!(status, 412, "{tag}");
        }
    }
    assert_eq!(docs.lock().unwrap()["a"], long("v2"));
}
