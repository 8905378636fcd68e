//! `ifmatch proxy`'s connections to its origin: used again once an answer was read (within four
//! seconds of idling: the origins' usual keep-alive is five), replaced
//! when the origin closed one while it was idle (the request is sent again, the client never
//! sees it), and never used again for a body that was not read to its end. The origin is a
//! raw socket that counts its connections.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// Answers each request on a connection with `ok`, uncached; after `/close` it closes the
/// connection without saying so (as an origin whose idle timeout just ran out); `/slow`
/// sends half its body, then the rest a second later.
async fn serve(mut stream: TcpStream) {
    let mut buffer = Vec::new();
    while let Some(head) = common::next_head(&mut stream, &mut buffer).await {
        let fields = "HTTP/1.1 200 OK\r\nCache-Control: no-store\r\n";
        if head.starts_with("GET /slow ") {
            // Tagged, so that the proxy streams it rather than hash it first.
            let start = format!("{fields}ETag: \"s\"\r\nContent-Length: 4\r\n\r\nsl");
            if stream.write_all(start.as_bytes()).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = stream.write_all(b"ow").await;
            continue;
        }
        let answer = format!("{fields}Content-Length: 2\r\n\r\nok");
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
        if head.starts_with("GET /close ") {
            return;
        }
    }
}

/// `ifmatch proxy` in front of `upstream` on one thread (so one pool of connections): the
/// process and its base URL.
fn one_threaded_proxy(upstream: &str) -> (common::Process, String) {
    let (proxy, base) = common::spawn_ifmatch(["proxy", "--upstream", upstream, "--threads", "1"]);
    (common::Process(proxy), base)
}

async fn start_origin() -> (Arc<AtomicUsize>, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(stream));
        }
    });
    (connections, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_connections_are_reused_replaced_when_closed_and_dropped_when_unread() {
    let (connections, upstream) = start_origin().await;
    let (_proxy, base) = one_threaded_proxy(&upstream);
    let http = common::client();
    let get = |path: &str| {
        let (http, url) = (http.clone(), format!("{base}{path}"));
        async move {
            let response = http.get(url).send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.text().await.unwrap())
        }
    };

    // One after another: one connection.
    for _ in 0..20 {
        assert_eq!(get("/keep").await, (200, "ok".to_owned()));
    }
    assert_eq!(connections.load(Ordering::SeqCst), 1);

    // Each answer's connection closed by the origin behind it: the next request goes on a new
    // one and never fails.
    for round in 0..10 {
        assert_eq!(get("/close").await, (200, "ok".to_owned()), "round {round}");
        if round % 2 == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(get("/keep").await, (200, "ok".to_owned()));
    assert_eq!(connections.load(Ordering::SeqCst), 11);

    // A client that leaves before the body ends: that connection is not given the next
    // request (its answer would be the rest of the last body).
    let before = connections.load(Ordering::SeqCst);
    let mut response = http.get(format!("{base}/slow")).send().await.unwrap();
    assert_eq!(response.chunk().await.unwrap().as_deref(), Some(&b"sl"[..]));
    drop(response);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..3 {
        assert_eq!(get("/keep").await, (200, "ok".to_owned()));
    }
    assert_eq!(connections.load(Ordering::SeqCst), before + 1);
    // Read to its end, it is used again.
    assert_eq!(get("/slow").await, (200, "slow".to_owned()));
    assert_eq!(get("/keep").await, (200, "ok".to_owned()));
    assert_eq!(connections.load(Ordering::SeqCst), before + 1);
}

/// A connection idle for four seconds or more is not given a request (an origin keeping idle
/// connections five seconds, as Node's and Apache's do, may close it just as the request is
/// written, and a request written is not sent again): the next request opens another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_idle_past_the_origins_usual_keep_alive_is_not_used_again() {
    let (connections, upstream) = start_origin().await;
    let (_proxy, base) = one_threaded_proxy(&upstream);
    let http = common::client();
    let get = async || {
        http.get(format!("{base}/keep"))
            .send()
            .await
            .unwrap()
            .status()
    };
    assert_eq!(get().await, 200);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(get().await, 200);
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "idle 2.5 s: used again"
    );
    tokio::time::sleep(Duration::from_millis(4200)).await;
    assert_eq!(get().await, 200);
    assert_eq!(
        connections.load(Ordering::SeqCst),
        2,
        "idle 4.2 s: a new one"
    );
}
