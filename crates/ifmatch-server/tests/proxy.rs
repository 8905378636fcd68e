//! `ifmatch proxy` end to end: a real origin (an axum app that knows nothing of ETags) behind
//! the real binary, over real sockets.

use crate::common;

use common::client;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

const BIG: usize = 10 << 20;

/// The origin: documents in memory, no ETags, no conditions; it counts what reaches it.
#[derive(Default)]
struct Origin {
    documents: Mutex<HashMap<String, Bytes>>,
    gets: AtomicUsize,
    writes: AtomicUsize,
    /// The GETs of `/cold`, and when the last sent its last byte.
    cold_gets: AtomicUsize,
    cold_sent: Mutex<Option<Instant>>,
    /// The GETs of `/streamed/...`.
    streamed_gets: AtomicUsize,
}

/// The byte at `i` of `/cold`.
fn cold_byte(i: usize) -> u8 {
    (i / 4096 % 251) as u8
}

async fn start_origin() -> (Arc<Origin>, String) {
    let origin = Arc::new(Origin::default());
    let app = Router::new()
        .route(
            "/docs/{id}",
            get(read).put(write).delete(
                |State(o): State<Arc<Origin>>, Path(id): Path<String>| async move {
                    o.writes.fetch_add(1, Ordering::SeqCst);
                    o.documents.lock().unwrap().remove(&id);
                    StatusCode::NO_CONTENT
                },
            ),
        )
        .route(
            "/echo",
            get(|headers: HeaderMap| async move {
                let mut lines: Vec<String> = headers
                    .iter()
                    .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("?")))
                    .collect();
                lines.sort();
                lines.join("\n")
            }),
        )
        .route(
            "/private",
            get(|headers: HeaderMap| async move {
                // Alice's by token or by cookie; anyone else is refused.
                let has = |name: &str, want: &str| headers.get(name).is_some_and(|v| v == want);
                if !(has("authorization", "Bearer alice") || has("cookie", "session=alice")) {
                    return Err(StatusCode::UNAUTHORIZED);
                }
                let mut out = HeaderMap::new();
                out.insert("x-user", "alice".parse().unwrap());
                out.insert("set-cookie", "seen=1".parse().unwrap());
                Ok((out, "alice's balance: 1,000"))
            }),
        )
        .route(
            "/many/{n}",
            get(|Path(n): Path<String>| async move {
                // 4 KiB, kept by a shared cache for an hour when `n` is even; neither kept nor
                // tagged (so hashed by the proxy) when odd.
                let body = Bytes::from(vec![b'm'; 4096]);
                let even = n.parse::<u64>().is_ok_and(|n| n % 2 == 0);
                let mut headers = HeaderMap::new();
                if even {
                    headers.insert("cache-control", "max-age=3600".parse().unwrap());
                    headers.insert("etag", format!("\"{n}\"").parse().unwrap());
                }
                (headers, body)
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        )
        .route(
            "/big",
            get(|| async {
                // 10 MiB in 64 KiB chunks, made as they are sent.
                let chunks = futures_util::stream::iter(0..BIG / (64 << 10))
                    .map(|i| Ok::<_, std::io::Error>(Bytes::from(vec![(i % 251) as u8; 64 << 10])));
                Body::from_stream(chunks)
            })
            .put(|body: Body| async move {
                // Consumed as it streams: the digest of what arrived.
                let mut stream = body.into_data_stream();
                let mut hasher = Sha256::new();
                while let Some(chunk) = stream.next().await {
                    hasher.update(chunk.unwrap());
                }
                hex::encode(hasher.finalize())
            }),
        )
        .route(
            "/streamed/{kib}",
            get(
                |State(o): State<Arc<Origin>>, Path(kib): Path<usize>| async move {
                    // `kib` KiB a shared cache may keep for an hour, in 4 KiB chunks 10 ms apart,
                    // of no declared length (chunked).
                    o.streamed_gets.fetch_add(1, Ordering::SeqCst);
                    let chunks = futures_util::stream::iter(0..kib).then(|i| async move {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        Ok::<_, std::io::Error>(Bytes::from(vec![(i % 251) as u8; 4096]))
                    });
                    let headers = [("cache-control", "max-age=3600")];
                    (headers, Body::from_stream(chunks))
                },
            )
            .put(|| async { StatusCode::NO_CONTENT }),
        )
        .route(
            "/cold",
            get(|State(o): State<Arc<Origin>>| async move {
                // 10 MiB a shared cache may store for a minute, sent in 64 KiB chunks over
                // about a second.
                o.cold_gets.fetch_add(1, Ordering::SeqCst);
                let chunks = futures_util::stream::iter(0..BIG / (64 << 10)).then(move |i| {
                    let o = o.clone();
                    async move {
                        tokio::time::sleep(Duration::from_millis(6)).await;
                        if i + 1 == BIG / (64 << 10) {
                            *o.cold_sent.lock().unwrap() = Some(Instant::now());
                        }
                        let at = i * (64 << 10);
                        let chunk: Vec<u8> = (at..at + (64 << 10)).map(cold_byte).collect();
                        Ok::<_, std::io::Error>(Bytes::from(chunk))
                    }
                });
                let headers = [
                    ("cache-control", "max-age=60".to_owned()),
                    ("content-length", BIG.to_string()),
                ];
                (headers, Body::from_stream(chunks))
            })
            .put(|| async { StatusCode::NO_CONTENT }),
        )
        .with_state(origin.clone());
    let base = common::serve_app(app).await;
    (origin, base)
}

async fn read(
    State(origin): State<Arc<Origin>>,
    Path(id): Path<String>,
) -> Result<Bytes, StatusCode> {
    origin.gets.fetch_add(1, Ordering::SeqCst);
    let found = origin.documents.lock().unwrap().get(&id).cloned();
    found.ok_or(StatusCode::NOT_FOUND)
}

async fn write(
    State(origin): State<Arc<Origin>>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    origin.writes.fetch_add(1, Ordering::SeqCst);
    let previous = origin.documents.lock().unwrap().insert(id, body);
    if previous.is_some() {
        StatusCode::NO_CONTENT
    } else {
        StatusCode::CREATED
    }
}

/// A proxy in front of `upstream`.
struct Proxy(common::Ifmatch);

impl std::ops::Deref for Proxy {
    type Target = common::Ifmatch;

    fn deref(&self) -> &common::Ifmatch {
        &self.0
    }
}

impl Proxy {
    fn start(upstream: &str, extra: &[&str]) -> Self {
        let args = ["proxy", "--upstream", upstream];
        Self(common::Ifmatch::start(
            args.into_iter().chain(extra.iter().copied()),
        ))
    }

    /// The peak resident memory of the proxy process, in KiB.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap()
    }

    /// Asserts that the proxy's peak resident memory grew by less than `most` KiB since it
    /// was `before` (`what` the load that grew it).
    fn assert_peak_grew_less(&self, before: u64, most: u64, what: &str) {
        let grown = self.peak_rss_kib().saturating_sub(before);
        eprintln!("peak RSS {before} KiB before, grew by {grown} KiB {what}");
        assert!(
            grown < most,
            "the proxy's peak memory grew by {grown} KiB {what}"
        );
    }

    async fn metric(&self, http: &reqwest::Client, name: &str) -> u64 {
        let text = common::get(http, &format!("{}/metrics", self.base))
            .await
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .parse()
            .unwrap()
    }
}

