//! A small document store in axum whose handlers know nothing of ETags; one layer gives it
//! strong ETags, 304s from the cache and atomic conditional writes.
//!
//! ```sh
//! cargo run -p examples --example axum-docs          # listens on 127.0.0.1:3000
//! curl -i -X PUT --data 'v1' localhost:3000/docs/a
//! curl -i localhost:3000/docs/a                       # ETag: "<sha-256 of v1>"
//! curl -i -H 'If-None-Match: "<tag>"' localhost:3000/docs/a            # 304, handler not run
//! curl -i -X PUT -H 'If-Match: "<an older tag>"' --data 'v2' localhost:3000/docs/a   # 412
//! curl -i -X PUT -H 'If-None-Match: *' --data 'new' localhost:3000/docs/b           # 201
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;
use ifmatch_tower::ConditionalLayer;
use tower::Layer;

type Docs = Arc<Mutex<HashMap<String, Bytes>>>;

async fn read(State(docs): State<Docs>, Path(id): Path<String>) -> Result<Bytes, StatusCode> {
    docs.lock()
        .unwrap()
        .get(&id)
        .cloned()
        .ok_or(StatusCode::NOT_FOUND)
}

async fn write(State(docs): State<Docs>, Path(id): Path<String>, body: Bytes) -> StatusCode {
    match docs.lock().unwrap().insert(id, body) {
        Some(_) => StatusCode::NO_CONTENT,
        None => StatusCode::CREATED,
    }
}

async fn remove(State(docs): State<Docs>, Path(id): Path<String>) -> StatusCode {
    match docs.lock().unwrap().remove(&id) {
        Some(_) => StatusCode::NO_CONTENT,
        None => StatusCode::NOT_FOUND,
    }
}

/// The document store, behind the layer. The layer goes around the whole router, so that a
/// conditional write can ask the GET route for the document as it is now (axum's
/// `Router::layer` would wrap each method's handler apart).
fn app() -> Router {
    let routes = Router::new()
        .route("/docs/{id}", get(read).put(write).delete(remove))
        .with_state(Docs::default());
    Router::new().fallback_service(ConditionalLayer::new().layer(routes))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("axum-docs listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app()).await
}
