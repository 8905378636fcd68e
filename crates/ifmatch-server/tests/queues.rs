//! The Queue service of `ifmatch serve`, as its users meet it: Azure's Python SDK
//! (azure-storage-queue, `tests/sdk/queues.py`) over the local disk, over Redis and over a
//! bucket (Azurite): queues, messages with their pop receipts, visibility and dequeue counts,
//! the documented limits, eight consumers racing, shared access signatures; sixteen consumers
//! through two instances over one Redis server, Sentinel and a Cluster.

use crate::common;

use ifmatch_redis::testing::{RedisCluster, RedisServer, Sentinels};

/// How long these tests' Sentinels wait before they fail a silent primary over: longer than a
/// loaded machine stalls it, since these tests are not about failover (`tests/failover.rs`
/// is). A CI run once lost a Get's move to one (a Delete with its receipt then found 404).
const NO_FAILOVER: std::time::Duration = std::time::Duration::from_secs(30);

/// `ifmatch serve` on `data` with `extra` (and `env`) and the Queue service on a port of its
/// own: the process, and the connection string an SDK takes.
fn sdk_script_with(extra: &[&str], env: &[(&str, &str)], raced: usize) {
    let data = tempfile::tempdir().unwrap();
    let extra = [&["--table-listen", "off", "--cosmos-listen", "off"], extra].concat();
    let (_server, blobs, queues) = common::serve_beside(data.path(), "queue-listen", &extra, env);
    let account = ifmatch_azure::DEV_ACCOUNT;
    let connection = format!(
        "DefaultEndpointsProtocol=http;AccountName={account};AccountKey={};\
         BlobEndpoint=http://127.0.0.1:{blobs}/{account};QueueEndpoint=http://127.0.0.1:{queues}/{account};",
        ifmatch_azure::DEV_KEY
    );
    common::python_script(
        "queues.py",
        &[connection, raced.to_string()],
        "python queues: ",
    );
}

#[test]
fn the_python_sdk_over_the_local_disk() {
    sdk_script_with(&[], &[], 200);
}

#[test]
fn the_python_sdk_over_redis() {
    let redis = RedisServer::start();
    sdk_script_with(&["--backend", &redis.url()], &[], 200);
}

#[ignore = "slow: scripts/test --full runs it"]
#[test]
fn the_python_sdk_under_sentinel() {
    let sentinels = Sentinels::start_with_down_after(NO_FAILOVER);
    sdk_script_with(&["--backend", &sentinels.url()], &[], 200);
}

