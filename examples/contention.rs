//! The contention load client of `scripts/bench-contention`: CLIENTS tasks each doing
//! read-modify-write increments of a counter with a compare-and-swap, retrying a lost race
//! after exponential backoff with full jitter (Azure's guidance), for SECONDS, over KEYS
//! counters (each increment on one of them picked at random). At the end every counter is read
//! back: the sum must equal the commits counted, or an update was lost (exit 1).
//!
//! Against a blob service (a connection string): each counter a blob, written with `If-Match`
//! of the ETag read (`ifmatch_client::update`). Against etcd (`etcd=http://HOST:PORT`, its v3
//! JSON gateway): each counter a key, written by a transaction comparing the key's
//! `mod_revision` with the one read, the same loop and backoff.
//!
//! Prints one line: `commits/s`, retries per commit, p50 and p99 commit latency (from the
//! first read to the acknowledged write, retries included).
//!
//! Usage: contention CONNECTION_STRING|etcd=URL [CLIENTS] [KEYS] [SECONDS] [RUN_NAME]

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ifmatch_client::{Backoff, Client, Conditions, update};
use serde_json::{Value, json};

/// Where the counters live.
#[derive(Clone)]
enum Counters {
    Blobs { client: Client, run: String },
    Etcd(Etcd),
}

impl Counters {
    async fn open(target: &str, run: &str) -> Self {
        if let Some(url) = target.strip_prefix("etcd=") {
            let http = reqwest::Client::builder().no_proxy().build().unwrap();
            let prefix = format!("{run}/");
            return Self::Etcd(Etcd {
                http,
                url: url.trim_end_matches('/').into(),
                prefix,
            });
        }
        let client = Client::from_connection_string(target).expect("connection string");
        client
            .create_container(run)
            .await
            .expect("create container");
        Self::Blobs {
            client,
            run: run.into(),
        }
    }

    /// Adds one to counter `n`: the attempts it took.
    async fn increment(&self, n: u64, backoff: &Backoff) -> u32 {
        match self {
            Self::Blobs { client, run } => {
                let blob = client.blob(run, &format!("counter-{n}"));
                let updated = update(&blob, backoff, None, |old| {
                    let n = old.map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
                    Some((n + 1).to_le_bytes().to_vec())
                })
                .await
                .expect("update");
                updated.attempts
            }
            Self::Etcd(etcd) => etcd.increment(n, backoff).await,
        }
    }

    /// Counter `n` as it is now.
    async fn read(&self, n: u64) -> u64 {
        match self {
            Self::Blobs { client, run } => {
                let blob = client.blob(run, &format!("counter-{n}"));
                match blob.get(&Conditions::default()).await {
                    Ok(Some(read)) => u64::from_le_bytes(read.bytes[..].try_into().unwrap()),
                    Ok(None) => 0,
                    Err(e) if e.is_not_found() => 0,
                    Err(e) => panic!("reading {n} back: {e}"),
                }
            }
            Self::Etcd(etcd) => etcd.get(n).await.0,
        }
    }
}

/// etcd's v3 API through its JSON gateway: keys and values in base64, 64-bit numbers as
/// strings.
#[derive(Clone)]
struct Etcd {
    http: reqwest::Client,
    url: String,
    prefix: String,
}

impl Etcd {
    fn key(&self, n: u64) -> String {
        STANDARD.encode(format!("{}counter-{n}", self.prefix))
    }

    async fn call(&self, path: &str, body: Value) -> Value {
        let request = self.http.post(format!("{}{path}", self.url));
        let answer = request.body(body.to_string()).send().await.expect("etcd");
        assert!(
            answer.status().is_success(),
            "etcd {path}: {}",
            answer.status()
        );
        serde_json::from_slice(&answer.bytes().await.expect("etcd")).expect("etcd's JSON")
    }

    /// The counter's value and `mod_revision` (0 when absent).
    async fn get(&self, n: u64) -> (u64, String) {
        let read = self
            .call("/v3/kv/range", json!({ "key": self.key(n) }))
            .await;
        let Some(kv) = read["kvs"].get(0) else {
            return (0, "0".into());
        };
        let bytes = STANDARD.decode(kv["value"].as_str().unwrap_or("")).unwrap();
        let value = u64::from_le_bytes(bytes[..].try_into().unwrap());
        (value, kv["mod_revision"].as_str().unwrap().to_owned())
    }

    /// Read, add one, write back if `mod_revision` is still the one read; else start over
    /// after `backoff`'s wait, as `ifmatch_client::update` does.
    async fn increment(&self, n: u64, backoff: &Backoff) -> u32 {
        for attempt in 0..backoff.attempts.max(1) {
            if attempt > 0 {
                tokio::time::sleep(backoff.delay(attempt - 1)).await;
            }
            let (value, revision) = self.get(n).await;
            let new = STANDARD.encode((value + 1).to_le_bytes());
            let txn = json!({
                "compare": [{ "key": self.key(n), "target": "MOD", "result": "EQUAL",
                              "mod_revision": revision }],
                "success": [{ "request_put": { "key": self.key(n), "value": new } }],
            });
            if self.call("/v3/kv/txn", txn).await["succeeded"] == Value::Bool(true) {
                return attempt + 1;
            }
        }
        panic!("counter {n}: no commit in {} attempts", backoff.attempts)
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(connection) = args.first() else {
        eprintln!(
            "usage: contention CONNECTION_STRING|etcd=URL [CLIENTS] [KEYS] [SECONDS] [RUN_NAME]"
        );
        std::process::exit(2);
    };
    let number = |i: usize, default: u64| args.get(i).map_or(default, |v| v.parse().unwrap());
    let (clients, keys, seconds) = (number(1, 32), number(2, 1), number(3, 10));
    let run = args
        .get(4)
        .cloned()
        .unwrap_or_else(|| format!("c{}", std::process::id()));
    let counters = Counters::open(connection, &run).await;
    // Exponential backoff with full jitter from 1 ms, capped at 100 ms; never gives up.
    let backoff = Backoff {
        base: Duration::from_millis(1),
        max: Duration::from_millis(100),
        attempts: u32::MAX,
    };
    let stop = Instant::now() + Duration::from_secs(seconds);
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            let counters = counters.clone();
            tokio::spawn(async move {
                let (mut latencies, mut attempts) = (Vec::new(), 0u64);
                // A small generator of the client's own (xorshift): which counter next.
                let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ (i + 1);
                while Instant::now() < stop {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let began = Instant::now();
                    let tried = counters.increment(state % keys, &backoff).await;
                    latencies.push(began.elapsed());
                    attempts += u64::from(tried);
                }
                (latencies, attempts)
            })
        })
        .collect();
    let (mut latencies, mut attempts) = (Vec::new(), 0);
    for task in tasks {
        let (l, a) = task.await.expect("client task");
        latencies.extend(l);
        attempts += a;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let commits = latencies.len() as u64;

    let mut total = 0;
    for b in 0..keys {
        total += counters.read(b).await;
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "commits/s {:.1} retries/commit {:.2} p50_ms {:.2} p99_ms {:.2} commits {commits} counted {total}",
        commits as f64 / elapsed,
        (attempts - commits) as f64 / commits as f64,
        at(0.5),
        at(0.99),
    );
    if total != commits {
        eprintln!("lost updates: {commits} commits acknowledged, the counters sum to {total}");
        std::process::exit(1);
    }
}
