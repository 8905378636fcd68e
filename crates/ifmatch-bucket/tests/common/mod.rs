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
