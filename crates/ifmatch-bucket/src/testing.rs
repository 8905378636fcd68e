//! A real S3 for tests, this crate's and others': moto's server (feature `testing`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;

/// moto's S3 server (installed into the workspace's `.venv` by the test command) on a free
/// loopback port, with a bucket; killed when dropped. It speaks S3's conditional puts
/// (`If-Match`, `If-None-Match: *`) but does not make them atomic under concurrency: two of 16
/// writers with one `If-Match` both won a round on a loaded machine. Use it for what has no
/// race (a store that goes away and comes back, a setup); test races against a store that is
/// atomic (Azurite, `ifmatch serve`).
#[derive(Debug)]
pub struct Moto {
    process: std::process::Child,
    /// Where it listens: `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The bucket made at start.
    pub bucket: String,
}

impl Moto {
    /// Starts it and makes `bucket`.
    pub async fn start(bucket: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self {
            process: spawn(port, bucket).await,
            endpoint: format!("http://127.0.0.1:{port}"),
            bucket: bucket.to_owned(),
        }
    }

    /// Kills the server, as a store's outage would.
    pub fn kill(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }

    /// Starts the server again on its port, with its bucket made anew (moto keeps nothing).
    pub async fn restart(&mut self) {
        self.kill();
        let port = self.endpoint.rsplit(':').next().unwrap().parse().unwrap();
        self.process = spawn(port, &self.bucket).await;
    }

    /// A client of the bucket with S3's conditional puts (`aws_conditional_put=etag`), as one
    /// instance of a fleet has its own.
    pub fn client(&self) -> Arc<dyn ObjectStore> {
        let store = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_bucket_name(&self.bucket)
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

/// moto's server on `port`, once it made `bucket`.
async fn spawn(port: u16, bucket: &str) -> std::process::Child {
    let bin = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/moto_server");
    let process = std::process::Command::new(bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{bin} (the test command installs it): {e}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match make_bucket(port, bucket).await {
            Ok(true) => return process,
            _ if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("moto_server did not make the bucket: {other:?}"),
        }
    }
}

/// Creates `bucket` on the S3 at `port` (unsigned: moto takes it): whether it answered 200.
async fn make_bucket(port: u16, bucket: &str) -> std::io::Result<bool> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let request = format!(
        "PUT /{bucket} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-length: 0\r\n\
         connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    Ok(answer.starts_with(b"HTTP/1.1 200"))
}

/// The variables object_store's S3 builder reads (`AmazonS3Builder::from_env`) for `moto`.
pub fn s3_variables(moto: &Moto) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT", moto.endpoint.clone()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
    ]
}
