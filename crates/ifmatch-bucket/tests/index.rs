//! Listings read the living: what was deleted before does not cost a listing a request (each
//! life of a record, an entity, a container or a table has an entry in an index, removed when
//! the life ends), and what a creation cut short left in the index is not listed, and goes once
//! it is old.

use crate::dying;

use std::sync::Arc;
use std::time::Duration;

use ifmatch_blob::{Content, Key, PutMode, Record, Records, Scan};
use ifmatch_bucket::{BucketRecords, BucketTables};
use ifmatch_table::{Change, Expected, Tables, conformance};
use object_store::ObjectStore;
use object_store::memory::InMemory;

use dying::Dying;

/// Of this many, all but [`KEPT`] are deleted before the listing.
const MADE: usize = 300;
const KEPT: usize = 5;

/// What a listing may cost beyond a request per thing listed: the container's or table's read,
/// the index's listing, a partition's epoch.
const OVERHEAD: i64 = 6;

fn record(tag: &str, container: bool) -> Record {
    let at = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let etag = ifmatch_core::strong_etag(tag.as_bytes());
    if container {
        Record::container(etag, at)
    } else {
        Record::blob(etag, at, Content::new(format!("object-{tag}"), 1, None))
    }
    .with_generation(1)
}

fn put(key: (String, String), n: i32) -> Change {
    Change {
        key: key.clone(),
        expected: Expected::Anything,
        write: Some(conformance::entity(&key.0, &key.1, n, 1)),
    }
}

fn delete(key: (String, String)) -> Change {
    Change {
        key,
        expected: Expected::Anything,
        write: None,
    }
}

#[tokio::test]
async fn a_blob_listing_costs_the_living_not_the_deleted() {
    let store = Dying::counting(Arc::new(InMemory::new()));
    let records = BucketRecords::new(store.clone(), "r");
    let container = Key::Container("c".into());
    records
        .put(&container, &record("c", true), PutMode::Create)
        .await
        .unwrap();
    let blob = |i: usize| Key::Blob("c".into(), format!("b{i:04}"));
    for i in 0..MADE {
        let (key, made) = (blob(i), record(&i.to_string(), false));
        records.put(&key, &made, PutMode::Create).await.unwrap();
    }
    for i in KEPT..MADE {
        records.delete(&blob(i), 1).await.unwrap();
    }
    let scan = Scan {
        container: "c",
        prefix: "",
        from: "",
        limit: 1000,
    };
    let before = store.requests();
    let listed = records.list(scan).await.unwrap();
    let spent = store.requests() - before;
    let names: Vec<&str> = listed.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["b0000", "b0001", "b0002", "b0003", "b0004"]);
    assert!(spent <= KEPT as i64 + OVERHEAD, "{spent} requests");
}

#[tokio::test]
async fn a_scan_costs_the_living_not_the_deleted() {
    let store = Dying::counting(Arc::new(InMemory::new()));
    let tables = BucketTables::new(store.clone(), "t");
    tables.create_table("t").await.unwrap();
    let key = |i: usize| ("p".to_owned(), format!("r{i:04}"));
    // In batches and one by one: either way the deleted leave no entry.
    for chunk in (0..MADE).collect::<Vec<_>>().chunks(100) {
        let changes: Vec<Change> = chunk.iter().map(|&i| put(key(i), 1)).collect();
        tables.commit("t", &changes).await.unwrap();
    }
    for chunk in (KEPT..MADE / 2).collect::<Vec<_>>().chunks(50) {
        let changes: Vec<Change> = chunk.iter().map(|&i| delete(key(i))).collect();
        tables.commit("t", &changes).await.unwrap();
    }
    for i in MADE / 2..MADE {
        tables.commit("t", &[delete(key(i))]).await.unwrap();
    }
    let scan = ifmatch_table::Scan {
        from: None,
        partition: None,
        limit: 1000,
    };
    let before = store.requests();
    let found = tables.scan("t", scan).await.unwrap();
    let spent = store.requests() - before;
    let rows: Vec<&str> = found.iter().map(|e| e.row_key.as_str()).collect();
    assert_eq!(rows, ["r0000", "r0001", "r0002", "r0003", "r0004"]);
    // Each partition's epoch is read twice, and its listing is started again.
    assert!(spent <= KEPT as i64 + OVERHEAD, "{spent} requests");
}

#[tokio::test]
async fn listings_of_containers_and_tables_cost_the_living() {
    let store = Dying::counting(Arc::new(InMemory::new()));
    let records = BucketRecords::new(store.clone(), "r");
    let tables = BucketTables::new(store.clone(), "t");
    for i in 0..MADE / 10 {
        let name = format!("c{i:03}");
        let container = Key::Container(name.clone());
        (records
            .put(&container, &record(&name, true), PutMode::Create)
            .await)
            .unwrap();
        tables.create_table(&name).await.unwrap();
    }
    for i in KEPT..MADE / 10 {
        let name = format!("c{i:03}");
        (records.delete(&Key::Container(name.clone()), 1).await).unwrap();
        assert!(tables.delete_table(&name).await.unwrap());
    }
    let kept: Vec<String> = (0..KEPT).map(|i| format!("c{i:03}")).collect();
    let before = store.requests();
    assert_eq!(records.containers().await.unwrap(), kept);
    assert!(store.requests() - before <= KEPT as i64 + OVERHEAD);
    let before = store.requests();
    assert_eq!(tables.tables("", 100).await.unwrap(), kept);
    assert!(store.requests() - before <= KEPT as i64 + OVERHEAD);
}

