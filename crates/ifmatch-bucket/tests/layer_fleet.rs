//! Two instances of one axum app sharing nothing but a bucket for the layer's versions and
//! write locks pass the fleet scenarios of every shared version backend
//! (`ifmatch-tower/tests/fleet`): over memory, moto's S3, Azurite, and `ifmatch serve` through
//! object_store's Azure backend, each instance with a client of its own.

#[path = "../../ifmatch-tower/tests/fleet/mod.rs"]
mod fleet;

mod common;

use std::sync::Arc;

use ifmatch_bucket::BucketVersions;
use ifmatch_tower::Shared;
use object_store::memory::InMemory;

fn over(store: &Arc<InMemory>) -> [Shared<BucketVersions>; 2] {
    [0, 1].map(|_| Shared::new(BucketVersions::new(store.clone(), "app/versions")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_memory_a_fleet_loses_no_update_and_creates_once() {
    let store = Arc::new(InMemory::new());
    fleet::loses_no_update_and_creates_once(over(&store)).await;
    fleet::either_representation_is_current_on_either_instance(over(&store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_ifmatch_serve_a_fleet_loses_no_update_and_creates_once() {
    let served = common::Served::start().await;
    let instances =
        || [0, 1].map(|_| Shared::new(BucketVersions::new(served.client(), "app/versions")));
    fleet::loses_no_update_and_creates_once(instances()).await;
    fleet::either_representation_is_current_on_either_instance(instances()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_moto_s3_a_fleet_loses_no_update_and_creates_once() {
    let moto = ifmatch_bucket::testing::Moto::start("bucket").await;
    let instances =
        || [0, 1].map(|_| Shared::new(BucketVersions::new(moto.client(), "app/versions")));
    fleet::loses_no_update_and_creates_once(instances()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_azurite_a_fleet_loses_no_update_and_creates_once() {
    let azurite = common::Azurite::start().await;
    let instances = || [0, 1].map(|_| Shared::new(BucketVersions::new(azurite.client(), "app")));
    fleet::loses_no_update_and_creates_once(instances()).await;
}
