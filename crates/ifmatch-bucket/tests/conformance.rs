//! The blob front's records and the Table front's entities in a bucket pass the conformance
//! suites of every records and tables backend (create-only and generation-checked puts,
//! containers owning their blobs, ordered listing and paging, errors naming the record, racing
//! writers, staged blocks; tables that come and go, entities in key order, compare-and-swap
//! commits, batches all or none, one of racing writers winning), over memory, Azurite and
//! `ifmatch serve` itself through object_store's Azure backend: stores whose conditional puts
//! are atomic (not moto's S3 server: see `versions.rs`).

use crate::common;

use std::sync::Arc;

use ifmatch_bucket::{BucketRecords, BucketTables};
use object_store::ObjectStore;
use object_store::memory::InMemory;

/// Every check of both suites, each on a prefix of its own in `store`.
async fn conforms(store: Arc<dyn ObjectStore>) {
    use ifmatch_blob::conformance as blobs;
    use ifmatch_table::conformance as tables;
    // A listing paged at every size is hundreds of requests too: given the tables' 60 s below,
    // for the same reason (a fresh clone's loaded run saw Azurite pass 10 s on one page).
    let records = |prefix: &str| {
        BucketRecords::new(store.clone(), prefix).timeout(std::time::Duration::from_secs(60))
    };
    blobs::every(records).await;
    // Again in the same places: what the first runs deleted is gone for good.
    blobs::records(&records("records")).await;
    blobs::staging(&records("staging")).await;

    // A batch of 100 entities is hundreds of requests: past the 10 s a commit is given by
    // default when a loaded machine slows the emulator, which is not what is tested here.
    let in_tables = |prefix: &str| {
        BucketTables::new(store.clone(), prefix).timeout(std::time::Duration::from_secs(60))
    };
    tables::every(in_tables).await;
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
