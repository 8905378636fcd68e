//! The Table backends' conformance suite against a real redis-server.

use ifmatch_redis::testing::RedisServer;
use ifmatch_redis::{RedisTables, connect};
use ifmatch_table::conformance;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_tables_keep_the_contract() {
    let server = RedisServer::start();
    let connection = connect(&server.url()).await.unwrap();
    let tables = |prefix: &str| RedisTables::new(connection.clone(), prefix);
    conformance::tables_come_and_go(&tables("a:")).await;
    conformance::entities_come_in_key_order(&tables("b:")).await;
    conformance::commits_compare_and_swap(&tables("c:")).await;
    conformance::a_batch_applies_all_or_none(&tables("d:")).await;
    conformance::one_of_racing_writers_wins(&tables("e:")).await;
}
