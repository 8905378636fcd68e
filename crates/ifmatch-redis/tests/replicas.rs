//! With `WAIT` asked for (`Redis::with_replicas`), a write that cannot reach its replica waits
//! for it on a connection of its own: reads go on being answered at once meanwhile, and the
//! write fails (its outcome unknown) once the wait is over. Real `redis-server` processes, a
//! primary and a replica.

use std::time::{Duration, Instant};

use ifmatch_redis::testing::RedisServer;
use ifmatch_redis::{REPLICA_TIMEOUT, RedisTables, connect};
use ifmatch_table::{Change, DateTime, Entity, Expected, Tables, Value};

fn write(n: i64) -> Change {
    Change {
        key: ("p".to_owned(), "r".to_owned()),
        expected: Expected::Anything,
        write: Some(Entity::new(
            "p",
            "r",
            DateTime::from_ticks(n),
            [("n", Value::Int64(n))],
        )),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_answered_while_a_write_waits_for_a_missing_replica() {
    let primary = RedisServer::start();
    let port = primary.port().to_string();
    // The replica keeps no append-only file: a loaded disk's stall of its `fsync` (which it
    // waits for before acknowledging) could outlast the 1 s `WAIT` of the first writes, and its
    // disk is not what this test is about.
    let replica_of = ["--replicaof", "127.0.0.1", &port, "--appendonly", "no"];
    let mut replica = RedisServer::start_with(&replica_of);
    // Its first sync done (on a loaded machine it may take longer than a write's wait).
    replica.wait_in_sync(&primary, Duration::from_secs(30));
    let connection = connect(&primary.url()).await.unwrap();
    let connection = connection.with_replicas(1).await.unwrap();
    let tables = RedisTables::new(connection, "t:");
    tables.create_table("t").await.unwrap();
    tables.commit("t", &[write(1)]).await.unwrap();

    replica.kill();
    let writing = {
        let tables = tables.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let outcome = tables.commit("t", &[write(2)]).await;
            (outcome, started.elapsed())
        })
    };
    // Reads while the write waits: each answered well within the wait.
    let key = ("p".to_owned(), "r".to_owned());
    let mut slowest = Duration::ZERO;
    let until = Instant::now() + REPLICA_TIMEOUT;
    while Instant::now() < until {
        let started = Instant::now();
        tables.get("t", &key).await.unwrap().expect("the entity");
        slowest = slowest.max(started.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        slowest < Duration::from_millis(300),
        "a read waited {slowest:?} behind a write's WAIT"
    );
    let (outcome, took) = writing.await.unwrap();
    assert!(
        outcome.is_err(),
        "a write no replica has is not acknowledged"
    );
    assert!(
        took >= REPLICA_TIMEOUT,
        "it waited for the replica ({took:?})"
    );
}