/// The answer's `Cache-Status`.
fn cache_status(response: &reqwest::Response) -> &str {
    response.headers()["cache-status"].to_str().unwrap()
}

fn etag(response: &reqwest::Response) -> String {
    response.headers()["etag"].to_str().unwrap().to_owned()
}

fn sha256_tag(bytes: &[u8]) -> String {
    format!("\"{}\"", hex::encode(Sha256::digest(bytes)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revalidations_are_answered_from_the_cache_and_stale_writes_never_reach_the_origin() {
    let (origin, upstream) = start_origin().await;
    let proxy = Proxy::start(&upstream, &["--metrics"]);
    let http = client();
    let url = format!("{}/docs/a", proxy.base);

    let created = common::send(&http, "PUT", &url, &[("if-none-match", "*")], "v1").await;
    assert_eq!(created.status(), 201);
    let again = common::send(&http, "PUT", &url, &[("if-none-match", "*")], "v1 again").await;
    assert_eq!(
        again.status(),
        412,
        "create-only refused on an existing document"
    );
    assert_eq!(origin.writes.load(Ordering::SeqCst), 1);

    let first = common::get(&http, &url).await;
    assert_eq!(first.status(), 200);
    let v1 = etag(&first);
    assert_eq!(
        v1,
        sha256_tag(b"v1"),
        "a strong SHA-256 tag the origin never set"
    );
    assert_eq!(first.headers()["via"], "1.1 ifmatch");

    let gets = origin.gets.load(Ordering::SeqCst);
    for _ in 0..5 {
        let revalidated =
            common::send(&http, "GET", &url, &[("if-none-match", &v1)], Vec::new()).await;
        assert_eq!(revalidated.status(), 304);
        assert_eq!(etag(&revalidated), v1);
    }
    assert_eq!(
        origin.gets.load(Ordering::SeqCst),
        gets,
        "no revalidation reached the origin"
    );
    assert_eq!(
        proxy
            .metric(&http, "ifmatch_not_modified_from_cache_total")
            .await,
        5
    );

    // A write with the current tag goes through, and the next GET has the new tag.
    let writes = origin.writes.load(Ordering::SeqCst);
    let updated = common::send(&http, "PUT", &url, &[("if-match", &v1)], "v2").await;
    assert_eq!(updated.status(), 204);
    assert_eq!(origin.writes.load(Ordering::SeqCst), writes + 1);
    let after = common::send(&http, "GET", &url, &[("if-none-match", &v1)], Vec::new()).await;
    assert_eq!(after.status(), 200, "the old tag no longer revalidates");
    assert_eq!(etag(&after), sha256_tag(b"v2"));
    assert_eq!(after.text().await.unwrap(), "v2");

    // A stale write is refused and never reaches the origin.
    let stale = common::send(&http, "PUT", &url, &[("if-match", &v1)], "lost").await;
    assert_eq!(stale.status(), 412);
    let stale_delete = common::send(&http, "DELETE", &url, &[("if-match", &v1)], Vec::new()).await;
    assert_eq!(stale_delete.status(), 412);
    assert_eq!(origin.writes.load(Ordering::SeqCst), writes + 1);
    let failed = r#"ifmatch_requests_total{operation="PUT",status="412"}"#;
    assert_eq!(proxy.metric(&http, failed).await, 2);
    let failed = r#"ifmatch_requests_total{operation="DELETE",status="412"}"#;
    assert_eq!(proxy.metric(&http, failed).await, 1);
    assert_eq!(common::get(&http, &url).await.text().await.unwrap(), "v2");

    // /metrics is the proxy's own: the origin's GET count did not move.
    let gets = origin.gets.load(Ordering::SeqCst);
    proxy.metric(&http, "ifmatch_connections_total").await;
    assert_eq!(origin.gets.load(Ordering::SeqCst), gets);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_conditional_write_is_left_to_the_origin_without_asking_it_first() {
    let (origin, upstream) = start_origin().await;
    let proxy = Proxy::start(&upstream, &[]);
    let http = client();
    let create = async |path: &str, authorization: &str| {
        let (url, fields) = (
            format!("{}{path}", proxy.base),
            [("if-none-match", "*"), ("authorization", authorization)],
        );
        common::send(&http, "PUT", &url, &fields, "v1")
            .await
            .status()
    };
    // A signature made for the PUT is no good for a GET: the origin, which here judges no
    // condition, gets both writes and no GET.
    let signed = "SharedKey account:c2lnbmVk";
    assert_eq!(create("/docs/s", signed).await, 201);
    assert_eq!(create("/docs/s", signed).await, 204);
    assert_eq!(origin.gets.load(Ordering::SeqCst), 0);
    assert_eq!(origin.writes.load(Ordering::SeqCst), 2);
    // A bearer token is asked for the current version, and the proxy judges.
    assert_eq!(create("/docs/b", "Bearer dG9rZW4").await, 201);
    assert_eq!(create("/docs/b", "Bearer dG9rZW4").await, 412);
    assert_eq!(origin.gets.load(Ordering::SeqCst), 2);
    assert_eq!(origin.writes.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blind_writes_get_428_when_asked() {
    let (origin, upstream) = start_origin().await;
    let proxy = Proxy::start(&upstream, &["--require-precondition", "--metrics"]);
    let http = client();
    let blind = common::send(&http, "PUT", &format!("{}/docs/b", proxy.base), &[], "x").await;
    assert_eq!(blind.status(), 428);
    assert_eq!(origin.writes.load(Ordering::SeqCst), 0);
    let required = r#"ifmatch_requests_total{operation="PUT",status="428"}"#;
    assert_eq!(proxy.metric(&http, required).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hop_by_hop_headers_go_and_forwarding_headers_come() {
    let (_origin, upstream) = start_origin().await;
    let proxy = Proxy::start(&upstream, &[]);
    let http = client();
    let echoed = common::send(
        &http,
        "GET",
        &format!("{}/echo", proxy.base),
        &[
            ("connection", "x-private-hop"),
            ("x-private-hop", "secret"),
            ("keep-alive", "timeout=5"),
            ("x-end-to-end", "kept"),
            ("x-forwarded-for", "203.0.113.7"),
            ("proxy-authorization", "Basic cHJveHk6c2VjcmV0"),
        ],
        Vec::new(),
    )
    .await
    .text()
    .await
    .unwrap();
    let has = |line: &str| echoes(&echoed, line);
    assert!(!echoed.contains("x-private-hop"), "{echoed}");
    // The proxy's credentials are for the proxy (RFC 9110 11.7.1), never for the origin.
    assert!(!echoed.contains("proxy-authorization"), "{echoed}");
    assert!(!echoed.contains("keep-alive"), "{echoed}");
    assert!(has("x-end-to-end: kept"), "{echoed}");
    assert!(has("via: 1.1 ifmatch"), "{echoed}");
    // A client's forwarding fields are its own word: dropped (see proxy_poisoning.rs).
    assert!(has("x-forwarded-for: 127.0.0.1"), "{echoed}");
    assert!(has("x-forwarded-proto: http"), "{echoed}");
    let proxy_host = proxy.base.trim_start_matches("http://");
    assert!(
        has(&format!(
            "forwarded: for=127.0.0.1;proto=http;host=\"{proxy_host}\""
        )),
        "{echoed}"
    );
    assert!(
        has(&format!("host: {}", upstream.trim_start_matches("http://"))),
        "{echoed}"
    );

    let preserving = Proxy::start(&upstream, &["--preserve-host"]);
    let echoed = common::get(&http, &format!("{}/echo", preserving.base))
        .await
        .text()
        .await
        .unwrap();
    let preserving_host = preserving.base.trim_start_matches("http://");
    assert!(
        echoes(&echoed, &format!("host: {preserving_host}")),
        "{echoed}"
    );
}

/// Whether the origin's `/echo` answer `echoed` has the line `line`.
fn echoes(echoed: &str, line: &str) -> bool {
    echoed.lines().any(|l| l == line)
}

/// An HTTP/2 client names its host in `:authority` and sends no `Host` (RFC 9113 8.3.1): the
/// proxy serves it what an HTTP/1.1 client of the same URL stored, and the other way round,
/// and names its host to the origin as it does an HTTP/1.1 client's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_clients_share_the_cache_with_http11_ones_and_name_their_host() {
    let (_origin, upstream) = start_origin().await;
    let proxy = Proxy::start(&upstream, &[]);
    let h1 = reqwest::Client::new();
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let url = |path: &str| format!("{}{path}", proxy.base);
    let first = h1.get(url("/many/2")).send().await.unwrap();
    assert!(cache_status(&first).contains("stored"), "{first:?}");
    for method in [reqwest::Method::GET, reqwest::Method::HEAD] {
        let again = h2.request(method, url("/many/2")).send().await.unwrap();
        assert_eq!(again.version(), reqwest::Version::HTTP_2);
        assert_eq!(cache_status(&again), "ifmatch; hit", "{again:?}");
    }
    let first = h2.get(url("/many/4")).send().await.unwrap();
    assert!(cache_status(&first).contains("stored"), "{first:?}");
    assert_eq!(first.bytes().await.unwrap().len(), 4096);
    for client in [&h1, &h2, &h1] {
        let again = client.get(url("/many/4")).send().await.unwrap();
        assert_eq!(cache_status(&again), "ifmatch; hit", "{again:?}");
        assert_eq!(again.bytes().await.unwrap().len(), 4096);
    }

    let proxy_host = proxy.base.trim_start_matches("http://");
    let echoed = h2.get(url("/echo")).send().await.unwrap();
    let echoed = echoed.text().await.unwrap();
    let has = |line: &str| echoes(&echoed, line);
    assert!(has(&format!("x-forwarded-host: {proxy_host}")), "{echoed}");
    assert!(
        has(&format!(
            "forwarded: for=127.0.0.1;proto=http;host=\"{proxy_host}\""
        )),
        "{echoed}"
    );
    assert!(has("via: 2 ifmatch"), "{echoed}");
    assert!(
        has(&format!("host: {}", upstream.trim_start_matches("http://"))),
        "{echoed}"
    );
    let preserving = Proxy::start(&upstream, &["--preserve-host"]);
    let echoed = h2
        .get(format!("{}/echo", preserving.base))
        .send()
        .await
        .unwrap();
    let echoed = echoed.text().await.unwrap();
    let preserving_host = preserving.base.trim_start_matches("http://");
    assert!(
        echoes(&echoed, &format!("host: {preserving_host}")),
        "{echoed}"
    );
    // A target in absolute form names the host, whatever `Host` says (RFC 9112 3.2.2): the
    // one the answer is stored under is the one the origin is told.
    let echoed = raw_get(&preserving.base, "http://named.example/echo", "").await;
    assert!(echoed.contains("\r\n\r\n"), "{echoed}");
    assert!(echoes(&echoed, "host: named.example"), "{echoed}");
    assert!(
        echoes(&echoed, "x-forwarded-host: named.example"),
        "{echoed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_origin_is_502_and_a_slow_one_504_never_a_hang() {
    let (_origin, upstream) = start_origin().await;
    let (_refusing, dead_port) = common::refusing_port();
    let dead = Proxy::start(&format!("http://127.0.0.1:{dead_port}"), &["--metrics"]);
    let http = client();
    let response = common::get(&http, &format!("{}/docs/x", dead.base)).await;
    assert_eq!(response.status(), 502);
    let text = response.text().await.unwrap();
    assert!(text.contains("origin unreachable"), "{text}");
    // The operating system's detail goes to the log, not to the client.
    assert!(
        !text.contains("os error") && !text.contains("127.0.0.1"),
        "{text}"
    );
    assert_eq!(dead.metric(&http, "ifmatch_upstream_errors_total").await, 1);

    let slow = Proxy::start(&upstream, &["--timeout", "0.5"]);
    let start = Instant::now();
    let response = common::get(&http, &format!("{}/slow", slow.base)).await;
    assert_eq!(response.status(), 504);
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("did not answer within 0.5 s")
    );
    // The proxy is still there.
    let ok = common::get(&http, &format!("{}/echo", slow.base)).await;
    assert_eq!(ok.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_mib_bodies_stream_both_ways_in_bounded_memory() {
    let (_origin, upstream) = start_origin().await;
    let proxy = Proxy::start(&upstream, &["--hash-limit", "1048576"]);
    let http = client();
    // Warm up: a request of each kind, so the baseline holds the buffers every request needs.
    assert_eq!(
        common::get(&http, &format!("{}/echo", proxy.base))
            .await
            .status(),
        200
    );
    let before = proxy.peak_rss_kib();

    let mut expected = Sha256::new();
    let chunks: Vec<Bytes> = (0..BIG / (64 << 10))
        .map(|i| Bytes::from(vec![(i % 7) as u8; 64 << 10]))
        .collect();
    for chunk in &chunks {
        expected.update(chunk);
    }
    let upload = reqwest::Body::wrap_stream(futures_util::stream::iter(
        chunks.into_iter().map(Ok::<_, std::io::Error>),
    ));
    let response = common::send(&http, "PUT", &format!("{}/big", proxy.base), &[], upload).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.text().await.unwrap(),
        hex::encode(expected.finalize())
    );

    let response = common::get(&http, &format!("{}/big", proxy.base)).await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers().get("etag").is_none(),
        "past the hashing limit: untagged"
    );
    let mut received = 0;
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        received += chunk.unwrap().len();
    }
    assert_eq!(received, BIG);
    proxy.assert_peak_grew_less(before, 6 * 1024, "for 10 MiB each way");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_stays_bounded_by_the_caches_past_their_capacity() {
    // 20,000 distinct URLs through a 4 MiB memory tier (and the 304 cache's 2,000 resources):
    // half stored, half hashed and passed through. What stays is what the caches weigh, not
    // the connections' read buffers their fields and bodies were slices of, nor a version
    // per URL ever seen.
    let (_origin, upstream) = start_origin().await;
    let proxy = Proxy::start(
        &upstream,
        &["--cache-memory", "4194304", "--cache-capacity", "2000"],
    );
    let http = client();
    let fetch = |from: u64| {
        let (http, base) = (http.clone(), proxy.base.clone());
        tokio::spawn(async move {
            for n in (from..20_000).step_by(8) {
                let response = http.get(format!("{base}/many/{n}")).send().await.unwrap();
                assert_eq!(response.status(), 200);
                assert_eq!(response.bytes().await.unwrap().len(), 4096);
            }
        })
    };
    let warm = http.get(format!("{}/many/warm", proxy.base)).send().await;
    assert_eq!(warm.unwrap().status(), 200);
    let before = proxy.peak_rss_kib();
    let clients: Vec<_> = (0..8).map(fetch).collect();
    for client in clients {
        client.await.unwrap();
    }
    proxy.assert_peak_grew_less(before, 24 * 1024, "past a 4 MiB tier and 2,000 resources");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_clients_read_modify_write_through_the_proxy_without_a_lost_update() {
    const CLIENTS: usize = 64;
    const EACH: usize = 2;
    let (_origin, upstream) = start_origin().await;
    // Four serving threads, each with its own runtime and origin pool: the write locks are
    // one for all of them.
    let proxy = Proxy::start(&upstream, &["--threads", "4"]);
    let http = client();
    let url = format!("{}/docs/counter", proxy.base);
    let created = common::send(&http, "PUT", &url, &[("if-none-match", "*")], "0").await;
    assert_eq!(created.status(), 201);

    let conflicts = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (http, url, conflicts) = (http.clone(), url.clone(), conflicts.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = 0;
            while done < EACH {
                let current = common::get(&http, &url).await;
                assert_eq!(current.status(), 200);
                let tag = etag(&current);
                let n: usize = current.text().await.unwrap().parse().unwrap();
                let write = common::send(
                    &http,
                    "PUT",
                    &url,
                    &[("if-match", &tag)],
                    (n + 1).to_string(),
                )
                .await;
                match write.status().as_u16() {
                    204 => done += 1,
                    412 => {
                        conflicts.fetch_add(1, Ordering::Relaxed);
                    }
                    other => panic!("unexpected {other}"),
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let last = common::get(&http, &url).await.text().await.unwrap();
    assert_eq!(
        last,
        (CLIENTS * EACH).to_string(),
        "{} conflicts retried",
        conflicts.load(Ordering::Relaxed)
    );
}

/// The serving threads (each with its own runtime, listening socket and origin pool)
/// share one cache: a revalidation on any new connection is answered from it, whichever thread
/// the kernel hands the connection to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_serving_thread_answers_revalidations_from_the_one_cache() {
    let (origin, upstream) = start_origin().await;
    let proxy = Proxy::start(&upstream, &["--threads", "4"]);
    let url = format!("{}/docs/shared", proxy.base);
    let http = client();
    let created = common::send(&http, "PUT", &url, &[("if-none-match", "*")], "v1").await;
    assert_eq!(created.status(), 201);
    let first = common::get(&http, &url).await;
    assert_eq!(first.status(), 200);
    let tag = etag(&first);
    let gets = origin.gets.load(Ordering::SeqCst);
    for _ in 0..16 {
        // A client of its own: a connection of its own.
        let fresh = client();
        let again = common::send(&fresh, "GET", &url, &[("if-none-match", &tag)], Vec::new()).await;
        assert_eq!(again.status(), 304);
    }
    assert_eq!(
        origin.gets.load(Ordering::SeqCst),
        gets,
        "no revalidation reached the origin"
    );
}

/// The proxy never answers 304 from its cache to a client whose credentials differ from those
/// the remembered answer was made for, and its 304s carry nothing of another user's (no
/// `X-User`; a `Set-Cookie` only when made of the origin's answer to the very request),
/// whatever `--key-header` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_answer_never_reaches_other_credentials() {
    let (_origin, upstream) = start_origin().await;
    for extra in [&[][..], &["--key-header", "authorization"][..]] {
        let proxy = Proxy::start(&upstream, extra);
        let http = client();
        let url = format!("{}/private", proxy.base);
        for alice in [
            ("authorization", "Bearer alice"),
            ("cookie", "session=alice"),
        ] {
            let first = common::send(&http, "GET", &url, &[alice], Vec::new()).await;
            assert_eq!(first.status(), 200, "{extra:?}");
            let tag = first.headers()["etag"].to_str().unwrap().to_owned();
            let inm = ("if-none-match", tag.as_str());
            let others: [&[(&str, &str)]; 4] = [
                &[inm],
                &[inm, ("authorization", "Bearer mallory")],
                &[inm, ("cookie", "session=bob")],
                &[inm, ("cookie", "session=alice2")],
            ];
            for headers in others {
                let r = common::send(&http, "GET", &url, headers, Vec::new()).await;
                assert_eq!(r.status(), 401, "{extra:?}: {headers:?} after {alice:?}");
                assert!(r.headers().get("x-user").is_none());
            }
            let again = common::send(&http, "GET", &url, &[alice, inm], Vec::new()).await;
            assert_eq!(again.status(), 304, "{extra:?}");
            assert!(again.headers().get("x-user").is_none(), "{extra:?}");
            // A 304 made of the origin's answer to Alice's own request keeps the cookie it set
            // for her; one from memory carries none.
            let cookie = again.headers().get("set-cookie");
            assert!(
                cookie.is_none_or(|c| c == "seen=1"),
                "{extra:?}: {cookie:?}"
            );
        }
    }
}

/// An origin on a raw socket that answers every request by writing `parts` in turn, each
/// after its wait, and counts the requests it got.
async fn start_raw_origin(
    parts: &'static [(Duration, &'static str)],
) -> (Arc<AtomicUsize>, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                counted.fetch_add(1, Ordering::SeqCst);
                for (wait, part) in parts {
                    tokio::time::sleep(*wait).await;
                    let _ = stream.write_all(part.as_bytes()).await;
                }
            });
        }
    });
    (requests, format!("http://{address}"))
}

/// An HTTP/1.0 origin that answers every request with a cacheable document carrying its own
/// tag, and counts the requests it got.
async fn start_http10_origin() -> (Arc<AtomicUsize>, String) {
    const ANSWER: &[(Duration, &str)] = &[(
        Duration::ZERO,
        "HTTP/1.0 200 OK\r\nETag: \"abcdef\"\r\nCache-Control: max-age=3600\r\n\
         Content-Length: 5\r\n\r\nhello",
    )];
    start_raw_origin(ANSWER).await
}

/// An origin that answers every request with a `103 Early Hints` at once and its final
/// response 2 s later; it counts the requests.
async fn start_early_hints_origin() -> (Arc<AtomicUsize>, String) {
    const ANSWER: &[(Duration, &str)] = &[
        (
            Duration::ZERO,
            "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\nX-Hint: early\r\n\r\n",
        ),
        (
            Duration::from_secs(2),
            "HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\n\
             Content-Length: 5\r\nConnection: close\r\n\r\nhello",
        ),
    ];
    start_raw_origin(ANSWER).await
}

/// Sends `GET path` on a connection of its own, HTTP/1.1; answers the whole response.
async fn raw_get(base: &str, path: &str, extra: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {address}\r\n{extra}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

/// Sends `GET path` in `version` on a connection of its own; answers when the first head came
/// and the whole answer.
async fn timed_get(base: &str, path: &str, version: &str) -> (Duration, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} {version}\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    let sent = Instant::now();
    stream.write_all(request.as_bytes()).await.unwrap();
    let (mut answer, mut buf) = (Vec::new(), [0u8; 4096]);
    let mut first_head = None;
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        if first_head.is_none() && answer.windows(4).any(|w| w == b"\r\n\r\n") {
            first_head = Some(sent.elapsed());
        }
    }
    (first_head.unwrap(), String::from_utf8(answer).unwrap())
}

/// A proxy passes its origin's interim responses on (RFC 9110 15.2) as they come, to HTTP/1.1
/// clients only, and stores none of them, nor their fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_hints_reach_the_client_at_once_and_are_never_stored() {
    let (requests, upstream) = start_early_hints_origin().await;
    let proxy = Proxy::start(&upstream, &[]);
    let (first, answer) = timed_get(&proxy.base, "/page", "HTTP/1.1").await;
    let (hints, last) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        hints.starts_with("HTTP/1.1 103 Early Hints\r\n"),
        "{answer}"
    );
    assert!(hints.contains("link: </s.css>; rel=preload"), "{answer}");
    assert!(
        first < Duration::from_millis(1500),
        "the hints waited {first:?}"
    );
    assert!(last.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(!last.to_ascii_lowercase().contains("x-hint"), "{answer}");
    assert!(last.ends_with("hello"), "{answer}");
    // From the store: the final response alone.
    let (_, cached) = timed_get(&proxy.base, "/page", "HTTP/1.1").await;
    assert!(cached.starts_with("HTTP/1.1 200 OK\r\n"), "{cached}");
    assert!(cached.contains("cache-status: ifmatch; hit"), "{cached}");
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    // An HTTP/1.0 client gets no 1xx (RFC 9110 15.2).
    let (_, old) = timed_get(&proxy.base, "/other", "HTTP/1.0").await;
    assert!(
        !old.contains(" 103 ") && old.contains(" 200 OK\r\n"),
        "{old}"
    );
    assert_eq!(requests.load(Ordering::SeqCst), 2);
}

