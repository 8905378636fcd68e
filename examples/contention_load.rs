//! The load of `scripts/bench-contention`, one loop for every side: `examples/contention.rs`
//! (blobs, etcd's JSON gateway) and `scripts/etcd-grpc` (etcd over gRPC) include this file.
//! CLIENTS tasks each add one to a counter picked at random among KEYS by a compare-and-swap,
//! again after the backoff's wait whenever it lost, for SECONDS; then every counter is read
//! back: the sum must equal the commits counted, or an update was lost (exit 1).
//!
//! Prints one line: `commits/s`, retries per commit, p50 and p99 commit latency (from the
//! first read to the acknowledged write, retries included), commits and the counters' sum.

use std::future::Future;
use std::time::{Duration, Instant};

use ifmatch_client::Backoff;

/// Counters read and added to by compare-and-swap.
pub(crate) trait Counters: Clone + Send + Sync + 'static {
    /// Adds one to counter `n`, again after `backoff`'s wait whenever it lost a race: the
    /// attempts it took.
    fn increment(&self, n: u64, backoff: &Backoff) -> impl Future<Output = u32> + Send;

    /// Counter `n` as it is now (0 when absent).
    fn read(&self, n: u64) -> impl Future<Output = u64> + Send;
}

/// What the command line asks: `TARGET [CLIENTS] [KEYS] [SECONDS] [RUN_NAME]`.
pub(crate) struct Asked {
    pub(crate) target: String,
    pub(crate) clients: u64,
    pub(crate) keys: u64,
    pub(crate) seconds: u64,
    /// A name of this run's own: its container or key prefix.
    pub(crate) run: String,
}

impl Asked {
    /// From the process's arguments; prints `usage` and exits 2 without a target.
    pub(crate) fn from_args(usage: &str) -> Self {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let Some(target) = args.first().cloned() else {
            eprintln!("usage: {usage}");
            std::process::exit(2);
        };
        let number = |i: usize, default: u64| args.get(i).map_or(default, |v| v.parse().unwrap());
        let run = (args.get(4).cloned()).unwrap_or_else(|| format!("c{}", std::process::id()));
        Self {
            target,
            clients: number(1, 32),
            keys: number(2, 1),
            seconds: number(3, 10),
            run,
        }
    }
}

/// Exponential backoff with full jitter from 1 ms, capped at 100 ms (Azure's guidance); never
/// gives up.
const BACKOFF: Backoff = Backoff {
    base: Duration::from_millis(1),
    max: Duration::from_millis(100),
    attempts: u32::MAX,
};

/// Runs the load `asked` describes on `counters` and prints its line; exits 1 when an update
/// was lost.
pub(crate) async fn run(counters: impl Counters, asked: &Asked) {
    let stop = Instant::now() + Duration::from_secs(asked.seconds);
    let start = Instant::now();
    let keys = asked.keys;
    let tasks: Vec<_> = (0..asked.clients)
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
                    attempts += u64::from(counters.increment(state % keys, &BACKOFF).await);
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
    let mut total = 0;
    for n in 0..keys {
        total += counters.read(n).await;
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
