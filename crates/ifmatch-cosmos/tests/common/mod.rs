//! Requests to the endpoint over a store, no socket, signed as the SDKs sign them.

use bytes::Bytes;
use http::{Method, Request, Response};
use ifmatch_azure::SystemEnv;
use ifmatch_cosmos::address::Address;
use ifmatch_cosmos::{EMULATOR_KEY, Endpoint};
use ifmatch_table::Tables;

/// The headers of a query across every partition.
pub(crate) const CROSS_PARTITION_QUERY: [(&str, &str); 3] = [
    ("x-ms-documentdb-isquery", "true"),
    ("content-type", "application/query+json"),
    ("x-ms-documentdb-query-enablecrosspartition", "true"),
];

/// A request as it is sent.
pub(crate) async fn send<T: Tables + Clone>(
    service: &Endpoint<T, SystemEnv>,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response<Bytes> {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost:8081");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (parts, ()) = request.body(()).unwrap().into_parts();
    service.handle(&parts, body.as_bytes()).await
}

/// A request signed with the emulator's key, as the SDKs sign one: its status, its JSON body
/// and its headers.
pub(crate) async fn signed<T: Tables + Clone>(
    service: &Endpoint<T, SystemEnv>,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, serde_json::Value, http::HeaderMap) {
    signed_at(
        service,
        method,
        path,
        headers,
        body,
        std::time::SystemTime::now(),
    )
    .await
}

/// [`signed`], dated `at`.
pub(crate) async fn signed_at<T: Tables + Clone>(
    service: &Endpoint<T, SystemEnv>,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    at: std::time::SystemTime,
) -> (u16, serde_json::Value, http::HeaderMap) {
    let address = Address::parse(path).unwrap();
    let date = httpdate::fmt_http_date(at);
    let text = ifmatch_cosmos::auth::string_to_sign(&method, &address, &date);
    use base64::Engine;
    let key = base64::engine::general_purpose::STANDARD
        .decode(EMULATOR_KEY)
        .unwrap();
    let token = ifmatch_cosmos::auth::token(&key, &text);
    let mut all = vec![
        ("x-ms-date", date.as_str()),
        ("authorization", token.as_str()),
    ];
    all.extend_from_slice(headers);
    let answer = send(service, method, path, &all, body).await;
    let json = serde_json::from_slice(answer.body()).unwrap_or(serde_json::Value::Null);
    (answer.status().as_u16(), json, answer.headers().clone())
}

/// Makes the database `shop` and its container `carts` (partitioned by `/pk`) on `service`.
#[allow(dead_code)]
pub(crate) async fn shop<T: Tables + Clone>(service: &Endpoint<T, SystemEnv>) {
    let carts = r#"{"id":"carts","partitionKey":{"paths":["/pk"],"kind":"Hash"}}"#;
    database_with(service, "shop", carts).await;
}

/// Makes the database `db` on `service` and in it the container `container` describes.
#[allow(dead_code)]
pub(crate) async fn database_with<T: Tables + Clone>(
    service: &Endpoint<T, SystemEnv>,
    db: &str,
    container: &str,
) {
    created(service, "/dbs", &format!(r#"{{"id":"{db}"}}"#)).await;
    created(service, &format!("/dbs/{db}/colls"), container).await;
}

/// POSTs `body` to `path` (a database, a container, a document), signed: it must be made (201).
#[allow(dead_code)]
pub(crate) async fn created<T: Tables + Clone>(
    service: &Endpoint<T, SystemEnv>,
    path: &str,
    body: &str,
) {
    let (status, json, _) = signed(service, Method::POST, path, &[], body).await;
    assert_eq!(status, 201, "POST {path}: {json}");
}
