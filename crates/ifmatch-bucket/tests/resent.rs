//! A put the store carried out but whose answer was lost, which object_store then resends and
//! the store refuses (the object the first try made is there), is known as done: a record or
//! an entity written once, its index entry kept, and a true conflict with another writer still
//! refused. Through a proxy that loses the answer of every other PUT.

use crate::common::{Losing, Served};

use std::time::{Duration, UNIX_EPOCH};

use ifmatch_blob::{Content, Key, PutMode, Record, Records, Scan, StoreError};
use ifmatch_bucket::{BucketRecords, BucketTables};
use ifmatch_table::Scan as Rows;
use ifmatch_table::{Change, Expected, TableError, Tables, conformance};

fn record(generation: u64, container: bool) -> Record {
    let at = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let etag = ifmatch_core::strong_etag(&generation.to_be_bytes());
    if container {
        Record::container(etag, at)
    } else {
        Record::blob(etag, at, Content::new(format!("o{generation}"), 1, None))
    }
    .with_generation(generation)
}

/// `ifmatch serve`, and the proxy in front of it that loses every other PUT's answer.
async fn losing_answers() -> (Served, Losing) {
    let served = Served::start().await;
    let losing = Losing::start(&served.endpoint).await;
    (served, losing)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_put_whose_answer_was_lost_is_known_done() {
    let (served, losing) = losing_answers().await;
    let records = BucketRecords::new(losing.client(), "r");
    let direct = BucketRecords::new(served.client(), "r");
    let container = Key::Container("c".into());
    records
        .put(&container, &record(1, true), PutMode::Create)
        .await
        .unwrap();
    let blob = |i: usize| Key::Blob("c".into(), format!("b{i}"));
    let (first, second, third) = (record(1, false), record(2, false), record(3, false));
    for i in 0..4 {
        let key = blob(i);
        let made = records.put(&key, &first, PutMode::Create).await;
        made.expect("a creation whose answer was lost");
        let updated = records.put(&key, &second, PutMode::Update(1)).await;
        updated.expect("an update whose answer was lost");
    }
    let scan = Scan {
        container: "c",
        prefix: "",
        from: "",
        limit: 100,
    };
    let listed = direct.list(scan).await.unwrap();
    let names: Vec<(&str, u64)> = (listed.iter())
        .map(|(name, record)| (name.as_str(), record.generation))
        .collect();
    let want: Vec<(String, u64)> = (0..4).map(|i| (format!("b{i}"), 2)).collect();
    let want: Vec<(&str, u64)> = want.iter().map(|(n, g)| (n.as_str(), *g)).collect();
    assert_eq!(names, want, "each written once, each listed");

    // Another writer's object is still told from one's own.
    let b0 = blob(0);
    let again = records.put(&b0, &third, PutMode::Create).await;
    assert!(
        matches!(again, Err(StoreError::AlreadyExists { .. })),
        "{again:?}"
    );
    let stale = records.put(&b0, &third, PutMode::Update(1)).await;
    assert!(
        matches!(stale, Err(StoreError::Conflict { .. })),
        "{stale:?}"
    );

    let deleted = records.delete(&b0, 2).await;
    deleted.expect("a deletion whose answer was lost");
    assert!(direct.get(&b0).await.unwrap().is_none());
    assert!(direct.get(&blob(1)).await.unwrap().is_some());
    assert!(
        losing.puts() >= 20,
        "answers lost and resent: {}",
        losing.puts()
    );
}

const ALL: Rows<'static> = Rows {
    from: None,
    partition: None,
    limit: 100,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entity_commit_whose_answer_was_lost_is_known_done() {
    let (served, losing) = losing_answers().await;
    let tables = BucketTables::new(losing.client(), "t");
    let direct = BucketTables::new(served.client(), "t");
    tables.create_table("t").await.unwrap();
    let insert = |row: &str| Change {
        key: ("p".into(), row.into()),
        expected: Expected::Absent,
        write: Some(conformance::entity("p", row, 1, 1)),
    };
    tables
        .commit("t", &[insert("a")])
        .await
        .expect("one insert");
    let both = [insert("b"), insert("c")];
    tables.commit("t", &both).await.expect("a batch of two");
    let rows: Vec<String> = (direct.scan("t", ALL).await.unwrap())
        .into_iter()
        .map(|entity| entity.row_key)
        .collect();
    assert_eq!(rows, ["a", "b", "c"], "each written once, each listed");
    let again = tables.commit("t", &[insert("a")]).await;
    assert!(
        matches!(again, Err(TableError::Conflict { .. })),
        "{again:?}"
    );
    assert!(
        losing.puts() >= 10,
        "answers lost and resent: {}",
        losing.puts()
    );
}
