//! The Cosmos headers that carry numbers and positions (a session token, a change feed's
//! position on either feed, a page size, a query's continuation), each given fuzzed bytes, sent
//! to an endpoint with documents: no request panics (an overflow in a debug build is one), and
//! none is answered 5xx: a number out of range or malformed is the client's error, 400.
#![no_main]

use std::sync::{Arc, LazyLock};

use http::{HeaderValue, Method, Request};
use ifmatch_azure::SystemEnv;
use ifmatch_cosmos::Endpoint;
use ifmatch_table::MemoryTables;
use libfuzzer_sys::fuzz_target;

type Service = Endpoint<Arc<MemoryTables>, SystemEnv>;

const DOCS: &str = "/dbs/d/colls/c/docs";

/// (method, header the fuzzed bytes go to, other headers, body)
const REQUESTS: [(&str, &str, &[(&str, &str)], &str); 5] = [
    (
        "GET",
        "x-ms-session-token",
        &[("x-ms-documentdb-partitionkey", "[\"p\"]")],
        "",
    ),
    ("GET", "if-none-match", &[("a-im", "Incremental feed")], ""),
    (
        "GET",
        "if-none-match",
        &[("a-im", "Full-Fidelity Feed")],
        "",
    ),
    (
        "GET",
        "x-ms-max-item-count",
        &[("a-im", "Incremental feed")],
        "",
    ),
    (
        "POST",
        "x-ms-continuation",
        &[
            ("x-ms-documentdb-isquery", "True"),
            ("content-type", "application/query+json"),
            ("x-ms-max-item-count", "1"),
        ],
        r#"{"query": "SELECT VALUE c.id FROM c ORDER BY c.id OFFSET 1 LIMIT 2"}"#,
    ),
];

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
});

static SERVICE: LazyLock<Service> = LazyLock::new(|| {
    let service =
        Endpoint::new(Arc::new(MemoryTables::new()), SystemEnv)
            .with_serving(ifmatch_azure::Serving::anonymous());
    RUNTIME.block_on(async {
        let container = r#"{"id":"c","partitionKey":{"paths":["/pk"]},"changeFeedPolicy":{"retentionDuration":10}}"#;
        send(&service, "POST", "/dbs", &[], r#"{"id":"d"}"#).await;
        send(&service, "POST", "/dbs/d/colls", &[], container).await;
        for i in 0..3 {
            let body = format!(r#"{{"id":"{i}","pk":"p"}}"#);
            let key = HeaderValue::from_static("[\"p\"]");
            send(&service, "POST", DOCS, &[("x-ms-documentdb-partitionkey", key)], &body).await;
        }
    });
    service
});

async fn send(
    service: &Service,
    method: &str,
    path: &str,
    headers: &[(&str, HeaderValue)],
    body: &str,
) -> u16 {
    let mut request = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).unwrap())
        .uri(path)
        .header("host", "localhost:8081");
    for (name, value) in headers {
        request = request.header(*name, value.clone());
    }
    let (parts, ()) = request.body(()).unwrap().into_parts();
    service
        .handle(&parts, body.as_bytes())
        .await
        .status()
        .as_u16()
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, value)) = data.split_first() else {
        return;
    };
    let Ok(value) = HeaderValue::from_bytes(value) else {
        return;
    };
    let (method, name, others, body) = REQUESTS[usize::from(which) % REQUESTS.len()];
    let path = match name {
        "x-ms-session-token" => "/dbs/d/colls/c/docs/0",
        _ => DOCS,
    };
    let mut headers: Vec<(&str, HeaderValue)> = others
        .iter()
        .map(|(n, v)| (*n, HeaderValue::from_static(v)))
        .collect();
    headers.push((name, value));
    let status = RUNTIME.block_on(send(&SERVICE, method, path, &headers, body));
    assert!(status < 500, "{name}: {status}");
});
