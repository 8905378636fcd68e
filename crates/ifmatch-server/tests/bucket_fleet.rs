//! A fleet with nothing but a bucket: two `ifmatch serve --backend az://...` instances, each
//! with a data directory of its own and no Redis, keeping records, leases, staged blocks and
//! bytes in one container of Azurite (an object store whose conditional puts are atomic).

use crate::common;

use common::{Bucket, client};

/// An instance with its own data directory, everything else in `bucket`.
fn instance(bucket: &Bucket) -> (common::Running, String) {
    common::serve_anonymous(&["--backend", &bucket.url("ifmatch")], &bucket.vars())
}

async fn send(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> reqwest::Response {
    common::send(&client(), method, url, headers, body.to_owned()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_nothing_but_a_bucket() {
    const CLIENTS: usize = 32;
    const INCREMENTS: usize = 100;
    let bucket = Bucket::start().await;
    let (_a, a) = instance(&bucket);
    let (_b, b) = instance(&bucket);
    let http = client();
    common::create_container(&http, &a, "fleet").await;
    let put = common::upload(&format!("{b}/fleet/counter"), "0").await;
    assert_eq!(put, 201, "the container made through A is seen by B");

    // Blocks staged through A, committed through B, read through A.
    for (id, part) in [("YQ==", "first "), ("Yg==", "second")] {
        let url = format!("{a}/fleet/blocks?comp=block&blockid={id}");
        assert_eq!(send("PUT", &url, &[], part).await.status(), 201);
    }
    let list = "<BlockList><Latest>YQ==</Latest><Latest>Yg==</Latest></BlockList>";
    let committed = send(
        "PUT",
        &format!("{b}/fleet/blocks?comp=blocklist"),
        &[],
        list,
    )
    .await;
    assert_eq!(committed.status(), 201);
    let got = common::get(&http, &format!("{a}/fleet/blocks")).await;
    assert_eq!(got.text().await.unwrap(), "first second");

    // 32 clients, read through one instance, write with If-Match through the other.
    let bases = [a.as_str(), b.as_str()];
    let conflicts = common::count_across(&http, bases, "/fleet/counter", CLIENTS, INCREMENTS).await;
    for base in &bases {
        let r = common::get(&http, &format!("{base}/fleet/counter")).await;
        assert_eq!(
            r.text().await.unwrap(),
            INCREMENTS.to_string(),
            "no increment lost"
        );
    }
    assert!(conflicts > 0, "the test did not contend");

    // A lease taken through A binds B.
    common::a_lease_binds(&a, &b, "/fleet/counter").await;

    // Deleted through B, the container and its blobs are gone through A; made again, empty.
    let deleted = send("DELETE", &format!("{b}/fleet?restype=container"), &[], "").await;
    assert_eq!(deleted.status(), 202);
    let gone = common::get(&client(), &format!("{a}/fleet/blocks")).await;
    assert_eq!(gone.status(), 404);
    common::create_container(&http, &a, "fleet").await;
    let listed = common::get(&client(), &format!("{b}/fleet?restype=container&comp=list")).await;
    let listed = listed.text().await.unwrap();
    assert!(!listed.contains("<Blob>"), "{listed}");
}

/// Page blobs, deleted containers and the change feed (each write once) through two instances
/// over nothing but a bucket (see `common::protection`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_blobs_kept_containers_and_the_change_feed_hold_across_instances() {
    let bucket = Bucket::start().await;
    let (_a, a) = instance(&bucket);
    let (_b, b) = instance(&bucket);
    common::protection::pages_and_kept_containers(&client(), &a, &b).await;
    common::protection::change_feed_once(&client(), &a, &b).await;
}

/// The Python SDK's data protection checks through an instance over nothing but a bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdks_data_protection_checks_pass_over_a_bucket() {
    let bucket = Bucket::start().await;
    let (_a, a) = instance(&bucket);
    common::protection::python_sdk_checks(&a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_without_conditional_updates_is_refused_at_start() {
    let (store, data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let url = format!("file://{}", store.path().display());
    let out = std::process::Command::new(common::binary())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--backend",
            &url,
            "--data",
        ])
        .arg(data.path())
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("conditional updates"), "{said}");
}

/// The bucket gone: a write through the instance is answered 503 promptly and lands nowhere;
/// the bucket back (what it held kept: `ifmatch serve` as the store), the instance serves again
/// with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bucket_gone_answers_503_promptly_and_the_instance_recovers_by_itself() {
    let mut bucket = Bucket::served().await;
    let (_a, a) = instance(&bucket);
    let http = client();
    common::create_container(&http, &a, "down").await;
    assert_eq!(common::upload(&format!("{a}/down/before"), "v1").await, 201);

    bucket.kill();
    common::a_put_is_refused_promptly(&format!("{a}/down/during")).await;

    bucket.restart();
    let got = common::get(&http, &format!("{a}/down/before")).await;
    assert_eq!(
        got.text().await.unwrap(),
        "v1",
        "what the bucket held is served again"
    );
    let missing = common::get(&client(), &format!("{a}/down/during")).await;
    assert_eq!(
        missing.status(),
        404,
        "the write answered 503 landed nowhere"
    );
    assert_eq!(common::upload(&format!("{a}/down/after"), "v2").await, 201);
}
