//! Two instances of one axum app sharing nothing but a bucket for the layer's versions and
//! write locks pass the fleet scenarios of every shared version backend
//! (`ifmatch-tower/tests/fleet`): over memory, Azurite, and `ifmatch serve` through
//! object_store's Azure backend, each instance with a client of its own; and a store killed and
//! back (moto's S3 server: one writer, no race, as its conditional puts are not atomic).

use crate::fleet;

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

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
async fn over_azurite_a_fleet_loses_no_update_and_creates_once() {
    let azurite = common::Azurite::start().await;
    let instances = || [0, 1].map(|_| Shared::new(BucketVersions::new(azurite.client(), "app")));
    fleet::loses_no_update_and_creates_once(instances()).await;
}

/// The store killed and back: while it is away, a conditional write through the layer is
/// answered 503 within the step's timeout and nothing is written; once it is back (moto keeps
/// nothing, so the key's lock is free), writes go through again with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_moto_s3_the_store_killed_and_back() {
    let mut moto = ifmatch_bucket::testing::Moto::start("bucket").await;
    let versions = BucketVersions::new(moto.client(), "app").timeout(Duration::from_secs(1));
    let (base, docs) = fleet::one_instance(Shared::new(versions)).await;
    let create = || fleet::put(&base, "/docs/k", ("if-none-match", "*"), "v1".into());

    moto.kill();
    let started = Instant::now();
    assert_eq!(create().await, 503, "the store is away");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "answered after {took:?}");
    assert!(docs.lock().unwrap().is_empty(), "nothing was written");

    moto.restart().await;
    assert_eq!(create().await, 201, "service resumed by itself");
}
