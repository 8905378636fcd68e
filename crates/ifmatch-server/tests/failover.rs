//! A fleet over Redis survives losing a primary (issue 68), under Sentinel and in a Redis
//! Cluster: two `ifmatch serve --backend redis+sentinel://... --redis-replicas 1` (or
//! `redis+cluster://...`) processes, 32 clients incrementing blob counters, 8 incrementing
//! Cosmos documents and 4 incrementing Table entities by batches, each with `If-Match`
//! (reading through one instance, writing through the other); a primary SIGKILLed mid-run and
//! restarted 3 s later (made a replica of the promoted one). Every acknowledged increment is
//! there after the failover, service resumes within a bound, and a lease taken before it is
//! still its holder's and no one else's. Each counter is the list of the increments that made
//! it, so that what landed is known exactly; each batch also inserts an entity of its own,
//! there exactly when its increment is. Real `redis-server`, Sentinel and cluster processes.

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Ifmatch, client, header};
use ifmatch_redis::testing::{RedisCluster, RedisServer, Sentinels};

const CLIENTS: usize = 32;
/// Clients counting on Cosmos documents besides, one document each, in one partition (their
/// commits take turns, and go in groups).
const DOCUMENTS: usize = 8;
/// Clients counting on Table entities besides, by batches, one partition each.
const BATCHES: usize = 4;
const ACCOUNT: &str = "devstoreaccount1";
/// From the primary's death to the first write acknowledged after it.
const RESUMES_WITHIN: Duration = Duration::from_secs(30);

/// An instance over `backend`, acknowledging a write once one replica has it: the process, its
/// Cosmos endpoint and its Table endpoint's account.
fn instance(data: &std::path::Path, backend: &str) -> (Ifmatch, String, String) {
    let (cosmos, tables) = (common::free_port(), common::free_port());
    let listen = format!("127.0.0.1:{cosmos}");
    let table_listen = format!("127.0.0.1:{tables}");
    let instance = Ifmatch::start([
        std::ffi::OsStr::new("serve"),
        "--data".as_ref(),
        data.as_os_str(),
        "--backend".as_ref(),
        backend.as_ref(),
        "--redis-replicas".as_ref(),
        "1".as_ref(),
        "--table-listen".as_ref(),
        table_listen.as_ref(),
        "--cosmos-listen".as_ref(),
        listen.as_ref(),
    ]);
    common::wait_for(cosmos, "cosmos");
    common::wait_for(tables, "tables");
    let tables = format!("http://{table_listen}/{ACCOUNT}");
    (instance, format!("http://{listen}"), tables)
}

/// The Redis a fleet runs over, and the primary the test kills.
enum Deployment {
    Sentinel(Sentinels),
    /// The cluster and the index of the primary that serves the blob container's slot.
    Cluster(RedisCluster, usize),
}

impl Deployment {
    fn url(&self) -> String {
        match self {
            Self::Sentinel(sentinels) => sentinels.url(),
            Self::Cluster(cluster, _) => cluster.url(),
        }
    }

    fn victim(&mut self) -> &mut RedisServer {
        match self {
            Self::Sentinel(sentinels) => &mut sentinels.primary,
            Self::Cluster(cluster, victim) => &mut cluster.nodes[*victim],
        }
    }
}

/// What a client counts on: a blob, a Cosmos document (`{"id", "pk", "ids"}`), or a Table
/// entity (`counter`, with `ids`) that each batch replaces and beside which it inserts `iID`.
#[derive(Clone, Copy)]
enum Kind {
    Blob,
    Document,
    Batch,
}

/// The counter at `url`: the ids of the increments that made it (one a line, oldest first)
/// and its tag, or `None` while the fleet cannot tell.
async fn read(http: &reqwest::Client, kind: Kind, url: &str) -> Option<(String, String)> {
    let r = match kind {
        Kind::Blob => common::get(http, url).await,
        Kind::Document => http.get(url).header(PK, "[\"p\"]").send().await.ok()?,
        Kind::Batch => (http.get(url))
            .header("accept", "application/json;odata=nometadata")
            .send()
            .await
            .ok()?,
    };
    if r.status() != 200 {
        return None;
    }
    let tag = header(&r, "etag")?;
    let text = r.text().await.ok()?;
    let ids = match kind {
        Kind::Blob => text,
        Kind::Document | Kind::Batch => {
            let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
            doc["ids"].as_str()?.to_owned()
        }
    };
    Some((ids, tag))
}

