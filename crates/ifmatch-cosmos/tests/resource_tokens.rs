//! Users, permissions and their resource tokens over the endpoint (memory tables, no socket):
//! every documented limit one past it refused, a token reaching exactly what its permission
//! names, and no more once the permission is replaced or deleted, or its database is gone.

use crate::common;

use std::sync::Arc;

use common::{created, send, signed};
use http::Method;
use ifmatch_azure::SystemEnv;
use ifmatch_cosmos::Endpoint;
use ifmatch_table::MemoryTables;
use serde_json::Value;

type Service = Endpoint<Arc<MemoryTables>, SystemEnv>;

const PERMISSIONS: &str = "/dbs/shop/users/ann/permissions";

async fn setup() -> Service {
    let e = Endpoint::new(Arc::new(MemoryTables::new()), SystemEnv);
    common::shop(&e).await;
    for (id, pk) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        let header = format!(r#"["{pk}"]"#);
        let body = format!(r#"{{"id":"{id}","pk":"{pk}"}}"#);
        let headers = [("x-ms-documentdb-partitionkey", header.as_str())];
        let made = signed(
            &e,
            Method::POST,
            "/dbs/shop/colls/carts/docs",
            &headers,
            &body,
        )
        .await;
        assert_eq!(made.0, 201);
    }
    created(&e, "/dbs/shop/users", r#"{"id":"ann"}"#).await;
    e
}

/// Creates a permission: its token.
async fn permit(e: &Service, body: &str) -> String {
    let (status, json, _) = signed(e, Method::POST, PERMISSIONS, &[], body).await;
    assert_eq!(status, 201, "{json}");
    json["_token"].as_str().unwrap().to_owned()
}

/// A request with a resource token: its status.
async fn with(e: &Service, token: &str, method: Method, path: &str, pk: Option<&str>) -> u16 {
    let mut headers = vec![("authorization", token)];
    if let Some(pk) = pk {
        headers.push(("x-ms-documentdb-partitionkey", pk));
    }
    let body = match method {
        Method::POST | Method::PUT => r#"{"id":"n1","pk":"a"}"#,
        _ => "",
    };
    send(e, method, path, &headers, body)
        .await
        .status()
        .as_u16()
}

#[tokio::test]
async fn every_limit_of_users_and_permissions_is_refused_one_past_it() {
    let e = setup().await;
    let body = r#"{"id":"p","permissionMode":"Read","resource":"dbs/shop/colls/carts"}"#;
    for (seconds, status) in [("9", 400), ("18001", 400), ("x", 400), ("10", 201)] {
        let asked = [("x-ms-documentdb-expiry-seconds", seconds)];
        let (got, json, _) = signed(&e, Method::POST, PERMISSIONS, &asked, body).await;
        assert_eq!(got, status, "{seconds}: {json}");
    }
    let asked = [("x-ms-documentdb-expiry-seconds", "18000")];
    let read = signed(&e, Method::GET, &format!("{PERMISSIONS}/p"), &asked, "").await;
    assert_eq!(read.0, 200);
    assert_eq!(
        signed(&e, Method::POST, PERMISSIONS, &[], body).await.0,
        409,
        "taken"
    );
    for bad in [
        r#"{"id":"q","permissionMode":"Write","resource":"dbs/shop/colls/carts"}"#,
        r#"{"id":"q","permissionMode":"All","resource":"dbs/other/colls/carts"}"#,
        r#"{"id":"q","permissionMode":"All","resource":"dbs/shop"}"#,
        r#"{"id":"q","permissionMode":"All","resource":"dbs/shop/colls/carts","resourcePartitionKey":"a"}"#,
        r#"{"id":"q","permissionMode":"All"}"#,
    ] {
        assert_eq!(
            signed(&e, Method::POST, PERMISSIONS, &[], bad).await.0,
            400,
            "{bad}"
        );
    }
    let nobody = "/dbs/shop/users/nobody/permissions";
    assert_eq!(signed(&e, Method::POST, nobody, &[], body).await.0, 404);
    assert_eq!(
        signed(&e, Method::POST, "/dbs/none/users", &[], r#"{"id":"u"}"#)
            .await
            .0,
        404
    );
    let renamed = signed(
        &e,
        Method::PUT,
        "/dbs/shop/users/ann",
        &[],
        r#"{"id":"bob"}"#,
    )
    .await;
    assert_eq!(renamed.0, 400);
}

#[tokio::test]
async fn a_token_reaches_what_its_permission_names_and_nothing_once_it_changes() {
    let e = setup().await;
    let docs = "/dbs/shop/colls/carts/docs";
    let a = Some(r#"["a"]"#);
    let b = Some(r#"["b"]"#);
    // One partition, every mode.
    let token = permit(
        &e,
        r#"{"id":"pa","permissionMode":"All","resource":"/dbs/shop/colls/carts/","resourcePartitionKey":["a"]}"#,
    )
    .await;
    assert_eq!(
        with(&e, &token, Method::GET, "/", None).await,
        200,
        "the account"
    );
    assert_eq!(
        with(&e, &token, Method::GET, &format!("{docs}/a1"), a).await,
        200
    );
    assert_eq!(with(&e, &token, Method::POST, docs, a).await, 201);
    assert_eq!(
        with(&e, &token, Method::GET, &format!("{docs}/b1"), b).await,
        403
    );
    assert_eq!(
        with(&e, &token, Method::GET, docs, None).await,
        403,
        "every partition"
    );
    assert_eq!(
        with(&e, &token, Method::GET, "/dbs/shop/colls/carts", None).await,
        200
    );
    assert_eq!(
        with(&e, &token, Method::DELETE, "/dbs/shop/colls/carts", None).await,
        403
    );
    assert_eq!(
        with(&e, &token, Method::GET, "/dbs/shop/users", None).await,
        403
    );
    assert_eq!(with(&e, &token, Method::POST, "/dbs", None).await, 403);
    let forged = token.replacen("ey", "ez", 1);
    assert_eq!(
        with(&e, &forged, Method::GET, &format!("{docs}/a1"), a).await,
        401
    );

    // One document, read only.
    let one = permit(
        &e,
        r#"{"id":"doc","permissionMode":"Read","resource":"dbs/shop/colls/carts/docs/a2"}"#,
    )
    .await;
    assert_eq!(
        with(&e, &one, Method::GET, &format!("{docs}/a2"), a).await,
        200
    );
    assert_eq!(
        with(&e, &one, Method::GET, &format!("{docs}/a1"), a).await,
        403
    );
    assert_eq!(
        with(&e, &one, Method::PUT, &format!("{docs}/a2"), a).await,
        403
    );

    // Replaced, its earlier tokens no longer hold; the new one does.
    let replaced = r#"{"id":"pa","permissionMode":"Read","resource":"dbs/shop/colls/carts"}"#;
    let (status, json, _) =
        signed(&e, Method::PUT, &format!("{PERMISSIONS}/pa"), &[], replaced).await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(
        with(&e, &token, Method::GET, &format!("{docs}/a1"), a).await,
        401
    );
    let fresh = json["_token"].as_str().unwrap();
    assert_eq!(
        with(&e, fresh, Method::GET, &format!("{docs}/b1"), b).await,
        200
    );
    let (_, listed, _) = signed(&e, Method::GET, PERMISSIONS, &[], "").await;
    let mut ids: Vec<&str> = (listed["Permissions"].as_array().unwrap().iter())
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["doc", "pa"]);

    // The user deleted, its permissions go; the database deleted, its users go.
    assert_eq!(
        signed(&e, Method::DELETE, "/dbs/shop/users/ann", &[], "")
            .await
            .0,
        204
    );
    assert_eq!(
        with(&e, fresh, Method::GET, &format!("{docs}/b1"), b).await,
        401
    );
    created(&e, "/dbs/shop/users", r#"{"id":"ann"}"#).await;
    assert_eq!(
        signed(&e, Method::GET, PERMISSIONS, &[], "").await.1["_count"],
        0
    );
    assert_eq!(
        signed(&e, Method::DELETE, "/dbs/shop", &[], "").await.0,
        204
    );
    created(&e, "/dbs", r#"{"id":"shop"}"#).await;
    let (_, users, _) = signed(&e, Method::GET, "/dbs/shop/users", &[], "").await;
    assert_eq!(users["Users"], Value::Array(Vec::new()));
}

/// A user has one permission a resource (with its partition): a second is 409, made or
/// replaced onto it; of two made at once, one is; a deleted one frees its resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_has_one_permission_a_resource() {
    let e = Arc::new(setup().await);
    let body = |id: &str, pk: &str| {
        format!(r#"{{"id":"{id}","permissionMode":"Read","resource":"dbs/shop/colls/carts"{pk}}}"#)
    };
    permit(&e, &body("whole", "")).await;
    permit(&e, &body("of-a", r#","resourcePartitionKey":["a"]"#)).await;
    let again = signed(&e, Method::POST, PERMISSIONS, &[], &body("again", "")).await;
    assert_eq!(again.0, 409, "{}", again.1);
    let onto = format!("{PERMISSIONS}/of-a");
    let replaced = signed(&e, Method::PUT, &onto, &[], &body("of-a", "")).await;
    assert_eq!(replaced.0, 409, "{}", replaced.1);
    // Fifty pairs racing for one partition's permission: one of each pair is made.
    for round in 0..50 {
        let pk = format!(r#","resourcePartitionKey":["r{round}"]"#);
        let racers = ["x", "y"].map(|side| {
            let (e, body) = (e.clone(), body(&format!("{side}{round}"), &pk));
            tokio::spawn(async move { signed(&e, Method::POST, PERMISSIONS, &[], &body).await.0 })
        });
        let mut statuses = Vec::new();
        for racer in racers {
            statuses.push(racer.await.unwrap());
        }
        statuses.sort();
        assert_eq!(statuses, [201, 409], "round {round}");
    }
    let (status, listed, _) = signed(&e, Method::GET, PERMISSIONS, &[], "").await;
    assert_eq!(status, 200);
    assert_eq!(listed["_count"], 52, "{listed}");
    let gone = signed(&e, Method::DELETE, &onto, &[], "").await;
    assert_eq!(gone.0, 204);
    permit(&e, &body("of-a-again", r#","resourcePartitionKey":["a"]"#)).await;
}
