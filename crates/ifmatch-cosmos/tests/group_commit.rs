//! Commits that wait for their container's turn are committed together
//! (`src/front/commit/group.rs`): under many writers a commit of the store carries several,
//! no acknowledged write is lost, the change feed keeps one entry a document, and a check that
//! fails is its own request's alone. Over the memory store, its commit made as slow as a
//! disk's sync so that writers wait for their turn.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{created, signed};
use http::Method;
use ifmatch_azure::SystemEnv;
use ifmatch_cosmos::Endpoint;
use ifmatch_table::{Change, Entity, EntityKey, MemoryTables, Scan, TableError, Tables};
use serde_json::json;

/// The memory store, each commit taking `SYNC` first, counting the commits that applied and
/// those a check refused, and the reads of a change feed's counter.
#[derive(Clone, Default)]
struct Slow {
    tables: Arc<MemoryTables>,
    applied: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
    counter_reads: Arc<AtomicUsize>,
}

const SYNC: Duration = Duration::from_millis(2);

impl Tables for Slow {
    async fn create_table(&self, name: &str) -> Result<bool, TableError> {
        self.tables.create_table(name).await
    }

    async fn delete_table(&self, name: &str) -> Result<bool, TableError> {
        self.tables.delete_table(name).await
    }

    async fn tables(&self, after: &str, limit: usize) -> Result<Vec<String>, TableError> {
        self.tables.tables(after, limit).await
    }

    async fn get(&self, table: &str, key: &EntityKey) -> Result<Option<Entity>, TableError> {
        if key.0 == "~feed" && key.1.is_empty() {
            self.counter_reads.fetch_add(1, Ordering::SeqCst);
        }
        self.tables.get(table, key).await
    }

    async fn scan(&self, table: &str, scan: Scan<'_>) -> Result<Vec<Entity>, TableError> {
        self.tables.scan(table, scan).await
    }

    async fn commit(&self, table: &str, changes: &[Change]) -> Result<(), TableError> {
        tokio::time::sleep(SYNC).await;
        let committed = self.tables.commit(table, changes).await;
        let count = match committed {
            Ok(()) => &self.applied,
            Err(TableError::Conflict { .. }) => &self.refused,
            Err(_) => return committed,
        };
        count.fetch_add(1, Ordering::SeqCst);
        committed
    }
}

type Service = Endpoint<Slow, SystemEnv>;

async fn container(service: &Service, id: &str) -> String {
    let body = json!({
        "id": id,
        "partitionKey": { "paths": ["/pk"], "kind": "Hash" },
        "uniqueKeyPolicy": { "uniqueKeys": [{ "paths": ["/name"] }] },
    });
    let made = signed(
        service,
        Method::POST,
        "/dbs/db/colls",
        &[],
        &body.to_string(),
    )
    .await;
    assert_eq!(made.0, 201, "{}", made.1);
    format!("/dbs/db/colls/{id}/docs")
}

