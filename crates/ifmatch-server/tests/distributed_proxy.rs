//! `ifmatch proxy --backend redis://...`: two proxies in front of one origin share versions and
//! write locks through a real redis-server. The origin knows nothing of ETags; it only
//! remembers the highest fencing token it has seen per document and refuses lower ones.

use crate::common;

use common::client;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use common::{Ifmatch, header};
use ifmatch_redis::testing::{RedisCluster, RedisServer};
use tokio::sync::{Notify, oneshot};

const FENCE: &str = "ifmatch-fencing-token";

#[derive(Default)]
struct Origin {
    /// Per document: the body and the highest fencing token seen.
    documents: Mutex<HashMap<String, (Bytes, u64)>>,
    /// A write sent with `x-hold` waits for this gate, in a task of its own: a write still
    /// travelling when its proxy dies.
    gate: Mutex<Option<oneshot::Sender<()>>>,
    held: Notify,
    late: Mutex<Option<StatusCode>>,
    writes: AtomicUsize,
}

impl Origin {
    fn apply(&self, id: String, fence: Option<u64>, body: Bytes) -> StatusCode {
        self.writes.fetch_add(1, Ordering::SeqCst);
        let mut documents = self.documents.lock().unwrap();
        let highest = documents.get(&id).map_or(0, |(_, f)| *f);
        let fence = fence.unwrap_or(highest);
        if fence < highest {
            return StatusCode::CONFLICT;
        }
        let created = documents.insert(id, (body, fence)).is_none();
        if created {
            StatusCode::CREATED
        } else {
            StatusCode::NO_CONTENT
        }
    }
}

async fn start_origin() -> (Arc<Origin>, String) {
    let origin = Arc::new(Origin::default());
    let app = Router::new()
        .route("/docs/{id}", get(read).put(write))
        // The same documents, which a shared cache may keep for a minute.
        .route(
            "/cached/{id}",
            get(|state, path| async move {
                let found = read(state, path).await?;
                Ok::<_, StatusCode>(([("cache-control", "max-age=60")], found))
            })
            .put(write),
        )
        .with_state(origin.clone());
    let base = common::serve_app(app).await;
    (origin, base)
}

async fn read(State(o): State<Arc<Origin>>, Path(id): Path<String>) -> Result<Bytes, StatusCode> {
    let found = o.documents.lock().unwrap().get(&id).map(|d| d.0.clone());
    found.ok_or(StatusCode::NOT_FOUND)
}

async fn write(
    State(origin): State<Arc<Origin>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let fence = headers
        .get(FENCE)
        .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
    if !headers.contains_key("x-hold") {
        return origin.apply(id, fence, body);
    }
    let (open, gate) = oneshot::channel();
    *origin.gate.lock().unwrap() = Some(open);
    origin.held.notify_one();
    let late = origin.clone();
    tokio::spawn(async move {
        let _ = gate.await;
        let outcome = late.apply(id, fence, body);
        *late.late.lock().unwrap() = Some(outcome);
        outcome
    })
    .await
    .unwrap()
}

