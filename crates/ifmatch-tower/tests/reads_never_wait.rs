//! Only writes wait for a key's write lock (a read that waited would make the layer a queue). Sixteen concurrent first reads
//! of one key run side by side, and a read while a write holds the lock is served at once.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use ifmatch_tower::ConditionalLayer;
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};

/// GETs take 100 ms, PUTs 600 ms.
fn slow() -> BoxCloneSyncService<Request<Full<Bytes>>, Response<Full<Bytes>>, Infallible> {
    BoxCloneSyncService::new(tower::service_fn(
        |request: Request<Full<Bytes>>| async move {
            let pause = if request.method() == Method::GET {
                100
            } else {
                600
            };
            tokio::time::sleep(Duration::from_millis(pause)).await;
            let mut response = Response::new(Full::new(Bytes::from_static(b"document")));
            if request.method() != Method::GET {
                *response.status_mut() = StatusCode::NO_CONTENT;
            }
            Ok::<_, Infallible>(response)
        },
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_one_key_never_queue() {
    let svc = ConditionalLayer::new().layer(slow());
    let get = || Request::get("/doc").body(Full::new(Bytes::new())).unwrap();
    let start = Instant::now();
    let reads: Vec<_> = (0..16)
        .map(|_| tokio::spawn(svc.clone().oneshot(get())))
        .collect();
    for read in reads {
        assert_eq!(read.await.unwrap().unwrap().status(), 200);
    }
    let sixteen = start.elapsed();
    println!("16 first reads of one key: {sixteen:?}");
    assert!(
        sixteen < Duration::from_millis(800),
        "reads queued: {sixteen:?}"
    );

    // A write holds the lock for 600 ms; a read meanwhile does not wait for it.
    let put = Request::put("/doc")
        .body(Full::new(Bytes::from_static(b"x")))
        .unwrap();
    let write = tokio::spawn(svc.clone().oneshot(put));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let start = Instant::now();
    assert_eq!(svc.clone().oneshot(get()).await.unwrap().status(), 200);
    let during = start.elapsed();
    println!("a read during a write: {during:?}");
    assert!(
        during < Duration::from_millis(400),
        "the read waited for the write: {during:?}"
    );
    assert_eq!(write.await.unwrap().unwrap().status(), 204);
}
