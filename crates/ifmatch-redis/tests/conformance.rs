//! The Redis records pass the same conformance suite as the in-memory ones, against a real
//! redis-server, and fail cleanly while it is away.

use ifmatch_blob::{Key, Records, StoreError, conformance};
use ifmatch_redis::testing::RedisServer;
use ifmatch_redis::{RedisRecords, connect};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_records_conform() {
    let server = RedisServer::start();
    let connection = connect(&server.url()).await.unwrap();
    conformance::every(|name| RedisRecords::new(connection.clone(), &format!("{name}:"))).await;
    // Another prefix is another store on the same server.
    conformance::records(&RedisRecords::new(connection, "other:")).await;
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
