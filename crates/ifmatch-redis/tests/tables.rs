//! The Table backends' conformance suite against a real redis-server.

use ifmatch_redis::testing::RedisServer;
use ifmatch_redis::{RedisTables, connect};
use ifmatch_table::conformance;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_tables_keep_the_contract() {
    let server = RedisServer::start();
    let connection = connect(&server.url()).await.unwrap();
    conformance::every(|prefix| RedisTables::new(connection.clone(), &format!("{prefix}:"))).await;
}
