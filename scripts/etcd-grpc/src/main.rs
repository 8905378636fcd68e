//! The loop of `examples/contention.rs` against etcd over gRPC: CLIENTS tasks each adding one to
//! a counter picked at random among KEYS, by a read and a transaction comparing the key's
//! `mod_revision` with the one read, again after `ifmatch_client::Backoff`'s wait when it lost
//! (the same backoff: 1 ms doubling to 100 ms, full jitter), for SECONDS. At the end every
//! counter is read back: the sum must equal the commits counted, or an update was lost.
//!
//! Prints the line `examples/contention.rs` prints.
//!
//! Usage: etcd-grpc HOST:PORT [CLIENTS] [KEYS] [SECONDS] [RUN_NAME]

use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, KvClient, Txn, TxnOp};
use ifmatch_client::Backoff;

/// Counter `n`'s value and `mod_revision` (0 when absent).
async fn read(kv: &mut KvClient, key: &str) -> (u64, i64) {
    let got = kv.get(key, None).await.expect("etcd get");
    match got.kvs().first() {
        Some(kv) => {
            let value = u64::from_le_bytes(kv.value().try_into().expect("8 bytes"));
            (value, kv.mod_revision())
        }
        None => (0, 0),
    }
}

/// Adds one to the counter at `key`: the attempts it took.
async fn increment(kv: &mut KvClient, key: &str, backoff: &Backoff) -> u32 {
    for attempt in 0..backoff.attempts.max(1) {
        if attempt > 0 {
            tokio::time::sleep(backoff.delay(attempt - 1)).await;
        }
        let (value, revision) = read(kv, key).await;
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, revision)])
            .and_then([TxnOp::put(key, (value + 1).to_le_bytes(), None)]);
        if kv.txn(txn).await.expect("etcd txn").succeeded() {
            return attempt + 1;
        }
    }
    panic!("{key}: no commit in {} attempts", backoff.attempts)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(endpoint) = args.first() else {
        eprintln!("usage: etcd-grpc HOST:PORT [CLIENTS] [KEYS] [SECONDS] [RUN_NAME]");
        std::process::exit(2);
    };
    let number = |i: usize, default: u64| args.get(i).map_or(default, |v| v.parse().unwrap());
    let (clients, keys, seconds) = (number(1, 32), number(2, 1), number(3, 10));
    let run = args
        .get(4)
        .cloned()
        .unwrap_or_else(|| format!("g{}", std::process::id()));
    let client = Client::connect([endpoint.as_str()], None)
        .await
        .expect("etcd");
    let backoff = Backoff {
        base: Duration::from_millis(1),
        max: Duration::from_millis(100),
        attempts: u32::MAX,
    };
    let stop = Instant::now() + Duration::from_secs(seconds);
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            let (mut kv, run) = (client.kv_client(), run.clone());
            tokio::spawn(async move {
                let (mut latencies, mut attempts) = (Vec::new(), 0u64);
                let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ (i + 1);
                while Instant::now() < stop {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let key = format!("{run}/counter-{}", state % keys);
                    let began = Instant::now();
                    attempts += u64::from(increment(&mut kv, &key, &backoff).await);
                    latencies.push(began.elapsed());
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
    let mut kv = client.kv_client();
    let mut total = 0;
    for n in 0..keys {
        total += read(&mut kv, &format!("{run}/counter-{n}")).await.0;
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
