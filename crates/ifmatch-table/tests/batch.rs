//! Entity group transactions over the in-memory tables, sent as raw multipart bodies: what
//! applies (all of it), and what is refused (with Azure's codes, the failing index first, and
//! nothing applied), hostile bodies included.

use bytes::Bytes;
use http::{HeaderMap, Method, Response};
use ifmatch_table::front::{self, Asked};
use ifmatch_table::{DateTime, EntityKey, MemoryTables, Tables};

const BASE: &str = "http://127.0.0.1:10002/devstoreaccount1";

async fn ask(
    tables: &MemoryTables,
    method: &str,
    path: &str,
    kind: &str,
    body: &[u8],
) -> Response<Bytes> {
    let mut headers = HeaderMap::new();
    if !kind.is_empty() {
        headers.insert("content-type", kind.parse().unwrap());
    }
    let asked = Asked {
        method: &Method::from_bytes(method.as_bytes()).unwrap(),
        path,
        query: &[],
        headers: &headers,
        body,
        base: BASE,
        now: DateTime::from_unix(1_800_000_000, 0),
        within: None,
        credential: None,
    };
    front::handle(tables, &asked).await
}

/// One operation of a changeset: its request line, headers and body.
fn operation(method: &str, target: &str, headers: &str, body: &str) -> String {
    format!(
        "Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
         {method} {BASE}/{target} HTTP/1.1\r\n{headers}Content-Type: application/json\r\n\r\n{body}"
    )
}

