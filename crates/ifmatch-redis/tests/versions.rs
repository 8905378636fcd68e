//! The Redis version backend passes the same conformance suite as the in-memory one, against
//! a real redis-server; a holder that stops renewing loses its lock after the time to live,
//! and can then record nothing.

use std::time::{Duration, Instant};

use ifmatch_core::precondition::Validators;
use ifmatch_core::strong_etag;
use ifmatch_redis::testing::RedisServer;
use ifmatch_redis::{RedisVersions, VersionsError, connect};
use ifmatch_tower::{VersionStore, conformance};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_versions_conform() {
    let server = RedisServer::start();
    let one = RedisVersions::new(connect(&server.url()).await.unwrap(), "ifmatch:");
    conformance::versions(&one).await;
    // Another prefix is another store on the same server.
    conformance::versions(&RedisVersions::new(
        connect(&server.url()).await.unwrap(),
        "b:",
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connections_are_two_instances_sharing_versions_and_locks() {
    let server = RedisServer::start();
    let a = RedisVersions::new(connect(&server.url()).await.unwrap(), "ifmatch:");
    let b = RedisVersions::new(connect(&server.url()).await.unwrap(), "ifmatch:");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_holder_keeps_its_lock_past_the_time_to_live() {
    let server = RedisServer::start();
    // Renewed every third of the time to live: only a stall of two thirds of it (650 ms) could
    // lose the lock, which a loaded two-core CI machine did to a 300 ms one.
    let ttl = Duration::from_secs(1);
    let a = RedisVersions::new(connect(&server.url()).await.unwrap(), "ifmatch:").lock_ttl(ttl);
    let b = RedisVersions::new(connect(&server.url()).await.unwrap(), "ifmatch:")
        .lock_ttl(ttl)
        .lock_wait(ttl * 3);
    let guard = a.lock("/slow").await.unwrap();
    // Three times the time to live: renewed all along, so B gives up.
    let error = b.lock("/slow").await.unwrap_err();
    assert!(
        matches!(error.downcast_ref(), Some(VersionsError::LockTimeout(_))),
        "{error}"
    );
    a.set(&guard, Validators::etag(strong_etag(b"slow")))
        .await
        .unwrap();
}

#[test]
fn a_dead_holder_loses_its_lock_after_the_time_to_live_and_records_nothing() {
    let server = RedisServer::start();
    let ttl = Duration::from_millis(400);
    // The dead instance: its runtime (and the task renewing its lock) stops while it holds
    // the lock, as a crash or a stall would; its guard is kept to try a late record.
    // `asked` is taken before the lock is asked for: the lock cannot expire sooner than a time
    // to live after it, however long the machine takes to hand the guard back.
    let dead = tokio::runtime::Runtime::new().unwrap();
    let (stale, asked) = dead.block_on(async {
        let versions =
            RedisVersions::new(connect(&server.url()).await.unwrap(), "ifmatch:").lock_ttl(ttl);
        let asked = Instant::now();
        (versions.lock("/k").await.unwrap(), asked)
    });
    dead.shutdown_background();

    let live = tokio::runtime::Runtime::new().unwrap();
    live.block_on(async {
        let versions =
            RedisVersions::new(connect(&server.url()).await.unwrap(), "ifmatch:").lock_ttl(ttl);
        let guard = versions.lock("/k").await.unwrap();
        // Not sooner than the time to live; and not held for ever (a renewal may have run
        // before the runtime stopped, and a loaded machine is slow to stop it).
        let waited = asked.elapsed();
        assert!(
            waited >= ttl && waited < ttl * 10,
            "the key was writable again after {waited:?} (lock time to live {ttl:?})"
        );
        assert!(versions.fencing_token(&guard) > versions.fencing_token(&stale));
        let fresh = Validators::etag(strong_etag(b"fresh"));
        versions.set(&guard, fresh.clone()).await.unwrap();
        // The dead holder's late record is refused and changes nothing.
        let late = versions
            .set(&stale, Validators::etag(strong_etag(b"late")))
            .await
            .unwrap_err();
        assert!(
            matches!(late.downcast_ref(), Some(VersionsError::LockLost(_))),
            "{late}"
        );
        assert_eq!(versions.get("/k").await.unwrap(), Some(fresh));
    });
}
