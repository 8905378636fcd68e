//! The floor under `ifmatch proxy`: hyper's HTTP/1 server and pooled client and nothing else
//! (no layer, no hashing, no forwarding headers, no limits, no metrics), on the same threads
//! as `ifmatch proxy` (one per core, each with its own runtime, `SO_REUSEPORT` listener and
//! origin pool). `scripts/bench-proxy` measures it beside nginx and `ifmatch proxy`: what
//! hyper and tokio cost a proxied request before ifmatch does anything.
//!
//! `LISTEN=127.0.0.1:8081 UPSTREAM=127.0.0.1:8080 cargo run --profile dist -p examples --example bare-proxy`

use std::convert::Infallible;
use std::net::SocketAddr;

use http::uri::{Authority, Parts, Scheme};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

fn main() {
    let listen: SocketAddr = std::env::var("LISTEN")
        .expect("LISTEN=host:port")
        .parse()
        .expect("LISTEN is host:port");
    let upstream: Authority = std::env::var("UPSTREAM")
        .expect("UPSTREAM=host:port")
        .parse()
        .expect("UPSTREAM is host:port");
    examples::serve_on_every_core(move || serve(listen, upstream.clone()));
}

async fn serve(listen: SocketAddr, upstream: Authority) {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<_, Incoming> = Client::builder(TokioExecutor::new()).build(connector);
    examples::accept_each(listen, |stream| {
        let (client, upstream) = (client.clone(), upstream.clone());
        let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
            let mut parts = Parts::default();
            parts.scheme = Some(Scheme::HTTP);
            parts.authority = Some(upstream.clone());
            parts.path_and_query = request.uri().path_and_query().cloned();
            if let Ok(uri) = http::Uri::from_parts(parts) {
                *request.uri_mut() = uri;
            }
            let client = client.clone();
            async move {
                let answer = match client.request(request).await {
                    Ok(response) => response.map(http_body_util::Either::Left),
                    Err(_) => {
                        let mut gone = http::Response::new(http_body_util::Either::Right(
                            http_body_util::Empty::new(),
                        ));
                        *gone.status_mut() = http::StatusCode::BAD_GATEWAY;
                        gone
                    }
                };
                Ok::<_, Infallible>(answer)
            }
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    })
    .await;
}
