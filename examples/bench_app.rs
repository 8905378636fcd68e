//! The app of the layer's load benchmark (`scripts/bench-tower`): one axum route answering a
//! fixed 4 KiB body (a PUT of it stores nothing and answers 204), with the layer around the
//! whole router: served as a service of its own when LAYER=service (the README's setup), as the
//! fallback service of an outer router when LAYER=on, or served as a service of its own but
//! skipping every request when LAYER=service-skip (what wrapping alone costs); every
//! conditional write asks the GET route for the document, or with LAYER=service-trusting /
//! trusting the layer judges writes by what it remembers (`every_change_passes_through`). An
//! ETag of the handler's own when HANDLER_ETAG=on. With RENDER=fresh, the handler renders its
//! answer anew each time (a copy of the document), as one that serializes a record does, rather
//! than answering the `Bytes` it holds. With DELAY_MS, the handler takes that long:
//! waiting (DELAY_MODE=wait, the default, as for a database) or computing (DELAY_MODE=compute,
//! as for rendering).
//!
//! For the caching proxy's benchmark (`scripts/bench-cache`), answers a shared cache may keep
//! for an hour, each with a tag of its own: `/cached/4k`, `/cached/1m` (1 MiB), and
//! `/keys/{anything}` (4 KiB, one per path); and for its cold misses, `/cold/{anything}`: 10 MiB
//! a shared cache may keep for an hour, sent in 64 KiB chunks over about a second, whose GETs
//! `/gets/{anything}` counts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::routing::get;
use bytes::Bytes;
use futures_util::StreamExt;
use ifmatch_tower::ConditionalLayer;

/// The GETs of each `/cold/{key}`.
type Gets = Arc<Mutex<HashMap<String, u64>>>;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3002".into());
    let delay = Duration::from_millis(
        std::env::var("DELAY_MS")
            .ok()
            .and_then(|d| d.parse().ok())
            .unwrap_or(0),
    );
    let compute = std::env::var("DELAY_MODE").is_ok_and(|m| m == "compute");
    let mode = std::env::var("LAYER").unwrap_or_default();
    // LAYER=service (and service-trusting): the layer around the router served as a service of
    // its own (the README's setup, axum's way for a middleware before routing); LAYER=on (and
    // trusting): the layer as the fallback service of an outer router, one router more.
    let service = mode == "service" || mode == "service-trusting" || mode == "service-skip";
    let layer = mode == "on" || mode == "trusting";
    let trusting = mode.ends_with("trusting");
    let conditional = if mode == "service-skip" {
        ConditionalLayer::new().skip(|_, _| true)
    } else if trusting {
        ConditionalLayer::new().every_change_passes_through()
    } else {
        ConditionalLayer::new()
    };
    // With HANDLER_ETAG=on the handler names its own version: the layer never buffers or hashes.
    let handler_etag = std::env::var("HANDLER_ETAG").is_ok_and(|l| l == "on");
    let fresh = std::env::var("RENDER").is_ok_and(|r| r == "fresh");
    let body = Bytes::from(
        (0..4096u32)
            .map(|i| b'a' + (i % 26) as u8)
            .collect::<Vec<u8>>(),
    );
    // A write that leaves the document as it was, and says its version, as a handler that
    // knows it does (what lets a layer that trusts its memory skip asking next time).
    let tag = ifmatch_core::strong_etag(&body).to_header_value();
    let handler = move || {
        let body = if fresh {
            Bytes::copy_from_slice(&body)
        } else {
            body.clone()
        };
        async move {
            if compute {
                // Busy for the whole delay, on the worker thread, as CPU-bound work is.
                let start = std::time::Instant::now();
                while start.elapsed() < delay {
                    std::hint::spin_loop();
                }
            } else if !delay.is_zero() {
                // tokio's timer rounds up to the next millisecond tick (a 1 ms sleep takes about
                // 2 ms); a thread sleep waits the delay itself.
                let _ = tokio::task::spawn_blocking(move || std::thread::sleep(delay)).await;
            }
            let etag = handler_etag.then_some([(axum::http::header::ETAG, "\"v1\"")]);
            (etag, body)
        }
    };
    let stored = move || {
        let tag = tag.clone();
        async move {
            let fields = [(axum::http::header::ETAG, tag)];
            (axum::http::StatusCode::NO_CONTENT, fields)
        }
    };
    let mut app = Router::new()
        .route("/doc", get(handler).put(stored))
        .merge(cache_routes())
        // A router served as a plain service turns its handlers into routes now rather than
        // on every request (`axum::serve` does it for the router it is given).
        .with_state(());
    if layer {
        app = Router::new().fallback_service(tower::Layer::layer(&conditional, app));
    }
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "bench-app on http://{} (layer {}, delay {delay:?})",
        listener.local_addr()?,
        if layer || service {
            mode.as_str()
        } else {
            "off"
        }
    );
    if service {
        use axum::response::IntoResponse;
        let app = tower::ServiceBuilder::new()
            .map_response(IntoResponse::into_response)
            .layer(conditional)
            .service(app);
        let app = axum::ServiceExt::<axum::extract::Request>::into_make_service(app);
        return axum::serve(listener, app).await;
    }
    axum::serve(listener, app).await
}

/// The routes the proxy's benchmarks read: cacheable answers of 4 KiB and 1 MiB, a slow cold
/// one, and how often each cold key was read.
fn cache_routes() -> Router {
    let cacheable = |size: usize, tag: &'static str| {
        let body = Bytes::from(
            (0..size)
                .map(|i| b'a' + (i % 26) as u8)
                .collect::<Vec<u8>>(),
        );
        move || {
            let body = body.clone();
            async move {
                let fields = [
                    (axum::http::header::CACHE_CONTROL, "max-age=3600"),
                    (axum::http::header::ETAG, tag),
                ];
                (fields, body)
            }
        }
    };
    let gets: Gets = Arc::default();
    let cold = {
        let gets = gets.clone();
        move |Path(key): Path<String>| {
            *gets.lock().unwrap().entry(key).or_default() += 1;
            let chunks = futures_util::stream::iter(0..160u8).then(|i| async move {
                tokio::time::sleep(Duration::from_millis(6)).await;
                Ok::<_, std::io::Error>(Bytes::from(vec![i; 64 << 10]))
            });
            let fields = [
                (axum::http::header::CACHE_CONTROL, "max-age=3600".to_owned()),
                (axum::http::header::CONTENT_LENGTH, (160 << 16).to_string()),
            ];
            async move { (fields, axum::body::Body::from_stream(chunks)) }
        }
    };
    let counted = move |Path(key): Path<String>| {
        let n = gets.lock().unwrap().get(&key).copied().unwrap_or(0);
        async move { n.to_string() }
    };
    Router::new()
        .route("/cold/{key}", get(cold))
        .route("/gets/{key}", get(counted))
        .route("/cached/4k", get(cacheable(4096, "\"c4k\"")))
        .route("/cached/1m", get(cacheable(1 << 20, "\"c1m\"")))
        .route("/keys/{key}", get(cacheable(4096, "\"key\"")))
}