fn insert(pk: &str, rk: &str) -> String {
    let body = format!(r#"{{"PartitionKey":"{pk}","RowKey":"{rk}","N":1}}"#);
    operation("POST", "people", "", &body)
}

/// A batch body of one changeset holding `operations`.
fn batch(operations: &[String]) -> Vec<u8> {
    let mut changeset = String::new();
    for op in operations {
        changeset.push_str(&format!("--changeset_1\r\n{op}\r\n"));
    }
    changeset.push_str("--changeset_1--\r\n");
    format!(
        "--batch_1\r\nContent-Type: multipart/mixed; boundary=changeset_1\r\n\r\n{changeset}--batch_1--\r\n"
    )
    .into_bytes()
}

const KIND: &str = "multipart/mixed; boundary=batch_1";

async fn fresh() -> MemoryTables {
    let tables = MemoryTables::new();
    tables.create_table("people").await.unwrap();
    tables
}

async fn count(tables: &MemoryTables) -> usize {
    let all = ifmatch_table::Scan {
        from: None,
        partition: None,
        limit: 1000,
    };
    tables.scan("people", all).await.unwrap().len()
}

/// The status lines of a batch answer's operations.
fn statuses(answer: &Response<Bytes>) -> Vec<String> {
    let text = std::str::from_utf8(answer.body()).unwrap();
    (text.lines())
        .filter(|l| l.starts_with("HTTP/1.1 "))
        .map(|l| l[9..12].to_owned())
        .collect()
}

fn text(answer: &Response<Bytes>) -> &str {
    std::str::from_utf8(answer.body()).unwrap()
}

#[tokio::test]
async fn a_batch_applies_every_operation() {
    let tables = fresh().await;
    let ops: Vec<String> = (0..100).map(|i| insert("p", &format!("{i:03}"))).collect();
    let answer = ask(&tables, "POST", "/$batch", KIND, &batch(&ops)).await;
    assert_eq!(answer.status(), 202);
    let kind = answer.headers()["content-type"].to_str().unwrap();
    assert!(
        kind.starts_with("multipart/mixed; boundary=batchresponse_"),
        "{kind}"
    );
    assert_eq!(statuses(&answer), vec!["201"; 100]);
    assert_eq!(count(&tables).await, 100);
    // An insert that prefers no content: 204, and its part says it applied the preference.
    let body = r#"{"PartitionKey":"p","RowKey":"quiet"}"#;
    let quiet = operation("POST", "people", "Prefer: return-no-content\r\n", body);
    let answer = ask(&tables, "POST", "/$batch", KIND, &batch(&[quiet])).await;
    assert_eq!(statuses(&answer), ["204"], "{}", text(&answer));
    assert!(
        text(&answer).contains("Preference-Applied: return-no-content\r\n"),
        "{}",
        text(&answer)
    );
    assert_eq!(count(&tables).await, 101);
    let key: EntityKey = ("p".into(), "007".into());
    let before = tables.get("people", &key).await.unwrap().unwrap();
    let tag = before.timestamp.etag();
    let mixed = [
        operation(
            "MERGE",
            "people(PartitionKey='p',RowKey='007')",
            &format!("If-Match: {tag}\r\n"),
            r#"{"M":2}"#,
        ),
        operation(
            "DELETE",
            "people(PartitionKey='p',RowKey='008')",
            "If-Match: *\r\n",
            "",
        ),
        operation(
            "PUT",
            "people(PartitionKey='p',RowKey='new')",
            "",
            r#"{"N":3}"#,
        ),
    ];
    let answer = ask(&tables, "POST", "/$batch", KIND, &batch(&mixed)).await;
    assert_eq!(
        statuses(&answer),
        ["204", "204", "204"],
        "{}",
        text(&answer)
    );
    let after = tables.get("people", &key).await.unwrap().unwrap();
    assert_eq!(after.properties.len(), 2, "merged: N kept, M added");
    assert_eq!(count(&tables).await, 101);
}

#[tokio::test]
async fn a_refused_operation_applies_nothing_and_names_its_index() {
    let tables = fresh().await;
    let first = batch(&[insert("p", "a")]);
    assert_eq!(
        statuses(&ask(&tables, "POST", "/$batch", KIND, &first).await),
        ["201"]
    );
    let ops = [insert("p", "b"), insert("p", "c"), insert("p", "a")];
    let answer = ask(&tables, "POST", "/$batch", KIND, &batch(&ops)).await;
    assert_eq!(answer.status(), 202);
    assert_eq!(statuses(&answer), ["409"]);
    assert!(text(&answer).contains(r#""code":"EntityAlreadyExists""#));
    assert!(
        text(&answer).contains(r#""value":"2:"#),
        "{}",
        text(&answer)
    );
    assert_eq!(count(&tables).await, 1, "b and c were not inserted");
    let stale = r#"W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'""#;
    let ops = [
        insert("p", "d"),
        operation(
            "PUT",
            "people(PartitionKey='p',RowKey='a')",
            &format!("If-Match: {stale}\r\n"),
            "{}",
        ),
    ];
    let answer = ask(&tables, "POST", "/$batch", KIND, &batch(&ops)).await;
    assert_eq!(statuses(&answer), ["412"]);
    assert!(text(&answer).contains("UpdateConditionNotSatisfied"));
    assert!(text(&answer).contains(r#""value":"1:"#));
    assert_eq!(count(&tables).await, 1);
}

#[tokio::test]
async fn hostile_batches_are_refused_with_nothing_changed() {
    let tables = fresh().await;
    let many: Vec<String> = (0..101).map(|i| insert("p", &i.to_string())).collect();
    let nested = format!(
        "Content-Type: multipart/mixed; boundary=changeset_2\r\n\r\n--changeset_2\r\n{}\r\n--changeset_2--",
        insert("p", "x")
    );
    let cases: Vec<(&str, Vec<u8>, &str, u16, &str)> = vec![
        ("101 operations", batch(&many), KIND, 400, "InvalidInput"),
        ("two partitions", batch(&[insert("p", "1"), insert("q", "1")]), KIND, 202, "CommandsInBatchActOnDifferentPartitions"),
        ("an entity twice", batch(&[insert("p", "1"), insert("p", "1")]), KIND, 202, "InvalidDuplicateRow"),
        ("an unknown verb", batch(&[operation("COPY", "people(PartitionKey='p',RowKey='1')", "", "{}")]), KIND, 202, "InvalidInput"),
        ("a GET in a changeset", batch(&[operation("GET", "people(PartitionKey='p',RowKey='1')", "", "")]), KIND, 202, "InvalidInput"),
        ("a nested changeset", batch(&[nested]), KIND, 400, "InvalidInput"),
        ("two tables", batch(&[insert("p", "1"), operation("POST", "others", "", r#"{"PartitionKey":"p","RowKey":"2"}"#)]), KIND, 202, "InvalidInput"),
        ("invalid JSON", batch(&[operation("POST", "people", "", "{not json")]), KIND, 202, "InvalidInput"),
        ("a wrong annotation", batch(&[operation("POST", "people", "", r#"{"PartitionKey":"p","RowKey":"1","N":"x","N@odata.type":"Edm.Int32"}"#)]), KIND, 202, "InvalidValueType"),
        ("no boundary", batch(&[insert("p", "1")]), "multipart/mixed", 400, "InvalidInput"),
        ("not multipart", br#"{"PartitionKey":"p"}"#.to_vec(), "application/json", 400, "InvalidInput"),
        ("an unclosed body", b"--batch_1\r\nContent-Type: multipart/mixed; boundary=changeset_1\r\n\r\n--changeset_1\r\n".to_vec(), KIND, 400, "InvalidInput"),
        ("an empty changeset", batch(&[]), KIND, 400, "InvalidInput"),
        ("not UTF-8", vec![0xff, 0xfe, 0x00], KIND, 400, "InvalidInput"),
    ];
    for (name, body, kind, status, code) in cases {
        let answer = ask(&tables, "POST", "/$batch", kind, &body).await;
        assert_eq!(answer.status(), status, "{name}: {}", text(&answer));
        assert!(text(&answer).contains(code), "{name}: {}", text(&answer));
        if status == 202 {
            assert_eq!(statuses(&answer).len(), 1, "{name}: one failed operation");
        }
        assert_eq!(count(&tables).await, 0, "{name} changed nothing");
    }
    let huge = vec![b'x'; ifmatch_table::front::batch::MAX_BATCH + 1];
    let answer = ask(&tables, "POST", "/$batch", KIND, &huge).await;
    assert_eq!(answer.status(), 413);
}
