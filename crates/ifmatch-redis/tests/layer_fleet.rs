//! Two instances of one axum app sharing one Redis for the layer's versions and write locks
//! pass the fleet scenarios of every shared version backend (`ifmatch-tower/tests/fleet`).

use crate::fleet;

use ifmatch_redis::testing::RedisServer;
use ifmatch_redis::{RedisVersions, connect};
use ifmatch_tower::Shared;

async fn two_instances(server: &RedisServer) -> [Shared<RedisVersions>; 2] {
    let url = server.url();
    let a = Shared::new(RedisVersions::new(
        connect(&url).await.unwrap(),
        "ifmatch:v:",
    ));
    let b = Shared::new(RedisVersions::new(
        connect(&url).await.unwrap(),
        "ifmatch:v:",
    ));
    [a, b]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_loses_no_update_and_creates_once() {
    let server = RedisServer::start();
    fleet::loses_no_update_and_creates_once(two_instances(&server).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_of_either_representation_is_current_on_either_instance() {
    let server = RedisServer::start();
    fleet::either_representation_is_current_on_either_instance(two_instances(&server).await).await;
}
