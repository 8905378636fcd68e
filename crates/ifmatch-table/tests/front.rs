//! The Table front's requests over the in-memory tables: no socket, the protocol alone.

use http::{HeaderMap, Method};
use ifmatch_table::front::{self, Answer, Asked};
use ifmatch_table::{DateTime, MemoryTables};
use serde_json::{Value as Json, json};

const BASE: &str = "http://127.0.0.1:10002/devstoreaccount1";

struct Reply {
    status: u16,
    headers: HeaderMap,
    json: Json,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn code(&self) -> &str {
        self.header("x-ms-error-code").unwrap_or_default()
    }
}

/// `method path` with `headers` and `body`, answered at second `at`.
async fn send(
    tables: &MemoryTables,
    (method, target): (&str, &str),
    headers: &[(&str, &str)],
    body: &Json,
    at: i64,
) -> Reply {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query: Vec<(String, String)> = form_pairs(query);
    let headers: HeaderMap = (headers.iter())
        .map(|(n, v)| (n.parse().unwrap(), v.parse().unwrap()))
        .collect();
    let body = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(body).unwrap()
    };
    let asked = Asked {
        method: &Method::from_bytes(method.as_bytes()).unwrap(),
        path,
        query: &query,
        headers: &headers,
        body: &body,
        base: BASE,
        now: DateTime::from_unix(1_800_000_000 + at, 0),
        within: None,
        credential: None,
    };
    reply(front::handle(tables, &asked).await)
}

/// `method target` with no headers and no body.
async fn bare(tables: &MemoryTables, method: &str, target: &str, at: i64) -> Reply {
    send(tables, (method, target), &[], &Json::Null, at).await
}

fn form_pairs(query: &str) -> Vec<(String, String)> {
    (query.split('&').filter(|p| !p.is_empty()))
        .map(|pair| {
            let (n, v) = pair.split_once('=').unwrap_or((pair, ""));
            (n.to_owned(), v.replace("%20", " ").replace("%27", "'"))
        })
        .collect()
}

fn reply(answer: Answer) -> Reply {
    let json = serde_json::from_slice(answer.body()).unwrap_or(Json::Null);
    Reply {
        status: answer.status().as_u16(),
        headers: answer.headers().clone(),
        json,
    }
}

/// Create Table `name`.
async fn create(tables: &MemoryTables, name: &str) -> Reply {
    let body = json!({"TableName": name});
    send(tables, ("POST", "/Tables"), &[], &body, 0).await
}

async fn table(tables: &MemoryTables, name: &str) {
    let created = create(tables, name).await;
    assert_eq!(created.status, 201, "{}", created.json);
}

const DOC: &str = "/people(PartitionKey='p',RowKey='r')";

#[tokio::test]
async fn tables_are_created_listed_and_deleted() {
    let tables = MemoryTables::new();
    table(&tables, "people").await;
    let again = create(&tables, "people").await;
    assert_eq!((again.status, again.code()), (409, "TableAlreadyExists"));
    let bad = create(&tables, "a-b").await;
    assert_eq!((bad.status, bad.code()), (400, "InvalidResourceName"));
    table(&tables, "places").await;
    let listed = bare(&tables, "GET", "/Tables", 0).await;
    assert_eq!(
        listed.json["value"],
        json!([{"TableName": "people"}, {"TableName": "places"}])
    );
    let page = bare(&tables, "GET", "/Tables?$top=1", 0).await;
    let next = page
        .header("x-ms-continuation-NextTableName")
        .unwrap()
        .to_owned();
    let rest = bare(&tables, "GET", &format!("/Tables?NextTableName={next}"), 0).await;
    assert_eq!(rest.json["value"], json!([{"TableName": "places"}]));
    let deleted = bare(&tables, "DELETE", "/Tables('places')", 0).await;
    assert_eq!(deleted.status, 204);
    let gone = bare(&tables, "DELETE", "/Tables('places')", 0).await;
    assert_eq!((gone.status, gone.code()), (404, "ResourceNotFound"));
    let missing = bare(&tables, "GET", "/places()", 0).await;
    assert_eq!((missing.status, missing.code()), (404, "TableNotFound"));
}