/// Writes `ids` to the counter at `url` if its tag is still `tag`: 201 when it did (a Cosmos
/// replace's 200 too), 412 when another write came first, 503 when the outcome is unknown.
async fn write(http: &reqwest::Client, kind: Kind, url: &str, tag: &str, ids: String) -> u16 {
    let condition = [("if-match", tag)];
    match kind {
        Kind::Blob => common::send(http, "PUT", url, &condition, ids)
            .await
            .status()
            .as_u16(),
        Kind::Document => {
            let id = url.rsplit('/').next().unwrap();
            let body = serde_json::json!({ "id": id, "pk": "p", "ids": ids }).to_string();
            let put = http
                .put(url)
                .header(PK, "[\"p\"]")
                .header("if-match", tag)
                .body(body);
            match put.send().await.unwrap().status().as_u16() {
                200 => 201,
                other => other,
            }
        }
        Kind::Batch => {
            let (account, pk) = table_of(url);
            let id = ids.lines().last().unwrap();
            let (body, kind) = batch(account, pk, tag, &ids, id);
            let sent = http.post(format!("{account}/$batch"));
            let r = sent.header("content-type", kind).body(body).send().await;
            let r = r.unwrap();
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            match status {
                202 if text.contains("HTTP/1.1 412") => 412,
                202 if text.contains("HTTP/1.1 503") => 503,
                202 if text.matches("HTTP/1.1 204").count() == 2 => 201,
                503 => 503,
                other => panic!("{url}: a batch answered {other}: {text}"),
            }
        }
    }
}

/// The account and the partition of a Table counter's URL,
/// `ACCOUNT/counters(PartitionKey='pN',RowKey='counter')`.
fn table_of(url: &str) -> (&str, &str) {
    let (account, entity) = url.split_once("/counters(").unwrap();
    let pk = entity.split('\'').nth(1).unwrap();
    (account, pk)
}

/// A batch that replaces partition `pk`'s counter with `ids` if its tag is still `tag`, and
/// inserts the entity `i{id}` beside it: both or neither.
fn batch(account: &str, pk: &str, tag: &str, ids: &str, id: &str) -> (String, String) {
    let counter = serde_json::json!({ "PartitionKey": pk, "RowKey": "counter", "ids": ids });
    let row = serde_json::json!({ "PartitionKey": pk, "RowKey": format!("i{id}") });
    let part = "--changeset_c\r\nContent-Type: application/http\r\n\
                Content-Transfer-Encoding: binary\r\n\r\n";
    let body = format!(
        "--batch_b\r\nContent-Type: multipart/mixed; boundary=changeset_c\r\n\r\n\
         {part}PUT {account}/counters(PartitionKey='{pk}',RowKey='counter') HTTP/1.1\r\n\
         Content-Type: application/json\r\nIf-Match: {tag}\r\n\r\n{counter}\r\n\
         {part}POST {account}/counters HTTP/1.1\r\nContent-Type: application/json\r\n\
         Prefer: return-no-content\r\n\r\n{row}\r\n\
         --changeset_c--\r\n--batch_b--\r\n"
    );
    (body, "multipart/mixed; boundary=batch_b".to_owned())
}

const PK: &str = "x-ms-documentdb-partitionkey";

