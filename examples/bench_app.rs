//! The app of the layer's load benchmark (`scripts/bench-tower`): one axum route answering a
//! fixed 4 KiB body, after DELAY_MS milliseconds, with the layer when LAYER=on, and an ETag of
//! the handler's own when HANDLER_ETAG=on.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use ifmatch_tower::ConditionalLayer;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3002".into());
    let delay = Duration::from_millis(
        std::env::var("DELAY_MS")
            .ok()
            .and_then(|d| d.parse().ok())
            .unwrap_or(0),
    );
    let layer = std::env::var("LAYER").is_ok_and(|l| l == "on");
    // With HANDLER_ETAG=on the handler names its own version: the layer never buffers or hashes.
    let handler_etag = std::env::var("HANDLER_ETAG").is_ok_and(|l| l == "on");
    let body = Bytes::from(
        (0..4096u32)
            .map(|i| b'a' + (i % 26) as u8)
            .collect::<Vec<u8>>(),
    );
    let handler = move || {
        let body = body.clone();
        async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let etag = handler_etag.then_some([(axum::http::header::ETAG, "\"v1\"")]);
            (etag, body)
        }
    };
    let mut app = Router::new().route("/doc", get(handler));
    if layer {
        app = app.layer(ConditionalLayer::new());
    }
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "bench-app on http://{} (layer {}, delay {delay:?})",
        listener.local_addr()?,
        if layer { "on" } else { "off" }
    );
    axum::serve(listener, app).await
}