/// The paths under `prefix`'s index.
async fn entries(store: &dyn ObjectStore, prefix: &str) -> usize {
    use futures_util::TryStreamExt;
    let index = object_store::path::Path::from(prefix).join("live");
    let listed: Vec<_> = store.list(Some(&index)).try_collect().await.unwrap();
    listed.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_cut_short_is_not_listed_and_its_entry_goes_once_old() {
    // Operations given up after 100 ms: an entry nothing confirmed is a leftover after 6 s.
    let timeout = Duration::from_millis(100);
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let live = BucketTables::new(store.clone(), "t").stale_after(Duration::ZERO);
    let live = live.timeout(timeout);
    live.create_table("t").await.unwrap();
    let keys = [
        ("p".to_owned(), "a".to_owned()),
        ("p".to_owned(), "b".to_owned()),
    ];
    let inserts: Vec<Change> = keys.iter().map(|k| put(k.clone(), 1)).collect();
    // The intent, then both entries and one lock: the instance dies before its commit.
    let dying = BucketTables::new(Dying::after(store.clone(), 6), "t");
    dying.commit("t", &inserts).await.unwrap_err();
    let scan = ifmatch_table::Scan {
        from: None,
        partition: None,
        limit: 10,
    };
    assert!(live.scan("t", scan).await.unwrap().is_empty());
    let cut = entries(&*store, "t").await;
    assert!(
        cut > 1,
        "the dying batch entered its creations: {cut} entries"
    );
    // Created again by a live instance: listed once each.
    live.commit("t", &inserts).await.unwrap();
    assert_eq!(live.scan("t", scan).await.unwrap().len(), 2);
    tokio::time::sleep(timeout * 61).await;
    assert_eq!(live.scan("t", scan).await.unwrap().len(), 2);
    // The table's entry and the two living entities': the leftovers went.
    assert_eq!(entries(&*store, "t").await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_creation_cut_short_anywhere_is_listed_once_or_not() {
    let scan = Scan {
        container: "c",
        prefix: "",
        from: "",
        limit: 100,
    };
    let blob = Key::Blob("c".into(), "x".into());
    for budget in 0..6 {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let live = BucketRecords::new(store.clone(), "r");
        let container = Key::Container("c".into());
        (live
            .put(&container, &record("c", true), PutMode::Create)
            .await)
            .unwrap();
        let dying = BucketRecords::new(Dying::after(store.clone(), budget), "r");
        let done = dying.put(&blob, &record("x", false), PutMode::Create).await;
        let listed = live.list(scan).await.unwrap().len();
        let there = live.get(&blob).await.unwrap().is_some();
        assert_eq!(listed, usize::from(there), "budget {budget}");
        if done.is_ok() {
            assert!(there, "budget {budget}");
        }
        // Written again, deleted, created again: listed once, then not, then once.
        let mode = if there {
            PutMode::Update(1)
        } else {
            PutMode::Create
        };
        live.put(&blob, &record("x2", false), mode).await.unwrap();
        assert_eq!(live.list(scan).await.unwrap().len(), 1, "budget {budget}");
        live.delete(&blob, 1).await.unwrap();
        assert_eq!(live.list(scan).await.unwrap().len(), 0, "budget {budget}");
        (live.put(&blob, &record("x3", false), PutMode::Create).await).unwrap();
        assert_eq!(live.list(scan).await.unwrap().len(), 1, "budget {budget}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_cut_short_anywhere_leaves_at_most_a_leftover_per_key() {
    let keys = [
        ("p".to_owned(), "a".to_owned()),
        ("p".to_owned(), "b".to_owned()),
    ];
    let scan = ifmatch_table::Scan {
        from: None,
        partition: None,
        limit: 10,
    };
    let mut whole = 0;
    for budget in 0..40 {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        // The live instance takes a pending intent for its dead instance's at once.
        let live = BucketTables::new(store.clone(), "t").stale_after(Duration::ZERO);
        live.create_table("t").await.unwrap();
        let puts: Vec<Change> = keys.iter().map(|k| put(k.clone(), 1)).collect();
        live.commit("t", &puts).await.unwrap();
        let dying = BucketTables::new(Dying::after(store.clone(), budget), "t");
        let deletes: Vec<Change> = keys.iter().map(|k| delete(k.clone())).collect();
        let done = dying.commit("t", &deletes).await.is_ok();
        // Written over whatever the batch left (its locks settled, their ended lives' entries
        // removed), then deleted: the table's entry stays, and at most one entry per key that
        // the cut left between a slot's write and its entry's removal (a leftover, which goes
        // once old).
        for key in &keys {
            live.commit("t", &[put(key.clone(), 2)]).await.unwrap();
        }
        assert_eq!(
            live.scan("t", scan).await.unwrap().len(),
            2,
            "budget {budget}"
        );
        for key in &keys {
            live.commit("t", &[delete(key.clone())]).await.unwrap();
        }
        assert!(live.scan("t", scan).await.unwrap().is_empty());
        let left = entries(&*store, "t").await;
        assert!(left <= 1 + keys.len(), "budget {budget}: {left} entries");
        if done {
            assert_eq!(left, 1, "budget {budget}: the batch finished");
            whole += 1;
        }
    }
    assert!(whole > 0, "some budget let the batch finish");
}
