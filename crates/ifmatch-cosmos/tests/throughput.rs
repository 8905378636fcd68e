//! Request units over the endpoint (memory tables, no socket): each answer charges what its
//! work costs by the model of `charge.rs`, Azure's published costs.

use crate::common;

use std::sync::Arc;

use common::{created, send, signed};
use http::Method;
use ifmatch_azure::SystemEnv;
use ifmatch_cosmos::Endpoint;
use ifmatch_cosmos::charge;
use ifmatch_table::MemoryTables;

type Service = Endpoint<Arc<MemoryTables>, SystemEnv>;

const DOCS: &str = "/dbs/shop/colls/carts/docs";

async fn setup() -> Service {
    let e = Endpoint::new(Arc::new(MemoryTables::new()), SystemEnv);
    common::shop(&e).await;
    e
}

/// The charge an answer's headers carry.
fn charged(headers: &http::HeaderMap) -> f64 {
    headers["x-ms-request-charge"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Creates the document `id` in partition `a` with a `pad` of `bytes`: its charge.
async fn create(e: &Service, id: &str, bytes: usize) -> f64 {
    let body = format!(r#"{{"id":"{id}","pk":"a","pad":"{}"}}"#, "x".repeat(bytes));
    let headers = [("x-ms-documentdb-partitionkey", r#"["a"]"#)];
    let (status, _, headers) = signed(e, Method::POST, DOCS, &headers, &body).await;
    assert_eq!(status, 201);
    charged(&headers)
}

#[tokio::test]
async fn each_answer_charges_what_its_work_costs() {
    let e = setup().await;
    // Sizes as stored: the body with its system properties, a few bytes either way.
    let near = |a: f64, b: f64| (a - b).abs() < 0.1;
    // Writes and point reads by size, as Azure's table says.
    assert!(near(create(&e, "small", 500).await, 4.95));
    let big = create(&e, "big", 64 * 1024 - 40).await;
    assert!(near(big, 22.67), "{big}");
    let partition = [("x-ms-documentdb-partitionkey", r#"["a"]"#)];
    let read = |id: &'static str| {
        let e = &e;
        async move {
            let path = format!("{DOCS}/{id}");
            let (status, _, headers) = signed(e, Method::GET, &path, &partition, "").await;
            assert_eq!(status, 200);
            charged(&headers)
        }
    };
    assert_eq!(read("small").await, 1.0);
    assert!(near(read("big").await, 4.76));
    // A read of nothing costs a read; metadata 1; a request refused unsigned nothing.
    let missing = signed(&e, Method::GET, &format!("{DOCS}/none"), &partition, "").await;
    assert_eq!((missing.0, charged(&missing.2)), (404, 1.0));
    let listed = signed(&e, Method::GET, "/dbs", &[], "").await;
    assert_eq!(charged(&listed.2), charge::METADATA);
    let refused = send(&e, Method::GET, "/dbs", &[], "").await;
    assert_eq!(refused.status(), 401);
    assert_eq!(charged(refused.headers()), 0.0);

    // A query pays to run, per document it reads, and for what it returns.
    for n in 0..200 {
        create(&e, &format!("n{n}"), 10).await;
    }
    let query = |text: &str| {
        let body = serde_json::json!({ "query": text, "parameters": [] }).to_string();
        let e = &e;
        async move {
            let (status, json, headers) =
                signed(e, Method::POST, DOCS, &common::CROSS_PARTITION_QUERY, &body).await;
            assert_eq!(status, 200, "{json}");
            charged(&headers)
        }
    };
    let reading = |documents: f64| charge::QUERY_BASE + documents * charge::PER_EXAMINED;
    // A filter reads every document (no index here); its page's body is small (1 RU).
    let one = query("SELECT VALUE c.id FROM c WHERE c.id = 'n7'").await;
    assert!(near(one, reading(202.0) + 1.0), "{one}");
    let nothing = query("SELECT VALUE c.id FROM c WHERE c.id = 'none'").await;
    assert!(
        near(nothing, one),
        "{nothing}: the same reading, the same small body"
    );
    // A page of 100 stops reading at 100.
    let page = query("SELECT VALUE c.id FROM c").await;
    assert!(near(page, reading(100.0) + 1.0), "{page}");
    // Returned bytes cost as a read of them: whole documents, not their ids.
    let heavy = query("SELECT * FROM c WHERE c.id >= 'n' OR c.id = 'small'").await;
    assert!(heavy > page, "{heavy}");

    // A delete costs the write of what it deletes.
    let path = format!("{DOCS}/big");
    let deleted = signed(&e, Method::DELETE, &path, &partition, "").await;
    assert_eq!(deleted.0, 204);
    assert!(near(charged(&deleted.2), 22.67));
}

/// A query of the offers for `link`, as the SDKs' `get_throughput` sends it: the offers found.
async fn offers_of(e: &Service, link: &str) -> Vec<serde_json::Value> {
    let body = serde_json::json!({
        "query": "SELECT * FROM root r WHERE r.resource=@link",
        "parameters": [{ "name": "@link", "value": link }],
    });
    let headers = [
        ("x-ms-documentdb-isquery", "true"),
        ("content-type", "application/query+json"),
    ];
    let (status, json, _) = signed(e, Method::POST, "/offers", &headers, &body.to_string()).await;
    assert_eq!(status, 200, "{json}");
    json["Offers"].as_array().unwrap().clone()
}

#[tokio::test]
async fn offers_are_given_read_queried_and_replaced_within_azures_limits() {
    let e = setup().await;
    // Made with none, in a database with none: Azure's least, 400 RU/s.
    let offers = offers_of(&e, "dbs/shop/colls/carts/").await;
    assert_eq!(offers.len(), 1);
    let offer = &offers[0];
    assert_eq!(offer["content"]["offerThroughput"], 400);
    assert_eq!(offer["offerVersion"], "V2");
    let id = offer["id"].as_str().unwrap();
    assert_eq!(offer["_self"], format!("offers/{id}/"));
    let path = format!("/offers/{id}");
    let (status, read, _) = signed(&e, Method::GET, &path, &[], "").await;
    assert_eq!((status, &read["content"]), (200, &offer["content"]));
    // Replaced: a multiple of 100 from 400; one past each bound refused.
    let mut replaced = offer.clone();
    for (bad, why) in [
        (300, "under 400"),
        (450, "not a multiple of 100"),
        (1_000_100, "past the most"),
    ] {
        replaced["content"]["offerThroughput"] = bad.into();
        let (status, json, _) = signed(&e, Method::PUT, &path, &[], &replaced.to_string()).await;
        assert_eq!(status, 400, "{why}: {json}");
    }
    replaced["content"]["offerThroughput"] = 1_000_000.into();
    let (status, json, _) = signed(&e, Method::PUT, &path, &[], &replaced.to_string()).await;
    assert_eq!(
        (status, &json["content"]["offerThroughput"]),
        (200, &1_000_000.into())
    );
    assert_ne!(json["_etag"], offer["_etag"]);

    // Autoscale, given when made: a multiple of 1000 from 1000.
    let made = |id: &str, header: (&'static str, String)| {
        let body = format!(r#"{{"id":"{id}","partitionKey":{{"paths":["/pk"]}}}}"#);
        let e = &e;
        async move {
            let headers = [(header.0, header.1.as_str())];
            signed(e, Method::POST, "/dbs/shop/colls", &headers, &body)
                .await
                .0
        }
    };
    let autoscale = |max: u64| {
        (
            "x-ms-cosmos-offer-autopilot-settings",
            format!(r#"{{"maxThroughput":{max}}}"#),
        )
    };
    assert_eq!(made("s1", autoscale(1500)).await, 400);
    assert_eq!(made("s1", autoscale(0)).await, 400);
    assert_eq!(
        made("s1", ("x-ms-offer-throughput", "399".into())).await,
        400
    );
    assert_eq!(made("s1", autoscale(4000)).await, 201);
    let scaled = &offers_of(&e, "dbs/shop/colls/s1/").await[0];
    assert_eq!(
        scaled["content"]["offerAutopilotSettings"]["maxThroughput"],
        4000
    );
    assert_eq!(scaled["content"]["offerThroughput"], 400);

    // A database's throughput is shared by its containers that have none of their own.
    let headers = [("x-ms-offer-throughput", "1000")];
    let db = signed(&e, Method::POST, "/dbs", &headers, r#"{"id":"shared"}"#).await;
    assert_eq!(db.0, 201);
    let inner = r#"{"id":"inner","partitionKey":{"paths":["/pk"]}}"#;
    created(&e, "/dbs/shared/colls", inner).await;
    assert!(offers_of(&e, "dbs/shared/colls/inner/").await.is_empty());
    assert_eq!(
        offers_of(&e, "dbs/shared/").await[0]["content"]["offerThroughput"],
        1000
    );
    // Gone with what it was the offer of.
    assert_eq!(
        signed(&e, Method::DELETE, "/dbs/shared", &[], "").await.0,
        204
    );
    assert!(offers_of(&e, "dbs/shared/").await.is_empty());
    assert_eq!(signed(&e, Method::GET, &path, &[], "").await.0, 200);
    assert_eq!(
        signed(&e, Method::DELETE, "/dbs/shop/colls/carts", &[], "")
            .await
            .0,
        204
    );
    assert_eq!(signed(&e, Method::GET, &path, &[], "").await.0, 404);
}

#[tokio::test]
async fn held_to_its_offer_a_container_past_its_budget_is_answered_429_with_the_time_to_wait() {
    let e = Endpoint::new(Arc::new(MemoryTables::new()), SystemEnv)
        .with_enforced_throughput(Arc::default());
    common::shop(&e).await;
    // 400 RU/s: about 80 writes of 1 KB (4.95 RU each), and what refills meanwhile, then 429s.
    let mut written = 0;
    let started = std::time::Instant::now();
    let refused = loop {
        let body = format!(r#"{{"id":"d{written}","pk":"a"}}"#);
        let headers = [("x-ms-documentdb-partitionkey", r#"["a"]"#)];
        let (status, json, headers) = signed(&e, Method::POST, DOCS, &headers, &body).await;
        if status == 429 {
            break (json, headers);
        }
        assert_eq!(status, 201);
        written += 1;
        assert!(written < 2000, "never held");
    };
    // The budget and what it refilled while the loop ran (a loaded machine writes slower).
    let budget = 400.0 * (1.0 + started.elapsed().as_secs_f64());
    let spent = f64::from(written) * 4.95;
    assert!(
        spent >= 400.0 && spent <= budget + 4.95,
        "{written} writes, {budget} RU"
    );
    let (json, headers) = refused;
    assert_eq!(headers["x-ms-substatus"], "3200");
    assert_eq!(
        headers["x-ms-request-charge"], "0",
        "a request held back costs nothing"
    );
    let wait: u64 = headers["x-ms-retry-after-ms"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=1000).contains(&wait), "{wait}");
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .contains("Request rate is large")
    );
    // Metadata is not held; after the wait the container's documents are served again.
    assert_eq!(signed(&e, Method::GET, "/dbs", &[], "").await.0, 200);
    tokio::time::sleep(std::time::Duration::from_millis(wait + 20)).await;
    let headers = [("x-ms-documentdb-partitionkey", r#"["a"]"#)];
    let read = signed(&e, Method::GET, &format!("{DOCS}/d0"), &headers, "").await;
    assert_eq!(read.0, 200);
}
