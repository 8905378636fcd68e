//! The layer on a plain hyper 1 server (through hyper-util), with tower's `ServiceBuilder`.
//!
//! ```sh
//! cargo run -p examples --example hyper-hello        # listens on 127.0.0.1:3001
//! curl -i localhost:3001/                            # ETag: "<sha-256 of the greeting>"
//! ```

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use ifmatch_tower::ConditionalLayer;
use tower::ServiceBuilder;

async fn hello(_: Request<Full<Bytes>>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        b"hello from hyper\n",
    ))))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3001".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("hyper-hello listening on http://{}", listener.local_addr()?);
    let service = ServiceBuilder::new()
        // hyper hands over `Incoming` bodies, and the layer needs a request body type it can
        // create for its own GETs (`Default`). This app only reads, so it drops request bodies;
        // an app that writes would collect them (bounded) into `Full` here.
        .map_request(|r: Request<hyper::body::Incoming>| r.map(|_| Full::default()))
        .layer(ConditionalLayer::new())
        .service_fn(hello);
    loop {
        let (stream, _) = listener.accept().await?;
        let service = TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