/// The proxy stores what its origin lets a shared cache store and serves it without the
/// origin while fresh, with `Age` and `Cache-Status`, the origin's tag as the origin sent it,
/// in the proxy's own HTTP version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_answer_is_served_from_the_store_in_the_proxys_own_version() {
    let (requests, upstream) = start_http10_origin().await;
    let proxy = Proxy::start(&upstream, &[]);
    let first = raw_get(&proxy.base, "/doc", "").await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(first.ends_with("hello"), "{first}");
    for _ in 0..5 {
        let again = raw_get(&proxy.base, "/doc", "").await;
        assert!(again.starts_with("HTTP/1.1 200"), "{again}");
        let lower = again.to_ascii_lowercase();
        assert!(lower.contains("etag: \"abcdef\"\r\n"), "{again}");
        assert!(lower.contains("\r\nage: "), "{again}");
        assert!(lower.contains("cache-status: ifmatch; hit"), "{again}");
        assert!(again.ends_with("hello"), "{again}");
    }
    // A client holding the origin's tag revalidates against the store.
    let revalidated = raw_get(&proxy.base, "/doc", "If-None-Match: \"abcdef\"\r\n").await;
    assert!(revalidated.starts_with("HTTP/1.1 304"), "{revalidated}");
    assert_eq!(
        requests.load(Ordering::SeqCst),
        1,
        "one request reached the origin"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_after_a_write_never_joins_a_fetch_from_before_it() {
    // Requests that come while a stored answer arrives read it instead of asking again; but
    // not once a write has changed the URL: what arrives may be older than the write.
    let (origin, upstream) = start_origin().await;
    let proxy = Proxy::start(&upstream, &[]);
    let http = client();
    let url = format!("{}/cold", proxy.base);
    let mut first = http.get(&url).send().await.unwrap().bytes_stream();
    first.next().await.unwrap().unwrap(); // arriving, for about a second
    let during = http.get(&url).send().await.unwrap();
    assert_eq!(cache_status(&during), "ifmatch; hit");
    let write = http.put(&url).body("changed").send().await.unwrap();
    assert_eq!(write.status(), 204);
    let after = http.get(&url).send().await.unwrap();
    assert!(
        cache_status(&after).contains("fwd=miss"),
        "asked again after the write: {:?}",
        cache_status(&after)
    );
    assert_eq!(origin.cold_gets.load(Ordering::SeqCst), 2);
    drop((first, during, after));
}

/// An answer of no declared length (chunked) is sent on as it comes and stored once it ended
/// whole: unless it is larger than the largest object, or a write came while it arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_answer_is_stored_once_whole_unless_too_large_or_written_meanwhile() {
    let (origin, upstream) = start_origin().await;
    let proxy = Proxy::start(&upstream, &["--cache-max-object", "100000"]);
    let http = client();
    let gets = || origin.streamed_gets.load(Ordering::SeqCst);
    let want =
        |kib: usize| -> Vec<u8> { (0..kib).flat_map(|i| vec![(i % 251) as u8; 4096]).collect() };
    let url = format!("{}/streamed/16", proxy.base);

    let first = http.get(&url).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert!(
        first.headers().get("content-length").is_none(),
        "sent on as it came"
    );
    assert_eq!(first.bytes().await.unwrap(), want(16));
    let again = http.get(&url).send().await.unwrap();
    assert_eq!(cache_status(&again), "ifmatch; hit");
    assert_eq!(again.headers()["content-length"], "65536");
    assert!(again.headers().get("transfer-encoding").is_none());
    assert_eq!(again.bytes().await.unwrap(), want(16));
    assert_eq!(gets(), 1, "the second from the store");

    // 128 KiB, past the largest object (100,000 bytes): every client gets all of it, from
    // the origin every time.
    let large = format!("{}/streamed/32", proxy.base);
    for n in 1..=2 {
        let response = http.get(&large).send().await.unwrap();
        assert_eq!(response.bytes().await.unwrap(), want(32));
        assert_eq!(gets(), 1 + n);
    }

    // A write while it arrives: what arrives may be older than the write, and is not kept.
    let written = format!("{}/streamed/20", proxy.base);
    let mut arriving = http.get(&written).send().await.unwrap().bytes_stream();
    arriving.next().await.unwrap().unwrap();
    let write = http.put(&written).body("changed").send().await.unwrap();
    assert_eq!(write.status(), 204);
    let mut rest = 0;
    while let Some(chunk) = arriving.next().await {
        rest += chunk.unwrap().len();
    }
    assert!(rest > 0);
    let after = http.get(&written).send().await.unwrap();
    assert!(
        cache_status(&after).contains("fwd=miss"),
        "asked again: {:?}",
        cache_status(&after)
    );
    assert_eq!(after.bytes().await.unwrap(), want(20));
    assert_eq!(gets(), 5);
}

