//! Conditional writes per second through a fleet of two `ifmatch serve` instances (release
//! build, `IFMATCH_BIN`), their records kept in Redis (`--backend redis://`, bytes under a
//! shared `--data`), in a Redis with a replica under three Sentinels with each write on the
//! replica before it is acknowledged (`--backend redis+sentinel://... --redis-replicas 1`), in
//! a Redis Cluster of three primaries (`redis+cluster://`), without replicas and with one
//! each and `--redis-replicas 1`, or in nothing but a bucket (`--backend az://`, over a third
//! `ifmatch serve` as the object store: its conditional puts are atomic, moto's are not), and,
//! as a reference, the same client's compare-and-swap straight on etcd, one member and a
//! three-member cluster (v3's JSON gateway: a range, then a transaction comparing the key's
//! `mod_revision`). 32 clients read a counter and write it back with `If-Match` through the
//! other instance (member), starting over when they lose, on one key and spread over 1,000
//! keys in 10 containers (a container's records share one hash slot, so a cluster spreads
//! containers over its primaries, not the blobs of one). Rounds alternate the backends (the
//! machine is noisy); each line gives the median commits per second over the rounds, its
//! min-max spread, and its ratio to Redis's. At the end of each run every counter is read
//! back: their sum must be the commits counted, or an update was lost.
//!
//! Run by `bash scripts/bench-fleet [SECONDS_PER_RUN] [ROUNDS]`.

use examples::{median, spread};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

const CLIENTS: usize = 32;
/// The containers (prefixes, for etcd) that many keys are spread over.
const CONTAINERS: usize = 10;
const ACCOUNT: &str = "devstoreaccount1";

/// A process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `command` started quietly, once it listens on `port`.
fn listening(mut command: Command, port: u16) -> Process {
    let child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn();
    let process = Process(child.unwrap_or_else(|e| panic!("{command:?}: {e}")));
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{command:?} did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    process
}

/// `ifmatch serve` with `args` and `env`: the process and its account's root.
fn serve(args: &[&str], env: &[(&str, String)]) -> (Process, String) {
    let binary = std::env::var("IFMATCH_BIN").unwrap_or_else(|_| "target/release/ifmatch".into());
    let port = free_port();
    let mut command = Command::new(binary);
    command.arg("serve").args(args).args([
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--table-listen",
        "off",
        "--cosmos-listen",
        "off",
    ]);
    command.envs(env.iter().map(|(k, v)| (k, v)));
    (
        listening(command, port),
        format!("http://127.0.0.1:{port}/{ACCOUNT}"),
    )
}

/// Where the counters are, and how to read and swap one.
#[derive(Clone)]
enum Target {
    /// Two instances' account roots.
    Fleet([String; 2]),
    /// etcd's client URLs, one a member.
    Etcd(Vec<String>),
}

