//! An instance that dies at any point of an operation (its requests stop there, as under a
//! SIGKILL) leaves the operation whole or absent, and nothing held: for a table batch and for
//! a container's deletion, cut short after each number of requests in turn, a live instance
//! then sees all of it or none of it, and goes on writing at once.

use crate::dying;

use std::sync::Arc;
use std::time::Duration;

use ifmatch_blob::{Content, Key, PutMode, Record, Records, Scan};
use ifmatch_bucket::{BucketRecords, BucketTables};
use ifmatch_table::{Change, Entity, Expected, Tables, Value, conformance};
use object_store::ObjectStore;
use object_store::memory::InMemory;

fn change(entity: Entity, expected: Expected) -> Change {
    let key = (entity.partition_key.clone(), entity.row_key.clone());
    Change {
        key,
        expected,
        write: Some(entity),
    }
}

fn n(entity: &Entity) -> i32 {
    match entity.properties["N"] {
        Value::Int32(n) => n,
        ref other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_cut_short_anywhere_is_whole_or_absent() {
    let mut whole = 0;
    for budget in 0..40 {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        // The live instance takes a pending intent for its dead instance's at once.
        let live = BucketTables::new(store.clone(), "t").stale_after(Duration::ZERO);
        live.create_table("t").await.unwrap();
        let (a, b) = (
            conformance::entity("p", "a", 0, 1),
            conformance::entity("p", "b", 0, 1),
        );
        let inserts = [
            change(a.clone(), Expected::Absent),
            change(b.clone(), Expected::Absent),
        ];
        live.commit("t", &inserts).await.unwrap();

        let dying = BucketTables::new(dying::Dying::after(store.clone(), budget), "t");
        let moves = [
            change(
                conformance::entity("p", "a", 1, 2),
                Expected::Version(a.timestamp),
            ),
            change(
                conformance::entity("p", "b", -1, 2),
                Expected::Version(b.timestamp),
            ),
        ];
        let done = dying.commit("t", &moves).await;

        let scan = ifmatch_table::Scan {
            from: None,
            partition: Some("p"),
            limit: 10,
        };
        let seen: Vec<i32> = live.scan("t", scan).await.unwrap().iter().map(n).collect();
        assert!(
            seen == [0, 0] || seen == [1, -1],
            "budget {budget}: {seen:?}"
        );
        if done.is_ok() {
            assert_eq!(
                seen,
                [1, -1],
                "budget {budget}: a commit said done is there"
            );
            whole += 1;
        }
        // Nothing is held: each entity takes a write at once.
        for rk in ["a", "b"] {
            let write = [change(
                conformance::entity("p", rk, 7, 3),
                Expected::Present,
            )];
            let written = tokio::time::timeout(Duration::from_secs(5), live.commit("t", &write));
            written.await.expect("not held").unwrap();
        }
        let seen: Vec<i32> = live.scan("t", scan).await.unwrap().iter().map(n).collect();
        assert_eq!(seen, [7, 7], "budget {budget}");
    }
    assert!(whole > 0, "some budget let the batch finish");
}

fn record(tag: &str, generation: u64, container: bool) -> Record {
    let at = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let etag = ifmatch_core::strong_etag(tag.as_bytes());
    let record = if container {
        Record::container(etag, at)
    } else {
        Record::blob(etag, at, Content::new(format!("object-{tag}"), 1, None))
    };
    record.with_generation(generation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_deletion_cut_short_anywhere_is_whole_or_absent() {
    let container = Key::Container("c".into());
    let blob = |name: &str| Key::Blob("c".into(), name.into());
    let names = ["x", "y/z", "é"];
    let scan = Scan {
        container: "c",
        prefix: "",
        from: "",
        limit: 100,
    };
    let mut whole = 0;
    for budget in 0..20 {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let live = BucketRecords::new(store.clone(), "r");
        live.put(&container, &record("c", 1, true), PutMode::Create)
            .await
            .unwrap();
        for name in names {
            live.put(&blob(name), &record(name, 1, false), PutMode::Create)
                .await
                .unwrap();
        }

        let dying = BucketRecords::new(dying::Dying::after(store.clone(), budget), "r");
        let done = dying.delete(&container, 1).await;

        let listed = live.list(scan).await.unwrap().len();
        if live.get(&container).await.unwrap().is_some() {
            assert!(done.is_err(), "budget {budget}: said deleted, and there");
            assert_eq!(listed, names.len(), "budget {budget}");
            for name in names {
                assert!(
                    live.get(&blob(name)).await.unwrap().is_some(),
                    "budget {budget}"
                );
            }
            continue;
        }
        whole += usize::from(done.is_ok());
        assert_eq!(listed, 0, "budget {budget}: the blobs went with it");
        for name in names {
            assert!(
                live.get(&blob(name)).await.unwrap().is_none(),
                "budget {budget}"
            );
        }
        // Created again, the container holds none of the blobs of before.
        live.put(&container, &record("c2", 1, true), PutMode::Create)
            .await
            .unwrap();
        assert_eq!(live.list(scan).await.unwrap().len(), 0, "budget {budget}");
        assert!(
            live.get(&blob("x")).await.unwrap().is_none(),
            "budget {budget}"
        );
    }
    assert!(whole > 0, "some budget let the deletion finish");
}