/// One client's increments of its own counter until `stop`: read through `read_at`, write
/// `If-Match` through `write_at` the ids read plus one of its own. A write answered 503 has an
/// unknown outcome: it may have landed, or land later (a 412 then says another came first,
/// and it is read again). At the end, the counter holds every id acknowledged (201), and no
/// id but those acknowledged or of unknown outcome. Notes in `resumed` how long after `killed`
/// (ms since `started`) the first increment sent after it was acknowledged.
async fn count(
    http: reqwest::Client,
    kind: Kind,
    (read_at, write_at): (String, String),
    stop: Arc<AtomicBool>,
    (started, killed, resumed): (Instant, Arc<AtomicU64>, Arc<AtomicU64>),
) -> usize {
    let (mut acknowledged, mut unknown) = (HashSet::<String>::new(), HashSet::<String>::new());
    for id in 0u64.. {
        let Some((ids, tag)) = read(&http, kind, &read_at).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if stop.load(Ordering::SeqCst) {
            let landed: HashSet<&str> = ids.lines().collect();
            for id in &acknowledged {
                assert!(
                    landed.contains(id.as_str()),
                    "{read_at}: acknowledged {id} lost"
                );
            }
            for id in &landed {
                let known = acknowledged.contains(*id) || unknown.contains(*id);
                assert!(known, "{read_at}: {id} never written");
            }
            if let Kind::Batch = kind {
                // Each batch whole or absent: its entity there exactly when its increment is.
                for id in acknowledged.iter().chain(&unknown) {
                    let (account, pk) = table_of(&read_at);
                    let row = format!("{account}/counters(PartitionKey='{pk}',RowKey='i{id}')");
                    let status = http.get(&row).send().await.unwrap().status();
                    let expected = if landed.contains(id.as_str()) {
                        200
                    } else {
                        404
                    };
                    assert_eq!(status, expected, "{row}: the batch of {id} in part");
                }
            }
            assert!(!acknowledged.is_empty(), "{read_at}: nothing acknowledged");
            return acknowledged.len();
        }
        let id = id.to_string();
        let sent = started.elapsed().as_millis() as u64;
        match write(&http, kind, &write_at, &tag, format!("{ids}{id}\n")).await {
            201 => {
                acknowledged.insert(id);
                // A write sent after the kill: one in flight then may have been replicated.
                let killed = killed.load(Ordering::SeqCst);
                if killed > 0 && sent > killed {
                    let now = started.elapsed().as_millis() as u64;
                    resumed.fetch_min(now - killed, Ordering::SeqCst);
                }
            }
            412 => {}
            503 => {
                unknown.insert(id);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("{write_at}: {other}"),
        }
    }
    unreachable!("ids run out")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_under_sentinel_loses_nothing_acknowledged_when_its_primary_dies() {
    survives(Deployment::Sentinel(Sentinels::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_over_a_redis_cluster_loses_nothing_acknowledged_when_a_primary_dies() {
    let cluster = RedisCluster::start(3, 1);
    // The primary of the blob container's slot, which holds its records and the lease.
    let victim = cluster.primary_of("ifmatch:{cnt}:c");
    survives(Deployment::Cluster(cluster, victim)).await;
}

/// Runs the clients over `redis`, kills its primary, and checks what the module says.
async fn survives(mut redis: Deployment) {
    let data = tempfile::tempdir().unwrap();
    let ((a, a_cosmos, a_tables), (b, b_cosmos, b_tables)) = (
        instance(data.path(), &redis.url()),
        instance(data.path(), &redis.url()),
    );
    let http = client();
    common::create_container(&http, &a.base, "cnt").await;
    for i in 0..CLIENTS {
        let r = common::send(&http, "PUT", &format!("{}/cnt/c{i}", b.base), &[], "").await;
        assert_eq!(r.status(), 201);
    }
    let made = http.post(format!("{a_cosmos}/dbs")).body(r#"{"id":"f"}"#);
    assert_eq!(made.send().await.unwrap().status(), 201);
    let container = r#"{"id":"c","partitionKey":{"paths":["/pk"]}}"#;
    let made = http.post(format!("{b_cosmos}/dbs/f/colls")).body(container);
    assert_eq!(made.send().await.unwrap().status(), 201);
    for i in 0..DOCUMENTS {
        let doc = serde_json::json!({ "id": format!("d{i}"), "pk": "p", "ids": "" });
        let made = (http.post(format!("{a_cosmos}/dbs/f/colls/c/docs")))
            .header(PK, "[\"p\"]")
            .body(doc.to_string());
        assert_eq!(made.send().await.unwrap().status(), 201);
    }
    let made = (http.post(format!("{a_tables}/Tables")))
        .header("content-type", "application/json")
        .body(r#"{"TableName":"counters"}"#);
    assert_eq!(made.send().await.unwrap().status(), 201);
    for i in 0..BATCHES {
        let counter =
            serde_json::json!({ "PartitionKey": format!("p{i}"), "RowKey": "counter", "ids": "" });
        let made = (http.post(format!("{b_tables}/counters")))
            .header("content-type", "application/json")
            .body(counter.to_string());
        assert_eq!(made.send().await.unwrap().status(), 201);
    }
    // A lease taken before the failover.
    let leased = format!("{}/cnt/leased", a.base);
    assert_eq!(
        common::send(&http, "PUT", &leased, &[], "x").await.status(),
        201
    );
    let acquire = [
        ("x-ms-lease-action", "acquire"),
        ("x-ms-lease-duration", "-1"),
    ];
    let r = common::send(&http, "PUT", &format!("{leased}?comp=lease"), &acquire, "").await;
    assert_eq!(r.status(), 201);
    let lease = header(&r, "x-ms-lease-id").unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let (killed, resumed) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(u64::MAX)),
    );
    let started = Instant::now();
    let bases = [a.base.clone(), b.base.clone()];
    let endpoints = [a_cosmos.clone(), b_cosmos.clone()];
    let blobs = (0..CLIENTS).map(|i| {
        let blob = |base: &String| format!("{base}/cnt/c{i}");
        (Kind::Blob, (blob(&bases[i % 2]), blob(&bases[(i + 1) % 2])))
    });
    let documents = (0..DOCUMENTS).map(|i| {
        let doc = |endpoint: &String| format!("{endpoint}/dbs/f/colls/c/docs/d{i}");
        let urls = (doc(&endpoints[i % 2]), doc(&endpoints[(i + 1) % 2]));
        (Kind::Document, urls)
    });
    let accounts = [a_tables.clone(), b_tables.clone()];
    let batches = (0..BATCHES).map(|i| {
        let counter =
            |account: &String| format!("{account}/counters(PartitionKey='p{i}',RowKey='counter')");
        let urls = (counter(&accounts[i % 2]), counter(&accounts[(i + 1) % 2]));
        (Kind::Batch, urls)
    });
    let clients: Vec<_> = (blobs.chain(documents).chain(batches))
        .map(|(kind, urls)| {
            let times = (started, killed.clone(), resumed.clone());
            tokio::spawn(count(http.clone(), kind, urls, stop.clone(), times))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(3)).await;
    redis.victim().kill();
    killed.store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    redis.victim().restart();
    let deadline = Instant::now() + RESUMES_WITHIN;
    while resumed.load(Ordering::SeqCst) == u64::MAX {
        assert!(
            Instant::now() < deadline,
            "no write acknowledged within {RESUMES_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = Duration::from_millis(resumed.load(Ordering::SeqCst));
    eprintln!("writes acknowledged again {took:?} after the primary was killed");
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    let mut total = 0;
    for client in clients {
        total += client.await.unwrap();
    }
    let clients = CLIENTS + DOCUMENTS + BATCHES;
    eprintln!("{total} increments acknowledged by {clients} clients, every one there");

    // The lease is its holder's still: another's acquire is refused, the holder's renewal not.
    let other = [
        ("x-ms-lease-action", "acquire"),
        ("x-ms-lease-duration", "-1"),
        (
            "x-ms-proposed-lease-id",
            "9f3bd2a4-5c1e-4b7a-8d3e-2f6a1c0b9e7d",
        ),
    ];
    let through_b = format!("{}/cnt/leased?comp=lease", b.base);
    let r = common::send(&http, "PUT", &through_b, &other, "").await;
    assert_eq!(r.status(), 409, "the lease outlived the failover");
    let renew = [
        ("x-ms-lease-action", "renew"),
        ("x-ms-lease-id", lease.as_str()),
    ];
    let r = common::send(&http, "PUT", &through_b, &renew, "").await;
    assert_eq!(r.status(), 200, "its holder renews it");
}
