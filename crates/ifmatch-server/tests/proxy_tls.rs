//! `ifmatch proxy` in front of an `https://` origin, as S3, Azure Storage and R2 are: the
//! origin's certificate is verified (against the system's roots and `--upstream-ca`) for the
//! upstream's name, its connections are pooled, and its answers cached as a plain origin's; a
//! handshake that never ends is bounded by `--timeout`.
//! The origin is hyper over rustls on a loopback port, with a certificate authority made for
//! each test.

use crate::common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// What the origin saw: its TLS handshakes (the name each asked for, and the protocol agreed)
/// and the requests it answered.
#[derive(Default)]
struct Seen {
    handshakes: Vec<(Option<String>, Option<Vec<u8>>)>,
    requests: Vec<String>,
}

/// An origin over TLS with `certificates`, on `127.0.0.1`: every GET is 200 `hello` (fresh
/// for an hour, tagged `"v1"`); every other method 412, as storage answers a stale
/// `If-Match`.
async fn start_tls_origin(certificates: &common::TestCertificates) -> (Arc<Mutex<Seen>>, u16) {
    let acceptor = tokio_rustls::TlsAcceptor::from(certificates.server_config());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, seen) = (acceptor.clone(), record.clone());
            tokio::spawn(async move {
                // A client that does not trust the certificate leaves here.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let (_, session) = tls.get_ref();
                let name = session.server_name().map(str::to_owned);
                let protocol = session.alpn_protocol().map(<[u8]>::to_vec);
                seen.lock().unwrap().handshakes.push((name, protocol));
                let service = hyper::service::service_fn(move |request: Request<_>| {
                    let seen = seen.clone();
                    async move {
                        let line = format!("{} {}", request.method(), request.uri());
                        seen.lock().unwrap().requests.push(line);
                        let answer = if request.method() == http::Method::GET {
                            Response::builder()
                                .header("cache-control", "max-age=3600")
                                .header("etag", "\"v1\"")
                                .body(Full::new(Bytes::from_static(b"hello")))
                        } else {
                            Response::builder()
                                .status(412)
                                .body(Full::new(Bytes::new()))
                        };
                        Ok::<_, Infallible>(answer.unwrap())
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (seen, port)
}

fn status_of(response: &reqwest::Response) -> String {
    (response.headers().get("cache-status"))
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn an_https_origin_is_verified_pooled_and_cached() {
    let certificates = common::TestCertificates::new();
    let (seen, port) = start_tls_origin(&certificates).await;
    let proxy = common::Ifmatch::start([
        "proxy".as_ref(),
        "--upstream".as_ref(),
        format!("https://localhost:{port}").as_ref(),
        "--upstream-ca".as_ref(),
        certificates.ca.as_os_str(),
        "--threads".as_ref(),
        "1".as_ref(),
    ]);
    let http = common::client();
    for path in ["/a", "/b", "/c"] {
        let first = http
            .get(format!("{}{path}", proxy.base))
            .send()
            .await
            .unwrap();
        assert_eq!(first.status(), 200);
        assert_eq!(first.headers()["etag"], "\"v1\"", "the origin's tag");
        assert!(
            status_of(&first).contains("stored"),
            "{}",
            status_of(&first)
        );
        assert_eq!(first.bytes().await.unwrap(), &b"hello"[..]);
    }
    let again = http.get(format!("{}/a", proxy.base)).send().await.unwrap();
    assert!(status_of(&again).contains("hit"), "{}", status_of(&again));
    assert_eq!(again.bytes().await.unwrap(), &b"hello"[..]);
    // One connection, used again for every miss, after one handshake that named the
    // upstream's host and agreed on HTTP/1.1.
    let expected = (Some("localhost".to_owned()), Some(b"http/1.1".to_vec()));
    assert_eq!(
        seen.lock().unwrap().handshakes,
        std::slice::from_ref(&expected)
    );
    // A write is checked against the origin's version, asked over TLS too: the stale tag
    // never reaches it.
    let stale = http
        .put(format!("{}/a", proxy.base))
        .header("if-match", "\"v0\"")
        .body("new")
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 412);

    let seen = seen.lock().unwrap();
    assert_eq!(seen.requests, ["GET /a", "GET /b", "GET /c", "GET /a"]);
    assert!(seen.handshakes.iter().all(|h| *h == expected));
}

#[tokio::test]
async fn an_origin_whose_certificate_does_not_verify_is_a_502_and_never_asked() {
    let certificates = common::TestCertificates::new();
    let (seen, port) = start_tls_origin(&certificates).await;
    let ca = certificates.ca.to_str().unwrap();
    let localhost = format!("https://localhost:{port}");
    let address = format!("https://127.0.0.1:{port}");
    // Issued by an authority the proxy was not told to trust.
    assert_eq!(status_through(&localhost, &[]).await, 502);
    // Trusted, but for another name than the upstream's.
    assert_eq!(status_through(&address, &["--upstream-ca", ca]).await, 502);
    let seen = seen.lock().unwrap();
    assert!(seen.handshakes.is_empty() && seen.requests.is_empty());
}

/// The status of a GET of `/a` through a proxy in front of `upstream` with `args`.
async fn status_through(upstream: &str, args: &[&str]) -> u16 {
    let mut all = vec!["proxy", "--upstream", upstream];
    all.extend_from_slice(args);
    let proxy = common::Ifmatch::start(all);
    let answer = common::client()
        .get(format!("{}/a", proxy.base))
        .send()
        .await;
    answer.unwrap().status().as_u16()
}

#[tokio::test]
async fn a_self_signed_certificate_given_to_trust_is_trusted_as_itself_for_its_name() {
    // As `openssl req -x509` makes them, `CA:TRUE`, which the web's rules refuse on a server.
    let certificates = common::TestCertificates::self_signed();
    let (seen, port) = start_tls_origin(&certificates).await;
    let ca = ["--upstream-ca", certificates.ca.to_str().unwrap()];
    assert_eq!(
        status_through(&format!("https://localhost:{port}"), &ca).await,
        200
    );
    assert_eq!(
        status_through(&format!("https://localhost:{port}"), &[]).await,
        502
    );
    assert_eq!(
        status_through(&format!("https://127.0.0.1:{port}"), &ca).await,
        502
    );
    assert_eq!(seen.lock().unwrap().requests, ["GET /a"]);
}

#[tokio::test]
async fn a_handshake_the_origin_never_finishes_is_a_504_within_the_timeout() {
    // Takes the connection, says nothing.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    let upstream = format!("https://localhost:{port}");
    let start = std::time::Instant::now();
    assert_eq!(status_through(&upstream, &["--timeout", "1"]).await, 504);
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn an_unusable_ca_file_stops_the_proxy_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let output = std::process::Command::new(common::binary())
        .args([
            "proxy",
            "--upstream",
            "https://localhost:1",
            "--upstream-ca",
        ])
        .arg(&empty)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(
        text.contains("empty.pem") && text.contains("no PEM certificate"),
        "{text}"
    );
}
