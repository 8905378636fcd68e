//! Conditional writes per second through two axum instances behind the Tower layer (the fleet
//! of `ifmatch-tower/tests/fleet`: a write holds the key's lock for a 2 ms database round trip),
//! their versions and write locks shared in Redis or in a bucket (`ifmatch serve` through
//! object_store's Azure backend; not moto's S3 server, whose conditional puts are not atomic
//! under concurrency). 32 clients read a document and write it
//! back with `If-Match` through the other instance, starting over on 412, on one key and spread
//! over 1,000 keys. Rounds alternate the backends (the machine is noisy); each line gives the
//! median commits per second over the rounds, its min-max spread, and its ratio to Redis's.
//! Run by `bash scripts/bench-fleet [SECONDS_PER_RUN] [ROUNDS]`.

#[path = "../crates/ifmatch-tower/tests/fleet/mod.rs"]
#[allow(missing_docs)]
mod fleet;

#[path = "../crates/ifmatch-bucket/tests/common/mod.rs"]
#[allow(missing_docs)]
mod stores;

use examples::{median, spread};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ifmatch_bucket::BucketVersions;
use ifmatch_tower::{Shared, VersionStore};

const CLIENTS: usize = 32;

#[tokio::main]
async fn main() {
    let (seconds, rounds) = examples::seconds_and_rounds();
    let redis = ifmatch_redis::testing::RedisServer::start();
    let served = stores::Served::start().await;
    let backends = ["redis", "bucket: ifmatch serve"];
    for keys in [1, 1000] {
        let mut rates = vec![Vec::new(); backends.len()];
        for _ in 0..rounds {
            for (backend, rate) in rates.iter_mut().enumerate() {
                let run = Duration::from_secs(seconds);
                let measured = match backend {
                    0 => {
                        let versions = || async {
                            let connection = ifmatch_redis::connect(&redis.url()).await.unwrap();
                            Shared::new(ifmatch_redis::RedisVersions::new(connection, "bench:"))
                        };
                        commits([versions().await, versions().await], keys, run).await
                    }
                    _ => {
                        let versions = || bucket(served.client());
                        commits([versions(), versions()], keys, run).await
                    }
                };
                rate.push(measured);
            }
        }
        let redis_median = median(&rates[0]);
        for (name, rate) in backends.iter().zip(&rates) {
            let (low, high) = spread(rate);
            println!(
                "{keys:>5} key(s), {name:<22} {:>7.0} commits/s ({low:.0}-{high:.0}), {:.2} of Redis",
                median(rate),
                median(rate) / redis_median
            );
        }
    }
}

fn bucket(store: Arc<dyn object_store::ObjectStore>) -> Shared<BucketVersions> {
    Shared::new(BucketVersions::new(store, "bench"))
}

/// Commits per second through two instances over `versions`, on `keys` documents, for `run`.
async fn commits<V: VersionStore + Clone>(versions: [V; 2], keys: usize, run: Duration) -> f64 {
    let docs = fleet::Docs::default();
    for key in 0..keys {
        docs.lock().unwrap().insert(format!("n{key}"), "0".into());
    }
    let bases = fleet::fleet_of(versions, &docs, false).await;
    let done = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + run;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (bases, done) = (bases.clone(), done.clone());
            tokio::spawn(async move {
                let mut turn = client;
                while Instant::now() < deadline {
                    turn += CLIENTS;
                    let path = format!("/docs/n{}", turn % keys);
                    let (read, write) = (&bases[client % 2], &bases[(client + 1) % 2]);
                    let (tag, value) = fleet::read(read, &path).await;
                    let next = (value.parse::<u64>().unwrap() + 1).to_string();
                    if fleet::put(write, &path, ("if-match", &tag), next).await == 204 {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / run.as_secs_f64()
}