#[tokio::main]
async fn main() {
    let (seconds, rounds) = examples::seconds_and_rounds();
    // TLS over the provider ifmatch's clients name (this program installs none).
    let http = (ifmatch_client::https::client_builder().expect("TLS roots"))
        .build()
        .unwrap();
    let work = tempfile::tempdir().unwrap();

    let redis = ifmatch_redis::testing::RedisServer::start();
    let shared = work.path().join("shared");
    let redis_args = ["--anonymous", "--backend", &redis.url(), "--data"];
    let shared = shared.to_str().unwrap();
    let (_r1, r1) = serve(&[&redis_args[..], &[shared]].concat(), &[]);
    let (_r2, r2) = serve(&[&redis_args[..], &[shared]].concat(), &[]);

    // A primary, a replica and three Sentinels; a write acknowledged once on the replica.
    let sentinels = ifmatch_redis::testing::Sentinels::start();
    let replicated = work.path().join("replicated");
    let replicated = replicated.to_str().unwrap();
    let sentinel_args = [
        "--anonymous",
        "--backend",
        &sentinels.url(),
        "--redis-replicas",
        "1",
        "--data",
        replicated,
    ];
    let (_s1, s1) = serve(&sentinel_args, &[]);
    let (_s2, s2) = serve(&sentinel_args, &[]);

    // The object store: `ifmatch serve`, signed requests, a container `fleet`.
    let store_data = work.path().join("store");
    let (_store, store) = serve(&["--data", store_data.to_str().unwrap()], &[]);
    let made = ifmatch_client::Client::from_connection_string(&format!(
        "DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={};BlobEndpoint={store};",
        ifmatch_azure::DEV_KEY
    ))
    .unwrap()
    .create_container("fleet")
    .await;
    made.expect("the store's container");
    let env = [
        ("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT.to_owned()),
        (
            "AZURE_STORAGE_ACCOUNT_KEY",
            ifmatch_azure::DEV_KEY.to_owned(),
        ),
        ("AZURE_STORAGE_ENDPOINT", store.clone()),
        ("AZURE_ALLOW_HTTP", "true".to_owned()),
    ];
    let bucket_args = |data: &str| {
        let data = work.path().join(data);
        let data = data.to_str().unwrap().to_owned();
        vec![
            "--anonymous".to_owned(),
            "--backend".into(),
            "az://fleet/bench".into(),
            "--data".into(),
            data,
        ]
    };
    let (a, b) = (bucket_args("a"), bucket_args("b"));
    let (_b1, b1) = serve(&a.iter().map(String::as_str).collect::<Vec<_>>(), &env);
    let (_b2, b2) = serve(&b.iter().map(String::as_str).collect::<Vec<_>>(), &env);

    // A Redis Cluster of three primaries; and one whose primaries have a replica each, each
    // write acknowledged once on it.
    let cluster = ifmatch_redis::testing::RedisCluster::start(3, 0);
    let cluster_args = |data: &str, url: &str, replicas: &str| {
        let data = work.path().join(data).to_str().unwrap().to_owned();
        let args = [
            "--anonymous",
            "--backend",
            url,
            "--redis-replicas",
            replicas,
            "--data",
        ];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(data);
        args
    };
    let c = cluster_args("cluster", &cluster.url(), "0");
    let (_c1, c1) = serve(&strs(&c), &[]);
    let (_c2, c2) = serve(&strs(&c), &[]);
    let replicated_cluster = ifmatch_redis::testing::RedisCluster::start(3, 1);
    let w = cluster_args("cluster-wait", &replicated_cluster.url(), "1");
    let (_w1, w1) = serve(&strs(&w), &[]);
    let (_w2, w2) = serve(&strs(&w), &[]);

    let (_etcd, etcd_url) = etcd(&work.path().join("etcd"), 1);
    let (_etcds, etcd_urls) = etcd(&work.path().join("etcd3"), 3);

    let targets = [
        ("redis", Target::Fleet([r1, r2])),
        ("redis, Sentinel, WAIT 1", Target::Fleet([s1, s2])),
        ("redis cluster, 3 primaries", Target::Fleet([c1, c2])),
        ("redis cluster, 3x2, WAIT 1", Target::Fleet([w1, w2])),
        ("bucket: ifmatch serve", Target::Fleet([b1, b2])),
        ("etcd, 1 member", Target::Etcd(etcd_url)),
        ("etcd, 3 members", Target::Etcd(etcd_urls)),
    ];
    measure(&http, &targets, seconds, rounds).await;
}

/// Each target's commits a second, on one key and on 1,000, `rounds` alternating runs of
/// `seconds` each, every run's counters checked against its commits.
async fn measure(http: &reqwest::Client, targets: &[(&str, Target)], seconds: u64, rounds: usize) {
    for keys in [1, 1000] {
        let mut rates = vec![Vec::new(); targets.len()];
        for round in 0..rounds {
            for ((_, target), rate) in targets.iter().zip(rates.iter_mut()) {
                let run = format!("k{keys}r{round}");
                setup(http, target, &run, keys).await;
                let commits = load(http, target, &run, keys, Duration::from_secs(seconds)).await;
                let sum = total(http, target, &run, keys).await;
                assert_eq!(sum, commits, "{run}: an update was lost");
                rate.push(commits as f64 / seconds as f64);
            }
        }
        let redis_median = median(&rates[0]);
        for ((name, _), rate) in targets.iter().zip(&rates) {
            let (low, high) = spread(rate);
            println!(
                "{keys:>5} key(s), {name:<28} {:>7.0} commits/s ({low:.0}-{high:.0}), {:.2} of Redis",
                median(rate),
                median(rate) / redis_median
            );
        }
    }
}

fn b64(text: &str) -> String {
    STANDARD.encode(text)
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// An etcd cluster of `members` members (data under `dir`), once each listens: the processes
/// and their client URLs.
fn etcd(dir: &std::path::Path, members: usize) -> (Vec<Process>, Vec<String>) {
    let ports: Vec<(u16, u16)> = (0..members).map(|_| (free_port(), free_port())).collect();
    let url = |port: u16| format!("http://127.0.0.1:{port}");
    let cluster: Vec<String> = (ports.iter().enumerate())
        .map(|(i, (_, peer))| format!("e{i}={}", url(*peer)))
        .collect();
    let cluster = cluster.join(",");
    let mut commands: Vec<(Command, u16)> = (ports.iter().enumerate())
        .map(|(i, &(client, peer))| {
            let mut command = Command::new("etcd");
            command
                .arg("--data-dir")
                .arg(dir.join(format!("e{i}")))
                .args(["--name", &format!("e{i}")])
                .args(["--listen-client-urls", &url(client)])
                .args(["--advertise-client-urls", &url(client)])
                .args(["--listen-peer-urls", &url(peer)])
                .args(["--initial-advertise-peer-urls", &url(peer)])
                .args(["--initial-cluster", &cluster])
                .args(["--initial-cluster-state", "new"]);
            (command, client)
        })
        .collect();
    // Every member started before any is waited for: a member of many listens for its
    // clients only once the others are there.
    let children: Vec<(Child, u16)> = (commands.iter_mut())
        .map(|(command, port)| {
            let child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn();
            (child.expect("etcd (Debian's etcd-server)"), *port)
        })
        .collect();
    let mut processes = Vec::new();
    for (child, port) in children {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "etcd did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        processes.push(Process(child));
    }
    let urls = ports.iter().map(|(client, _)| url(*client)).collect();
    (processes, urls)
}

/// The container (etcd: the prefix) of counter `key` of `run`.
fn container(run: &str, key: usize) -> String {
    format!("{run}-{}", key % CONTAINERS)
}

/// Counter `key` of `run`'s path.
fn counter(run: &str, key: usize) -> String {
    format!("{}/n{key}", container(run, key))
}

async fn etcd_call(http: &reqwest::Client, url: &str, call: &str, body: Value) -> Value {
    let request = http.post(format!("{url}/v3/kv/{call}"));
    let answer = request.body(body.to_string()).send().await.unwrap();
    serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap()
}

/// `keys` counters at 0, under the run's name.
async fn setup(http: &reqwest::Client, target: &Target, run: &str, keys: usize) {
    match target {
        Target::Fleet(bases) => {
            for key in 0..keys.min(CONTAINERS) {
                let made = http
                    .put(format!(
                        "{}/{}?restype=container",
                        bases[0],
                        container(run, key)
                    ))
                    .send()
                    .await;
                assert_eq!(made.unwrap().status(), 201);
            }
            for key in 0..keys {
                let url = format!("{}/{}", bases[0], counter(run, key));
                let put = http
                    .put(url)
                    .header("x-ms-blob-type", "BlockBlob")
                    .body("0");
                assert_eq!(put.send().await.unwrap().status(), 201);
            }
        }
        Target::Etcd(urls) => {
            for key in 0..keys {
                let put = json!({ "key": b64(&counter(run, key)), "value": b64("0") });
                etcd_call(http, &urls[0], "put", put).await;
            }
        }
    }
}

/// One counter's value and version (an ETag, or a `mod_revision`).
async fn read(http: &reqwest::Client, target: &Target, client: usize, key: &str) -> (u64, String) {
    match target {
        Target::Fleet(bases) => {
            let got = http
                .get(format!("{}/{key}", bases[client % 2]))
                .send()
                .await
                .unwrap();
            let tag = got.headers()["etag"].to_str().unwrap().to_owned();
            (got.text().await.unwrap().parse().unwrap(), tag)
        }
        Target::Etcd(urls) => {
            let url = &urls[client % urls.len()];
            let found = etcd_call(http, url, "range", json!({ "key": b64(key) })).await;
            let kv = &found["kvs"][0];
            let value = STANDARD.decode(kv["value"].as_str().unwrap()).unwrap();
            let revision = kv["mod_revision"].as_str().unwrap().to_owned();
            (String::from_utf8(value).unwrap().parse().unwrap(), revision)
        }
    }
}

/// Writes `value` if the counter is still at `version`, through the other instance.
async fn swap(
    http: &reqwest::Client,
    target: &Target,
    client: usize,
    key: &str,
    version: &str,
    value: u64,
) -> bool {
    match target {
        Target::Fleet(bases) => {
            let put = http.put(format!("{}/{key}", bases[(client + 1) % 2]));
            let put = put
                .header("x-ms-blob-type", "BlockBlob")
                .header("if-match", version);
            put.body(value.to_string()).send().await.unwrap().status() == 201
        }
        Target::Etcd(urls) => {
            let url = &urls[(client + 1) % urls.len()];
            let txn = json!({
                "compare": [{ "key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": version }],
                "success": [{ "request_put": { "key": b64(key), "value": b64(&value.to_string()) } }],
            });
            etcd_call(http, url, "txn", txn).await["succeeded"]
                .as_bool()
                .unwrap_or(false)
        }
    }
}

/// The commits of `CLIENTS` clients incrementing the run's `keys` counters for `run_for`.
async fn load(
    http: &reqwest::Client,
    target: &Target,
    run: &str,
    keys: usize,
    run_for: Duration,
) -> u64 {
    let done = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + run_for;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (http, target, done, run) =
                (http.clone(), target.clone(), done.clone(), run.to_owned());
            tokio::spawn(async move {
                let mut turn = client;
                while Instant::now() < deadline {
                    turn += CLIENTS;
                    let key = counter(&run, turn % keys);
                    let (value, version) = read(&http, &target, client, &key).await;
                    if swap(&http, &target, client, &key, &version, value + 1).await {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    done.load(Ordering::Relaxed) as u64
}

/// The sum of the run's counters.
async fn total(http: &reqwest::Client, target: &Target, run: &str, keys: usize) -> u64 {
    let mut sum = 0;
    for key in 0..keys {
        sum += read(http, target, 0, &counter(run, key)).await.0;
    }
    sum
}
