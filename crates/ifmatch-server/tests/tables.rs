//! The Table service of `ifmatch serve`, as its users meet it: Azure's Python SDK
//! (azure-data-tables, `tests/sdk/tables.py`) over the local disk, over Redis and over a bucket
//! (Azurite), a blob lease locking entities across two tables, and batches that a SIGKILL
//! leaves whole or absent (on each backend).

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::{Process, client};
use ifmatch_redis::testing::RedisServer;

const ACCOUNT: &str = "devstoreaccount1";
const KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// `ifmatch serve` on `data` with `extra` arguments and `env` set: the process, the blob and
/// table origins.
fn serve_with(
    data: &std::path::Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Process, String, String) {
    let (process, blobs, tables) = common::serve_beside(data, "table-listen", extra, env);
    let origin = |port| format!("http://127.0.0.1:{port}");
    (process, origin(blobs), origin(tables))
}

fn connection_string(blobs: &str, tables: &str) -> String {
    format!(
        "DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};\
         BlobEndpoint={blobs}/{ACCOUNT};TableEndpoint={tables}/{ACCOUNT};"
    )
}

/// Runs the Python script `script` of `tests/sdk` (the virtual environment's SDK) against a
/// fresh `ifmatch serve` with `extra` arguments: it must pass, and end with its tally.
fn sdk_script(script: &str, tally: &str, extra: &[&str]) {
    sdk_script_with(script, tally, extra, &[]);
}

/// [`sdk_script`] with the server's `env` set.
fn sdk_script_with(script: &str, tally: &str, extra: &[&str], env: &[(&str, &str)]) {
    let data = tempfile::tempdir().unwrap();
    let (_server, blobs, tables) = serve_with(data.path(), extra, env);
    common::python_script(script, &[connection_string(&blobs, &tables)], tally);
}

#[test]
fn the_python_sdk_over_the_local_disk() {
    sdk_script("tables.py", "python tables: ", &[]);
}

#[test]
fn the_python_sdk_over_redis() {
    let redis = RedisServer::start();
    sdk_script("tables.py", "python tables: ", &["--backend", &redis.url()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_over_a_bucket() {
    let bucket = common::Bucket::start().await;
    let backend = ["--backend", &bucket.url("ifmatch")];
    let vars = bucket.vars();
    tokio::task::block_in_place(|| {
        sdk_script_with("tables.py", "python tables: ", &backend, &vars)
    });
}

#[test]
fn a_blob_lease_locks_entities_across_two_tables() {
    sdk_script("table_lock.py", "table lock: ", &[]);
}

/// A batch inserting `rows` entities into partition `pk`, as the SDKs send one.
fn batch(tables: &str, pk: &str, rows: usize) -> (String, String) {
    let mut body =
        String::from("--batch_x\r\nContent-Type: multipart/mixed; boundary=changeset_x\r\n\r\n");
    for row in 0..rows {
        body.push_str(&format!(
            "--changeset_x\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
             POST {tables}/{ACCOUNT}/crash HTTP/1.1\r\nContent-Type: application/json\r\n\
             Prefer: return-no-content\r\n\r\n\
             {{\"PartitionKey\":\"{pk}\",\"RowKey\":\"{row:03}\",\"Padding\":\"{}\"}}\r\n",
            "x".repeat(2000)
        ));
    }
    body.push_str("--changeset_x--\r\n--batch_x--\r\n");
    (body, "multipart/mixed; boundary=batch_x".to_owned())
}

/// How many entities each partition of table `crash` holds.
async fn partitions(tables: &str) -> HashMap<String, usize> {
    let http = client();
    let mut counts = HashMap::new();
    let mut next: Option<(String, String)> = None;
    loop {
        // Pages of 100 entities: over a bucket each entity is a read of its own, and a page
        // must be read within the store's time for one operation on a loaded machine.
        let mut url = format!("{tables}/{ACCOUNT}/crash()?$select=PartitionKey&$top=100");
        if let Some((pk, rk)) = &next {
            url.push_str(&format!("&NextPartitionKey={pk}&NextRowKey={rk}"));
        }
        let mut tries = 0;
        let page = loop {
            let page = (http.get(&url))
                .header("accept", "application/json;odata=nometadata")
                .send()
                .await
                .unwrap();
            tries += 1;
            // 503 asks for a retry, as the SDKs make one.
            if page.status() == 503 && tries < 3 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            let status = page.status();
            assert_eq!(status, 200, "{}", page.text().await.unwrap_or_default());
            break page;
        };
        let header =
            |name: &str| (page.headers().get(name)).map(|v| v.to_str().unwrap().to_owned());
        let more = header("x-ms-continuation-NextPartitionKey")
            .zip(header("x-ms-continuation-NextRowKey"));
        let json: serde_json::Value = serde_json::from_slice(&page.bytes().await.unwrap()).unwrap();
        for entity in json["value"].as_array().unwrap() {
            let pk = entity["PartitionKey"].as_str().unwrap().to_owned();
            *counts.entry(pk).or_default() += 1;
        }
        match more {
            Some(more) => next = Some(more),
            None => return counts,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_batches_leaves_each_whole_or_absent() {
    let args = ["--anonymous"];
    sigkill_during_batches(&args, &[], Duration::from_millis(1500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_batches_over_redis_leaves_each_whole_or_absent() {
    let redis = RedisServer::start();
    let args = ["--anonymous", "--backend", &redis.url()];
    sigkill_during_batches(&args, &[], Duration::from_millis(1500)).await;
}

/// Over a bucket, a batch costs a few hundred requests (a batch's intent, an index entry, a
/// lock and a release of each entity): the server runs longer before it is killed. The bucket
/// is `ifmatch serve` itself: Azurite ignores List Blobs' `startFrom`, so each partition of the
/// check's scan lists the table from its start, and the scan of three rounds' batches outlasts
/// its timeout there (the restarted server answered 503, or, when the bucket's check at start
/// ran out of time too, the server exited and its port reset the connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_batches_over_a_bucket_leaves_each_whole_or_absent() {
    let bucket = common::Bucket::served().await;
    let url = bucket.url("ifmatch");
    let args = ["--anonymous", "--backend", &url];
    sigkill_during_batches(&args, &bucket.vars(), Duration::from_secs(5)).await;
}

/// Four writers sending 100-entity batches, the server (with `args` and `env`) SIGKILLed under
/// them after `running` and started again, three rounds: every partition whole or absent,
/// every acknowledged batch there.
async fn sigkill_during_batches(args: &[&str], env: &[(&str, &str)], running: Duration) {
    let data = tempfile::tempdir().unwrap();
    let sent = common::BatchSent {
        request: Arc::new(|http, tables, pk| {
            let (body, kind) = batch(tables, pk, 100);
            let url = format!("{tables}/{ACCOUNT}/$batch");
            http.post(url).header("content-type", kind).body(body)
        }),
        acknowledged: 202,
        each: "HTTP/1.1 204",
        rows: 100,
    };
    let setup = async |tables: &str| {
        let created = (client().post(format!("{tables}/{ACCOUNT}/Tables")))
            .header("content-type", "application/json")
            .body(r#"{"TableName":"crash"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
    };
    let start = || {
        let (server, _blobs, tables) = serve_with(data.path(), args, env);
        (server, tables)
    };
    common::sigkill_under_batches(start, setup, sent, partitions, running).await;
}
