//! The Queue service of `ifmatch serve`, as its users meet it: Azure's Python SDK
//! (azure-storage-queue, `tests/sdk/queues.py`) over the local disk, over Redis and over a
//! bucket (Azurite): queues, messages with their pop receipts, visibility and dequeue counts,
//! the documented limits, eight consumers racing, shared access signatures.

mod common;

use ifmatch_redis::testing::RedisServer;

/// `ifmatch serve` on `data` with `extra` (and `env`) and the Queue service on a port of its
/// own: the process, and the connection string an SDK takes.
fn sdk_script_with(extra: &[&str], env: &[(&str, &str)]) {
    let data = tempfile::tempdir().unwrap();
    let extra = [&["--table-listen", "off", "--cosmos-listen", "off"], extra].concat();
    let (_server, blobs, queues) = common::serve_beside(data.path(), "queue-listen", &extra, env);
    let account = ifmatch_azure::DEV_ACCOUNT;
    let connection = format!(
        "DefaultEndpointsProtocol=http;AccountName={account};AccountKey={};\
         BlobEndpoint=http://127.0.0.1:{blobs}/{account};QueueEndpoint=http://127.0.0.1:{queues}/{account};",
        ifmatch_azure::DEV_KEY
    );
    common::python_script("queues.py", &[connection], "python queues: ");
}

#[test]
fn the_python_sdk_over_the_local_disk() {
    sdk_script_with(&[], &[]);
}

#[test]
fn the_python_sdk_over_redis() {
    let redis = RedisServer::start();
    sdk_script_with(&["--backend", &redis.url()], &[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_over_a_bucket() {
    let bucket = common::Bucket::start().await;
    let backend = ["--backend", &bucket.url("ifmatch")];
    let vars = bucket.vars();
    tokio::task::block_in_place(|| sdk_script_with(&backend, &vars));
}
