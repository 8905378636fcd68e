//! The native load client of `scripts/bench-cosmos`: Cosmos DB's REST API over hyper, each
//! request signed with a master-key token as the SDKs sign it, so that it runs against
//! `ifmatch serve` and `@vercel/cosmosdb-server` alike at a fraction of the JS SDK's CPU (the
//! JS client spent more of the two cores than either server, and capped both).
//!
//! `cosmos-load ENDPOINT KEY DOCS SECONDS [WRITERS]`: WRITERS tasks (16) on one thread
//! incrementing DOCS counter documents for SECONDS, the JS client's loop: read a counter,
//! replace it with `If-Match` its `_etag`, again on 412. Then every counter is read back.
//! Prints one JSON line, as `scripts/bench-cosmos.mjs counter` does:
//! `{"commits_per_s":R,"conflicts":N,"commits":N,"total":N,"exact":B}` (`exact`: the counters
//! add up to the commits counted; a server that ignored `If-Match` would lose some).

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use ifmatch_cosmos::address::Address;
use ifmatch_cosmos::auth::{string_to_sign, token};

/// A Cosmos endpoint and the key that signs for it.
struct Cosmos {
    http: Client<HttpConnector, Full<Bytes>>,
    endpoint: String,
    key: Vec<u8>,
}

struct Answer {
    status: StatusCode,
    body: Bytes,
}

impl Cosmos {
    fn new(endpoint: &str, key: &str) -> Self {
        let key = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, key)
            .expect("a base64 key");
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Self {
            http: Client::builder(TokioExecutor::new()).build(connector),
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            key,
        }
    }

    /// Sends `method path` with `headers` and a JSON `body`, signed.
    async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: String,
    ) -> Answer {
        let date = httpdate::fmt_http_date(SystemTime::now());
        let address = Address::parse(path).expect("a Cosmos address");
        let authorization = token(&self.key, &string_to_sign(&method, &address, &date));
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.endpoint))
            .header("x-ms-date", &date)
            .header("x-ms-version", "2018-12-31")
            .header("authorization", authorization)
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body.into())).expect("a request");
        let response = (self.http.request(request).await).expect("the server answers");
        let status = response.status();
        let body = response.into_body().collect().await.expect("a body");
        Answer {
            status,
            body: body.to_bytes(),
        }
    }

    /// Creates `path`'s resource from `body`, or finds it there.
    async fn create(&self, path: &str, headers: &[(&str, &str)], body: String) {
        let answer = self.send(Method::POST, path, headers, body).await;
        let status = answer.status;
        assert!(
            status.is_success() || status == StatusCode::CONFLICT,
            "creating in {path}: {status} {}",
            String::from_utf8_lossy(&answer.body)
        );
    }
}

/// A counter document's `n` and `_etag`.
fn counter_of(body: &[u8]) -> (u64, String) {
    let json: serde_json::Value = serde_json::from_slice(body).expect("JSON");
    let n = json["n"].as_u64().expect("n");
    (n, json["_etag"].as_str().expect("_etag").to_owned())
}

/// The next number of a client's own small generator (xorshift).
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, endpoint, key, docs, seconds, rest @ ..] = &args[..] else {
        eprintln!("usage: cosmos-load ENDPOINT KEY DOCS SECONDS [WRITERS]");
        std::process::exit(2);
    };
    let docs: u64 = docs.parse().expect("DOCS");
    let seconds: f64 = seconds.parse().expect("SECONDS");
    let writers: u64 = rest.first().map_or(16, |w| w.parse().expect("WRITERS"));
    let cosmos = Rc::new(Cosmos::new(endpoint, key));
    cosmos.create("/dbs", &[], r#"{"id":"bench"}"#.into()).await;
    let since_epoch = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
    let id = format!("native{docs}-{}", since_epoch.unwrap().as_millis());
    let container = format!(r#"{{"id":"{id}","partitionKey":{{"paths":["/pk"],"kind":"Hash"}}}}"#);
    cosmos.create("/dbs/bench/colls", &[], container).await;
    let docs_path = format!("/dbs/bench/colls/{id}/docs");
    for i in 0..docs {
        let key = format!(r#"["c{i}"]"#);
        let body = format!(r#"{{"id":"c{i}","pk":"c{i}","n":0}}"#);
        let pk = [("x-ms-documentdb-partitionkey", key.as_str())];
        cosmos.create(&docs_path, &pk, body).await;
    }

    let (commits, conflicts) = (Rc::new(Cell::new(0u64)), Rc::new(Cell::new(0u64)));
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(seconds);
    let local = tokio::task::LocalSet::new();
    for w in 0..writers {
        let (cosmos, docs_path) = (cosmos.clone(), docs_path.clone());
        let (commits, conflicts) = (commits.clone(), conflicts.clone());
        local.spawn_local(async move {
            let mut state = 0x9e37_79b9_7f4a_7c15 ^ (w + 1);
            while Instant::now() < end {
                let i = next(&mut state) % docs;
                let path = format!("{docs_path}/c{i}");
                let key = format!(r#"["c{i}"]"#);
                let pk = ("x-ms-documentdb-partitionkey", key.as_str());
                let read = cosmos.send(Method::GET, &path, &[pk], String::new()).await;
                assert_eq!(read.status, StatusCode::OK, "a read");
                let (n, etag) = counter_of(&read.body);
                let body = format!(r#"{{"id":"c{i}","pk":"c{i}","n":{}}}"#, n + 1);
                let headers = [pk, ("if-match", etag.as_str())];
                let replaced = cosmos.send(Method::PUT, &path, &headers, body).await;
                match replaced.status {
                    StatusCode::OK => commits.set(commits.get() + 1),
                    StatusCode::PRECONDITION_FAILED => conflicts.set(conflicts.get() + 1),
                    other => panic!("a replace answered {other}"),
                }
            }
        });
    }
    local.await;
    let elapsed = started.elapsed().as_secs_f64();
    let mut total = 0;
    for i in 0..docs {
        let key = format!(r#"["c{i}"]"#);
        let pk = [("x-ms-documentdb-partitionkey", key.as_str())];
        let path = format!("{docs_path}/c{i}");
        let read = cosmos.send(Method::GET, &path, &pk, String::new()).await;
        total += counter_of(&read.body).0;
    }
    let commits = commits.get();
    println!(
        r#"{{"commits_per_s":{:.1},"conflicts":{},"commits":{commits},"total":{total},"exact":{}}}"#,
        commits as f64 / elapsed,
        conflicts.get(),
        total == commits
    );
}
