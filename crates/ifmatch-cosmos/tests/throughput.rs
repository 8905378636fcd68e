//! Request units over the endpoint (memory tables, no socket): each answer charges what its
//! work costs by the model of `charge.rs`, Azure's published costs.

mod common;

use std::sync::Arc;

use common::{send, signed};
use http::Method;
use ifmatch_azure::SystemEnv;
use ifmatch_cosmos::Endpoint;
use ifmatch_cosmos::charge;
use ifmatch_table::MemoryTables;

type Service = Endpoint<Arc<MemoryTables>, SystemEnv>;

const DOCS: &str = "/dbs/shop/colls/carts/docs";

async fn setup() -> Service {
    let e = Endpoint::new(Arc::new(MemoryTables::new()), SystemEnv);
    let db = signed(&e, Method::POST, "/dbs", &[], r#"{"id":"shop"}"#).await;
    assert_eq!(db.0, 201);
    let container = r#"{"id":"carts","partitionKey":{"paths":["/pk"],"kind":"Hash"}}"#;
    let made = signed(&e, Method::POST, "/dbs/shop/colls", &[], container).await;
    assert_eq!(made.0, 201);
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
            let headers = [
                ("x-ms-documentdb-isquery", "true"),
                ("content-type", "application/query+json"),
                ("x-ms-documentdb-query-enablecrosspartition", "true"),
            ];
            let (status, json, headers) = signed(e, Method::POST, DOCS, &headers, &body).await;
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
