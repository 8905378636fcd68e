//! Blob bytes in object storage (`--store`), against real servers on loopback: moto's S3
//! server and Azurite, both installed by the test command (`scripts/test`). The objects
//! contract on each; then two instances sharing nothing but a redis-server and an S3 endpoint.

use crate::common;

use common::client;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{Process, free_port, header};
use http_body_util::{BodyExt, Full};
use ifmatch_azure::{DEV_ACCOUNT, DEV_KEY};
use ifmatch_blob::{Objects, StoreError};
use ifmatch_redis::testing::RedisServer;
use ifmatch_server::bucket::BucketObjects;
use object_store::path::Path;

/// moto's S3 server, with one bucket.
struct Moto {
    _process: Process,
    port: u16,
}

const BUCKET: &str = "ifmatch-test";

impl Moto {
    async fn start() -> Self {
        Self::start_on(free_port()).await
    }

    async fn start_on(port: u16) -> Self {
        let process = common::moto(port);
        let made = client()
            .put(format!("http://127.0.0.1:{port}/{BUCKET}"))
            .send()
            .await
            .unwrap();
        assert!(made.status().is_success(), "{}", made.status());
        Self {
            _process: process,
            port,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The variables object_store's S3 builder reads, for this endpoint.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    fn objects(&self, prefix: &str) -> BucketObjects {
        let store = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_bucket_name(BUCKET)
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_region("us-east-1")
            .build()
            .unwrap();
        BucketObjects::new(Arc::new(store), Path::from(prefix), 1 << 20)
    }
}

/// What every objects backend must do, and what a bucket adds: a body larger than one part
/// goes up in parts and reads back whole and in ranges across parts; one over the limit
/// leaves nothing.
async fn contract(objects: &BucketObjects) {
    ifmatch_blob::conformance::objects(objects).await;
    let big: Vec<u8> = (0..20u32 << 20).map(|i| (i % 251) as u8).collect();
    let big = Bytes::from(big);
    let staged = objects
        .stage(Full::new(big.clone()), 64 << 20)
        .await
        .unwrap();
    assert_eq!(staged.len, big.len() as u64);
    assert_eq!(staged.etag, ifmatch_core::strong_etag(&big));
    let len = big.len() as u64;
    let read = |range: Option<std::ops::Range<u64>>| {
        let object = staged.object.clone();
        async move {
            let reader = objects.read(&object, len, range).await.unwrap();
            reader.collect().await.unwrap().to_bytes()
        }
    };
    assert_eq!(read(None).await, big);
    let across = (8 << 20) - 5..(8 << 20) + 5;
    assert_eq!(
        read(Some(across.clone())).await,
        big.slice(across.start as usize..across.end as usize)
    );
    assert!(matches!(
        objects.read(&staged.object, 5, None).await,
        Err(StoreError::Corrupt { .. })
    ));
    // Every staged object, however new.
    let all_staged = async || {
        let later = std::time::SystemTime::now() + Duration::from_secs(60);
        objects.older_than(Duration::ZERO, later).await.unwrap()
    };
    let before = all_staged().await;
    let refused = objects.stage(Full::new(big.clone()), 10 << 20).await;
    assert!(
        matches!(refused, Err(StoreError::TooLarge { .. })),
        "{refused:?}"
    );
    let after = all_staged().await;
    assert_eq!(
        before.len(),
        after.len(),
        "a refused upload leaves no object"
    );
    objects.discard(&staged.object).await.unwrap();
}

/// The orphan sweep over a bucket: an object no record names goes, a blob's stays.
async fn sweep(objects: BucketObjects) {
    let front = ifmatch_blob::Front::new(
        ifmatch_blob::memory::MemoryRecords::default(),
        objects,
        ifmatch_server::SystemEnv,
    )
    .with_anonymous_access(true);
    // A Put Blob (or a container's creation) of `body` at `uri`: its status.
    let put = async |uri: &str, body: &'static str| {
        let request = http::Request::put(uri)
            .header("x-ms-blob-type", "BlockBlob")
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .unwrap();
        front.handle(request).await.status()
    };
    let base = "/devstoreaccount1/box";
    assert_eq!(put(&format!("{base}?restype=container"), "").await, 201);
    assert_eq!(put(&format!("{base}/kept"), "kept").await, 201);
    let orphan = front
        .objects()
        .stage(Full::new(Bytes::from_static(b"orphan")), 100)
        .await
        .unwrap();
    assert_eq!(front.sweep(Duration::ZERO).await.unwrap(), 1);
    assert!(matches!(
        front.objects().read(&orphan.object, 6, None).await,
        Err(StoreError::NotFound { .. })
    ));
    let got = front
        .handle(
            http::Request::get(format!("{base}/kept"))
                .body(Full::new(Bytes::new()))
                .unwrap(),
        )
        .await;
    assert_eq!(got.into_body().collect().await.unwrap().to_bytes(), "kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_in_s3_azure_a_directory_and_memory_keep_the_contract() {
    let moto = Moto::start().await;
    contract(&moto.objects("contract")).await;
    sweep(moto.objects("sweep")).await;

    let work = tempfile::tempdir().unwrap();
    let (azurite, port) = common::azurite(work.path());
    let endpoint = format!("http://127.0.0.1:{port}/{DEV_ACCOUNT}");
    let made = common::signed_key("PUT", &format!("{endpoint}/bytes?restype=container")).await;
    assert_eq!(made.status(), 201);
    let store = object_store::azure::MicrosoftAzureBuilder::new()
        .with_account(DEV_ACCOUNT)
        .with_access_key(DEV_KEY)
        .with_container_name("bytes")
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .build()
        .unwrap();
    contract(&BucketObjects::new(
        Arc::new(store),
        Path::from("p"),
        1 << 20,
    ))
    .await;
    drop(azurite);

    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("store").display());
    contract(&BucketObjects::open(&url, 1 << 20).unwrap()).await;
    contract(&BucketObjects::open("memory://", 1 << 20).unwrap()).await;
}