/// `Prefer` chooses between 201 with what was written and 204, and the answer says it did
/// (`Preference-Applied`); without one, an insert returns content and says nothing.
#[tokio::test]
async fn an_insert_answers_as_preferred_and_says_so() {
    let tables = MemoryTables::new();
    for (prefer, status, applied) in [
        (Some("return-no-content"), 204, Some("return-no-content")),
        (Some("return-content"), 201, Some("return-content")),
        (None, 201, None),
    ] {
        let name = format!("t{status}{}", prefer.map_or(0, str::len));
        let headers: Vec<(&str, &str)> = prefer.iter().map(|p| ("prefer", *p)).collect();
        let body = json!({"TableName": name});
        let made = send(&tables, ("POST", "/Tables"), &headers, &body, 0).await;
        assert_eq!(made.status, status, "{prefer:?}");
        assert_eq!(made.header("preference-applied"), applied, "{prefer:?}");
        let entity = json!({"PartitionKey": "p", "RowKey": "r"});
        let inserted = send(&tables, ("POST", &format!("/{name}")), &headers, &entity, 0).await;
        assert_eq!(inserted.status, status, "{prefer:?}");
        assert_eq!(inserted.header("preference-applied"), applied, "{prefer:?}");
        assert!(inserted.header("etag").is_some());
    }
}

#[tokio::test]
async fn etags_never_repeat_and_stale_ones_change_nothing() {
    let tables = MemoryTables::new();
    table(&tables, "people").await;
    let entity = json!({"PartitionKey": "p", "RowKey": "r", "N": 1});
    let inserted = send(&tables, ("POST", "/people"), &[], &entity, 1).await;
    assert_eq!(inserted.status, 201, "{}", inserted.json);
    let first = inserted.header("etag").unwrap().to_owned();
    assert!(first.starts_with("W/\"datetime'"), "{first}");
    assert_eq!(inserted.json["odata.etag"], json!(first));
    let again = send(&tables, ("POST", "/people"), &[], &entity, 1).await;
    assert_eq!((again.status, again.code()), (409, "EntityAlreadyExists"));

    let read = bare(&tables, "GET", DOC, 2).await;
    assert_eq!(
        (read.status, read.header("etag")),
        (200, Some(first.as_str()))
    );
    assert_eq!(read.json["N"], json!(1));
    // Changed to 2, then back to 1 in the same second: three tags, none the same.
    let two = json!({"N": 2});
    let changed = send(&tables, ("PUT", DOC), &[("if-match", &first)], &two, 1).await;
    assert_eq!(changed.status, 204);
    let second = changed.header("etag").unwrap().to_owned();
    let one = json!({"N": 1});
    let back = send(&tables, ("PUT", DOC), &[("if-match", &second)], &one, 1).await;
    assert_eq!(back.status, 204);
    let third = back.header("etag").unwrap().to_owned();
    assert!(first != second && second != third && first != third);
    // A client holding the first tag: refused, and nothing changes (no A-B-A).
    let stale = [
        ("PUT", json!({"N": 9})),
        ("MERGE", json!({"M": 9})),
        ("DELETE", Json::Null),
    ];
    for (method, body) in stale {
        let refused = send(&tables, (method, DOC), &[("if-match", &first)], &body, 3).await;
        let refusal = (refused.status, refused.code());
        assert_eq!(refusal, (412, "UpdateConditionNotSatisfied"), "{method}");
    }
    let read = bare(&tables, "GET", DOC, 3).await;
    assert_eq!(
        (read.json["N"].clone(), read.header("etag")),
        (json!(1), Some(third.as_str()))
    );
}

