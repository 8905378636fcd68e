//! A Redis under Sentinel loses its primary mid-run (SIGKILL): the connection follows the
//! promoted replica with no restart, every increment acknowledged with `WAIT 1` is there
//! after the failover, service resumes within a bound once the promoted replica has a replica
//! again (the old primary, restarted 3 s after its death), and a lock taken before it is still
//! its holder's, with its fencing tokens never going back. Real `redis-server` and Sentinel
//! processes (`testing::Sentinels`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use ifmatch_redis::testing::Sentinels;
use ifmatch_redis::{RedisTables, RedisVersions, connect};
use ifmatch_table::{Change, DateTime, Entity, Expected, TableError, Tables, Value};
use ifmatch_tower::SharedBackend;

const CLIENTS: usize = 16;
/// Service after the primary dies: the Sentinels take 1 s to call it down, then elect one of
/// themselves and promote the replica.
const RESUMES_WITHIN: Duration = Duration::from_secs(20);

/// The counter of `client`: its value and the instant it was written at (`None`: not yet).
async fn read(tables: &RedisTables, client: usize) -> Result<Option<(i64, DateTime)>, TableError> {
    let key = ("c".to_owned(), client.to_string());
    Ok(tables.get("counters", &key).await?.map(|entity| {
        let Some(Value::Int64(n)) = entity.properties.get("n") else {
            panic!("a counter holds n");
        };
        (*n, entity.timestamp)
    }))
}

/// Increments `client`'s own counter until `stop`, counting what was acknowledged; a write
/// whose outcome is unknown (an error) counts when a later read finds it, since each write's
/// instant is its own. When an increment first lands after the kill, `resumed` says when.
async fn increment(
    tables: RedisTables,
    client: usize,
    stop: Arc<AtomicBool>,
    killed_at: Arc<AtomicI64>,
    resumed_after: Arc<AtomicI64>,
    started: Instant,
) -> i64 {
    let (mut acknowledged, mut unknown) = (0, None::<DateTime>);
    let mut tick = (client as i64 + 1) * 1_000_000_000;
    while !stop.load(Ordering::SeqCst) {
        let current = match read(&tables, client).await {
            Ok(current) => current,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        // The write of unknown outcome, found or not: either way, decided now.
        if let Some(at) = unknown.take()
            && current.is_some_and(|(_, stored)| stored == at)
        {
            acknowledged += 1;
        }
        tick += 1;
        let at = DateTime::from_ticks(tick);
        let n = current.map_or(0, |(n, _)| n);
        let change = Change {
            key: ("c".to_owned(), client.to_string()),
            expected: current.map_or(Expected::Absent, |(_, stored)| Expected::Version(stored)),
            write: Some(Entity::new(
                "c",
                &client.to_string(),
                at,
                [("n", Value::Int64(n + 1))],
            )),
        };
        let sent = started.elapsed().as_millis() as i64;
        match tables.commit("counters", &[change]).await {
            Ok(()) => {
                acknowledged += 1;
                // A write sent after the kill: one in flight then may have been replicated.
                let killed = killed_at.load(Ordering::SeqCst);
                if killed > 0 && sent > killed {
                    let now = started.elapsed().as_millis() as i64;
                    resumed_after.fetch_min(now - killed, Ordering::SeqCst);
                }
            }
            Err(TableError::Conflict { .. }) => panic!("client {client}'s counter is its own"),
            Err(_) => {
                unknown = Some(at);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    // The last write of unknown outcome, decided.
    loop {
        match read(&tables, client).await {
            Ok(current) => {
                if let Some(at) = unknown
                    && current.is_some_and(|(_, stored)| stored == at)
                {
                    acknowledged += 1;
                }
                return acknowledged;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_under_sentinel_loses_nothing_acknowledged() {
    let mut redis = Sentinels::start();
    let connection = connect(&redis.url()).await.unwrap().with_replicas(1);
    let tables = RedisTables::new(connection.clone(), "t:");
    tables.create_table("counters").await.unwrap();
    // A lock taken before the failover, with its fencing token.
    let versions = RedisVersions::new(connection.clone(), "v:");
    let token = versions.acquire("/leased", "holder", 60_000).await.unwrap();
    let token = token.expect("the lock is free");

    let (stop, killed_at, resumed_after) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicI64::new(0)),
        Arc::new(AtomicI64::new(i64::MAX)),
    );
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (tables, stop) = (tables.clone(), stop.clone());
            let (killed_at, resumed_after) = (killed_at.clone(), resumed_after.clone());
            tokio::spawn(increment(
                tables,
                client,
                stop,
                killed_at,
                resumed_after,
                started,
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    redis.primary.kill();
    killed_at.store(started.elapsed().as_millis() as i64, Ordering::SeqCst);
    // With one replica asked for, the promoted replica acknowledges nothing until it has a
    // replica itself: the old primary, back (as a rebooted machine would be), which the
    // Sentinels make a replica of the new master.
    tokio::time::sleep(Duration::from_secs(3)).await;
    redis.primary.restart();
    let deadline = Instant::now() + RESUMES_WITHIN;
    while resumed_after.load(Ordering::SeqCst) == i64::MAX {
        assert!(
            Instant::now() < deadline,
            "no write landed within {RESUMES_WITHIN:?} of the primary's death"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let resumed = Duration::from_millis(resumed_after.load(Ordering::SeqCst) as u64);
    eprintln!("writes resumed {resumed:?} after the primary was killed");
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    let mut total = 0;
    for (client, task) in clients.into_iter().enumerate() {
        let acknowledged = task.await.unwrap();
        let stored = read(&tables, client).await.unwrap().map_or(0, |(n, _)| n);
        assert_eq!(
            stored, acknowledged,
            "client {client}: every acknowledged increment"
        );
        total += acknowledged;
    }
    assert!(total > CLIENTS as i64, "the clients wrote ({total})");

    // The lock is its holder's still, and no one else's; the next token is higher.
    assert_eq!(
        versions
            .acquire("/leased", "another", 60_000)
            .await
            .unwrap(),
        None
    );
    assert!(versions.renew("/leased", "holder", 60_000).await.unwrap());
    versions.release("/leased", "holder").await.unwrap();
    let next = versions
        .acquire("/leased", "another", 60_000)
        .await
        .unwrap();
    assert!(
        next.is_some_and(|next| next > token),
        "{next:?} after {token}"
    );
}
