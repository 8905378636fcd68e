//! The Cosmos DB endpoint under heavy request bodies: a test binary of its own, so that what it
//! costs the machine (it parses 2 MB bodies of a million values, again and again) never runs
//! beside the timed tests of `cosmos.rs`.

use crate::common;

use std::time::Duration;

use common::cosmos::{Container, PointReader, peak_mib};

/// Queries whose parameter is a million zeros (a 2 MB body that is about 80 MB once read), eight
/// at once, again and again: each is answered (200, or 429 with a time to retry after while the
/// large requests in flight hold the memory budget), a parameter named many times is held once,
/// the server's peak memory stays within the figure `docs/cosmos.md` gives, and a point read
/// is served meanwhile, quickly. Before the budget, one such query grew the server by about
/// 330 MiB and eight by a gigabyte.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queries_with_million_element_parameters_stay_within_the_memory_budget() {
    let container = Container::anonymous("heavy").await;
    let (docs, http) = (container.docs.clone(), container.http.clone());
    for i in 0..5 {
        let body = serde_json::json!({ "id": format!("d{i}"), "pk": "p", "n": i });
        container.create_in_p(body).await;
    }
    let before = peak_mib(container.server.0.id());
    let zeros = format!("[{}0]", "0,".repeat(1_000_000));
    let queries = [
        // Not named at all: the cost was in reading the parameters.
        "SELECT VALUE c.id FROM c".to_owned(),
        // Named two hundred times: held once.
        format!(
            "SELECT VALUE c.id FROM c WHERE c.n IN ({}, 0, 1, 2, 3, 4)",
            vec!["ARRAY_LENGTH(@big)"; 200].join(", ")
        ),
    ];
    let reader = PointReader::start(&http, format!("{docs}/d0"));
    let mut senders = Vec::new();
    for sender in 0..8 {
        let (docs, http) = (docs.clone(), http.clone());
        let body = format!(
            r#"{{"query": {}, "parameters": [{{"name": "@big", "value": {zeros}}}]}}"#,
            serde_json::Value::from(queries[sender % 2].clone())
        );
        assert!(body.len() > 2_000_000 && body.len() < 2_100_000);
        senders.push(tokio::spawn(async move {
            // As the SDKs do: a 429 is retried after the time it names, until served twice.
            let (mut served, mut throttled) = (0, 0);
            while served < 2 {
                assert!(throttled < 400, "never served");
                let answer = http
                    .post(&docs)
                    .header("x-ms-documentdb-isquery", "True")
                    .header("content-type", "application/query+json")
                    .header("x-ms-documentdb-partitionkey", r#"["p"]"#)
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                let status = answer.status().as_u16();
                let retry = answer.headers().get("x-ms-retry-after-ms").cloned();
                let said = answer.text().await.unwrap();
                match status {
                    200 => {
                        served += 1;
                        let page: serde_json::Value = serde_json::from_str(&said).unwrap();
                        assert_eq!(page["_count"], 5, "{said}");
                    }
                    429 => {
                        throttled += 1;
                        assert!(said.contains("TooManyRequests"), "{said}");
                        let retry = retry.expect("a 429 says when to retry");
                        let ms = retry.to_str().unwrap().parse().unwrap();
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                    _ => panic!("{status}: {}", &said[..said.len().min(300)]),
                }
            }
            (served, throttled)
        }));
    }
    let (mut served, mut throttled) = (0, 0);
    for sender in senders {
        let (s, t) = sender.await.unwrap();
        (served, throttled) = (served + s, throttled + t);
    }
    let reads = reader.stop().await;
    let peak = peak_mib(container.server.0.id());
    eprintln!(
        "{served} served, {throttled} throttled; meanwhile {reads}; peak memory {before} MiB \
         before, {peak} MiB after"
    );
    assert_eq!(served, 16);
    reads.assert_served();
    assert!(peak < 384, "the server's peak resident memory: {peak} MiB");
}
