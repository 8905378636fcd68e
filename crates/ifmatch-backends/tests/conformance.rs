//! The local-disk backends pass the same conformance suite as the in-memory ones, cold (every
//! read from disk) and warm (through the caches).

use ifmatch_backends::local::{DataDir, INLINE_MAX, LocalObjects, LocalRecords};
use ifmatch_blob::conformance;

#[tokio::test]
async fn local_records_conform() {
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::open(dir.path()).unwrap();
    conformance::records(&LocalRecords::new(data.clone(), 10_000, INLINE_MAX)).await;
    // With no cache at all, every answer comes from the files.
    let dir = tempfile::tempdir().unwrap();
    conformance::records(&LocalRecords::new(DataDir::open(dir.path()).unwrap(), 0, 0)).await;
}

#[tokio::test]
async fn local_errors_name_their_record() {
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::open(dir.path()).unwrap();
    conformance::errors(&LocalRecords::new(data, 10_000, INLINE_MAX)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_racing_writers_lose_no_update() {
    for cache in [10_000, 0] {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open(dir.path()).unwrap();
        conformance::race(&LocalRecords::new(data, cache, INLINE_MAX)).await;
    }
}

#[tokio::test]
async fn local_listings_page_every_blob_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::open(dir.path()).unwrap();
    conformance::listing(&LocalRecords::new(data, 10_000, INLINE_MAX)).await;
    let dir = tempfile::tempdir().unwrap();
    conformance::listing(&LocalRecords::new(DataDir::open(dir.path()).unwrap(), 0, 0)).await;
}

#[tokio::test]
async fn local_staged_blocks_conform() {
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::open(dir.path()).unwrap();
    conformance::staging(&LocalRecords::new(data, 10_000, INLINE_MAX)).await;
}

#[tokio::test]
async fn local_objects_conform() {
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::open(dir.path()).unwrap();
    conformance::objects(&LocalObjects::new(data.clone(), 64 << 20)).await;
    conformance::objects(&LocalObjects::new(data, 0)).await;
}