/// Adds one to document `id`'s `n`: read, replace with `If-Match`, again on 412.
async fn increment(service: &Service, docs: &str, id: &str, pk: &str) {
    let link = format!("{docs}/{id}");
    let header = json!([pk]).to_string();
    let key = [("x-ms-documentdb-partitionkey", header.as_str())];
    loop {
        let (status, mut doc, headers) = signed(service, Method::GET, &link, &key, "").await;
        assert_eq!(status, 200, "{doc}");
        let etag = headers["etag"].to_str().unwrap().to_owned();
        doc["n"] = json!(doc["n"].as_i64().unwrap() + 1);
        let condition = [key[0], ("if-match", etag.as_str())];
        let body = doc.to_string();
        match signed(service, Method::PUT, &link, &condition, &body).await {
            (200, ..) => return,
            (412, ..) => continue,
            (status, json, _) => panic!("{status}: {json}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_commits_go_together_and_none_is_lost() {
    let store = Slow::default();
    let service = Arc::new(Endpoint::new(store.clone(), SystemEnv));
    created(&*service, "/dbs", r#"{"id":"db"}"#).await;
    let docs = container(&service, "counters").await;
    const DOCUMENTS: usize = 16;
    let pk = |i: usize| format!("p{}", i % 4);
    for i in 0..DOCUMENTS {
        let body = json!({ "id": format!("d{i}"), "pk": pk(i), "n": 0, "name": format!("n{i}") });
        let header = json!([pk(i)]).to_string();
        let key = [("x-ms-documentdb-partitionkey", header.as_str())];
        let made = signed(&*service, Method::POST, &docs, &key, &body.to_string()).await;
        assert_eq!(made.0, 201, "{}", made.1);
    }

    // 32 writers, 20 increments each, over the 16 documents.
    let applied_before = store.applied.load(Ordering::SeqCst);
    let writers: Vec<_> = (0..32)
        .map(|writer| {
            let (service, docs) = (service.clone(), docs.clone());
            tokio::spawn(async move {
                for round in 0..20 {
                    let i = (writer + round) % DOCUMENTS;
                    increment(&service, &docs, &format!("d{i}"), &pk(i)).await;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let applied = store.applied.load(Ordering::SeqCst) - applied_before;
    assert!(
        applied < 32 * 20,
        "{applied} commits of the store for {} writes: none went together",
        32 * 20
    );

    let mut total = 0;
    for i in 0..DOCUMENTS {
        let header = json!([pk(i)]).to_string();
        let key = [("x-ms-documentdb-partitionkey", header.as_str())];
        let (_, doc, _) = signed(&*service, Method::GET, &format!("{docs}/d{i}"), &key, "").await;
        total += doc["n"].as_i64().unwrap();
    }
    assert_eq!(total, 32 * 20, "every acknowledged increment is there");

    // The feed: each document once, and one entry a document in the store (and its counter).
    let feed = [
        ("a-im", "Incremental feed"),
        ("x-ms-max-item-count", "1000"),
    ];
    let (status, page, _) = signed(&*service, Method::GET, &docs, &feed, "").await;
    assert_eq!(status, 200, "{page}");
    let mut ids: Vec<_> = (page["Documents"].as_array().unwrap().iter())
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), DOCUMENTS, "{page}");
    let scan = Scan {
        from: Some(("~feed", "")),
        partition: Some("~feed"),
        limit: 1000,
    };
    let entries = store.tables.scan("~cosmos~localhost~db/counters", scan);
    assert_eq!(entries.await.unwrap().len(), DOCUMENTS + 1);
}

/// Writers racing on one document: those that waited for the turn while the winner wrote it
/// are refused by the document as stored, not each by a commit of the store (a transaction and
/// a sync each, one after the other, for every loser of every round).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_waited_while_its_document_was_written_costs_the_store_nothing() {
    let store = Slow::default();
    let service = Arc::new(Endpoint::new(store.clone(), SystemEnv));
    let made = signed(&*service, Method::POST, "/dbs", &[], r#"{"id":"db"}"#).await;
    assert_eq!(made.0, 201);
    let docs = container(&service, "one").await;
    let key = [("x-ms-documentdb-partitionkey", r#"["p"]"#)];
    let body = json!({ "id": "d", "pk": "p", "n": 0, "name": "d" }).to_string();
    assert_eq!(
        signed(&*service, Method::POST, &docs, &key, &body).await.0,
        201
    );
    let (applied, refused) = (store.applied.clone(), store.refused.clone());
    let before = (
        applied.load(Ordering::SeqCst),
        refused.load(Ordering::SeqCst),
    );
    let writers: Vec<_> = (0..16)
        .map(|_| {
            let (service, docs) = (service.clone(), docs.clone());
            tokio::spawn(async move {
                for _ in 0..10 {
                    increment(&service, &docs, "d", "p").await;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let applied = applied.load(Ordering::SeqCst) - before.0;
    let refused = refused.load(Ordering::SeqCst) - before.1;
    assert_eq!(applied, 160, "one commit an increment");
    let (_, doc, _) = signed(&*service, Method::GET, &format!("{docs}/d"), &key, "").await;
    assert_eq!(doc["n"], 160, "every acknowledged increment is there");
    assert!(
        refused < applied / 4,
        "{refused} commits of the store refused for {applied} applied (without the point \
         reads: about 1,200)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unique_value_taken_in_a_group_goes_to_one_writer() {
    let service = Arc::new(Endpoint::new(Slow::default(), SystemEnv));
    created(&*service, "/dbs", r#"{"id":"db"}"#).await;
    let docs = container(&service, "names").await;
    // Sixteen writers create documents of one partition at once, two names between them.
    let writers: Vec<_> = (0..16)
        .map(|i| {
            let (service, docs) = (service.clone(), docs.clone());
            tokio::spawn(async move {
                let body = json!({ "id": format!("u{i}"), "pk": "p", "name": i % 2 });
                let key = [("x-ms-documentdb-partitionkey", r#"["p"]"#)];
                signed(&*service, Method::POST, &docs, &key, &body.to_string()).await
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for writer in writers {
        let (status, json, _) = writer.await.unwrap();
        assert!(status == 201 || status == 409, "{status}: {json}");
        statuses.push(status);
    }
    let created = statuses.iter().filter(|&&s| s == 201).count();
    assert_eq!(created, 2, "one writer a name: {statuses:?}");
}

/// A commit numbers its changes from the change feed's counter as the last commit of its
/// container on this instance left it, reading nothing first; a counter another instance
/// moved since is refused by the store's check, read again, and the commit lands with the next
/// number: the feed has every document once, in the order they were written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_reads_the_feed_counter_only_after_another_instance_moved_it() {
    let store = Slow::default();
    let (a, b) = (
        Endpoint::new(store.clone(), SystemEnv),
        Endpoint::new(store.clone(), SystemEnv),
    );
    created(&a, "/dbs", r#"{"id":"db"}"#).await;
    let docs = container(&a, "kept").await;
    let (reads, refused) = (store.counter_reads.clone(), store.refused.clone());
    assert_eq!(create(&a, &docs, "1").await, 201);
    let read = reads.load(Ordering::SeqCst);
    assert_eq!(create(&a, &docs, "2").await, 201);
    assert_eq!(
        reads.load(Ordering::SeqCst),
        read,
        "a's second commit read the counter"
    );
    assert_eq!(create(&b, &docs, "3").await, 201);
    let before = refused.load(Ordering::SeqCst);
    assert_eq!(create(&a, &docs, "4").await, 201);
    assert_eq!(
        refused.load(Ordering::SeqCst),
        before + 1,
        "b's move went unchecked"
    );
    let feed = [("a-im", "Incremental feed")];
    let (status, page, _) = signed(&a, Method::GET, &docs, &feed, "").await;
    assert_eq!(status, 200, "{page}");
    let ids: Vec<_> = (page["Documents"].as_array().unwrap().iter())
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["1", "2", "3", "4"], "{page}");

    // The container deleted and made again: the counter a kept is of the old one, and the new
    // container's first document is the first of its feed.
    let deleted = signed(&b, Method::DELETE, "/dbs/db/colls/kept", &[], "").await;
    assert_eq!(deleted.0, 204, "{}", deleted.1);
    let docs = container(&b, "kept").await;
    assert_eq!(create(&a, &docs, "5").await, 201);
    let (status, page, _) = signed(&a, Method::GET, &docs, &feed, "").await;
    assert_eq!(status, 200, "{page}");
    let ids: Vec<_> = (page["Documents"].as_array().unwrap().iter())
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["5"], "{page}");
}

/// Creates document `id` in partition `p` of `docs`: the status.
async fn create(service: &Service, docs: &str, id: &str) -> u16 {
    let body = json!({ "id": id, "pk": "p", "name": id }).to_string();
    let key = [("x-ms-documentdb-partitionkey", r#"["p"]"#)];
    signed(service, Method::POST, docs, &key, &body).await.0
}
