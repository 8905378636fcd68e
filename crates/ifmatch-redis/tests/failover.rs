//! A Redis under Sentinel loses its primary mid-run (SIGKILL): the connection follows the
//! promoted replica with no restart, every increment acknowledged with `WAIT 1` is there
//! after the failover, service resumes within a bound once the promoted replica has a replica
//! again (the old primary, restarted 3 s after its death), and a lock taken before it is still
//! its holder's, with its fencing tokens never going back. Real `redis-server` and Sentinel
//! processes (`testing::Sentinels`).

use crate::common;

use std::time::Duration;

use common::Run;
use ifmatch_redis::testing::Sentinels;
use ifmatch_redis::{RedisTables, RedisVersions, connect};
use ifmatch_table::Tables;
use ifmatch_tower::SharedBackend;

const CLIENTS: usize = 16;
/// How long after its death the killed primary is started again.
const RESTART: Duration = Duration::from_secs(3);
/// Service after the primary dies: the Sentinels take 1 s to call it down, then elect one of
/// themselves and promote the replica.
const RESUMES_WITHIN: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_under_sentinel_loses_nothing_acknowledged() {
    let mut redis = Sentinels::start();
    let connection = connect(&redis.url()).await.unwrap();
    let connection = connection.with_replicas(1).await.unwrap();
    let tables = RedisTables::new(connection.clone(), "t:");
    tables.create_table("counters").await.unwrap();
    // A lock taken before the failover, with its fencing token.
    let versions = RedisVersions::new(connection.clone(), "v:");
    let token = versions.acquire("/leased", "holder", 60_000).await.unwrap();
    let token = token.expect("the lock is free");

    let run = Run::start(&tables, CLIENTS, |_| "counters");
    tokio::time::sleep(Duration::from_secs(2)).await;
    redis.primary.kill();
    run.killed();
    // With one replica asked for, the promoted replica acknowledges nothing until it has a
    // replica itself: the old primary, back (as a rebooted machine would be), which the
    // Sentinels make a replica of the new master.
    tokio::time::sleep(RESTART).await;
    redis.primary.restart();
    let resumed = run.resumed("counters", RESTART, RESUMES_WITHIN).await;
    eprintln!("writes resumed {resumed:?} after the primary was killed");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let total = run.finish().await;
    assert!(total > CLIENTS, "the clients wrote ({total})");

    // The lock is its holder's still, and no one else's; the next token is higher.
    common::held_through(&versions, "/leased", token).await;
}
