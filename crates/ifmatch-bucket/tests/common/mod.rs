//! The object stores the bucket backend's tests run against.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use ifmatch_azure::{DEV_ACCOUNT, DEV_KEY};
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
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
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
        azure_client(&self.endpoint)
    }
}

/// object_store's Azure client of the container `bucket` of the development account at
/// `endpoint` (`http://HOST:PORT/devstoreaccount1`), signing with its key.
fn azure_client(endpoint: &str) -> Arc<dyn ObjectStore> {
    let store = MicrosoftAzureBuilder::new()
        .with_account(DEV_ACCOUNT)
        .with_access_key(DEV_KEY)
        .with_container_name("bucket")
        .with_endpoint(endpoint.to_owned())
        .with_allow_http(true)
        .build()
        .unwrap();
    Arc::new(store)
}

/// Azurite's blob service (installed under `target/azurite` by the test command) on a free
/// loopback port over a temporary directory, with a container `bucket`; killed when dropped.
pub struct Azurite {
    process: std::process::Child,
    endpoint: String,
    _dir: tempfile::TempDir,
}

impl Azurite {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let bin = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../target/azurite/node_modules/.bin/azurite-blob"
        );
        let process = std::process::Command::new(bin)
            .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            .arg("--location")
            .arg(dir.path())
            .args(["--silent", "--skipApiVersionCheck", "--loose"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{bin} (the test command installs it): {e}"));
        let endpoint = format!("http://127.0.0.1:{port}/{DEV_ACCOUNT}");
        let connection = format!(
            "DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};\
             BlobEndpoint={endpoint};"
        );
        let client = ifmatch_client::Client::from_connection_string(&connection).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while let Err(error) = client.create_container("bucket").await {
            assert!(
                std::time::Instant::now() < deadline,
                "azurite did not start: {error}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        Self {
            process,
            endpoint,
            _dir: dir,
        }
    }

    /// A client of the container, as one instance of a fleet has its own.
    pub fn client(&self) -> Arc<dyn ObjectStore> {
        azure_client(&self.endpoint)
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
