//! The object stores the bucket backend's tests run against.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use ifmatch_blob::{DEV_ACCOUNT, DEV_KEY};
use object_store::ObjectStore;
use object_store::azure::MicrosoftAzureBuilder;

/// `ifmatch serve` on a loopback port over a temporary directory, with a container `bucket`:
/// an object store whose `If-Match` and create-only puts are atomic. Kept until the test ends.
pub struct Served {
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

impl Served {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut options = ifmatch_server::Options::default();
        // The container is made with a plain PUT; object_store signs its own requests.
        options.anonymous = true;
        let front = ifmatch_server::open(dir.path(), options.clone()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}/{DEV_ACCOUNT}", listener.local_addr().unwrap());
        tokio::spawn(ifmatch_server::serve(
            listener,
            front,
            options,
            std::future::pending(),
        ));
        let made = reqwest::Client::new()
            .put(format!("{endpoint}/bucket?restype=container"))
            .send()
            .await
            .unwrap();
        assert_eq!(made.status(), 201);
        Self {
            endpoint,
            _dir: dir,
        }
    }

    /// A client of the container, as one instance of a fleet has its own.
    pub fn client(&self) -> Arc<dyn ObjectStore> {
        let store = MicrosoftAzureBuilder::new()
            .with_account(DEV_ACCOUNT)
            .with_access_key(DEV_KEY)
            .with_container_name("bucket")
            .with_endpoint(self.endpoint.clone())
            .with_allow_http(true)
            .build()
            .unwrap();
        Arc::new(store)
    }
}

/// moto's S3 server (installed into `.venv` by the test command) on a free loopback port, with
/// a bucket `bucket`; killed when dropped. Its conditional puts (`If-Match`, `If-None-Match:
/// *`) were checked atomic first: of 16 concurrent writers with one precondition, one wins,
/// in every one of 20 rounds (`one_writer_of_sixteen_wins_on_moto`).
pub struct Moto {
    process: std::process::Child,
    pub endpoint: String,
}

impl Moto {
    pub async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let bin = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/moto_server");
        let process = std::process::Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{bin} (the test command installs it): {e}"));
        let endpoint = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            match http.put(format!("{endpoint}/bucket")).send().await {
                Ok(made) if made.status().is_success() => break,
                _ if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                other => panic!("moto_server did not start: {other:?}"),
            }
        }
        Self { process, endpoint }
    }

    /// A client of the bucket with S3's conditional puts (`aws_conditional_put=etag`), as one
    /// instance of a fleet has its own.
    pub fn client(&self) -> Arc<dyn ObjectStore> {
        let store = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_bucket_name("bucket")
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_allow_http(true)
            .with_conditional_put(object_store::aws::S3ConditionalPut::ETagMatch)
            .build()
            .unwrap();
        Arc::new(store)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
