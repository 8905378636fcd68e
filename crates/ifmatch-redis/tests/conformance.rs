//! The Redis records pass the same conformance suite as the in-memory ones, against a real
//! redis-server, and fail cleanly while it is away.

use ifmatch_blob::{Key, Records, StoreError, conformance};
use ifmatch_redis::testing::RedisServer;
use ifmatch_redis::{RedisRecords, connect};

/// A redis-server of the test's own, and records in it under `ifmatch:`.
async fn records() -> (RedisServer, RedisRecords) {
    let server = RedisServer::start();
    let connection = connect(&server.url()).await.unwrap();
    (server, RedisRecords::new(connection, "ifmatch:"))
}

#[tokio::test]
async fn redis_records_conform() {
    let server = RedisServer::start();
    let connection = connect(&server.url()).await.unwrap();
    conformance::records(&RedisRecords::new(connection.clone(), "ifmatch:")).await;
    // Another prefix is another store on the same server.
    conformance::records(&RedisRecords::new(connection, "other:")).await;
}

#[tokio::test]
async fn redis_errors_name_their_record() {
    let (_server, records) = records().await;
    conformance::errors(&records).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_racing_writers_lose_no_update() {
    let (_server, records) = records().await;
    conformance::race(&records).await;
}

#[tokio::test]
async fn redis_listings_page_every_blob_once() {
    let (_server, records) = records().await;
    conformance::listing(&records).await;
}

#[tokio::test]
async fn redis_staged_blocks_conform() {
    let (_server, records) = records().await;
    conformance::staging(&records).await;
}

#[tokio::test]
async fn redis_away_is_unavailable_then_service_resumes() {
    let mut server = RedisServer::start();
    let records = RedisRecords::new(connect(&server.url()).await.unwrap(), "ifmatch:");
    let key = Key::Container("c".into());
    assert!(records.get(&key).await.unwrap().is_none());
    server.kill();
    let started = std::time::Instant::now();
    let error = records.get(&key).await.unwrap_err();
    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    server.restart();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match records.get(&key).await {
            Ok(found) => break assert!(found.is_none()),
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            Err(e) => panic!("did not resume: {e:?}"),
        }
    }
}
