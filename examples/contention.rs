//! The contention load client of `scripts/bench-contention`: CLIENTS tasks each doing
//! read-modify-write increments of a counter blob with `If-Match`, retrying a lost race after
//! exponential backoff with full jitter (Azure's guidance), for SECONDS, over BLOBS blobs
//! (each increment on one of them picked at random). At the end every counter is read back:
//! the sum must equal the commits counted, or an update was lost (exit 1).
//!
//! Prints one line: `commits/s`, retries per commit, p50 and p99 commit latency (from the
//! first read to the acknowledged write, retries included).
//!
//! Usage: contention CONNECTION_STRING [CLIENTS] [BLOBS] [SECONDS] [RUN_NAME]

use std::time::{Duration, Instant};

use ifmatch_client::{Backoff, Client, Conditions, update};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(connection) = args.first() else {
        eprintln!("usage: contention CONNECTION_STRING [CLIENTS] [BLOBS] [SECONDS] [RUN_NAME]");
        std::process::exit(2);
    };
    let number = |i: usize, default: u64| args.get(i).map_or(default, |v| v.parse().unwrap());
    let (clients, blobs, seconds) = (number(1, 32), number(2, 1), number(3, 10));
    let run = args
        .get(4)
        .cloned()
        .unwrap_or_else(|| format!("c{}", std::process::id()));
    let client = Client::from_connection_string(connection).expect("connection string");
    client
        .create_container(&run)
        .await
        .expect("create container");
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
            let (client, run) = (client.clone(), run.clone());
            tokio::spawn(async move {
                let (mut latencies, mut attempts) = (Vec::new(), 0u64);
                // A small generator of the client's own (xorshift): which blob next.
                let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ (i + 1);
                while Instant::now() < stop {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let blob = client.blob(&run, &format!("counter-{}", state % blobs));
                    let began = Instant::now();
                    let updated = update(&blob, &backoff, None, |old| {
                        let n = old.map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
                        Some((n + 1).to_le_bytes().to_vec())
                    })
                    .await
                    .expect("update");
                    latencies.push(began.elapsed());
                    attempts += u64::from(updated.attempts);
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
    for b in 0..blobs {
        let blob = client.blob(&run, &format!("counter-{b}"));
        match blob.get(&Conditions::default()).await {
            Ok(Some(read)) => total += u64::from_le_bytes(read.bytes[..].try_into().unwrap()),
            Ok(None) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => panic!("reading {b} back: {e}"),
        }
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