/// Concurrent misses of one URL make one request to the origin, and every client reads the
/// body as it arrives: the first bytes reach clients before the origin sent its last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_misses_reach_the_origin_once_and_stream() {
    let (origin, upstream) = start_origin().await;
    let proxy = Proxy::start(&upstream, &[]);
    let http = client();
    let expected: Arc<Vec<u8>> = Arc::new((0..BIG).map(cold_byte).collect());
    let started = Instant::now();
    let clients = (0..100).map(|_| {
        let (http, url) = (http.clone(), format!("{}/cold", proxy.base));
        let expected = expected.clone();
        tokio::spawn(async move {
            let response = http.get(url).send().await.unwrap();
            assert_eq!(response.status(), 200);
            let mut stream = response.bytes_stream();
            let (mut first, mut received, mut wrong) = (None, 0, 0);
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.unwrap();
                first.get_or_insert_with(Instant::now);
                let at = received.min(BIG);
                wrong += usize::from(expected.get(at..at + chunk.len()) != Some(&chunk[..]));
                received += chunk.len();
            }
            (first.unwrap(), received, wrong)
        })
    });
    let answers = futures_util::future::join_all(clients).await;
    let sent = origin.cold_sent.lock().unwrap().unwrap();
    let mut firsts = Vec::new();
    for answer in answers {
        let (first, received, wrong) = answer.unwrap();
        assert_eq!(
            (received, wrong),
            (BIG, 0),
            "every client, every byte (wrong chunks)"
        );
        firsts.push(first);
    }
    assert_eq!(
        origin.cold_gets.load(Ordering::SeqCst),
        1,
        "one origin request"
    );
    let earliest = firsts.iter().min().unwrap();
    eprintln!(
        "first byte at {:?}, the origin's last sent at {:?}, all done at {:?}",
        *earliest - started,
        sent - started,
        started.elapsed()
    );
    assert!(*earliest < sent, "the first byte waited for the last");
    // And the next request is a hit.
    let again = http
        .get(format!("{}/cold", proxy.base))
        .send()
        .await
        .unwrap();
    assert!(cache_status(&again).contains("hit"));
    assert_eq!(again.bytes().await.unwrap().len(), BIG);
    assert_eq!(origin.cold_gets.load(Ordering::SeqCst), 1);
}

