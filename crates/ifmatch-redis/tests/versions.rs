//! The Redis version backend passes the same conformance suite as the in-memory one, against
//! a real redis-server, and its locks expire with their holders only.

use std::time::{Duration, Instant};

use ifmatch_core::precondition::Validators;
use ifmatch_core::strong_etag;
use ifmatch_redis::testing::RedisServer;
use ifmatch_redis::{RedisVersions, connect};
use ifmatch_tower::{Shared, VersionStore, conformance};

/// An instance's versions over `server`, under `prefix`.
async fn versions(server: &RedisServer, prefix: &str) -> Shared<RedisVersions> {
    Shared::new(RedisVersions::new(
        connect(&server.url()).await.unwrap(),
        prefix,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_versions_conform() {
    let server = RedisServer::start();
    let one = versions(&server, "ifmatch:").await;
    conformance::versions(&one).await;
    // Another prefix is another store on the same server.
    conformance::versions(&versions(&server, "b:").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connections_are_two_instances_sharing_versions_and_locks() {
    let server = RedisServer::start();
    let a = versions(&server, "ifmatch:").await;
    let b = versions(&server, "ifmatch:").await;
    let guard = a.lock("/k").await.unwrap();
    let tag = Validators::etag(strong_etag(b"v1"));
    a.set(&guard, tag.clone()).await.unwrap();
    assert_eq!(b.get("/k").await.unwrap(), Some(tag));
    // B waits while A holds the lock, and gets it once A drops it.
    let waiting = tokio::spawn(async move {
        let started = Instant::now();
        let guard = b.lock("/k").await.unwrap();
        (started.elapsed(), b.fencing_token(&guard))
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let first = a.fencing_token(&guard).unwrap();
    drop(guard);
    let (waited, second) = waiting.await.unwrap();
    assert!(
        waited >= Duration::from_millis(150),
        "B did not wait: {waited:?}"
    );
    assert!(second.unwrap() > first);
}

/// A live holder keeps its lock past the time to live; a dead one loses it after it, and can
/// then record nothing.
#[test]
fn locks_expire_with_their_holder_only() {
    let server = RedisServer::start();
    let url = server.url();
    conformance::expiring_locks(|ttl, wait| {
        let url = url.clone();
        async move {
            let connection = connect(&url).await.unwrap();
            Shared::new(RedisVersions::new(connection, "ifmatch:"))
                .lock_ttl(ttl)
                .lock_wait(wait)
        }
    });
}
