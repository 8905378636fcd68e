//! A batch is seen whole or not at all: scans of a partition while racing batches move
//! amounts between its entities.

use crate::common;

use ifmatch_bucket::BucketTables;
use ifmatch_table::conformance;

/// Two entities whose `N`s sum to 0, and `writers` batches moving an amount from one to the
/// other, each expecting the versions it read; meanwhile, scans of the partition. A batch is
/// seen whole or not at all: every scan's sum is 0.
async fn scans_see_batches_whole(tables: BucketTables) {
    use ifmatch_table::{Change, Expected, Scan, Tables, Value};
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

    tables.create_table("moves").await.unwrap();
    let at = AtomicI64::new(1);
    let entity = |rk: &str, n: i32| {
        let second = at.fetch_add(1, Ordering::Relaxed);
        conformance::entity("p", rk, n, second)
    };
    let insert = |e: ifmatch_table::Entity| Change {
        key: (e.partition_key.clone(), e.row_key.clone()),
        expected: Expected::Absent,
        write: Some(e),
    };
    tables
        .commit("moves", &[insert(entity("a", 0)), insert(entity("b", 0))])
        .await
        .unwrap();
    let n = |e: &ifmatch_table::Entity| match e.properties["N"] {
        Value::Int32(n) => n,
        ref other => panic!("{other:?}"),
    };
    let scan = Scan {
        from: None,
        partition: Some("p"),
        limit: 10,
    };
    let done = AtomicBool::new(false);
    let (tables, done, entity, n) = (&tables, &done, &entity, &n);
    let writer = |w: i32| async move {
        for _ in 0..8 {
            loop {
                let [a, b] = <[_; 2]>::try_from(tables.scan("moves", scan).await.unwrap()).unwrap();
                let moved = |from: &ifmatch_table::Entity, delta: i32| Change {
                    key: (from.partition_key.clone(), from.row_key.clone()),
                    expected: Expected::Version(from.timestamp),
                    write: Some(entity(&from.row_key, n(from) + delta)),
                };
                let changes = [moved(&a, w + 1), moved(&b, -(w + 1))];
                match tables.commit("moves", &changes).await {
                    Ok(()) => break,
                    Err(ifmatch_table::TableError::Conflict { .. }) => {}
                    Err(error) => panic!("{error}"),
                }
            }
        }
    };
    let reader = || async move {
        let mut scans = 0;
        while !done.load(Ordering::Relaxed) {
            let page = tables.scan("moves", scan).await.unwrap();
            assert_eq!(page.len(), 2);
            assert_eq!(n(&page[0]) + n(&page[1]), 0, "half a batch: {page:?}");
            scans += 1;
        }
        scans
    };
    let writers = async {
        futures_util::future::join_all((0..4).map(writer)).await;
        done.store(true, Ordering::Relaxed);
    };
    let (_, scans) = tokio::join!(writers, futures_util::future::join(reader(), reader()));
    assert!(scans.0 + scans.1 > 0);
    let page = tables.scan("moves", scan).await.unwrap();
    assert_eq!(
        n(&page[0]),
        4 * 8 * 5 / 2,
        "every move landed once: {page:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_ifmatch_serve_scans_see_batches_whole() {
    let served = common::Served::start().await;
    scans_see_batches_whole(BucketTables::new(served.client(), "moves")).await;
}
