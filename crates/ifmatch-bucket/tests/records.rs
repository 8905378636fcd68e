//! The blob front's records in a bucket pass the conformance suite of every records backend
//! (create-only and generation-checked puts, containers owning their blobs, ordered listing and
//! paging, errors naming the record, racing writers, staged blocks), over memory, Azurite and
//! `ifmatch serve` itself through object_store's Azure backend: stores whose conditional puts
//! are atomic (not moto's S3 server: see `versions.rs`).

mod common;

use std::sync::Arc;

use ifmatch_blob::conformance;
use ifmatch_bucket::BucketRecords;
use object_store::ObjectStore;
use object_store::memory::InMemory;

/// Every check of the suite, each on records of a prefix of its own in `store`.
async fn conforms(store: Arc<dyn ObjectStore>) {
    let records = |prefix: &str| BucketRecords::new(store.clone(), prefix);
    conformance::records(&records("records")).await;
    conformance::errors(&records("errors")).await;
    conformance::race(&records("race")).await;
    conformance::listing(&records("listing")).await;
    conformance::staging(&records("staging")).await;
    // Again in the same places: what the first runs deleted is gone for good.
    conformance::records(&records("records")).await;
    conformance::staging(&records("staging")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_memory_it_conforms() {
    conforms(Arc::new(InMemory::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_ifmatch_serve_it_conforms() {
    let served = common::Served::start().await;
    conforms(served.client()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_azurite_it_conforms() {
    let azurite = common::Azurite::start().await;
    conforms(azurite.client()).await;
}
