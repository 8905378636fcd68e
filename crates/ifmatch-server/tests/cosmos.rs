//! The Cosmos DB endpoint of `ifmatch serve`, as its users meet it: Azure's Python SDK
//! (azure-cosmos, `tests/sdk/cosmos.py`) over the local disk, over HTTPS, over Redis and over a
//! bucket (Azurite), and
//! the Rust SDK (azure_data_cosmos: the seed flow, the 304, 16 writers on a counter); offers
//! and the 429s of enforced throughput through the Python SDK's retries; and
//! transactional batches that a SIGKILL leaves whole or absent (on both backends). What the SDKs
//! never send is the Cosmos crate's own test (`crates/ifmatch-cosmos/tests/protocol.rs`).

use crate::common;

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::Process;
use common::cosmos::{Container, PointReader, create_database, peak_mib};
use ifmatch_cosmos::EMULATOR_KEY;
use ifmatch_redis::testing::RedisServer;

/// `ifmatch serve` on `data` with `extra` arguments: the process and the Cosmos endpoint.
fn serve(data: &std::path::Path, extra: &[&str]) -> (Process, String) {
    serve_with(data, extra, &[])
}

/// [`serve`] with `env` set.
fn serve_with(data: &std::path::Path, extra: &[&str], env: &[(&str, &str)]) -> (Process, String) {
    let extra = [&["--table-listen", "off"], extra].concat();
    let (process, _, cosmos) = common::serve_beside(data, "cosmos-listen", &extra, env);
    (process, format!("http://127.0.0.1:{cosmos}"))
}

fn sdk_script(extra: &[&str]) {
    sdk_script_with(extra, &[], 16);
}

/// `tests/sdk/cosmos.py` against a server with `extra` and `env`, `writers` racing for one
/// counter.
fn sdk_script_with(extra: &[&str], env: &[(&str, &str)], writers: usize) {
    let data = tempfile::tempdir().unwrap();
    let (_server, endpoint) = serve_with(data.path(), extra, env);
    let connection = ifmatch_cosmos::connection_string(&endpoint);
    let args = [connection, writers.to_string()];
    common::python_script("cosmos.py", &args, "python cosmos: ");
}

#[test]
fn the_python_sdk_over_the_local_disk() {
    sdk_script(&[]);
}

#[test]
fn the_python_sdk_over_https_with_the_certificate_made_on_first_start() {
    let data = tempfile::tempdir().unwrap();
    let (_server, endpoint) = serve(data.path(), &["--cosmos-https"]);
    let endpoint = endpoint.replace("http://127.0.0.1", "https://localhost");
    let connection = ifmatch_cosmos::connection_string(&endpoint);
    // The client trusts the certificate the server made, and nothing else.
    let certificate = data.path().join("tls/cert.pem");
    let vars = [("REQUESTS_CA_BUNDLE", certificate.as_os_str())];
    common::python_script_with("cosmos.py", &[connection], &vars, "python cosmos: ");
    // The same certificate on the next start: a client told to trust it once still does.
    let before = std::fs::read(&certificate).unwrap();
    drop(_server);
    let (_server, _) = serve(data.path(), &["--cosmos-https"]);
    assert_eq!(std::fs::read(&certificate).unwrap(), before);
}

/// Offers and request units through the Python SDK, and its retry policy waiting out the 429s
/// of a container held to 400 RU/s (`tests/sdk/cosmos_throughput.py`).
#[test]
fn the_python_sdks_throughput_and_its_429_retries_against_enforced_offers() {
    let data = tempfile::tempdir().unwrap();
    let (_server, endpoint) = serve(data.path(), &["--cosmos-throughput", "enforce"]);
    let connection = ifmatch_cosmos::connection_string(&endpoint);
    let tally = "python cosmos throughput: 14 passed";
    common::python_script("cosmos_throughput.py", &[connection], tally);
}

/// Stored procedures, triggers and user-defined functions through the Python SDK: each run
/// one transaction, its bounds, 24 concurrent increments none lost, and runs that overflow the
/// engine's native stack answered 400 with the server up (`tests/sdk/cosmos_scripts.py`).
#[test]
fn the_python_sdks_scripts_run_as_transactions_within_their_bounds() {
    let data = tempfile::tempdir().unwrap();
    let (_server, endpoint) = serve(data.path(), &[]);
    let connection = ifmatch_cosmos::connection_string(&endpoint);
    let tally = "python cosmos scripts: 53 passed";
    common::python_script("cosmos_scripts.py", &[connection], tally);
}

