//! The contention load client of `scripts/bench-contention` (the loop: `contention_load.rs`).
//!
//! Against a blob service (a connection string): each counter a blob, written with `If-Match`
//! of the ETag read (`ifmatch_client::update`). Against etcd (`etcd=http://HOST:PORT`, its v3
//! JSON gateway): each counter a key, written by a transaction comparing the key's
//! `mod_revision` with the one read, the same loop and backoff.
//!
//! Usage: contention CONNECTION_STRING|etcd=URL [CLIENTS] [KEYS] [SECONDS] [RUN_NAME]

#[path = "contention_load.rs"]
mod load;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ifmatch_client::{Backoff, Client, Conditions, update};
use load::Asked;
use serde_json::{Value, json};

/// Where the counters live.
#[derive(Clone)]
enum Store {
    Blobs { client: Client, run: String },
    Etcd(Etcd),
}

impl Store {
    async fn open(target: &str, run: &str) -> Self {
        if let Some(url) = target.strip_prefix("etcd=") {
            // TLS over the provider ifmatch's clients name (this program installs none).
            let builder = ifmatch_client::https::client_builder().expect("TLS roots");
            let http = builder.no_proxy().build().unwrap();
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
}

impl load::Counters for Store {
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

// The allocator of `ifmatch serve`: glibc's malloc took about 13% of this client's CPU.
#[global_allocator]
static ALLOCATOR: ifmatch_server::allocator::Allocator = ifmatch_server::allocator::Allocator;

#[tokio::main]
async fn main() {
    let asked = Asked::from_args(
        "contention CONNECTION_STRING|etcd=URL [CLIENTS] [KEYS] [SECONDS] [RUN_NAME]",
    );
    load::run(Store::open(&asked.target, &asked.run).await, &asked).await;
}
