//! `ifmatch proxy`'s cache against hostile origins and clients: an origin that lies about its
//! length, sends 10,000 fields or `Vary: *`; clients that try to poison the cache through
//! fields no key holds, to deceive it into storing a private page, or to smuggle a second
//! request. Nothing poisoned is served to another client, the answer is a clear 4xx or 502,
//! and the proxy stays up. The origin is a raw socket, so that it can send what no HTTP
//! library would.

use crate::common;

use common::client;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What reached the origin: each request's head, as it came.
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl Seen {
    fn of(&self, path: &str) -> Vec<String> {
        let heads = self.0.lock().unwrap();
        let line = format!("GET {path} ");
        heads
            .iter()
            .filter(|h| h.starts_with(&line))
            .cloned()
            .collect()
    }

    fn all(&self) -> String {
        self.0.lock().unwrap().join("\n")
    }
}

/// A field value of `head`, by lowercase name.
fn field<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The origin's answer to a request head, raw.
fn answer(head: &str) -> Vec<u8> {
    let path = head.split(' ').nth(1).unwrap_or("/");
    let fresh = "Cache-Control: max-age=60\r\n";
    match path {
        // 100 bytes promised, 50 sent, then the connection closes.
        "/short" => format!(
            "HTTP/1.1 200 OK\r\n{fresh}Content-Length: 100\r\n\r\n{}",
            "x".repeat(50)
        )
        .into_bytes(),
        // Five bytes of a thousand, sent as a 200.
        "/part-as-whole" => format!(
            "HTTP/1.1 200 OK\r\n{fresh}Content-Range: bytes 0-4/1000\r\nContent-Length: 5\r\n\r\nhello"
        )
        .into_bytes(),
        // One chunk, then the connection closes before the last.
        "/chunked-cut" => {
            format!("HTTP/1.1 200 OK\r\n{fresh}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
                .into_bytes()
        }
        // A part, to a request that asked for all of it.
        "/unasked-part" => format!(
            "HTTP/1.1 206 Partial Content\r\n{fresh}ETag: \"p\"\r\nContent-Range: bytes 0-4/10\r\nContent-Length: 5\r\n\r\nhello"
        )
        .into_bytes(),
        "/many-fields" => {
            let fields: String = (0..10_000).map(|i| format!("X-F{i}: {i}\r\n")).collect();
            format!("HTTP/1.1 200 OK\r\n{fresh}{fields}Content-Length: 2\r\n\r\nok").into_bytes()
        }
        "/vary-star" => {
            format!("HTTP/1.1 200 OK\r\n{fresh}Vary: *\r\nContent-Length: 2\r\n\r\nok").into_bytes()
        }
        "/vary-500" => {
            let names: Vec<String> = (0..500).map(|i| format!("x-v{i}")).collect();
            let vary = names.join(", ");
            format!("HTTP/1.1 200 OK\r\n{fresh}Vary: {vary}\r\nContent-Length: 2\r\n\r\nok")
                .into_bytes()
        }
        "/account/settings.css" => {
            // A private page, no caching fields but a date it was modified, and a cookie.
            let who = field(head, "cookie").unwrap_or("nobody").to_owned();
            let body = format!("the page of {who}");
            format!(
                "HTTP/1.1 200 OK\r\nLast-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\nSet-Cookie: seen=1\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
        _ => {
            // An origin that honours every rewriting field it is sent, and builds links from
            // the forwarded host.
            let body = format!(
                "url={} method={} host={}",
                field(head, "x-original-url").unwrap_or("-"),
                field(head, "x-http-method-override").unwrap_or("-"),
                field(head, "x-forwarded-host").unwrap_or("-"),
            );
            format!(
                "HTTP/1.1 200 OK\r\n{fresh}Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
    }
}

async fn serve(mut stream: TcpStream, seen: Arc<Seen>) {
    let mut buffer = Vec::new();
    while let Some(head) = common::next_head(&mut stream, &mut buffer).await {
        seen.0.lock().unwrap().push(head.clone());
        if stream.write_all(&answer(&head)).await.is_err() {
            return;
        }
        if head.starts_with("GET /short ") || head.starts_with("GET /chunked-cut ") {
            return;
        }
    }
}

async fn start_origin() -> (Arc<Seen>, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let origin = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, origin.clone()));
        }
    });
    (seen, base)
}