/// The admin listener purges by URL and by prefix, and `/metrics` says what the cache did and
/// holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purges_and_cache_metrics_on_listeners_of_their_own() {
    let (requests, upstream) = start_http10_origin().await;
    let (admin, metrics) = (common::free_port(), common::free_port());
    let proxy = Proxy::start(
        &upstream,
        &[
            "--admin-listen",
            &format!("127.0.0.1:{admin}"),
            "--metrics-listen",
            &format!("127.0.0.1:{metrics}"),
        ],
    );
    common::wait_for(admin, "the admin listener");
    let http = client();
    let host = common::host_of(&proxy.base);
    for _ in 0..3 {
        raw_get(&proxy.base, "/doc", "").await;
        raw_get(&proxy.base, "/doc?page=2", "").await;
    }
    assert_eq!(requests.load(Ordering::SeqCst), 2);
    let page = common::text_of(format!("http://127.0.0.1:{metrics}/metrics")).await;
    let value = |name: &str| {
        page.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {name} in {page}"))
            .to_owned()
    };
    assert_eq!(value("ifmatch_cache_hits_total"), "4");
    assert_eq!(value("ifmatch_cache_misses_total"), "2");
    assert_eq!(value("ifmatch_cache_entries{tier=\"memory\"}"), "2");
    assert_eq!(value("ifmatch_cache_bytes_from_cache_total"), "20");

    let purge = |query: String| {
        let http = http.clone();
        async move {
            let response = http
                .post(format!("http://127.0.0.1:{admin}/purge?{query}"))
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let url = format!("url=http%3A%2F%2F{host}%2Fdoc");
    assert_eq!(purge(url.clone()).await, (200, "purged 1\n".into()));
    assert_eq!(purge(url).await, (404, "purged 0\n".into()));
    raw_get(&proxy.base, "/doc", "").await;
    assert_eq!(
        requests.load(Ordering::SeqCst),
        3,
        "asked again once purged"
    );
    let prefix = format!("prefix=http%3A%2F%2F{host}%2F");
    assert_eq!(purge(prefix).await, (200, "purged 2\n".into()));
    assert_eq!(purge("url=ftp%3A%2F%2Fx%2F".into()).await.0, 400);
    let get = http
        .get(format!("http://127.0.0.1:{admin}/purge"))
        .send()
        .await;
    assert_eq!(get.unwrap().status(), 405);
    // The data path knows nothing of purging.
    let forwarded = raw_get(&proxy.base, "/purge?url=x", "").await;
    assert!(forwarded.starts_with("HTTP/1.1 200"), "{forwarded}");
}

/// A client's `max-stale` lets a stale answer be served only where the answer allows it: never
/// past `must-revalidate`, `proxy-revalidate`, `no-cache` or `s-maxage` (RFC 9111 5.2.2), which
/// http-cache-semantics honours for the first alone (its issue 22).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_stale_never_overrides_what_the_answer_forbids() {
    let reached: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let counter = reached.clone();
    let app = Router::new().route(
        "/s/{case}",
        get(move |Path(case): Path<String>| {
            let counter = counter.clone();
            async move {
                *counter.lock().unwrap().entry(case.clone()).or_default() += 1;
                let directives = match case.as_str() {
                    "plain" => "max-age=1",
                    "s-maxage" => "s-maxage=1",
                    other => &format!("max-age=1, {other}"),
                };
                ([("cache-control", directives.to_owned())], case)
            }
        }),
    );
    let upstream = common::serve_app(app).await;
    let proxy = Proxy::start(&upstream, &[]);
    let cases = [
        "plain",
        "must-revalidate",
        "proxy-revalidate",
        "no-cache",
        "s-maxage",
    ];
    let http = client();
    let get = |case: &str, directive: Option<&str>| {
        let mut request = http.get(format!("{}/s/{case}", proxy.base));
        if let Some(directive) = directive {
            request = request.header("cache-control", directive);
        }
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    for case in cases {
        assert_eq!(get(case, None).await, case);
    }
    tokio::time::sleep(Duration::from_millis(2100)).await;
    for case in cases {
        for directive in ["max-stale", "max-stale=1000"] {
            assert_eq!(get(case, Some(directive)).await, case);
        }
    }
    let reached = reached.lock().unwrap().clone();
    // Stale, and let be: served from the store. Forbidden: the first stale request asks the
    // origin again (what it answers is fresh for the next).
    assert_eq!(reached["plain"], 1, "{reached:?}");
    for case in &cases[1..] {
        assert!(reached[*case] >= 2, "{case} was served stale: {reached:?}");
    }
}
