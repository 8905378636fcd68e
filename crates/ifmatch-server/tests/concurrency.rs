//! No lost update: concurrent conditional writes to one blob over real sockets.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Server, code, header};

/// Reads the counter, adds one, writes it back with If-Match; on 412, starts over.
async fn increment(s: &Server, path: &str) -> usize {
    let mut conflicts = 0;
    loop {
        let r = s.get(path, &[]).await;
        assert_eq!(r.status(), 200);
        let tag = header(&r, "etag").unwrap();
        let value: u64 = r.text().await.unwrap().parse().unwrap();
        let r = s
            .put(path, &[("if-match", &tag)], (value + 1).to_string())
            .await;
        match r.status().as_u16() {
            201 => return conflicts,
            412 => {
                assert_eq!(code(&r).as_deref(), Some("ConditionNotMet"));
                conflicts += 1;
            }
            other => panic!("unexpected {other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_clients_five_hundred_increments_none_lost() {
    const CLIENTS: usize = 32;
    const INCREMENTS: usize = 500;
    let s = Arc::new(Server::start().await);
    s.create_container("cnt").await;
    s.put_blob("/cnt/counter", b"0").await;

    let tickets = Arc::new(AtomicUsize::new(INCREMENTS));
    let conflicts = Arc::new(AtomicUsize::new(0));
    let started = std::time::Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (s, tickets, conflicts) = (s.clone(), tickets.clone(), conflicts.clone());
            tokio::spawn(async move {
                let mut done = 0;
                while tickets
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    conflicts.fetch_add(increment(&s, "/cnt/counter").await, Ordering::Relaxed);
                    done += 1;
                }
                done
            })
        })
        .collect();
    let mut successes = 0;
    for client in clients {
        successes += client.await.unwrap();
    }
    assert_eq!(successes, INCREMENTS);
    let r = s.get("/cnt/counter", &[]).await;
    let tag = header(&r, "etag").unwrap();
    let body = r.text().await.unwrap();
    assert_eq!(
        body,
        INCREMENTS.to_string(),
        "every successful write counted exactly once"
    );
    assert_eq!(tag, common::sha256_tag(body.as_bytes()));
    let conflicts = conflicts.load(Ordering::Relaxed);
    assert!(conflicts > 0, "the test did not contend");
    let elapsed = started.elapsed();
    eprintln!(
        "{INCREMENTS} increments by {CLIENTS} clients on one instance in {elapsed:?} \
         ({:.0} commits/s), {conflicts} answered 412 and retried",
        INCREMENTS as f64 / elapsed.as_secs_f64()
    );
    // A counter is kept in its record: no write, won or lost, left an object behind.
    assert_eq!(
        std::fs::read_dir(s.dir.path().join("objects"))
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_writers_holding_the_same_etag_exactly_one_wins() {
    let s = Arc::new(Server::start().await);
    s.create_container("cnt").await;
    for round in 0..10 {
        let tag = s
            .put_blob("/cnt/doc", format!("round {round}").as_bytes())
            .await;
        let writers: Vec<_> = (0..16)
            .map(|i| {
                let (s, tag) = (s.clone(), tag.clone());
                tokio::spawn(async move {
                    s.put("/cnt/doc", &[("if-match", &tag)], format!("writer {i}"))
                        .await
                        .status()
                        .as_u16()
                })
            })
            .collect();
        ifmatch_tower::conformance::one_won(writers).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_create_only_writers_exactly_one_wins() {
    let s = Arc::new(Server::start().await);
    s.create_container("cnt").await;
    let writers: Vec<_> = (0..16)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                let r = s
                    .put(
                        "/cnt/once",
                        &[("if-none-match", "*")],
                        format!("writer {i}"),
                    )
                    .await;
                (r.status().as_u16(), code(&r))
            })
        })
        .collect();
    let mut results = Vec::new();
    for w in writers {
        results.push(w.await.unwrap());
    }
    assert_eq!(
        results.iter().filter(|(s, _)| *s == 201).count(),
        1,
        "{results:?}"
    );
    assert!(
        results
            .iter()
            .filter(|(s, _)| *s != 201)
            .all(|(s, c)| *s == 409 && c.as_deref() == Some("BlobAlreadyExists"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_lease_acquires_exactly_one_wins() {
    let s = Arc::new(Server::start().await);
    s.create_container("cnt").await;
    s.put_blob("/cnt/locked", b"x").await;
    let takers: Vec<_> = (0..16)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move {
                let r = s.acquire("/cnt/locked", "-1").await;
                (r.status().as_u16(), header(&r, "x-ms-lease-id"))
            })
        })
        .collect();
    let mut results = Vec::new();
    for t in takers {
        results.push(t.await.unwrap());
    }
    let winners: Vec<_> = results.iter().filter(|(s, _)| *s == 201).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    assert_eq!(results.iter().filter(|(s, _)| *s == 409).count(), 15);
    let id = winners[0].1.clone().unwrap();
    assert_eq!(
        s.put("/cnt/locked", &[("x-ms-lease-id", &id)], b"mine".to_vec())
            .await
            .status(),
        201
    );
}