async fn get(url: &str, fields: &[(&str, &str)]) -> (u16, String) {
    let mut request = client().get(url);
    for (name, value) in fields {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// Sends raw bytes to the proxy: what it answers before closing (or within a second).
async fn raw(base: &str, bytes: &str) -> String {
    let mut stream = TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap();
    stream.write_all(bytes.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_origins_are_refused_and_never_stored() {
    let (seen, upstream) = start_origin().await;
    let (proxy, base) = common::spawn_ifmatch(["proxy", "--upstream", &upstream]);
    let _proxy = common::Process(proxy);

    // A body shorter than its length: the client sees it fail, and it is not stored.
    for round in 1..=2 {
        // Cut off before its head was sent (the proxy hashes a body this small first), or
        // part way: never a whole answer.
        let failed = match client().get(format!("{base}/short")).send().await {
            Err(_) => true,
            Ok(response) => response.status() == 502 || response.bytes().await.is_err(),
        };
        assert!(failed, "round {round}: a cut body ends in an error");
        assert_eq!(
            seen.of("/short").len(),
            round,
            "asked again: nothing stored"
        );
    }

    // Only complete answers are stored, and a part is never served as all of it.
    for round in 1..=2 {
        let (status, body) = get(&format!("{base}/part-as-whole"), &[]).await;
        assert_eq!(status, 502, "round {round}: {body}");
        assert_eq!(seen.of("/part-as-whole").len(), round, "never stored");

        let cut = match client().get(format!("{base}/chunked-cut")).send().await {
            Err(_) => true,
            Ok(response) => response.bytes().await.is_err(),
        };
        assert!(cut, "round {round}: a cut chunked body ends in an error");
        assert_eq!(seen.of("/chunked-cut").len(), round, "never stored");

        let response = client()
            .get(format!("{base}/unasked-part"))
            .send()
            .await
            .unwrap();
        assert_ne!(response.status(), 200, "round {round}");
        assert_eq!(
            seen.of("/unasked-part").len(),
            round,
            "a part never answers a request for the whole"
        );
    }

    // 10,000 fields: 502, and the proxy goes on.
    let (status, _) = get(&format!("{base}/many-fields"), &[]).await;
    assert_eq!(status, 502);

    // `Vary: *` is never served from the store; a 500-name `Vary` is, to the same request.
    for _ in 0..2 {
        assert_eq!(
            get(&format!("{base}/vary-star"), &[]).await,
            (200, "ok".into())
        );
        assert_eq!(
            get(&format!("{base}/vary-500"), &[]).await,
            (200, "ok".into())
        );
    }
    assert_eq!(seen.of("/vary-star").len(), 2);
    assert_eq!(seen.of("/vary-500").len(), 1);
    assert_eq!(
        get(&format!("{base}/vary-500"), &[("x-v7", "1")]).await.0,
        200
    );
    assert_eq!(seen.of("/vary-500").len(), 2, "another variant asks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_poison_nothing() {
    let (seen, upstream) = start_origin().await;
    let (proxy, base) = common::spawn_ifmatch(["proxy", "--upstream", &upstream]);
    let _proxy = common::Process(proxy);
    let host = common::host_of(&base);

    // Fields the key does not hold never reach the origin with a GET.
    let attack = [
        ("x-original-url", "/admin"),
        ("x-rewrite-url", "/admin"),
        ("x-http-method-override", "DELETE"),
        ("x-forwarded-host", "evil.example"),
    ];
    let (_, poisoned) = get(&format!("{base}/page"), &attack).await;
    assert_eq!(poisoned, format!("url=- method=- host={host}"));
    let (_, victim) = get(&format!("{base}/page"), &[]).await;
    assert_eq!(victim, format!("url=- method=- host={host}"));
    assert!(!seen.all().contains("/admin") && !seen.all().contains("evil.example"));
    assert!(
        !seen
            .all()
            .to_ascii_lowercase()
            .contains("x-http-method-override")
    );

    // A private page under a static-looking path (cache deception): never served to another.
    let (_, victims) = get(
        &format!("{base}/account/settings.css"),
        &[("cookie", "session=victim")],
    )
    .await;
    assert_eq!(victims, "the page of session=victim");
    let (_, attackers) = get(&format!("{base}/account/settings.css"), &[]).await;
    assert_eq!(attackers, "the page of nobody");
    // And with credentials, not stored either.
    let (_, with_token) = get(&format!("{base}/token"), &[("authorization", "Bearer a")]).await;
    assert!(with_token.starts_with("url=-"));
    get(&format!("{base}/token"), &[]).await;
    assert_eq!(seen.of("/token").len(), 2);

    // Smuggling. Two lengths, a folded line: 400, nothing reaches the origin.
    let before = seen.0.lock().unwrap().len();
    let refused = [
        "GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 38\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: x\r\nX-Long: one\r\n two\r\n\r\n",
    ];
    for attempt in refused {
        let answer = raw(&base, attempt).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{attempt:?}: {answer}");
    }
    assert_eq!(
        seen.0.lock().unwrap().len(),
        before,
        "nothing reached the origin"
    );
    // A length and a chunked coding: the coding frames it (RFC 9112 6.3), so what follows the
    // last chunk is the client's own next request, answered as itself; the origin gets each
    // framed anew, never one inside another's body.
    let framed_twice = "GET /b HTTP/1.1\r\nHost: x\r\nContent-Length: 43\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    let answer = raw(&base, framed_twice).await;
    assert!(!answer.contains("HTTP/1.1 5"), "{answer}");
    for head in seen.of("/b").iter().chain(&seen.of("/smuggled")) {
        assert!(
            !head.contains("GET /smuggled") || head.starts_with("GET /smuggled"),
            "{head}"
        );
        assert!(
            field(head, "content-length").is_none_or(|l| l == "0"),
            "{head}"
        );
    }
    // Still up.
    assert_eq!(get(&format!("{base}/page"), &[]).await.0, 200);
}
