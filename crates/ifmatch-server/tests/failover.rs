//! A fleet over Redis under Sentinel survives losing its primary (issue 68): two `ifmatch
//! serve --backend redis+sentinel://... --redis-replicas 1` processes, 32 clients incrementing
//! blob counters with `If-Match` (reading through one instance, writing through the other),
//! the primary SIGKILLed mid-run and restarted 3 s later (the Sentinels make it a replica of
//! the promoted one). Every acknowledged increment is there after the failover, service
//! resumes within a bound, and a lease taken before it is still its holder's and no one
//! else's. Each counter is the list of the increments that made it, so that what landed is
//! known exactly. Real `redis-server` and Sentinel processes.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Ifmatch, client, header};
use ifmatch_redis::testing::Sentinels;

const CLIENTS: usize = 32;
/// From the primary's death to the first write acknowledged after it.
const RESUMES_WITHIN: Duration = Duration::from_secs(30);

/// An instance over the Sentinels' Redis, acknowledging a write once one replica has it.
fn instance(data: &std::path::Path, backend: &str) -> Ifmatch {
    Ifmatch::start([
        std::ffi::OsStr::new("serve"),
        "--data".as_ref(),
        data.as_os_str(),
        "--backend".as_ref(),
        backend.as_ref(),
        "--redis-replicas".as_ref(),
        "1".as_ref(),
        "--table-listen".as_ref(),
        "off".as_ref(),
        "--cosmos-listen".as_ref(),
        "off".as_ref(),
    ])
}

/// The counter blob at `url`: the ids of the increments that made it (one a line, oldest
/// first) and its tag, or `None` while the fleet cannot tell.
async fn read(http: &reqwest::Client, url: &str) -> Option<(String, String)> {
    let r = common::get(http, url).await;
    if r.status() != 200 {
        return None;
    }
    let tag = header(&r, "etag")?;
    Some((r.text().await.ok()?, tag))
}

/// One client's increments of its own counter until `stop`: read through `read_at`, write
/// `If-Match` through `write_at` the ids read plus one of its own. A write answered 503 has an
/// unknown outcome: it may have landed, or land later (a 412 then says another came first,
/// and it is read again). At the end, the counter holds every id acknowledged (201), and no
/// id but those acknowledged or of unknown outcome. Notes in `resumed` how long after `killed`
/// (ms since `started`) the first increment sent after it was acknowledged.
async fn count(
    http: reqwest::Client,
    (read_at, write_at): (String, String),
    stop: Arc<AtomicBool>,
    (started, killed, resumed): (Instant, Arc<AtomicU64>, Arc<AtomicU64>),
) -> usize {
    let (mut acknowledged, mut unknown) = (HashSet::<String>::new(), HashSet::<String>::new());
    for id in 0u64.. {
        let Some((ids, tag)) = read(&http, &read_at).await else {
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
            return acknowledged.len();
        }
        let id = id.to_string();
        let sent = started.elapsed().as_millis() as u64;
        let condition = [("if-match", tag.as_str())];
        let body = format!("{ids}{id}\n");
        let r = common::send(&http, "PUT", &write_at, &condition, body).await;
        match r.status().as_u16() {
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
    let mut redis = Sentinels::start();
    let data = tempfile::tempdir().unwrap();
    let (a, b) = (
        instance(data.path(), &redis.url()),
        instance(data.path(), &redis.url()),
    );
    let http = client();
    common::create_container(&http, &a.base, "cnt").await;
    for i in 0..CLIENTS {
        let r = common::send(&http, "PUT", &format!("{}/cnt/c{i}", b.base), &[], "").await;
        assert_eq!(r.status(), 201);
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
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let urls = (
                format!("{}/cnt/c{i}", bases[i % 2]),
                format!("{}/cnt/c{i}", bases[(i + 1) % 2]),
            );
            let times = (started, killed.clone(), resumed.clone());
            tokio::spawn(count(http.clone(), urls, stop.clone(), times))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(3)).await;
    redis.primary.kill();
    killed.store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    redis.primary.restart();
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
    eprintln!("{total} increments acknowledged by {CLIENTS} clients, every one there");

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
