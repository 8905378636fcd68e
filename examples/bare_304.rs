//! The floor under `ifmatch serve`'s 304: hyper's HTTP/1 server and nothing else (no account,
//! no routing, no record, no admission, no metrics), answering a request whose `If-None-Match`
//! is its one tag with the head Get Blob's 304 carries (the same fields and lengths, a fresh
//! request id each time, hyper's `date`), on the same threads as `ifmatch serve`'s blob
//! listener (one per core, each with its own runtime and `SO_REUSEPORT` listener).
//! `scripts/bench-nginx` measures it beside nginx and `ifmatch serve`: what hyper and tokio
//! cost a 304 before ifmatch does anything.
//!
//! `LISTEN=127.0.0.1:8082 cargo run --profile dist -p examples --example bare-304`

use std::cell::Cell;
use std::convert::Infallible;
use std::net::SocketAddr;

use http::header::{ETAG, IF_NONE_MATCH, LAST_MODIFIED};
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;

/// The tag the bench's 304s name: a SHA-256 in hex, as `ifmatch serve`'s.
const TAG: &str = "\"7679c8ee953f45b50dcad1c0a21671b9f25556e3d7ee738c6a49331f61166f05\"";

fn main() {
    let listen: SocketAddr = std::env::var("LISTEN")
        .expect("LISTEN=host:port")
        .parse()
        .expect("LISTEN is host:port");
    examples::serve_on_every_core(move || serve(listen));
}

async fn serve(listen: SocketAddr) {
    examples::accept_each(listen, |stream| {
        let service = hyper::service::service_fn(|request: http::Request<Incoming>| {
            std::future::ready(Ok::<_, Infallible>(answer(&request)))
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    })
    .await;
}

/// 304 with Get Blob's fields when the request names [`TAG`], else 200 with the tag alone.
fn answer(request: &http::Request<Incoming>) -> Response<Empty<Bytes>> {
    let mut answer = Response::new(Empty::new());
    answer
        .headers_mut()
        .insert(ETAG, HeaderValue::from_static(TAG));
    if request
        .headers()
        .get(IF_NONE_MATCH)
        .map(HeaderValue::as_bytes)
        != Some(TAG.as_bytes())
    {
        return answer;
    }
    *answer.status_mut() = StatusCode::NOT_MODIFIED;
    let headers = answer.headers_mut();
    let modified = HeaderValue::from_static("Mon, 30 Nov 2026 17:09:57 GMT");
    headers.insert(LAST_MODIFIED, modified);
    headers.insert("x-ms-lease-state", HeaderValue::from_static("available"));
    headers.insert("x-ms-lease-status", HeaderValue::from_static("unlocked"));
    headers.insert(
        "x-ms-error-code",
        HeaderValue::from_static("ConditionNotMet"),
    );
    headers.insert("x-ms-request-id", request_id());
    headers.insert("x-ms-version", HeaderValue::from_static("2021-12-02"));
    answer
}

thread_local! {
    static NEXT: Cell<u64> = const { Cell::new(0) };
}

/// A request id of a UUID's shape and length, different for every answer of this thread.
fn request_id() -> HeaderValue {
    let n = NEXT.with(|next| {
        next.set(next.get() + 1);
        next.get()
    });
    let mut id = *b"00000000-0000-4000-8000-000000000000";
    let hex = b"0123456789abcdef";
    for (i, slot) in id[24..].iter_mut().rev().enumerate() {
        *slot = hex[((n >> (4 * i)) & 0xf) as usize];
    }
    HeaderValue::from_bytes(&id).expect("hex digits and dashes")
}
