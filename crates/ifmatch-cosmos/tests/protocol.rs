//! What the SDKs never send (bad ids, bodies that are not documents, partition keys that
//! disagree, tags this service never wrote, queries too deep, no credentials), answered as
//! Cosmos answers it: raw signed requests to the endpoint over the memory tables, no socket.
//! (The SDKs themselves, every backend and the server's own behaviour are tested end to end in
//! `crates/ifmatch-server/tests/cosmos.rs`.)

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{send, signed, signed_at};
use http::Method;
use ifmatch_azure::SystemEnv;
use ifmatch_cosmos::Endpoint;
use ifmatch_table::MemoryTables;

/// The headers of a query.
const QUERY: [(&str, &str); 2] = [
    ("x-ms-documentdb-isquery", "True"),
    ("content-type", "application/query+json"),
];

type Service = Endpoint<Arc<MemoryTables>, SystemEnv>;

fn service() -> Service {
    Endpoint::new(Arc::new(MemoryTables::new()), SystemEnv)
}

#[tokio::test]
async fn what_the_sdks_never_send_is_answered_as_cosmos_answers_it() {
    let service = service();
    let e = &service;
    let container = r#"{"id":"carts","partitionKey":{"paths":["/user"],"kind":"Hash"}}"#;
    common::database_with(e, "shop", container).await;
    let docs = "/dbs/shop/colls/carts/docs";
    let ann = [("x-ms-documentdb-partitionkey", r#"["ann"]"#)];
    let refused = |(status, json, _): (u16, serde_json::Value, _), want: u16, code: &str| {
        assert_eq!(status, want, "{json}");
        assert_eq!(json["code"], code, "{json}");
        assert!(
            json["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{json}"
        );
    };
    for (body, why) in [
        ("not json", "malformed"),
        ("[1,2]", "not an object"),
        (r#"{"user":"ann"}"#, "no id"),
        (r#"{"id":"a/b","user":"ann"}"#, "an id with /"),
        (r#"{"id":"a#b","user":"ann"}"#, "an id with #"),
        (r#"{"id":7,"user":"ann"}"#, "an id that is not a string"),
        (
            r#"{"id":"a","user":"bob"}"#,
            "a partition key that disagrees with the header",
        ),
    ] {
        let answer = signed(e, Method::POST, docs, &ann, body).await;
        assert_eq!(answer.0, 400, "{why}: {}", answer.1);
        refused(answer, 400, "BadRequest");
    }
    // The disagreeing partition key says so in its substatus, as the SDKs name it
    // (PartitionKeyMismatch).
    let bob = r#"{"id":"a","user":"bob"}"#;
    let (_, _, headers) = signed(e, Method::POST, docs, &ann, bob).await;
    assert_eq!(headers["x-ms-substatus"], "1001");
    // A consistency level stronger than the account's (Session) is refused; weaker ones serve.
    for (level, status) in [
        ("Strong", 400),
        ("BoundedStaleness", 400),
        ("Session", 201),
        ("ConsistentPrefix", 201),
        ("Eventual", 201),
    ] {
        let body = format!(r#"{{"id":"{level}","user":"ann"}}"#);
        let asked = [ann[0], ("x-ms-consistency-level", level)];
        let answer = signed(e, Method::POST, docs, &asked, &body).await;
        assert_eq!(answer.0, status, "{level}: {}", answer.1);
    }
    for long in ["x".repeat(1024), "€".repeat(342)] {
        let long = format!(r#"{{"id":"{long}","user":"ann"}}"#);
        refused(
            signed(e, Method::POST, docs, &ann, &long).await,
            400,
            "BadRequest",
        );
    }
    // Ids as long as Azure takes (1,023 bytes of UTF-8): created, read and deleted by their
    // escaped links.
    for long in ["x".repeat(1023), "€".repeat(341)] {
        let body = serde_json::json!({ "id": long, "user": "ann" }).to_string();
        assert_eq!(signed(e, Method::POST, docs, &ann, &body).await.0, 201);
        let link = format!(
            "{docs}/{}",
            percent_encoding::utf8_percent_encode(&long, percent_encoding::NON_ALPHANUMERIC)
        );
        let (status, read, _) = signed(e, Method::GET, &link, &ann, "").await;
        assert_eq!((status, read["id"].as_str()), (200, Some(long.as_str())));
        assert_eq!(signed(e, Method::DELETE, &link, &ann, "").await.0, 204);
    }
    let long_database = format!(r#"{{"id":"{}"}}"#, "d".repeat(256));
    refused(
        signed(e, Method::POST, "/dbs", &[], &long_database).await,
        400,
        "BadRequest",
    );
    // A token dated outside the window is 403 with Azure's words (the SDKs hint at the
    // clock); a wrong signature is 401.
    let now = std::time::SystemTime::now();
    for at in [
        now - Duration::from_secs(20 * 60),
        now + Duration::from_secs(20 * 60),
        now - Duration::from_secs(24 * 3600),
    ] {
        let (status, json, _) = signed_at(e, Method::GET, "/dbs/shop", &[], "", at).await;
        assert_eq!(
            (status, json["code"].as_str()),
            (403, Some("Forbidden")),
            "{json}"
        );
        let message = json["message"].as_str().unwrap();
        assert!(
            message.starts_with("The authorization token is not valid at the current time"),
            "{message}"
        );
    }
    let (status, created, headers) =
        signed(e, Method::POST, docs, &ann, r#"{"id":"a","user":"ann"}"#).await;
    assert_eq!(status, 201);
    assert_eq!(headers["etag"].to_str().unwrap(), created["_etag"]);
    let doc = "/dbs/shop/colls/carts/docs/a";
    // A tag this server never wrote matches nothing: 412, never a write.
    for tag in [r#""00000000-0000-0000-8ac5-1ad2a10d01db""#, "garbage"] {
        let conditional = [ann[0], ("if-match", tag)];
        let body = r#"{"id":"a","user":"ann","n":1}"#;
        refused(
            signed(e, Method::PUT, doc, &conditional, body).await,
            412,
            "PreconditionFailed",
        );
    }
    let (_, now, _) = signed(e, Method::GET, doc, &ann, "").await;
    assert_eq!(now["_etag"], created["_etag"], "nothing changed");
    // A point operation names its partition; a container its key; a continuation is one.
    let bad_key = [("x-ms-documentdb-partitionkey", "ann")];
    let garbage = [("x-ms-continuation", "not a token")];
    let none = "/dbs/shop/colls/none/docs/a";
    for (method, path, headers, body, status, code) in [
        (Method::GET, doc, &[][..], "", 400, "BadRequest"),
        (Method::GET, doc, &bad_key, "", 400, "BadRequest"),
        (Method::GET, none, &ann, "", 404, "NotFound"),
        (
            Method::POST,
            "/dbs/shop/colls",
            &[],
            r#"{"id":"nokey"}"#,
            400,
            "BadRequest",
        ),
        (Method::GET, docs, &garbage, "", 400, "BadRequest"),
    ] {
        refused(signed(e, method, path, headers, body).await, status, code);
    }
    // Batches: at most 100 operations, all on the batch's partition.
    let batch = [ann[0], ("x-ms-cosmos-is-batch-request", "True")];
    let op = |id: &str, user: &str| {
        format!(r#"{{"operationType":"Create","resourceBody":{{"id":"{id}","user":"{user}"}}}}"#)
    };
    let many: Vec<String> = (0..101).map(|i| op(&format!("m{i}"), "ann")).collect();
    let body = format!("[{}]", many.join(","));
    refused(
        signed(e, Method::POST, docs, &batch, &body).await,
        400,
        "BadRequest",
    );
    let body = format!("[{},{}]", op("two1", "ann"), op("two2", "bob"));
    refused(
        signed(e, Method::POST, docs, &batch, &body).await,
        400,
        "BadRequest",
    );
    let two = "/dbs/shop/colls/carts/docs/two1";
    assert_eq!(
        signed(e, Method::GET, two, &ann, "").await.0,
        404,
        "nothing of a refused batch"
    );
    // Queries that would take the server's stack or time are refused, and it stays up.
    let query = QUERY;
    for text in [
        format!("SELECT * FROM c WHERE c{} = 1", ".a".repeat(20_000)),
        format!(
            "SELECT * FROM c WHERE {}1{}",
            "(".repeat(500),
            ")".repeat(500)
        ),
        format!("SELECT * FROM c WHERE c.s LIKE '{}'", "%_".repeat(1000)),
        "SELECT * FROM c WHERE".to_owned(),
        "x".repeat(300_000),
    ] {
        let body = serde_json::json!({ "query": text }).to_string();
        refused(
            signed(e, Method::POST, docs, &query, &body).await,
            400,
            "BadRequest",
        );
    }
    // No credentials, or a forged signature: 401, and nothing written.
    let intruder = r#"{"id":"intruder","user":"ann"}"#;
    let unsigned = send(e, Method::POST, docs, &ann, intruder).await;
    assert_eq!(unsigned.status(), 401);
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let forged = [
        ("x-ms-date", date.as_str()),
        ("authorization", "type%3Dmaster%26ver%3D1.0%26sig%3DAAAA"),
        ("x-ms-documentdb-partitionkey", r#"["ann"]"#),
    ];
    let forged = send(e, Method::POST, docs, &forged, intruder).await;
    assert_eq!(forged.status(), 401);
    let intruder = "/dbs/shop/colls/carts/docs/intruder";
    assert_eq!(signed(e, Method::GET, intruder, &ann, "").await.0, 404);
    // The endpoint still reads what it holds.
    assert_eq!(signed(e, Method::GET, doc, &ann, "").await.0, 200);
}

/// Positions and counts a client sends back are numbers this server could have given, or 400:
/// a change feed position at the top of its range (or below its start) on either feed, a
/// query continuation whose counts are past what any page counts, a session token past 64 bits.
#[tokio::test]
async fn positions_and_tokens_out_of_range_are_refused() {
    use base64::Engine;
    let service = service();
    let e = &service;
    let container = r#"{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash"},"changeFeedPolicy":{"retentionDuration":10}}"#;
    common::database_with(e, "d", container).await;
    let docs = "/dbs/d/colls/c/docs";
    let p = ("x-ms-documentdb-partitionkey", r#"["p"]"#);
    for i in 0..3 {
        let body = format!(r#"{{"id":"{i}","pk":"p"}}"#);
        assert_eq!(signed(e, Method::POST, docs, &[p], &body).await.0, 201);
    }
    for feed in ["Incremental feed", "Full-Fidelity Feed"] {
        for position in [
            "\"9223372036854775807\"",
            "\"-1\"",
            "\"9223372036854775808\"",
            "\"1e3\"",
        ] {
            let asked = [("a-im", feed), ("if-none-match", position)];
            let (status, json, _) = signed(e, Method::GET, docs, &asked, "").await;
            assert_eq!(status, 400, "{feed} from {position}: {json}");
        }
        // The last position there is goes on to nothing new.
        let asked = [("a-im", feed), ("if-none-match", "\"9223372036854775806\"")];
        assert_eq!(
            signed(e, Method::GET, docs, &asked, "").await.0,
            304,
            "{feed}"
        );
    }
    let query = [QUERY[0], QUERY[1], ("x-ms-max-item-count", "1"), p];
    let body = r#"{"query": "SELECT VALUE c.id FROM c"}"#;
    let (status, _, headers) = signed(e, Method::POST, docs, &query, body).await;
    assert_eq!(status, 200);
    assert!(headers.contains_key("x-ms-continuation"));
    for counts in [
        r#"{"k":null,"r":0,"s":18446744073709551615,"n":0}"#,
        r#"{"k":null,"r":0,"s":0,"n":18446744073709551615}"#,
        r#"{"k":null,"r":18446744073709551615,"s":0,"n":0}"#,
        r#"{"k":null,"s":0,"n":0}"#,
    ] {
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(counts);
        let asked = [query.as_slice(), &[("x-ms-continuation", token.as_str())]].concat();
        let (status, json, _) = signed(e, Method::POST, docs, &asked, body).await;
        assert_eq!(status, 400, "{counts}: {json}");
    }
    for token in [
        "0:-1#18446744073709551616",
        "0:-1#3#1=99999999999999999999999",
    ] {
        let asked = [p, ("x-ms-session-token", token)];
        let (status, json, _) = signed(e, Method::GET, &format!("{docs}/0"), &asked, "").await;
        assert_eq!(status, 400, "{token}: {json}");
    }
}

/// A body heavier once read than the whole memory budget is never read: 413, not a 429 the
/// SDKs would retry for ever (a Worker's budget is 32 MiB). One within it, while the budget is
/// held by another, is 429 with a time to retry after.
#[tokio::test]
async fn a_body_heavier_than_the_memory_budget_is_413_and_one_that_must_wait_429() {
    use ifmatch_azure::inflight::Inflight;
    let budget = Arc::new(Inflight::new(8 << 20));
    let service = service().with_serving(ifmatch_azure::Serving {
        inflight: budget.clone(),
        ..ifmatch_azure::Serving::default()
    });
    let e = &service;
    let container = r#"{"id":"c","partitionKey":{"paths":["/pk"],"kind":"Hash"}}"#;
    common::database_with(e, "d", container).await;
    let docs = "/dbs/d/colls/c/docs";
    let p = [("x-ms-documentdb-partitionkey", r#"["p"]"#)];
    let zeros = |n: usize| format!(r#"{{"id":"a","pk":"p","z":[{}0]}}"#, "0,".repeat(n));
    let (status, json, _) = signed(e, Method::POST, docs, &p, &zeros(100_000)).await;
    assert_eq!(
        (status, json["code"].as_str()),
        (413, Some("RequestEntityTooLarge")),
        "{json}"
    );
    let held = budget.admit(6 << 20).unwrap();
    let (status, _, headers) = signed(e, Method::POST, docs, &p, &zeros(10_000)).await;
    assert_eq!(status, 429);
    assert!(headers.contains_key("x-ms-retry-after-ms"));
    drop(held);
    assert_eq!(
        signed(e, Method::POST, docs, &p, &zeros(10_000)).await.0,
        201
    );
}

/// Every answer names the request's activity: the id the request gave (the SDKs give one, to
/// find a request again in their diagnostics), else one of its own; a value that is no id is
/// not echoed.
#[tokio::test]
async fn an_answer_echoes_the_activity_id_its_request_named() {
    let service = service();
    let named = "8e0d7c2a-5b1f-4c6e-9a3d-2f4b6c8d0e1f";
    // A GET of `path` naming `activity`: its status and the activity its answer names.
    let ask = async |path: &str, activity: Option<&str>| {
        let headers: Vec<(&str, &str)> = activity
            .map(|a| ("x-ms-activity-id", a))
            .into_iter()
            .collect();
        let (status, _, headers) = signed(&service, Method::GET, path, &headers, "").await;
        let answered = headers["x-ms-activity-id"].to_str().unwrap().to_owned();
        (status, answered)
    };
    assert_eq!(ask("/dbs", Some(named)).await, (200, named.to_owned()));
    assert_eq!(
        ask("/dbs/none", Some(named)).await,
        (404, named.to_owned()),
        "a failure too"
    );
    for given in [Some("not an id"), None] {
        let (_, answered) = ask("/dbs", given).await;
        assert!(uuid::Uuid::try_parse(&answered).is_ok_and(|id| id.to_string() != named));
    }
}