#[test]
fn the_python_sdk_over_redis() {
    let redis = RedisServer::start();
    sdk_script(&["--backend", &redis.url()]);
}

/// A minute of Azurite's requests: in `scripts/test --full`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: scripts/test --full runs it"]
async fn the_python_sdk_over_a_bucket() {
    let bucket = common::Bucket::start().await;
    let backend = ["--backend", &bucket.url("ifmatch")];
    let vars = bucket.vars();
    // Four writers race for the counter there, not 16: each retry is a few dozen of Azurite's
    // requests, and the 16 took four minutes of the test command.
    tokio::task::block_in_place(|| sdk_script_with(&backend, &vars, 4));
}

/// A transactional batch creating `rows` documents in partition `pk`, as the SDKs send one.
/// Creates database `id` with a container `c` partitioned by `/pk` (201 each).
fn batch(pk: &str, rows: usize) -> String {
    let operations: Vec<serde_json::Value> = (0..rows)
        .map(|row| {
            serde_json::json!({
                "operationType": "Create",
                "resourceBody": { "id": format!("{row:03}"), "pk": pk, "padding": "x".repeat(2000) },
            })
        })
        .collect();
    serde_json::Value::Array(operations).to_string()
}

/// How many documents each partition holds, by a query across partitions, in pages.
async fn partitions(endpoint: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    let mut continuation: Option<String> = None;
    loop {
        let mut request = common::client()
            .post(format!("{endpoint}/dbs/crash/colls/c/docs"))
            .header("x-ms-documentdb-isquery", "True")
            .header("content-type", "application/query+json")
            .header("x-ms-max-item-count", "1000")
            .body(r#"{"query": "SELECT VALUE c.pk FROM c"}"#);
        if let Some(token) = &continuation {
            request = request.header("x-ms-continuation", token);
        }
        let page = request.send().await.unwrap();
        assert_eq!(page.status(), 200);
        let next =
            (page.headers().get("x-ms-continuation")).map(|v| v.to_str().unwrap().to_owned());
        let json: serde_json::Value = serde_json::from_slice(&page.bytes().await.unwrap()).unwrap();
        for pk in json["Documents"].as_array().unwrap() {
            *counts.entry(pk.as_str().unwrap().to_owned()).or_default() += 1;
        }
        match next {
            Some(token) => continuation = Some(token),
            None => return counts,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_batches_leaves_each_whole_or_absent() {
    sigkill_during_batches(&["--anonymous"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_batches_over_redis_leaves_each_whole_or_absent() {
    let redis = RedisServer::start();
    sigkill_during_batches(&["--anonymous", "--backend", &redis.url()]).await;
}

/// Four writers sending 100-document batches, the server SIGKILLed under them and started
/// again with `args`, three rounds: every partition whole or absent, every acknowledged batch
/// there.
async fn sigkill_during_batches(args: &[&str]) {
    let data = tempfile::tempdir().unwrap();
    let sent = common::BatchSent {
        request: Arc::new(|http, endpoint, pk| {
            http.post(format!("{endpoint}/dbs/crash/colls/c/docs"))
                .header("x-ms-cosmos-is-batch-request", "True")
                .header("x-ms-documentdb-partitionkey", format!("[\"{pk}\"]"))
                .body(batch(pk, 100))
        }),
        acknowledged: 200,
        each: "\"statusCode\":201",
        rows: 100,
    };
    let setup = async |endpoint: &str| create_database(&common::client(), endpoint, "crash").await;
    let start = || serve(data.path(), args);
    let running = Duration::from_millis(1500);
    common::sigkill_under_batches(start, setup, sent, partitions, running).await;
}

/// One page of the change feed after `etag` (from the beginning when `None`), through
/// `endpoint`: its documents and the etag to go on from.
/// Upserts `body` into the collection `docs` (its documents' URL), in the partition `"p"`.
async fn upsert_in_p(
    http: &reqwest::Client,
    docs: &str,
    body: &serde_json::Value,
) -> reqwest::StatusCode {
    let written = http
        .post(docs)
        .header("x-ms-documentdb-is-upsert", "True")
        .header("x-ms-documentdb-partitionkey", "[\"p\"]")
        .body(body.to_string())
        .send();
    written.await.unwrap().status()
}

async fn feed_page(endpoint: &str, etag: Option<&str>) -> (Vec<serde_json::Value>, String) {
    let mut request = common::client()
        .get(format!("{endpoint}/dbs/feed/colls/c/docs"))
        .header("a-im", "Incremental feed")
        .header("x-ms-max-item-count", "100");
    if let Some(etag) = etag {
        request = request.header("if-none-match", etag);
    }
    let page = request.send().await.unwrap();
    let status = page.status().as_u16();
    assert!(status == 200 || status == 304, "feed page: {status}");
    let next = page.headers()["etag"].to_str().unwrap().to_owned();
    let bytes = page.bytes().await.unwrap();
    let documents = match status {
        200 => serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()["Documents"]
            .as_array()
            .unwrap()
            .clone(),
        _ => Vec::new(),
    };
    (documents, next)
}

/// Two instances over one Redis, eight writers across them creating and replacing documents
/// while a consumer reads the change feed through both, each page resumed from the last
/// page's etag: once the writes are done and the feed is drained, the consumer has seen every
/// document in its final version. (Feed positions from each instance's own clock let a page
/// through one instance pass a write still under way on the other, skipping it for good.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_change_feed_across_two_instances_over_redis_misses_no_change() {
    let redis = RedisServer::start();
    let args = ["--anonymous", "--backend", &redis.url()];
    the_change_feed_across_two_instances_misses_no_change(&args, &[], 120).await;
}

/// The same over nothing but a bucket (Azurite), with fewer writes: each costs a few dozen
/// requests of Azurite's (every write moves the feed's counter, in a commit of several
/// entities). Over a minute: in `scripts/test --full`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "slow: scripts/test --full runs it"]
async fn the_change_feed_across_two_instances_over_a_bucket_misses_no_change() {
    let bucket = common::Bucket::start().await;
    let url = bucket.url("ifmatch");
    let args = ["--anonymous", "--backend", &url];
    the_change_feed_across_two_instances_misses_no_change(&args, &bucket.vars(), 20).await;
}

/// Eight writers across two instances with `args` and `env`, `writes` each.
async fn the_change_feed_across_two_instances_misses_no_change(
    args: &[&str],
    env: &[(&str, &str)],
    writes: usize,
) {
    let (data_a, data_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_a, a) = serve_with(data_a.path(), args, env);
    let (_b, b) = serve_with(data_b.path(), args, env);
    let http = common::client();
    let created = http.post(format!("{a}/dbs")).body(r#"{"id":"feed"}"#);
    assert_eq!(created.send().await.unwrap().status(), 201);
    let container = r#"{"id":"c","partitionKey":{"paths":["/pk"]}}"#;
    let created = http.post(format!("{a}/dbs/feed/colls")).body(container);
    assert_eq!(created.send().await.unwrap().status(), 201);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let consumer = {
        let (a, b, done) = (a.clone(), b.clone(), done.clone());
        tokio::spawn(async move {
            let mut seen: HashMap<String, String> = HashMap::new();
            let mut etag: Option<String> = None;
            for turn in 0usize.. {
                let finished = done.load(std::sync::atomic::Ordering::SeqCst);
                let endpoint = if turn % 2 == 0 { &a } else { &b };
                let (documents, next) = feed_page(endpoint, etag.as_deref()).await;
                let empty = documents.is_empty();
                for document in documents {
                    let id = document["id"].as_str().unwrap().to_owned();
                    seen.insert(id, document["_etag"].as_str().unwrap().to_owned());
                }
                etag = Some(next);
                if finished && empty {
                    return seen;
                }
            }
            unreachable!()
        })
    };
    let writers: Vec<_> = (0..8)
        .map(|w| {
            // Most writes through A: a page read through B must not pass those under way.
            let endpoint = if w < 6 { a.clone() } else { b.clone() };
            let http = http.clone();
            tokio::spawn(async move {
                for k in 0..writes {
                    // A document of its own, and a write to one of four shared ones.
                    for id in [format!("w{w}-{k}"), format!("shared{}", k % 4)] {
                        let body = serde_json::json!({ "id": id, "pk": "p", "by": w, "k": k });
                        let docs = format!("{endpoint}/dbs/feed/colls/c/docs");
                        let written = upsert_in_p(&http, &docs, &body).await;
                        assert!(written.is_success(), "{written}");
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = consumer.await.unwrap();
    let mut final_versions = HashMap::new();
    let mut continuation: Option<String> = None;
    loop {
        let mut request = http
            .post(format!("{a}/dbs/feed/colls/c/docs"))
            .header("x-ms-documentdb-isquery", "True")
            .header("content-type", "application/query+json")
            .header("x-ms-max-item-count", "1000")
            .body(r#"{"query": "SELECT c.id, c._etag FROM c"}"#);
        if let Some(token) = &continuation {
            request = request.header("x-ms-continuation", token);
        }
        let page = request.send().await.unwrap();
        let next =
            (page.headers().get("x-ms-continuation")).map(|v| v.to_str().unwrap().to_owned());
        let json: serde_json::Value = serde_json::from_slice(&page.bytes().await.unwrap()).unwrap();
        for row in json["Documents"].as_array().unwrap() {
            let id = row["id"].as_str().unwrap().to_owned();
            final_versions.insert(id, row["_etag"].as_str().unwrap().to_owned());
        }
        match next {
            Some(token) => continuation = Some(token),
            None => break,
        }
    }
    assert_eq!(final_versions.len(), 8 * writes + 4);
    let missed: Vec<_> = (final_versions.iter())
        .filter(|(id, etag)| seen.get(*id) != Some(etag))
        .map(|(id, _)| id.clone())
        .collect();
    assert!(
        missed.is_empty(),
        "the feed never showed the final version of {missed:?}"
    );
}

/// A feed page reads at most a budget of entries, other partitions' included: of 12,000
/// documents in 120 partitions, the last partition's feed is a 304 that stops part way, with an
/// etag the next page goes on from to find the partition's 100 (one page used to read the
/// whole feed, however large).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_page_reads_a_bounded_number_of_entries() {
    let container = Container::anonymous("scan").await;
    let (docs, http) = (container.docs.clone(), container.http.clone());
    for b in 0..120 {
        let pk = format!("p{b}");
        let operations: Vec<serde_json::Value> = (0..100)
            .map(|row| {
                let body = serde_json::json!({ "id": format!("{row}"), "pk": pk });
                serde_json::json!({ "operationType": "Create", "resourceBody": body })
            })
            .collect();
        let sent = http
            .post(&docs)
            .header("x-ms-cosmos-is-batch-request", "True")
            .header("x-ms-documentdb-partitionkey", format!("[\"{pk}\"]"))
            .body(serde_json::Value::Array(operations).to_string());
        assert_eq!(sent.send().await.unwrap().status(), 200);
    }
    let page = |etag: Option<String>| {
        let mut request = http
            .get(&docs)
            .header("a-im", "Incremental feed")
            .header("x-ms-max-item-count", "1000")
            .header("x-ms-documentdb-partitionkey", "[\"p119\"]");
        if let Some(etag) = etag {
            request = request.header("if-none-match", etag);
        }
        async move {
            let answer = request.send().await.unwrap();
            let etag = answer.headers()["etag"].to_str().unwrap().to_owned();
            let status = answer.status().as_u16();
            let body: serde_json::Value =
                serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap_or_default();
            let count = body["Documents"].as_array().map_or(0, Vec::len);
            (status, etag, count)
        }
    };
    let position = |etag: &str| etag.trim_matches('"').parse::<u64>().unwrap();
    let (status, first, _) = page(None).await;
    assert_eq!(status, 304);
    assert!(
        (10_000..12_000).contains(&position(&first)),
        "the first page stops at the budget: {first}"
    );
    let (status, second, count) = page(Some(first)).await;
    assert_eq!((status, count, position(&second)), (200, 100, 12_000));
}

/// Its build takes two minutes: in `scripts/test --full`, which builds it.
#[test]
#[ignore = "slow: scripts/test --full runs it"]
fn the_rust_sdk_seed_flow_the_304_and_a_counter_of_16_writers() {
    // Built by the test command in a workspace of its own (tests/rust-sdk).
    let checker = common::tool(
        "IFMATCH_RUST_SDK",
        "tests/rust-sdk/target/debug/cosmos-rust-sdk",
    );
    let data = tempfile::tempdir().unwrap();
    let (_server, endpoint) = serve(data.path(), &[]);
    let output = Command::new(checker)
        .args([format!("{endpoint}/"), EMULATOR_KEY.to_owned()])
        .output()
        .unwrap();
    common::assert_ran("the Rust SDK's checks", &output, "rust cosmos: 19 passed");
}

/// Queries that make a value grow with itself (a string doubled forty times, a document copied
/// once per mention) are refused at once with a 400 that names the bound; the server's peak
/// memory stays within the figure `docs/cosmos.md` gives, and other clients are served
/// meanwhile, quickly.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_query_that_amplifies_a_value_is_refused_at_once_while_others_are_served() {
    let container = Container::anonymous("bomb").await;
    let (docs, http) = (container.docs.clone(), container.http.clone());
    for i in 0..20 {
        let body = serde_json::json!({ "id": format!("d{i}"), "pk": "p", "s": "a".repeat(1000), "a": [1, 2], "big": "b".repeat(50_000) });
        container.create_in_p(body).await;
    }
    let nested = |open: &str, inner: &str, close: &str, times: usize| {
        format!("{}{inner}{}", open.repeat(times), close.repeat(times))
    };
    let replaced = nested("REPLACE(", "c.s", ", 'a', 'aa')", 40);
    let concatenated = nested("CONCAT(REPLICATE(c.s, 10), ", "c.s", ")", 60);
    let listed = |item: &str, times: usize, between: &str| vec![item; times].join(between);
    let bombs = [
        format!("SELECT VALUE {replaced} FROM c"),
        format!("SELECT VALUE {concatenated} FROM c"),
        format!(
            "SELECT VALUE LENGTH({}) FROM c",
            listed("REPLICATE(c.s, 10)", 120, " || ")
        ),
        format!(
            "SELECT VALUE ARRAY_CONCAT({}) FROM c",
            listed("[c, c, c, c, c, c, c, c]", 60, ", ")
        ),
        format!(
            "SELECT VALUE StringJoin([{}], c.big) FROM c",
            listed("c.big", 300, ", ")
        ),
        format!(
            "SELECT VALUE REPLACE(REPLICATE(c.s, 10), 'a', '{}') FROM c",
            "b".repeat(2000)
        ),
        format!("SELECT * FROM c ORDER BY {replaced}"),
        format!("SELECT VALUE COUNT(1) FROM c WHERE LENGTH({replaced}) > 0"),
        // A cross product that explodes: 1,000 characters split at each, joined thrice.
        "SELECT VALUE COUNT(1) FROM c JOIN a IN StringSplit(c.s, 'a') JOIN b IN StringSplit(c.s, 'a') JOIN d IN StringSplit(c.s, 'a')".to_owned(),
        // A regular expression that backtracks where engines backtrack, on long texts.
        format!(
            "SELECT VALUE RegexMatch(REPLICATE(c.s, 10), '^(a+)+$') FROM c JOIN x IN [{}]",
            listed("1", 900, ", ")
        ),
    ];
    // A point read, timed, all along.
    let reader = PointReader::start(&http, format!("{docs}/d0"));
    let mut attackers = Vec::new();
    for _ in 0..4 {
        let (bombs, docs, http) = (bombs.clone(), docs.clone(), http.clone());
        attackers.push(tokio::spawn(async move {
            for bomb in bombs.iter().cycle().take(3 * bombs.len()) {
                let started = std::time::Instant::now();
                let answer = http
                    .post(&docs)
                    .header("x-ms-documentdb-isquery", "True")
                    .header("content-type", "application/query+json")
                    .header("x-ms-documentdb-partitionkey", r#"["p"]"#)
                    .body(serde_json::json!({ "query": bomb }).to_string())
                    .send()
                    .await
                    .unwrap();
                let status = answer.status().as_u16();
                let body: serde_json::Value =
                    serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
                let said = body.to_string();
                assert_eq!(
                    (status, body["code"].as_str()),
                    (400, Some("BadRequest")),
                    "{}: {}",
                    &bomb[..50],
                    &said[..said.len().min(200)]
                );
                assert!(
                    body["message"].as_str().unwrap().contains("16 MiB"),
                    "{body}"
                );
                // Each is refused within 0.12 s on a quiet machine (docs/cosmos.md); the bound
                // is for the test command's other programs beside it on 2 cores. A query the
                // meter did not stop would not end (each nested REPLACE doubles the text).
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "{}: {:?}",
                    &bomb[..50],
                    started.elapsed()
                );
            }
        }));
    }
    for attacker in attackers {
        attacker.await.unwrap();
    }
    let served = reader.stop().await;
    let peak = peak_mib(container.server.0.id());
    eprintln!("meanwhile {served}; peak memory {peak} MiB");
    served.assert_served();
    assert!(peak < 256, "the server's peak resident memory: {peak} MiB");
}

/// Two instances of `ifmatch serve` over one Redis, open without credentials, with a database
/// and a container (`container`, its JSON) created through the first: their endpoints.
struct Fleet {
    a: String,
    b: String,
    _servers: [Process; 2],
    _data: [tempfile::TempDir; 2],
    _redis: RedisServer,
}

impl Fleet {
    async fn with(db: &str, container: &str) -> Self {
        let redis = RedisServer::start();
        let args = ["--anonymous", "--backend", &redis.url()];
        let data = [(); 2].map(|()| tempfile::tempdir().unwrap());
        let (server_a, a) = serve_with(data[0].path(), &args, &[]);
        let (server_b, b) = serve_with(data[1].path(), &args, &[]);
        let http = common::client();
        let created = http
            .post(format!("{a}/dbs"))
            .body(format!(r#"{{"id":"{db}"}}"#));
        assert_eq!(created.send().await.unwrap().status(), 201);
        let created = http
            .post(format!("{a}/dbs/{db}/colls"))
            .body(container.to_owned());
        assert_eq!(created.send().await.unwrap().status(), 201);
        let _servers = [server_a, server_b];
        Self {
            a,
            b,
            _servers,
            _data: data,
            _redis: redis,
        }
    }

    /// The endpoint writer `w` goes through: the instances in turn.
    /// `workers` tasks at once, each `work(w, endpoint, client)` through [`Fleet::through`]
    /// its `w`: what each answered, in order.
    async fn each<T: Send + 'static, F: Future<Output = T> + Send + 'static>(
        &self,
        workers: usize,
        work: impl Fn(usize, String, reqwest::Client) -> F,
    ) -> Vec<T> {
        let http = common::client();
        let tasks: Vec<_> = (0..workers)
            .map(|w| tokio::spawn(work(w, self.through(w), http.clone())))
            .collect();
        let mut answered = Vec::with_capacity(workers);
        for task in tasks {
            answered.push(task.await.unwrap());
        }
        answered
    }

    fn through(&self, w: usize) -> String {
        let endpoint = if w.is_multiple_of(2) {
            &self.a
        } else {
            &self.b
        };
        endpoint.clone()
    }
}

/// How many documents the container whose documents `docs` names holds, by a query.
async fn count(docs: &str) -> u64 {
    let page = (common::client().post(docs))
        .header("x-ms-documentdb-isquery", "True")
        .header("content-type", "application/query+json")
        .body(r#"{"query": "SELECT VALUE COUNT(1) FROM c"}"#)
        .send()
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&page.bytes().await.unwrap()).unwrap();
    json["Documents"][0].as_u64().unwrap()
}

/// A unique key across a fleet: for each of 20 values, eight creators of documents of their
/// own race for it through two instances over one Redis; exactly one of each eight is
/// created (201), the others are 409 and leave nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_unique_key_raced_for_through_two_instances_goes_to_one_creator() {
    let container = r#"{"id":"c","partitionKey":{"paths":["/pk"]},"uniqueKeyPolicy":{"uniqueKeys":[{"paths":["/email"]}]}}"#;
    let fleet = Fleet::with("u", container).await;
    let creators = (fleet.each(8, |w, endpoint, http| async move {
        let mut statuses = Vec::new();
        for value in 0..20 {
            let body = serde_json::json!({ "id": format!("{w}-{value}"), "pk": "p", "email": format!("{value}@e") });
            let written = http
                .post(format!("{endpoint}/dbs/u/colls/c/docs"))
                .header("x-ms-documentdb-partitionkey", "[\"p\"]")
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            statuses.push(written.status().as_u16());
        }
        statuses
    }))
    .await;
    let mut won = [0; 20];
    for creator in creators {
        for (value, status) in creator.into_iter().enumerate() {
            assert!(status == 201 || status == 409, "{status}");
            won[value] += usize::from(status == 201);
        }
    }
    assert_eq!(won, [1; 20], "each value to exactly one creator");
    let count = count(&format!("{}/dbs/u/colls/c/docs", fleet.b)).await;
    assert_eq!(count, 20, "nothing of a loser is left");
}

/// Stored procedures across a fleet: eight callers run a read-and-replace increment six times
/// each through two instances over one Redis, on one partition; every run is one transaction
/// and no two interleave: the counter ends at 48, and each run answered a count of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn procedures_through_two_instances_never_interleave() {
    let fleet = Fleet::with("s", r#"{"id":"c","partitionKey":{"paths":["/pk"]}}"#).await;
    let http = common::client();
    let increment = "function increment() { var c = getContext().getCollection();         c.readDocument(c.getSelfLink() + '/docs/n', {}, function (e, d) { if (e) throw e;         d.count += 1; c.replaceDocument(d._self, d, function (e2, w) { if (e2) throw e2;         getContext().getResponse().setBody(w.count); }); }); }";
    let made = http
        .post(format!("{}/dbs/s/colls/c/sprocs", fleet.a))
        .body(serde_json::json!({ "id": "increment", "body": increment }).to_string());
    assert_eq!(made.send().await.unwrap().status(), 201);
    let counter = http
        .post(format!("{}/dbs/s/colls/c/docs", fleet.b))
        .header("x-ms-documentdb-partitionkey", r#"["p"]"#)
        .body(r#"{"id":"n","pk":"p","count":0}"#);
    assert_eq!(counter.send().await.unwrap().status(), 201);
    let callers = (fleet.each(8, |_, endpoint, http| async move {
        let mut counts = Vec::new();
        for _ in 0..6 {
            let ran = http
                .post(format!("{endpoint}/dbs/s/colls/c/sprocs/increment"))
                .header("x-ms-documentdb-partitionkey", r#"["p"]"#)
                .body("[]")
                .send()
                .await
                .unwrap();
            assert_eq!(ran.status(), 200);
            counts.push(ran.text().await.unwrap().parse::<u64>().unwrap());
        }
        counts
    }))
    .await;
    let mut counts = Vec::new();
    for caller in callers {
        counts.extend(caller);
    }
    counts.sort_unstable();
    assert_eq!(
        counts,
        (1..=48).collect::<Vec<u64>>(),
        "each run its own count"
    );
    let read = http
        .get(format!("{}/dbs/s/colls/c/docs/n", fleet.a))
        .header("x-ms-documentdb-partitionkey", r#"["p"]"#)
        .send()
        .await
        .unwrap();
    let stored: serde_json::Value = serde_json::from_str(&read.text().await.unwrap()).unwrap();
    assert_eq!(stored["count"], 48, "none lost");
}

/// Items past their time to live leave storage in the background, on the local disk and over
/// Redis: once the sweep has gone by, a container whose time to live is turned off shows none
/// of them again (before it, they would be there still).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_past_their_time_leave_storage_in_the_background() {
    let redis = RedisServer::start();
    for backend in [None, Some(redis.url())] {
        let data = tempfile::tempdir().unwrap();
        let mut args = vec!["--anonymous"];
        if let Some(url) = &backend {
            args.extend(["--backend", url]);
        }
        let (_server, endpoint) = serve(data.path(), &args);
        let http = common::client();
        let created = http.post(format!("{endpoint}/dbs")).body(r#"{"id":"t"}"#);
        assert_eq!(created.send().await.unwrap().status(), 201);
        for (id, ttl) in [
            ("swept", r#","defaultTtl":1"#),
            ("kept", r#","defaultTtl":60"#),
        ] {
            let container = format!(r#"{{"id":"{id}","partitionKey":{{"paths":["/pk"]}}{ttl}}}"#);
            let created = http.post(format!("{endpoint}/dbs/t/colls")).body(container);
            assert_eq!(created.send().await.unwrap().status(), 201);
            for n in 0..50 {
                let body = serde_json::json!({ "id": format!("{n}"), "pk": format!("p{}", n % 5) });
                let written = http
                    .post(format!("{endpoint}/dbs/t/colls/{id}/docs"))
                    .header("x-ms-documentdb-partitionkey", format!("[\"p{}\"]", n % 5))
                    .body(body.to_string());
                assert_eq!(written.send().await.unwrap().status(), 201);
            }
        }
        let off = |id: &str| {
            http.put(format!("{endpoint}/dbs/t/colls/{id}"))
                .body(format!(
                    r#"{{"id":"{id}","partitionKey":{{"paths":["/pk"]}}}}"#
                ))
                .send()
        };
        // Turned off before the items' time: they all stay.
        assert_eq!(off("kept").await.unwrap().status(), 200);
        tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
        assert_eq!(off("swept").await.unwrap().status(), 200);
        for (id, left) in [("swept", 0), ("kept", 50)] {
            let count = count(&format!("{endpoint}/dbs/t/colls/{id}/docs")).await;
            assert_eq!(count, left, "{id} over {backend:?}");
        }
    }
}

/// The all-versions-and-deletes feed across a fleet: six writers through two instances over
/// one Redis, each creating, replacing and deleting documents of its own; the feed, read
/// through either instance, holds every one of those writes once, numbered in one rising
/// order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_version_across_two_instances_comes_once_in_one_order() {
    let container = r#"{"id":"c","partitionKey":{"paths":["/pk"]},"changeFeedPolicy":{"retentionDuration":60}}"#;
    let fleet = Fleet::with("v", container).await;
    let http = common::client();
    (fleet.each(6, |w, endpoint, http| async move {
        for k in 0..10 {
            let id = format!("w{w}-{k}");
            let docs = format!("{endpoint}/dbs/v/colls/c/docs");
            for n in 0..2 {
                let body = serde_json::json!({ "id": id, "pk": "p", "n": n });
                assert!(upsert_in_p(&http, &docs, &body).await.is_success());
            }
            let deleted = http
                .delete(format!("{docs}/{id}"))
                .header("x-ms-documentdb-partitionkey", "[\"p\"]")
                .send()
                .await
                .unwrap();
            assert_eq!(deleted.status(), 204);
        }
    }))
    .await;
    let (mut seen, mut etag, mut turn) = (Vec::new(), None::<String>, 0);
    loop {
        let endpoint = &fleet.through(turn);
        turn += 1;
        let mut request = http
            .get(format!("{endpoint}/dbs/v/colls/c/docs"))
            .header("a-im", "Full-Fidelity Feed")
            .header("x-ms-max-item-count", "7");
        if let Some(tag) = &etag {
            request = request.header("if-none-match", tag);
        }
        let page = request.send().await.unwrap();
        etag = page
            .headers()
            .get("etag")
            .map(|v| v.to_str().unwrap().to_owned());
        if page.status() == 304 {
            break;
        }
        let json: serde_json::Value = serde_json::from_slice(&page.bytes().await.unwrap()).unwrap();
        for item in json["Documents"].as_array().unwrap() {
            let metadata = &item["metadata"];
            seen.push((
                metadata["lsn"].as_i64().unwrap(),
                metadata["operationType"].as_str().unwrap().to_owned(),
                metadata["id"].as_str().unwrap().to_owned(),
            ));
        }
    }
    assert_eq!(seen.len(), 6 * 10 * 3, "every write and delete once");
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "one rising order");
    for w in 0..6 {
        for k in 0..10 {
            let id = format!("w{w}-{k}");
            let ops: Vec<&str> = (seen.iter())
                .filter(|(_, _, of)| *of == id)
                .map(|(_, op, _)| op.as_str())
                .collect();
            assert_eq!(ops, ["create", "replace", "delete"], "{id}");
        }
    }
}