/// An instance with its own data directory, records in Redis, bytes in S3.
fn instance(redis: &RedisServer, moto: &Moto) -> (common::Running, String) {
    let env = moto.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let store = format!("s3://{BUCKET}/fleet");
    let backend = ["--backend", &redis.url(), "--store", &store];
    common::serve_anonymous(&backend, &env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_nothing_but_redis_and_s3() {
    const CLIENTS: usize = 32;
    // Each round, the 32 writers holding the same tag all upload to moto (a single Python
    // process) before one commit wins: about half a second a round here.
    const INCREMENTS: usize = 100;
    let redis = RedisServer::start();
    let moto = Moto::start().await;
    let (_a, a) = instance(&redis, &moto);
    let (_b, b) = instance(&redis, &moto);
    common::create_container(&client(), &a, "fleet").await;
    let put = common::upload(&format!("{b}/fleet/counter"), "0").await;
    assert_eq!(put, 201, "the container made through A is seen by B");

    // A blob of several parts written through A reads back through B: the bytes are in S3.
    let big: Vec<u8> = (0..(12u32 << 20)).map(|i| (i % 253) as u8).collect();
    let put = common::upload(&format!("{a}/fleet/big"), big.clone()).await;
    assert_eq!(put, 201);
    let got = common::get(&client(), &format!("{b}/fleet/big")).await;
    assert_eq!(header(&got, "etag").unwrap(), common::sha256_tag(&big));
    assert_eq!(got.bytes().await.unwrap(), big);

    // 32 clients, read through one instance, write with If-Match through the other.
    let bases = [a.as_str(), b.as_str()];
    common::count_across(&client(), bases, "/fleet/counter", CLIENTS, INCREMENTS).await;
    for base in &bases {
        let r = common::get(&client(), &format!("{base}/fleet/counter")).await;
        assert_eq!(
            r.text().await.unwrap(),
            INCREMENTS.to_string(),
            "no increment lost"
        );
    }

    // A lease taken through A binds B.
    common::a_lease_binds(&a, &b, "/fleet/counter").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_gone_answers_503_promptly_and_the_instance_recovers_by_itself() {
    let redis = RedisServer::start();
    let moto = Moto::start().await;
    let port = moto.port;
    let (_a, a) = instance(&redis, &moto);
    common::create_container(&client(), &a, "down").await;
    assert_eq!(common::upload(&format!("{a}/down/before"), "v1").await, 201);

    drop(moto);
    common::a_put_is_refused_promptly(&format!("{a}/down/during")).await;
    let listed = common::get(&client(), &format!("{a}/down?restype=container&comp=list")).await;
    let listed = listed.text().await.unwrap();
    assert!(
        !listed.contains("<Name>during</Name>"),
        "a failed upload is never listed"
    );

    // The same endpoint back (moto keeps nothing: a new, empty bucket), no restart of ifmatch.
    let _moto = Moto::start_on(port).await;
    assert_eq!(common::upload(&format!("{a}/down/after"), "v2").await, 201);
    let got = common::get(&client(), &format!("{a}/down/after")).await;
    assert_eq!(got.text().await.unwrap(), "v2");
}