/// A proxy in front of `upstream` sharing versions and locks through `redis`, sending
/// fencing tokens to the origin.
fn start_proxy(upstream: &str, redis: &str, extra: &[&str]) -> Ifmatch {
    let args = [
        "proxy",
        "--upstream",
        upstream,
        "--backend",
        redis,
        "--fencing-header",
        FENCE,
    ];
    Ifmatch::start(args.into_iter().chain(extra.iter().copied()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_thirty_two_clients_no_lost_update() {
    let redis = RedisServer::start();
    no_lost_update(&redis.url()).await;
}

/// The same two tests over a Redis Cluster of three primaries: the versions and locks of a key
/// on its slot's primary, the invalidations published to every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_over_a_redis_cluster_lose_no_update_and_share_what_they_forget() {
    let cluster = RedisCluster::start(3, 0);
    no_lost_update(&cluster.url()).await;
    forgotten_by_the_other(&cluster.url()).await;
}

/// Two proxies over the Redis at `redis`, 32 clients incrementing one counter through them.
async fn no_lost_update(redis: &str) {
    const CLIENTS: usize = 32;
    const EACH: usize = 12;
    let (origin, upstream) = start_origin().await;
    let a = start_proxy(&upstream, redis, &[]);
    let b = start_proxy(&upstream, redis, &[]);
    let http = client();
    let on_a = format!("{}/docs/counter", a.base);
    let on_b = format!("{}/docs/counter", b.base);
    let created = common::send(&http, "PUT", &on_a, &[("if-none-match", "*")], "0").await;
    assert_eq!(created.status(), 201);
    let again = common::send(&http, "PUT", &on_b, &[("if-none-match", "*")], "0").await;
    assert_eq!(again.status(), 412, "create-only through the other proxy");

    let conflicts = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (http, conflicts, refused) = (http.clone(), conflicts.clone(), refused.clone());
            // Half read through A and write through B, half the other way round.
            let (read, write) = if i % 2 == 0 {
                (on_a.clone(), on_b.clone())
            } else {
                (on_b.clone(), on_a.clone())
            };
            tokio::spawn(async move {
                let mut done = 0;
                while done < EACH {
                    let current = common::get(&http, &read).await;
                    assert_eq!(current.status(), 200);
                    let tag = header(&current, "etag").unwrap();
                    let n: usize = current.text().await.unwrap().parse().unwrap();
                    let body = (n + 1).to_string();
                    let put = common::send(&http, "PUT", &write, &[("if-match", &tag)], body).await;
                    match put.status().as_u16() {
                        204 => done += 1,
                        412 => {
                            conflicts.fetch_add(1, Ordering::Relaxed);
                        }
                        // The key's lock stayed taken past the proxy's wait (10 s; the origin
                        // answers slowly on a loaded machine): refused before it was sent,
                        // and the client is told to retry, as it does.
                        503 => {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        other => panic!("unexpected {other}"),
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    let last = common::get(&http, &on_b).await;
    assert_eq!(last.text().await.unwrap(), (CLIENTS * EACH).to_string());
    assert_eq!(origin.writes.load(Ordering::SeqCst), CLIENTS * EACH + 1);
    println!(
        "two proxies over Redis: {} increments, {} conflicts and {} busy refusals retried, \
         {:.0} commits/s",
        CLIENTS * EACH,
        conflicts.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        (CLIENTS * EACH) as f64 / elapsed.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_killed_holding_the_write_lock_frees_the_key_and_its_late_write_is_fenced_off() {
    let redis = RedisServer::start();
    let (origin, upstream) = start_origin().await;
    let ttl = Duration::from_secs(1);
    let mut a = start_proxy(&upstream, &redis.url(), &["--lock-ttl", "1"]);
    let b = start_proxy(&upstream, &redis.url(), &["--lock-ttl", "1"]);
    let http = client();
    let on_a = format!("{}/docs/d", a.base);
    let on_b = format!("{}/docs/d", b.base);
    let first = common::send(&http, "PUT", &on_a, &[("if-none-match", "*")], "v1").await;
    assert_eq!(first.status(), 201);
    let v1 = header(&first, "etag").unwrap_or_else(|| {
        // The origin sends no tag on writes; the proxy learns it from a read.
        String::new()
    });
    let read = common::get(&http, &on_b).await;
    let tag = header(&read, "etag").unwrap();
    assert!(v1.is_empty() || v1 == tag);

    // A takes the lock and sends the write, which the origin holds; then A dies.
    let held = {
        let (http, on_a, tag) = (http.clone(), on_a.clone(), tag.clone());
        tokio::spawn(async move {
            let r = http
                .put(&on_a)
                .header("if-match", tag)
                .header("x-hold", "1")
                .body("from the dead proxy")
                .send()
                .await;
            r.map(|r| r.status().as_u16())
        })
    };
    tokio::time::timeout(Duration::from_secs(10), origin.held.notified())
        .await
        .expect("the write reached the origin");
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let killed = Instant::now();
    assert!(held.await.unwrap().is_err(), "the dead proxy answered");

    // Through B, with the tag both saw: it waits for the dead proxy's lock to expire, then
    // lands (the held write has not: the version is still v1's).
    let write = common::send(&http, "PUT", &on_b, &[("if-match", &tag)], "from B").await;
    let waited = killed.elapsed();
    assert_eq!(write.status(), 204, "{:?}", write.text().await);
    assert!(
        waited >= Duration::from_millis(200) && waited < ttl + Duration::from_secs(3),
        "B's write landed {waited:?} after the kill (lock time to live {ttl:?})"
    );

    // The dead proxy's write finally arrives: its fencing token is older than B's.
    origin
        .gate
        .lock()
        .unwrap()
        .take()
        .unwrap()
        .send(())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let late = loop {
        if let Some(outcome) = *origin.late.lock().unwrap() {
            break outcome;
        }
        assert!(Instant::now() < deadline, "the late write never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        late,
        StatusCode::CONFLICT,
        "the late write was not fenced off"
    );
    let now = common::get(&http, &on_b).await;
    assert_eq!(now.text().await.unwrap(), "from B");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_proxy_is_never_revalidated_by_the_other_past_the_cache_ttl() {
    let redis = RedisServer::start();
    let (_origin, upstream) = start_origin().await;
    let a = start_proxy(&upstream, &redis.url(), &["--cache-ttl", "0.5"]);
    let b = start_proxy(&upstream, &redis.url(), &["--cache-ttl", "0.5"]);
    let http = client();
    let on_a = format!("{}/docs/page", a.base);
    let on_b = format!("{}/docs/page", b.base);
    assert_eq!(
        common::send(&http, "PUT", &on_a, &[("if-none-match", "*")], "old")
            .await
            .status(),
        201
    );
    let old = header(&common::get(&http, &on_b).await, "etag").unwrap();
    let cached = common::send(&http, "GET", &on_b, &[("if-none-match", &old)], Vec::new()).await;
    assert_eq!(cached.status(), 304);

    let replaced = common::send(&http, "PUT", &on_a, &[("if-match", &old)], "new").await;
    assert_eq!(replaced.status(), 204);
    // Writes never lag: B knows the version A recorded, so the old tag fails at once.
    let stale = common::send(&http, "PUT", &on_b, &[("if-match", &old)], "lost").await;
    assert_eq!(stale.status(), 412);
    // Revalidation on B may answer from its cache until the cache's time to live: not after.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let fresh = common::send(&http, "GET", &on_b, &[("if-none-match", &old)], Vec::new()).await;
    assert_eq!(fresh.status(), 200);
    assert_ne!(header(&fresh, "etag").unwrap(), old);
    assert_eq!(fresh.text().await.unwrap(), "new");
}

/// The time one conditional write takes, uncontended, through a proxy with versions and locks
/// in its memory and through one with Redis (lock, read the version, record it, release: four
/// round trips), measured alternately in one run: the figure is the difference at p50 and
/// p99. Asserts only that every write lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_write_latency_in_memory_vs_redis() {
    const ROUNDS: usize = 10;
    const EACH: usize = 50;
    let redis = RedisServer::start();
    let (_origin, upstream) = start_origin().await;
    let memory = Ifmatch::start(["proxy", "--upstream", &upstream]);
    let shared = start_proxy(&upstream, &redis.url(), &[]);
    let http = client();
    let urls = [
        format!("{}/docs/memory", memory.base),
        format!("{}/docs/redis", shared.base),
    ];
    let mut tags = Vec::new();
    for url in &urls {
        let r = common::send(&http, "PUT", url, &[("if-none-match", "*")], "0").await;
        assert_eq!(r.status(), 201);
        let r = common::send(&http, "GET", url, &[], Vec::new()).await;
        tags.push(header(&r, "etag").unwrap());
    }
    let mut times = [Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        for (i, url) in urls.iter().enumerate() {
            for n in 0..EACH {
                let body = format!("{round}:{n}");
                let tag = common::sha256_tag(body.as_bytes());
                let started = Instant::now();
                let r = common::send(&http, "PUT", url, &[("if-match", &tags[i])], body).await;
                times[i].push(started.elapsed());
                assert_eq!(r.status(), 204);
                // The origin sends no tag; the proxy's is the SHA-256 of what it then serves.
                tags[i] = tag;
            }
        }
    }
    let (m50, m99) = common::p50_p99(&mut times[0]);
    let (r50, r99) = common::p50_p99(&mut times[1]);
    eprintln!(
        "proxy conditional write, {} each: in memory p50 {m50:.3} ms p99 {m99:.3} ms; Redis p50 \
         {r50:.3} ms p99 {r99:.3} ms; added p50 {:+.3} ms p99 {:+.3} ms",
        ROUNDS * EACH,
        r50 - m50,
        r99 - m99
    );
}

/// What one proxy's cache forgets because of a write, the other's forgets too (over Redis):
/// a fresh answer stored by B is not served once A has written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_proxy_is_forgotten_by_the_others_cache() {
    let redis = RedisServer::start();
    forgotten_by_the_other(&redis.url()).await;
}

async fn forgotten_by_the_other(redis: &str) {
    let (_origin, upstream) = start_origin().await;
    let a = start_proxy(&upstream, redis, &[]);
    let b = start_proxy(&upstream, redis, &[]);
    let http = client();
    // Both behind one name, as a fleet behind a balancer: one key.
    let host = ("host", "docs.example");
    let (on_a, on_b) = (
        format!("{}/cached/page", a.base),
        format!("{}/cached/page", b.base),
    );
    let created = common::send(&http, "PUT", &on_a, &[host, ("if-none-match", "*")], "v1").await;
    assert_eq!(created.status(), 201);
    for _ in 0..2 {
        let read = common::send(&http, "GET", &on_b, &[host], Vec::new()).await;
        assert_eq!(read.text().await.unwrap(), "v1");
    }
    let hit = common::send(&http, "GET", &on_b, &[host], Vec::new()).await;
    assert!(header(&hit, "cache-status").unwrap().contains("hit"));
    let tag = header(&hit, "etag").unwrap();

    let replaced = common::send(&http, "PUT", &on_a, &[host, ("if-match", &tag)], "v2").await;
    assert_eq!(replaced.status(), 204);
    let started = std::time::Instant::now();
    loop {
        let read = common::send(&http, "GET", &on_b, &[host], Vec::new()).await;
        if read.text().await.unwrap() == "v2" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "B still serves what A replaced"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("B forgot within {:?}", started.elapsed());
}
