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
    /// Started on a port found free; a port another test's server took meanwhile (Azurite
    /// then exits, and the other server answers in its place) is given up for another.
    pub async fn start() -> Self {
        for _ in 0..4 {
            if let Some(started) = Self::start_on_a_free_port().await {
                return started;
            }
        }
        panic!("azurite found no free port in four tries");
    }

    async fn start_on_a_free_port() -> Option<Self> {
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
            .args([
                "--silent",
                "--skipApiVersionCheck",
                "--loose",
                "--disableTelemetry",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{bin} (the test command installs it): {e}"));
        let mut started = Self {
            process,
            endpoint: format!("http://127.0.0.1:{port}/{DEV_ACCOUNT}"),
            _dir: dir,
        };
        if !started.listening(port).await {
            return None;
        }
        let connection = format!(
            "DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};\
             BlobEndpoint={};",
            started.endpoint
        );
        let client = ifmatch_client::Client::from_connection_string(&connection).unwrap();
        client.create_container("bucket").await.unwrap();
        Some(started)
    }

    /// Waits up to a minute for this Azurite to answer on `port` (its `Server` header says
    /// who answers); `false` once it exited or another server answers there.
    async fn listening(&mut self, port: u16) -> bool {
        let http = reqwest::Client::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if self.process.try_wait().unwrap().is_some() {
                return false;
            }
            if let Ok(answer) = http.get(format!("http://127.0.0.1:{port}/")).send().await {
                let server = answer.headers().get("server");
                return server.is_some_and(|s| s.as_bytes().starts_with(b"Azurite-Blob"));
            }
            assert!(
                std::time::Instant::now() < deadline,
                "azurite did not start"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
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

/// A proxy in front of `origin` (`http://HOST:PORT/ACCOUNT`) that passes every request on and
/// its answer back, except that it drops the connection instead of the answer of every other
/// PUT (the first, the third, ...): each PUT is carried out and its answer lost, as when a
/// connection breaks after the store acted, and object_store resends it (its next PUT). Its
/// endpoint is [`Losing::endpoint`]; it runs until the test ends.
pub struct Losing {
    pub endpoint: String,
    puts: Arc<std::sync::atomic::AtomicUsize>,
}

impl Losing {
    pub async fn start(origin: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (host, account) = origin.rsplit_once('/').unwrap();
        let endpoint = format!("http://{}/{account}", listener.local_addr().unwrap());
        let puts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (host, counted) = (host.to_owned(), puts.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            loop {
                let (socket, _) = listener.accept().await.unwrap();
                let (host, counted, http) = (host.clone(), counted.clone(), http.clone());
                let pass = hyper::service::service_fn(move |request| {
                    pass_on(http.clone(), host.clone(), counted.clone(), request)
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(socket), pass),
                );
            }
        });
        Self { endpoint, puts }
    }

    /// How many PUTs reached the proxy (each lost answer's and each resend's).
    pub fn puts(&self) -> usize {
        self.puts.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A client of the container through the proxy.
    pub fn client(&self) -> Arc<dyn ObjectStore> {
        azure_client(&self.endpoint)
    }
}

/// Passes `request` on to `host` and its answer back; fails (so hyper drops the connection
/// unanswered) after carrying out every other PUT.
async fn pass_on(
    http: reqwest::Client,
    host: String,
    puts: Arc<std::sync::atomic::AtomicUsize>,
    request: http::Request<hyper::body::Incoming>,
) -> Result<http::Response<http_body_util::Full<bytes::Bytes>>, std::io::Error> {
    use http_body_util::BodyExt;
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    let uri = format!("{host}{}", parts.uri);
    let mut sent = http.request(parts.method.clone(), uri).body(body);
    for (name, value) in &parts.headers {
        if name != http::header::HOST {
            sent = sent.header(name, value);
        }
    }
    let answer = sent.send().await.map_err(std::io::Error::other)?;
    let put = parts.method == http::Method::PUT;
    if put && (puts.fetch_add(1, std::sync::atomic::Ordering::SeqCst)).is_multiple_of(2) {
        return Err(std::io::Error::other("the answer lost"));
    }
    let mut out = http::Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        out = out.header(name, value);
    }
    let bytes = answer.bytes().await.map_err(std::io::Error::other)?;
    Ok(out.body(http_body_util::Full::new(bytes)).unwrap())
}
