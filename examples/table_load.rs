//! The load client of `scripts/bench-tables`, over the Table REST dialect with Shared Key
//! (so it runs against `ifmatch serve` and Azurite's table service alike):
//!
//! - `counter CONNECTION CLIENTS ENTITIES SECONDS`: CLIENTS tasks doing read-modify-write
//!   increments of counter entities with `If-Match`, retrying a lost race after exponential
//!   backoff with full jitter, each increment on one of ENTITIES picked at random; then every
//!   counter is read back (exit 1 if the sum is not the commits counted). Prints
//!   `commits/s R retries/commit R p50_ms R p99_ms R`.
//! - `batch CONNECTION ROUNDS`: ROUNDS batches of 100 inserts, one after another. Prints
//!   `p50_ms R p99_ms R`.
//! - `fill CONNECTION TABLE PARTITIONS ROWS`: PARTITIONS x ROWS entities in batches of 100 (8 in
//!   flight).
//! - `page CONNECTION TABLE PARTITION ROUNDS`: ROUNDS queries of one page of PARTITION. Prints
//!   `p50_ms R p99_ms R entities N`.

#[path = "signed_client.rs"]
mod signed_client;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use ifmatch_azure::Account;
use ifmatch_azure::auth::Signed;
use signed_client::Signer;

/// The Table service's Shared Key string-to-sign.
fn table_string(account: &Account, request: Signed<'_>) -> String {
    ifmatch_table::auth::string_to_sign(account, request, false)
}

/// A Table service endpoint and the account that signs for it (its `send` is the signer's).
#[derive(Clone)]
struct Tables(Signer);

impl std::ops::Deref for Tables {
    type Target = Signer;

    fn deref(&self) -> &Signer {
        &self.0
    }
}

impl Tables {
    fn new(connection: &str) -> Self {
        let fixed = &[
            ("x-ms-version", "2019-02-02"),
            ("accept", "application/json;odata=nometadata"),
            ("dataserviceversion", "3.0"),
        ];
        Self(Signer::new(
            connection,
            "TableEndpoint",
            table_string,
            fixed,
        ))
    }

