//! What the socket tests share: an axum app served on a loopback port, and a client.

#![allow(dead_code, unreachable_pub)]

/// Serves `app` on a free loopback port; answers its base URL.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// A client that never goes through a proxy.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A PUT of `body` to `url` with `If-Match: tag`, and `also` (one header more) if given: its
/// status.
pub async fn put_if_match(
    url: String,
    tag: &str,
    also: Option<(&str, &str)>,
    body: &'static str,
) -> u16 {
    let mut put = http().put(url).header("if-match", tag).body(body);
    if let Some((name, value)) = also {
        put = put.header(name, value);
    }
    put.send().await.unwrap().status().as_u16()
}

/// Documents by id, what [`docs`] serves.
pub type Docs = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, bytes::Bytes>>>;

/// Serves [`Docs`] at `/docs/{id}` behind `layer`: GET (404 when absent), PUT (`created` for
/// a new document, 204 for a replaced one), DELETE (204, or 404). Answers the base URL and the
/// documents, for tests that change them behind the layer's back.
pub async fn docs(
    layer: ifmatch_tower::ConditionalLayer,
    created: axum::http::StatusCode,
) -> (String, Docs) {
    let (app, documents) = docs_app(created);
    (serve(around(layer, app)).await, documents)
}

/// [`docs`] with the layer given to axum's `Router::layer`, which wraps each method's handler
/// apart.
pub async fn docs_per_method(
    layer: ifmatch_tower::ConditionalLayer,
    created: axum::http::StatusCode,
) -> (String, Docs) {
    let (app, documents) = docs_app(created);
    (serve(app.layer(layer)).await, documents)
}

/// The application [`docs`] serves, and its documents.
pub fn docs_app(created: axum::http::StatusCode) -> (axum::Router, Docs) {
    use axum::extract::{Path, State};
    use axum::http::StatusCode;
    let read = async |State(docs): State<Docs>, Path(id): Path<String>| {
        let docs = docs.lock().unwrap();
        docs.get(&id).cloned().ok_or(StatusCode::NOT_FOUND)
    };
    let write =
        async move |State(docs): State<Docs>, Path(id): Path<String>, body: bytes::Bytes| {
            let replaced = docs.lock().unwrap().insert(id, body).is_some();
            if replaced {
                StatusCode::NO_CONTENT
            } else {
                created
            }
        };
    let remove = async |State(docs): State<Docs>, Path(id): Path<String>| {
        let removed = docs.lock().unwrap().remove(&id).is_some();
        if removed {
            StatusCode::NO_CONTENT
        } else {
            StatusCode::NOT_FOUND
        }
    };
    let documents = Docs::default();
    let app = axum::Router::new()
        .route(
            "/docs/{id}",
            axum::routing::get(read).put(write).delete(remove),
        )
        .with_state(documents.clone());
    (app, documents)
}

/// `app` with `layer` around the whole of it, as the README sets it up: the layer then asks
/// the application for the current version of whatever a conditional write names.
pub fn around<V>(layer: ifmatch_tower::ConditionalLayer<V>, app: axum::Router) -> axum::Router
where
    V: ifmatch_tower::VersionStore + Clone + Send + Sync + 'static,
{
    use tower::Layer;
    axum::Router::new().fallback_service(layer.layer(app))
}
