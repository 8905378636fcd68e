//! What an operator sees of `ifmatch serve`: `/metrics` on a listener of its own, and the JSON
//! access log, read from the real binary.

use crate::common;

use common::{free_port, send};

/// The value of the sample named exactly `sample` (name and labels) on `page`.
fn sample(page: &str, sample: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_operations_by_status_off_the_data_path_and_the_access_log_has_each_request()
{
    let dir = tempfile::tempdir().unwrap();
    let (port, metrics_port) = (free_port(), free_port());
    let log = dir.path().join("log.jsonl");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ifmatch"))
        .args(["--log-json", "serve", "--anonymous", "--access-log"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
        .arg("--data")
        .arg(dir.path().join("data"))
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::wait_for(port, "ifmatch");
    common::wait_for(metrics_port, "the metrics listener");
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let base = format!("http://127.0.0.1:{port}/devstoreaccount1");
    let blob = format!("{base}/seen/doc");
    let status = |r: reqwest::Response| r.status().as_u16();

    let container = format!("{base}/seen?restype=container");
    assert_eq!(status(send(&http, "PUT", &container, &[], "").await), 201);
    assert_eq!(status(send(&http, "PUT", &container, &[], "").await), 409);
    let block = [("x-ms-blob-type", "BlockBlob")];
    let put = send(&http, "PUT", &blob, &block, vec![7u8; 1000]).await;
    let tag = put.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(status(put), 201);
    assert_eq!(status(common::get(&http, &blob).await), 200);
    let revalidate = [("if-none-match", tag.as_str())];
    assert_eq!(
        status(send(&http, "GET", &blob, &revalidate, "").await),
        304
    );
    let stale = [
        ("x-ms-blob-type", "BlockBlob"),
        (
            "if-match",
            "\"0000000000000000000000000000000000000000000000000000000000000000\"",
        ),
    ];
    assert_eq!(status(send(&http, "PUT", &blob, &stale, "lost").await), 412);
    let acquire = [
        ("x-ms-lease-action", "acquire"),
        ("x-ms-lease-duration", "15"),
    ];
    let lease = format!("{blob}?comp=lease");
    assert_eq!(status(send(&http, "PUT", &lease, &acquire, "").await), 201);
    assert_eq!(status(send(&http, "PUT", &lease, &acquire, "").await), 409);

    let page = common::get(&http, &format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await
        .text()
        .await
        .unwrap();
    // Each sample as the exposition format writes it: its name and labels, its value.
    let expect = r#"
ifmatch_requests_total{operation="CreateContainer",status="201"} 1
ifmatch_requests_total{operation="CreateContainer",status="409"} 1
ifmatch_requests_total{operation="PutBlob",status="201"} 1
ifmatch_requests_total{operation="PutBlob",status="412"} 1
ifmatch_requests_total{operation="GetBlob",status="200"} 1
ifmatch_requests_total{operation="GetBlob",status="304"} 1
ifmatch_request_duration_seconds_count{operation="GetBlob"} 2
ifmatch_request_duration_seconds_bucket{operation="GetBlob",le="+Inf"} 2
ifmatch_lease_actions_total{action="acquire",status="201"} 1
ifmatch_lease_actions_total{action="acquire",status="409"} 1
ifmatch_request_bytes_total 1004
ifmatch_response_bytes_total 1000
ifmatch_cas_retries_total 0
"#;
    for line in expect.lines().filter(|line| !line.is_empty()) {
        let (name, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value.parse().unwrap();
        let seen = sample(&page, name);
        if name == "ifmatch_response_bytes_total" {
            // The 1,000 bytes of the GET, and the XML of the error answers.
            assert!(seen.unwrap() >= value, "{name}: {seen:?}\n{page}");
        } else {
            assert_eq!(seen, Some(value), "{name}\n{page}");
        }
    }
    assert!(
        sample(&page, "ifmatch_open_connections").unwrap() >= 1.0,
        "{page}"
    );
    assert!(
        sample(&page, "ifmatch_connections_total").unwrap() >= 1.0,
        "{page}"
    );

    // The data port has no /metrics: there it is a container path of the dialect.
    let data_port = common::get(&http, &format!("http://127.0.0.1:{port}/metrics")).await;
    assert!(
        !data_port
            .text()
            .await
            .unwrap()
            .contains("ifmatch_requests_total")
    );
    let missing = common::get(&http, &format!("http://127.0.0.1:{metrics_port}/other")).await;
    assert_eq!(missing.status(), 404);

    // One JSON object per request, with its operation, status and request id.
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    let access: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "ifmatch::access")
        .collect();
    assert_eq!(access.len(), 9, "{text}");
    let stale = access
        .iter()
        .find(|v| v["operation"] == "PutBlob" && v["status"] == 412)
        .unwrap_or_else(|| panic!("no stale PUT in {text}"));
    assert_eq!(stale["method"], "PUT");
    assert_eq!(stale["path"], "/devstoreaccount1/seen/doc");
    assert_eq!(stale["client"], "127.0.0.1");
    assert!(
        stale["request_id"]
            .as_str()
            .is_some_and(|id| id.len() == 36),
        "{stale}"
    );
    assert!(stale["micros"].as_u64().is_some(), "{stale}");
}

/// The Table and Queue services name their operations beside their answers, as the blob front
/// does: each a row of its own in `/metrics`, and `Preflight` for a browser's CORS question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_and_queue_services_operations_are_rows_of_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let [blobs, tables, queues, metrics] = [(); 4].map(|()| free_port());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ifmatch"))
        .args(["serve", "--anonymous", "--cosmos-listen", "off"])
        .args(["--listen", &format!("127.0.0.1:{blobs}")])
        .args(["--table-listen", &format!("127.0.0.1:{tables}")])
        .args(["--queue-listen", &format!("127.0.0.1:{queues}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .arg("--data")
        .arg(dir.path().join("data"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for port in [blobs, tables, queues, metrics] {
        common::wait_for(port, "ifmatch");
    }
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let status = |r: reqwest::Response| r.status().as_u16();
    let table = format!("http://127.0.0.1:{tables}/devstoreaccount1/Tables");
    let json = [("content-type", "application/json")];
    let named = r#"{"TableName":"seen"}"#;
    assert_eq!(status(send(&http, "POST", &table, &json, named).await), 201);
    assert_eq!(status(send(&http, "POST", &table, &json, named).await), 409);
    let queue = format!("http://127.0.0.1:{queues}/devstoreaccount1/seen");
    assert_eq!(status(send(&http, "PUT", &queue, &[], "").await), 201);
    let preflight = [
        ("origin", "https://app.example"),
        ("access-control-request-method", "PUT"),
    ];
    // No CORS rule: refused, and counted as what it was.
    assert_eq!(
        status(send(&http, "OPTIONS", &queue, &preflight, "").await),
        403
    );

    let page = common::get(&http, &format!("http://127.0.0.1:{metrics}/metrics"))
        .await
        .text()
        .await
        .unwrap();
    for (name, value) in [
        (
            r#"ifmatch_requests_total{operation="CreateTable",status="201"}"#,
            1.0,
        ),
        (
            r#"ifmatch_requests_total{operation="CreateTable",status="409"}"#,
            1.0,
        ),
        (
            r#"ifmatch_requests_total{operation="CreateQueue",status="201"}"#,
            1.0,
        ),
        (
            r#"ifmatch_requests_total{operation="Preflight",status="403"}"#,
            1.0,
        ),
    ] {
        assert_eq!(sample(&page, name), Some(value), "{name}\n{page}");
    }
    assert!(!page.contains(r#"operation="Unknown""#), "{page}");
    let _ = child.kill();
    let _ = child.wait();
}