#[tokio::test]
async fn merges_upserts_and_deletes() {
    let tables = MemoryTables::new();
    table(&tables, "people").await;
    // Insert Or Merge, then Insert Or Replace: no If-Match.
    let merged = send(&tables, ("PATCH", DOC), &[], &json!({"A": 1}), 1).await;
    assert_eq!(merged.status, 204);
    let merged = send(&tables, ("MERGE", DOC), &[], &json!({"B": 2}), 2).await;
    assert_eq!(merged.status, 204);
    let read = bare(&tables, "GET", DOC, 2).await;
    assert_eq!(
        (read.json["A"].clone(), read.json["B"].clone()),
        (json!(1), json!(2))
    );
    let replaced = send(&tables, ("PUT", DOC), &[], &json!({"C": 3}), 3).await;
    assert_eq!(replaced.status, 204);
    let read = bare(&tables, "GET", DOC, 3).await;
    assert!(read.json.get("A").is_none() && read.json["C"] == json!(3));
    let star = send(
        &tables,
        ("PUT", "/people(PartitionKey='p',RowKey='none')"),
        &[("if-match", "*")],
        &json!({}),
        3,
    )
    .await;
    assert_eq!(star.code(), "ResourceNotFound");
    let deleted = send(
        &tables,
        ("DELETE", DOC),
        &[("if-match", "*")],
        &Json::Null,
        4,
    )
    .await;
    assert_eq!(deleted.status, 204);
    let gone = bare(&tables, "GET", DOC, 4).await;
    assert_eq!((gone.status, gone.code()), (404, "ResourceNotFound"));
    let bare = bare(&tables, "DELETE", DOC, 4).await;
    assert_eq!(bare.status, 400);
    let slash = "/people(PartitionKey='p',RowKey='a#b')";
    let refused = send(&tables, ("PUT", slash), &[], &json!({}), 4).await;
    assert_eq!((refused.status, refused.code()), (400, "OutOfRangeInput"));
    let other = send(&tables, ("PUT", DOC), &[], &json!({"RowKey": "x"}), 4).await;
    assert_eq!((other.status, other.code()), (400, "InvalidInput"));
}

#[tokio::test]
async fn queries_page_through_every_match_once() {
    let tables = MemoryTables::new();
    table(&tables, "items").await;
    for i in 0..25 {
        let pk = if i % 2 == 0 { "even" } else { "odd" };
        let entity = json!({"PartitionKey": pk, "RowKey": format!("{i:03} x'y"), "N": i});
        assert_eq!(
            send(&tables, ("POST", "/items"), &[], &entity, 1)
                .await
                .status,
            201
        );
    }
    let mut seen = Vec::new();
    let mut target = "/items()?$top=10".to_owned();
    loop {
        let page = bare(&tables, "GET", &target, 2).await;
        assert_eq!(page.status, 200, "{}", page.json);
        let value = page.json["value"].as_array().unwrap().clone();
        assert!(value.len() <= 10);
        seen.extend(value.iter().map(|e| e["N"].as_i64().unwrap()));
        let Some(pk) = page.header("x-ms-continuation-NextPartitionKey") else {
            break;
        };
        let rk = page.header("x-ms-continuation-NextRowKey").unwrap();
        target = format!("/items()?$top=10&NextPartitionKey={pk}&NextRowKey={rk}");
    }
    seen.sort();
    assert_eq!(seen, (0..25).collect::<Vec<_>>(), "every entity once");

    let filtered = "/items()?$filter=PartitionKey%20eq%20'odd'%20and%20N%20gt%2015&$select=N";
    let page = bare(&tables, "GET", filtered, 2).await;
    let value = page.json["value"].as_array().unwrap();
    let numbers: Vec<i64> = value.iter().map(|e| e["N"].as_i64().unwrap()).collect();
    assert_eq!(numbers, [17, 19, 21, 23]);
    assert!(
        value.iter().all(|e| e.get("RowKey").is_none()),
        "$select keeps N alone"
    );
    let bad = bare(&tables, "GET", "/items()?$filter=N%20eq", 2).await;
    assert_eq!((bad.status, bad.code()), (400, "InvalidInput"));
    let top = bare(&tables, "GET", "/items()?$top=1001", 2).await;
    assert_eq!(top.status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_32_writers_holding_one_tag_one_wins() {
    let tables = std::sync::Arc::new(MemoryTables::new());
    table(&tables, "race").await;
    let entity = json!({"PartitionKey": "p", "RowKey": "r", "N": 0});
    let tag = send(&tables, ("POST", "/race"), &[], &entity, 1).await;
    let tag = tag.header("etag").unwrap().to_owned();
    let writers = (0..32).map(|w| {
        let (tables, tag) = (tables.clone(), tag.clone());
        tokio::spawn(async move {
            let target = "/race(PartitionKey='p',RowKey='r')";
            send(
                &tables,
                ("PUT", target),
                &[("if-match", &tag)],
                &json!({"N": w}),
                2,
            )
            .await
            .status
        })
    });
    let mut statuses = Vec::new();
    for writer in writers {
        statuses.push(writer.await.unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 204).count(),
        1,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 204 || *s == 412),
        "{statuses:?}"
    );
}
