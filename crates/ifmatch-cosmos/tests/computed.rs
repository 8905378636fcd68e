//! Computed properties over the endpoint (memory tables, no socket): declared when a container
//! is made or replaced (one past each of Azure's limits refused), read by queries in `SELECT`,
//! `WHERE` and `ORDER BY` as stored properties are, and left out of `SELECT *`.

use crate::common;

use std::sync::Arc;

use common::{created, signed};
use http::Method;
use ifmatch_azure::SystemEnv;
use ifmatch_cosmos::Endpoint;
use ifmatch_table::MemoryTables;
use serde_json::{Value, json};

type Service = Endpoint<Arc<MemoryTables>, SystemEnv>;

const DOCS: &str = "/dbs/shop/colls/people/docs";

async fn query(e: &Service, text: &str) -> Vec<Value> {
    let body = json!({ "query": text, "parameters": [] }).to_string();
    let (status, json, _) =
        signed(e, Method::POST, DOCS, &common::CROSS_PARTITION_QUERY, &body).await;
    assert_eq!(status, 200, "{text}: {json}");
    json["Documents"].as_array().unwrap().clone()
}

#[tokio::test]
async fn queries_read_computed_properties_as_stored_ones_and_a_wildcard_leaves_them_out() {
    let e = Endpoint::new(Arc::new(MemoryTables::new()), SystemEnv);
    created(&e, "/dbs", r#"{"id":"shop"}"#).await;
    let container = |properties: Value| {
        json!({ "id": "people", "partitionKey": { "paths": ["/pk"] }, "computedProperties": properties })
            .to_string()
    };
    let lower = json!({ "name": "cp_lower", "query": "SELECT VALUE LOWER(c.name) FROM c" });
    // One past Azure's limits, and a query of another form, refused when made.
    let many: Vec<Value> = (0..21)
        .map(|n| json!({ "name": format!("cp{n}"), "query": "SELECT VALUE c.n FROM c" }))
        .collect();
    let colls = "/dbs/shop/colls";
    for bad in [
        json!(many),
        json!([{ "name": "cp", "query": "SELECT VALUE c.n FROM c WHERE c.n > 1" }]),
        json!([{ "name": "id", "query": "SELECT VALUE c.n FROM c" }]),
    ] {
        let (status, json, _) = signed(&e, Method::POST, colls, &[], &container(bad)).await;
        assert_eq!(status, 400, "{json}");
    }
    let made = signed(&e, Method::POST, colls, &[], &container(json!([lower]))).await;
    assert_eq!(made.0, 201, "{}", made.1);
    assert_eq!(made.1["computedProperties"][0]["name"], "cp_lower");
    for (id, name) in [("1", "Zoe"), ("2", "ann"), ("3", "Bob")] {
        let body = json!({ "id": id, "pk": "a", "name": name }).to_string();
        let headers = [("x-ms-documentdb-partitionkey", r#"["a"]"#)];
        assert_eq!(signed(&e, Method::POST, DOCS, &headers, &body).await.0, 201);
    }
    let sorted = query(&e, "SELECT VALUE c.cp_lower FROM c ORDER BY c.cp_lower").await;
    assert_eq!(sorted, [json!("ann"), json!("bob"), json!("zoe")]);
    let found = query(&e, "SELECT c.id FROM c WHERE c.cp_lower = 'zoe'").await;
    assert_eq!(found, [json!({ "id": "1" })]);
    let all = query(&e, "SELECT * FROM c WHERE c.id = '3'").await;
    assert!(all[0].get("cp_lower").is_none(), "{}", all[0]);
    assert_eq!(all[0]["name"], "Bob");
    // Replaced: a new computed property is read at once, for every item.
    let upper = json!({ "name": "cp_upper", "query": "SELECT VALUE UPPER(c.name) FROM c" });
    let path = "/dbs/shop/colls/people";
    let replaced = signed(
        &e,
        Method::PUT,
        path,
        &[],
        &container(json!([lower, upper])),
    )
    .await;
    assert_eq!(replaced.0, 200, "{}", replaced.1);
    let upper = query(&e, "SELECT VALUE c.cp_upper FROM c WHERE c.id = '2'").await;
    assert_eq!(upper, [json!("ANN")]);
    // A document as read keeps only what it stores.
    let headers = [("x-ms-documentdb-partitionkey", r#"["a"]"#)];
    let read = signed(&e, Method::GET, &format!("{DOCS}/2"), &headers, "").await;
    assert!(read.1.get("cp_upper").is_none());
}
