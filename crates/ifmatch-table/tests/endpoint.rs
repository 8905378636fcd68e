//! The Table service as a host runs it, over the memory tables and a clock that never moves:
//! which account a request reaches, that credentials are needed, and that a tag is never given
//! twice even when the clock does not move on.

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use ifmatch_azure::ManualEnv;
use ifmatch_azure::auth;
use ifmatch_azure::{Accounts, Client, Serving, WholeBody};
use ifmatch_table::{Endpoint, MemoryTables};

const KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

type Tested = Endpoint<Arc<MemoryTables>, Arc<ManualEnv>>;

/// The accounts `first` and `second`, and requests without credentials let through if
/// `anonymous`.
fn serving(anonymous: bool) -> Serving {
    let accounts = Accounts::parse(&format!("first:{KEY}; second:{KEY}")).unwrap();
    Serving {
        accounts,
        anonymous,
        ..Serving::default()
    }
}

fn service(anonymous: bool) -> Tested {
    service_with(serving(anonymous))
}

fn service_with(serving: Serving) -> Tested {
    let tables = Arc::new(MemoryTables::new());
    Endpoint::new(tables, Arc::new(ManualEnv::default())).with_serving(serving)
}

async fn send(
    service: &Tested,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response<Bytes> {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (parts, ()) = request.body(()).unwrap().into_parts();
    let (answer, _) = service
        .answer(&parts, Client::default(), body.as_bytes())
        .await;
    answer
}

/// Create Table `name` through `uri` (`/{account}/Tables`), as `host`.
async fn create(service: &Tested, uri: &str, host: &str, name: &str) -> Response<Bytes> {
    let body = format!(r#"{{"TableName":"{name}"}}"#);
    send(service, "POST", uri, &[("host", host)], &body).await
}

fn code(answer: &Response<Bytes>) -> &str {
    (answer.headers().get("x-ms-error-code")).map_or("", |v| v.to_str().unwrap())
}

#[tokio::test]
async fn a_tag_is_never_given_twice_though_the_clock_stands_still() {
    let service = service(true);
    let created = create(&service, "/first/Tables", "127.0.0.1", "people").await;
    assert_eq!(created.status(), 201);
    let entity = r#"{"PartitionKey":"p","RowKey":"r","N":1}"#;
    let first = send(&service, "POST", "/first/people", &[], entity).await;
    assert_eq!(first.status(), 201);
    let first_tag = first.headers()["etag"].to_str().unwrap().to_owned();
    let one = "/first/people(PartitionKey='p',RowKey='r')";
    let deleted = send(&service, "DELETE", one, &[("if-match", "*")], "").await;
    assert_eq!(deleted.status(), 204);
    let again = send(&service, "POST", "/first/people", &[], entity).await;
    let again_tag = again.headers()["etag"].to_str().unwrap().to_owned();
    assert_ne!(
        first_tag, again_tag,
        "the same entity, deleted and inserted again"
    );
    let stale = send(&service, "PUT", one, &[("if-match", &first_tag)], entity).await;
    assert_eq!(
        (stale.status().as_u16(), code(&stale)),
        (412, "UpdateConditionNotSatisfied")
    );
}

#[tokio::test]
async fn requests_reach_their_accounts_tables_and_need_credentials() {
    let open = service(true);
    for (uri, host) in [
        ("/first/Tables", "127.0.0.1"),
        ("/Tables", "second.table.localhost"),
    ] {
        let created = create(&open, uri, host, "shared").await;
        assert_eq!(created.status(), 201, "{uri} {host}");
    }
    let listed = send(&open, "GET", "/second/Tables", &[], "").await;
    let text = std::str::from_utf8(listed.body()).unwrap();
    assert!(text.contains(r#""TableName":"shared""#), "{text}");
    let other = create(&open, "/first/Tables", "127.0.0.1", "onlyfirst").await;
    assert_eq!(other.status(), 201);
    let second = send(&open, "GET", "/second/onlyfirst()", &[], "").await;
    assert_eq!(
        (second.status().as_u16(), code(&second)),
        (404, "TableNotFound")
    );

    let closed = service(false);
    let unsigned = send(&closed, "GET", "/first/Tables", &[], "").await;
    assert_eq!(
        (unsigned.status().as_u16(), code(&unsigned)),
        (403, "AuthenticationFailed")
    );
    let date = httpdate::fmt_http_date(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000),
    );
    let text = format!("GET\n\n\n{date}\n/first/first/Tables");
    let key = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, KEY).unwrap();
    let signature = auth::sign(&key, &text);
    let authorization = format!("SharedKey first:{signature}");
    let headers = [
        ("x-ms-date", date.as_str()),
        ("authorization", authorization.as_str()),
    ];
    let signed = send(&closed, "GET", "/first/Tables", &headers, "").await;
    assert_eq!(signed.status(), 200, "{:?}", signed.body());
    let lite = format!("{date}\n/first/first/Tables");
    let authorization = format!("SharedKeyLite first:{}", auth::sign(&key, &lite));
    let headers = [
        ("x-ms-date", date.as_str()),
        ("authorization", authorization.as_str()),
    ];
    let signed = send(&closed, "GET", "/first/Tables", &headers, "").await;
    assert_eq!(signed.status(), 200, "Shared Key Lite: {:?}", signed.body());
    // Signed over an old `Date` beside a fresh, unsigned `x-ms-date`: a replay, refused.
    let old = httpdate::fmt_http_date(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000),
    );
    let replayed = format!("GET\n\n\n{old}\n/first/first/Tables");
    let authorization = format!("SharedKey first:{}", auth::sign(&key, &replayed));
    let headers = [
        ("date", old.as_str()),
        ("x-ms-date", date.as_str()),
        ("authorization", authorization.as_str()),
    ];
    let replay = send(&closed, "GET", "/first/Tables", &headers, "").await;
    assert_eq!(
        (replay.status().as_u16(), code(&replay)),
        (403, "AuthenticationFailed")
    );
    let wrong = [
        ("x-ms-date", date.as_str()),
        ("authorization", "SharedKey first:AAAA"),
    ];
    let forged = send(&closed, "GET", "/first/Tables", &wrong, "").await;
    assert_eq!(
        (forged.status().as_u16(), code(&forged)),
        (403, "AuthenticationFailed")
    );
}

/// A body whose JSON is far larger once read than its bytes (four MiB of `[0,0,0,...]`) is
/// weighed before it is read: heavier than the whole memory budget, 413; heavier than what
/// the large requests in flight leave, 503 `ServerBusy` (which the SDKs retry); an ordinary
/// entity meanwhile is served.
#[tokio::test]
async fn bodies_heavy_once_read_are_weighed_before_they_are_read() {
    use ifmatch_azure::inflight::Inflight;
    let budget = Arc::new(Inflight::new(64 << 20));
    let service = service_with(Serving {
        inflight: budget.clone(),
        ..serving(true)
    });
    assert_eq!(
        create(&service, "/first/Tables", "127.0.0.1", "people")
            .await
            .status(),
        201
    );
    let zeros = |n: usize| {
        format!(
            r#"{{"PartitionKey":"p","RowKey":"r","A":[{}0]}}"#,
            "0,".repeat(n)
        )
    };
    let huge = send(&service, "POST", "/first/people", &[], &zeros(2_000_000)).await;
    assert_eq!(
        (huge.status().as_u16(), code(&huge)),
        (413, "RequestBodyTooLarge")
    );
    // While another heavy request holds most of the budget, a second waits its turn.
    let held = budget.admit(60 << 20).unwrap();
    let heavy = send(&service, "POST", "/first/people", &[], &zeros(100_000)).await;
    assert_eq!((heavy.status().as_u16(), code(&heavy)), (503, "ServerBusy"));
    let entity = r#"{"PartitionKey":"p","RowKey":"r","N":1}"#;
    let ordinary = send(&service, "POST", "/first/people", &[], entity).await;
    assert_eq!(ordinary.status(), 201);
    drop(held);
    // Its turn come, it is read, and refused for what it is (an array is no property type).
    let heavy = send(&service, "POST", "/first/people", &[], &zeros(100_000)).await;
    assert_eq!(heavy.status(), 400);
}