#[ignore = "slow: scripts/test --full runs it"]
#[test]
fn the_python_sdk_over_a_redis_cluster() {
    let cluster = RedisCluster::start(3, 0);
    sdk_script_with(&["--backend", &cluster.url()], &[], 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_over_a_bucket() {
    let bucket = common::Bucket::start().await;
    let backend = ["--backend", &bucket.url("ifmatch")];
    let vars = bucket.vars();
    // Consumers of one queue over a bucket take turns (docs/queues.md): a race of 24.
    tokio::task::block_in_place(|| sdk_script_with(&backend, &vars, 24));
}

/// `ifmatch serve` open without credentials on `data` with `extra`: the process and the Queue
/// service's account URL.
fn open_server(data: &std::path::Path, extra: &[&str]) -> (common::Process, String) {
    let extra = [
        &[
            "--anonymous",
            "--table-listen",
            "off",
            "--cosmos-listen",
            "off",
        ],
        extra,
    ]
    .concat();
    let (process, _, queues) = common::serve_beside(data, "queue-listen", &extra, &[]);
    let account = ifmatch_azure::DEV_ACCOUNT;
    (process, format!("http://127.0.0.1:{queues}/{account}"))
}

/// The text of each `<tag>` of `xml`, in order.
fn all(xml: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    xml.split(open.as_str())
        .skip(1)
        .filter_map(|rest| rest.split_once(close.as_str()).map(|(v, _)| v.to_owned()))
        .collect()
}

async fn put(http: &reqwest::Client, queue: &str, text: &str) -> reqwest::StatusCode {
    let body = format!("<QueueMessage><MessageText>{text}</MessageText></QueueMessage>");
    let sent = http.post(format!("{queue}/messages")).body(body).send();
    sent.await.unwrap().status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn competing_consumers_through_two_instances_process_each_message_once() {
    let redis = RedisServer::start();
    competing_consumers(&redis.url(), 2000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn competing_consumers_under_sentinel() {
    let sentinels = Sentinels::start_with_down_after(NO_FAILOVER);
    competing_consumers(&sentinels.url(), 500).await;
}

/// Over a Redis Cluster, a queue's messages lie in one hash slot (each change of a message, two
/// entities, is one script there), whichever node serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn competing_consumers_over_a_redis_cluster_with_each_queue_in_one_slot() {
    let cluster = RedisCluster::start(3, 0);
    competing_consumers(&cluster.url(), 500).await;
    let mut slots = std::collections::BTreeSet::new();
    let mut keys = 0;
    for node in &cluster.nodes {
        let port = node.port().to_string();
        let cli = |args: &[&str]| {
            let out = std::process::Command::new("redis-cli")
                .args(["-p", &port])
                .args(args)
                .output()
                .expect("redis-cli");
            String::from_utf8(out.stdout).unwrap()
        };
        for key in cli(&["--scan", "--pattern", "*~work~*"]).lines() {
            keys += 1;
            slots.insert(cli(&["CLUSTER", "KEYSLOT", key]).trim().to_owned());
        }
    }
    assert!(keys > 0, "the queue's messages are stored in the cluster");
    assert_eq!(slots.len(), 1, "one queue, one slot: {slots:?}");
}

/// Sixteen consumers through two instances over one Redis deployment (`url`) take `total`
/// messages (each got with a visibility timeout, then deleted with its receipt): every message
/// is processed exactly once, and a delete with a receipt a later Get replaced is refused.
async fn competing_consumers(url: &str, total: usize) {
    let data = [(); 2].map(|()| tempfile::tempdir().unwrap());
    let args = ["--backend", url];
    let (_a, a) = open_server(data[0].path(), &args);
    let (_b, b) = open_server(data[1].path(), &args);
    let http = common::client();
    let created = http.put(format!("{a}/work")).send().await.unwrap();
    assert_eq!(created.status(), 201);
    let mut producers = Vec::new();
    for p in 0..8 {
        let (http, queue) = (http.clone(), format!("{}/work", [&a, &b][p % 2]));
        producers.push(tokio::spawn(async move {
            for i in (p..total).step_by(8) {
                assert_eq!(put(&http, &queue, &format!("m{i}")).await, 201);
            }
        }));
    }
    for producer in producers {
        producer.await.unwrap();
    }
    let mut consumers = Vec::new();
    for c in 0..16 {
        let (http, queue) = (http.clone(), format!("{}/work", [&a, &b][c % 2]));
        consumers.push(tokio::spawn(async move {
            let mut done = Vec::new();
            loop {
                let got = http
                    .get(format!(
                        "{queue}/messages?numofmessages=8&visibilitytimeout=60"
                    ))
                    .send()
                    .await
                    .unwrap();
                let status = got.status();
                let xml = got.text().await.unwrap();
                assert_eq!(status, 200, "{xml}");
                let ids = all(&xml, "MessageId");
                if ids.is_empty() {
                    return done;
                }
                let receipts = all(&xml, "PopReceipt");
                for ((id, receipt), text) in ids.iter().zip(&receipts).zip(all(&xml, "MessageText"))
                {
                    // A receipt of this server is URL-safe base64: it goes in a query as it is.
                    let url = format!("{queue}/messages/{id}?popreceipt={receipt}");
                    let deleted = http.delete(url).send().await.unwrap();
                    let status = deleted.status();
                    let body = deleted.text().await.unwrap();
                    assert_eq!(status, 204, "{id}: {body}");
                    done.push(text);
                }
            }
        }));
    }
    let mut processed = Vec::new();
    for consumer in consumers {
        processed.extend(consumer.await.unwrap());
    }
    processed.sort();
    let mut expected: Vec<String> = (0..total).map(|i| format!("m{i}")).collect();
    expected.sort();
    assert_eq!(processed.len(), total, "every message processed once");
    assert_eq!(processed, expected);

    // A receipt replaced by a later Get (its visibility run out) no longer deletes.
    assert_eq!(put(&http, &format!("{a}/work"), "late").await, 201);
    let first = common::text_of(format!("{a}/work/messages?visibilitytimeout=1")).await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let second = common::text_of(format!("{b}/work/messages?visibilitytimeout=30")).await;
    assert_eq!(all(&second, "DequeueCount"), ["2"], "{second}");
    let id = &all(&first, "MessageId")[0];
    // A Delete Message through `base` with the receipt of the Get that answered `got`.
    let delete = async |base: &str, got: &str| {
        let receipt = &all(got, "PopReceipt")[0];
        let url = format!("{base}/work/messages/{id}?popreceipt={receipt}");
        common::send(&http, "DELETE", &url, &[], "").await.status()
    };
    assert_eq!(delete(&a, &first).await, 404);
    assert_eq!(delete(&b, &second).await, 204);
}

/// Messages acknowledged (201) on the local disk are there after a SIGKILL, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_messages_survive_a_sigkill() {
    let data = tempfile::tempdir().unwrap();
    let (mut server, queues) = open_server(data.path(), &[]);
    let http = common::client();
    let created = common::send(&http, "PUT", &format!("{queues}/kept"), &[], "").await;
    assert_eq!(created.status(), 201);
    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut writers = Vec::new();
    for w in 0..8 {
        let (http, queue, acked) = (http.clone(), format!("{queues}/kept"), acknowledged.clone());
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let text = format!("w{w}-{i}");
                let body =
                    format!("<QueueMessage><MessageText>{text}</MessageText></QueueMessage>");
                match http
                    .post(format!("{queue}/messages"))
                    .body(body)
                    .send()
                    .await
                {
                    Ok(answer) if answer.status() == 201 => acked.lock().unwrap().push(text),
                    _ => return,
                }
            }
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    drop(server);
    let (_server, queues) = open_server(data.path(), &[]);
    let mut found = Vec::new();
    loop {
        let got = format!("{queues}/kept/messages?numofmessages=32&visibilitytimeout=600");
        let texts = all(&common::text_of(got).await, "MessageText");
        if texts.is_empty() {
            break;
        }
        found.extend(texts);
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() > 50,
        "{} acknowledged",
        acknowledged.len()
    );
    let mut unique = found.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), found.len(), "no message twice");
    for text in &acknowledged {
        assert!(found.contains(text), "{text} was acknowledged and lost");
    }
}