    async fn create_table(&self, name: &str) {
        let body = format!(r#"{{"TableName":"{name}"}}"#);
        let json = [("content-type", "application/json")];
        let answer = self.send(Method::POST, "/Tables", &json, body).await;
        assert!(answer.status.is_success() || answer.status == StatusCode::CONFLICT);
    }

    /// A batch of `rows` inserts into `partition` from `from` on: its status.
    async fn batch(&self, table: &str, partition: &str, from: usize, rows: usize) -> StatusCode {
        let mut body = String::from(
            "--batch_b\r\nContent-Type: multipart/mixed; boundary=changeset_c\r\n\r\n",
        );
        for row in from..from + rows {
            body.push_str(&format!(
                "--changeset_c\r\nContent-Type: application/http\r\n\
                 Content-Transfer-Encoding: binary\r\n\r\n\
                 POST {}/{table} HTTP/1.1\r\nContent-Type: application/json\r\n\
                 Accept: application/json;odata=nometadata\r\nPrefer: return-no-content\r\n\
                 DataServiceVersion: 3.0\r\n\r\n\
                 {{\"PartitionKey\":\"{partition}\",\"RowKey\":\"{row:08}\",\"N\":{row}}}\r\n",
                self.endpoint
            ));
        }
        body.push_str("--changeset_c--\r\n--batch_b--\r\n");
        let kind = [("content-type", "multipart/mixed; boundary=batch_b")];
        let answer = self.send(Method::POST, "/$batch", &kind, body).await;
        let text = String::from_utf8_lossy(&answer.body);
        assert!(
            answer.status == StatusCode::ACCEPTED && !text.contains(" 4") && !text.contains(" 5"),
            "a batch failed: {} {text}",
            answer.status
        );
        answer.status
    }
}

/// The value of the counter entity's `N` in a JSON body.
fn counter_of(body: &[u8]) -> u64 {
    let json: serde_json::Value = serde_json::from_slice(body).expect("JSON");
    json["N"].as_u64().expect("N")
}

fn percentiles(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

/// The next number of a client's own small generator (xorshift).
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// One increment of `row` with `If-Match`, retried until it commits: how many attempts.
async fn increment(tables: &Tables, table: &str, row: u64, state: &mut u64) -> u32 {
    let path = format!("/{table}(PartitionKey='c',RowKey='{row}')");
    let json = ("content-type", "application/json");
    let mut wait_ms = 1.0_f64;
    for attempt in 1.. {
        let read = tables.send(Method::GET, &path, &[], Bytes::new()).await;
        let done = match read.status {
            StatusCode::NOT_FOUND => {
                let body = format!(r#"{{"PartitionKey":"c","RowKey":"{row}","N":1}}"#);
                let headers = [json, ("prefer", "return-no-content")];
                let path = format!("/{table}");
                let answer = tables.send(Method::POST, &path, &headers, body).await;
                answer.status.is_success()
            }
            StatusCode::OK => {
                let n = counter_of(&read.body) + 1;
                let body = format!(r#"{{"PartitionKey":"c","RowKey":"{row}","N":{n}}}"#);
                let tag = read.etag.expect("an ETag");
                let headers = [json, ("if-match", tag.as_str())];
                let answer = tables.send(Method::PUT, &path, &headers, body).await;
                match answer.status {
                    StatusCode::NO_CONTENT => true,
                    StatusCode::PRECONDITION_FAILED => false,
                    other => panic!("an update answered {other}"),
                }
            }
            other => panic!("a read answered {other}"),
        };
        if done {
            return attempt;
        }
        // Full jitter: a random wait up to the doubling cap.
        let fraction = (next(state) % 1000) as f64 / 1000.0;
        tokio::time::sleep(Duration::from_secs_f64(wait_ms * fraction / 1e3)).await;
        wait_ms = (wait_ms * 2.0).min(100.0);
    }
    unreachable!()
}

/// One client's increments until `stop`: each one's latency, and the attempts they took.
async fn increments(
    tables: &Tables,
    table: &str,
    entities: u64,
    stop: Instant,
    seed: u64,
) -> (Vec<Duration>, u64) {
    let (mut latencies, mut attempts) = (Vec::new(), 0u64);
    let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ seed;
    while Instant::now() < stop {
        let began = Instant::now();
        let row = next(&mut state) % entities;
        attempts += u64::from(increment(tables, table, row, &mut state).await);
        latencies.push(began.elapsed());
    }
    (latencies, attempts)
}

async fn counter(tables: Tables, clients: u64, entities: u64, seconds: u64) {
    let table = format!("c{}", std::process::id());
    tables.create_table(&table).await;
    let stop = Instant::now() + Duration::from_secs(seconds);
    let start = Instant::now();
    let tasks = (0..clients).map(|i| {
        let (tables, table) = (tables.clone(), table.clone());
        tokio::spawn(async move { increments(&tables, &table, entities, stop, i + 1).await })
    });
    let done = futures_util::future::join_all(tasks).await;
    let elapsed = start.elapsed().as_secs_f64();
    let done: Vec<(Vec<Duration>, u64)> = done.into_iter().map(|d| d.expect("a client")).collect();
    let attempts: u64 = done.iter().map(|(_, a)| a).sum();
    let latencies: Vec<Duration> = done.into_iter().flat_map(|(l, _)| l).collect();
    let commits = latencies.len() as u64;
    let mut total = 0;
    for row in 0..entities {
        let path = format!("/{table}(PartitionKey='c',RowKey='{row}')");
        let read = tables.send(Method::GET, &path, &[], Bytes::new()).await;
        if read.status == StatusCode::OK {
            total += counter_of(&read.body);
        }
    }
    let (p50, p99) = percentiles(latencies);
    println!(
        "commits/s {:.1} retries/commit {:.2} p50_ms {p50:.2} p99_ms {p99:.2} commits {commits} counted {total}",
        commits as f64 / elapsed,
        (attempts - commits) as f64 / commits as f64,
    );
    if total != commits {
        eprintln!("lost updates: {commits} commits acknowledged, the counters sum to {total}");
        std::process::exit(1);
    }
}

async fn batches(tables: Tables, rounds: usize) {
    let table = format!("b{}", std::process::id());
    tables.create_table(&table).await;
    let mut times = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let began = Instant::now();
        tables.batch(&table, &format!("p{round}"), 0, 100).await;
        times.push(began.elapsed());
    }
    let (p50, p99) = percentiles(times);
    println!("p50_ms {p50:.2} p99_ms {p99:.2}");
}

async fn fill(tables: Tables, table: &str, partitions: usize, rows: usize) {
    tables.create_table(table).await;
    let jobs: Vec<(usize, usize)> = (0..partitions)
        .flat_map(|p| (0..rows).step_by(100).map(move |from| (p, from)))
        .collect();
    let jobs = std::sync::Arc::new(std::sync::Mutex::new(jobs));
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let (tables, table, jobs) = (tables.clone(), table.to_owned(), jobs.clone());
            tokio::spawn(async move {
                loop {
                    let Some((p, from)) = jobs.lock().unwrap().pop() else {
                        return;
                    };
                    let n = (rows - from).min(100);
                    tables.batch(&table, &format!("p{p:06}"), from, n).await;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a filler");
    }
}

async fn page(tables: Tables, table: &str, partition: &str, rounds: usize) {
    let path = format!("/{table}()?$filter=PartitionKey%20eq%20'{partition}'");
    let mut times = Vec::with_capacity(rounds);
    let mut entities = 0;
    for _ in 0..rounds {
        let began = Instant::now();
        let answer = tables.send(Method::GET, &path, &[], Bytes::new()).await;
        times.push(began.elapsed());
        assert_eq!(answer.status, StatusCode::OK);
        let json: serde_json::Value = serde_json::from_slice(&answer.body).expect("JSON");
        entities = json["value"].as_array().expect("value").len();
    }
    let (p50, p99) = percentiles(times);
    println!("p50_ms {p50:.2} p99_ms {p99:.2} entities {entities}");
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: table-load counter CONNECTION CLIENTS ENTITIES SECONDS | batch CONNECTION ROUNDS | fill CONNECTION TABLE PARTITIONS ROWS | page CONNECTION TABLE PARTITION ROUNDS";
    let (Some(what), Some(connection)) = (args.first(), args.get(1)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let tables = Tables::new(connection);
    let number = |i: usize| -> u64 {
        let text = args.get(i).unwrap_or_else(|| panic!("{usage}"));
        text.parse().expect("a number")
    };
    let text = |i: usize| args.get(i).unwrap_or_else(|| panic!("{usage}")).as_str();
    match what.as_str() {
        "counter" => counter(tables, number(2), number(3), number(4)).await,
        "batch" => batches(tables, number(2) as usize).await,
        "fill" => fill(tables, text(2), number(3) as usize, number(4) as usize).await,
        "page" => page(tables, text(2), text(3), number(4) as usize).await,
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
