//! The harness of the end-to-end tests: a real `ifmatch` front on a loopback port over a
//! temporary data directory, driven by a real HTTP client.

#![allow(dead_code, unreachable_pub)]

pub mod cosmos;
pub mod protection;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use ifmatch_azure::Env;
use reqwest::{Method, Response};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// The system clock shifted by an offset the test moves forward: lease expiry without sleeping.
/// Ids are real random UUIDs.
#[derive(Debug, Clone, Default)]
pub struct ShiftedEnv(Arc<AtomicU64>);

impl Env for ShiftedEnv {
    fn now(&self) -> SystemTime {
        SystemTime::now() + Duration::from_millis(self.0.load(Ordering::SeqCst))
    }

    fn random_uuid(&self) -> uuid::Uuid {
        uuid::Uuid::new_v4()
    }
}

/// The account the tests' servers serve, path-style: every test URL starts with it.
pub const ACCOUNT: &str = "devstoreaccount1";

/// The connection string of a server over HTTPS (`--https`) with its blob, queue and table
/// endpoints at `ports` on `localhost` (the name its certificate is for).
pub fn https_connection(ports: [u16; 3]) -> String {
    let endpoint = |port: u16| format!("https://localhost:{port}/{ACCOUNT}");
    format!(
        "DefaultEndpointsProtocol=https;AccountName={ACCOUNT};AccountKey={};BlobEndpoint={};\
         QueueEndpoint={};TableEndpoint={};",
        ifmatch_azure::DEV_KEY,
        endpoint(ports[0]),
        endpoint(ports[1]),
        endpoint(ports[2]),
    )
}

pub struct Server {
    /// `http://127.0.0.1:PORT/devstoreaccount1`: the account's root, path-style.
    pub base: String,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub client: reqwest::Client,
    pub env: ShiftedEnv,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    pub async fn start() -> Self {
        Self::start_with(
            tempfile::tempdir().unwrap(),
            ifmatch_server::Options::default(),
        )
        .await
    }

    /// A server with the container `name` made.
    pub async fn with_container(name: &str) -> Self {
        let server = Self::start().await;
        server.create_container(name).await;
        server
    }

    /// A server over `dir` with `options`, open to requests without credentials (the tests of
    /// authentication start the binary without `--anonymous`).
    pub async fn start_with(dir: tempfile::TempDir, mut options: ifmatch_server::Options) -> Self {
        options.anonymous = true;
        let env = ShiftedEnv::default();
        let front =
            ifmatch_server::open_with_env(dir.path(), options.clone(), env.clone()).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let base = format!("http://{addr}/{ACCOUNT}");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(ifmatch_server::serve(
            listener,
            front,
            options,
            async move {
                let _ = stopped.await;
            },
        ));
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        Self {
            base,
            addr,
            client,
            env,
            dir,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the server cleanly and hands back its data directory.
    pub async fn stop(mut self) -> tempfile::TempDir {
        self.stop.take().unwrap().send(()).unwrap();
        self.task.take().unwrap().await.unwrap().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }

    pub fn advance(&self, by: Duration) {
        self.env
            .0
            .fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> Response {
        let url = format!("{}{path}", self.base);
        send(&self.client, method, &url, headers, body).await
    }

    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.send("GET", path, headers, Vec::new()).await
    }

    pub async fn head(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.send("HEAD", path, headers, Vec::new()).await
    }

    pub async fn put(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> Response {
        self.send("PUT", path, headers, body).await
    }

    /// A PUT with no body: an operation of its query (`comp=`) or a container's creation.
    pub async fn put_empty(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.put(path, headers, Vec::new()).await
    }

    pub async fn delete(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.send("DELETE", path, headers, Vec::new()).await
    }

    pub async fn create_container(&self, name: &str) {
        create_container(&self.client, &self.base, name).await;
    }

    /// Puts a blob and returns its ETag.
    pub async fn put_blob(&self, path: &str, body: &[u8]) -> String {
        let r = self.put(path, &[], body.to_vec()).await;
        assert_eq!(r.status(), 201, "put {path}");
        header(&r, "etag").unwrap()
    }

    pub async fn lease(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        let path = if path.contains('?') {
            format!("{path}&comp=lease")
        } else {
            format!("{path}?comp=lease")
        };
        self.put_empty(&path, headers).await
    }

    /// Acquire a lease on `path` for `duration` seconds (`"-1"`: infinite), no id proposed.
    pub async fn acquire(&self, path: &str, duration: &str) -> Response {
        let acquire = [
            ("x-ms-lease-action", "acquire"),
            ("x-ms-lease-duration", duration),
        ];
        self.lease(path, &acquire).await
    }
}

/// Sends one request to `url` with `client`. A PUT of a blob (a path of three segments or
/// more: account, container, blob; no `comp`) carries `x-ms-blob-type: BlockBlob` unless `headers` name it, as every SDK's Put
/// Blob does; tests of the header itself send raw requests.
pub async fn send(
    client: &reqwest::Client,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<reqwest::Body>,
) -> Response {
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = client.request(method.clone(), url).body(body);
    let parsed = reqwest::Url::parse(url).unwrap();
    let put_blob = method == Method::PUT
        && parsed.path().trim_start_matches('/').matches('/').count() >= 2
        && !parsed.query().unwrap_or("").contains("comp=")
        && !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("x-ms-blob-type"));
    if put_blob {
        request = request.header("x-ms-blob-type", "BlockBlob");
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// A GET of `url` with no fields.
pub async fn get(client: &reqwest::Client, url: &str) -> Response {
    send(client, "GET", url, &[], Vec::new()).await
}

/// A PUT of `url` with `headers` and no body.
pub async fn put(client: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> Response {
    send(client, "PUT", url, headers, Vec::new()).await
}

/// A Put Blob of `body` at `url` by a client of its own: the status it answers.
pub async fn upload(url: &str, body: impl Into<reqwest::Body>) -> u16 {
    send(&client(), "PUT", url, &[], body)
        .await
        .status()
        .as_u16()
}

/// `clients` clients add one to the counter blob at `path` (a decimal number) under each of
/// `bases` until `increments` were made in all: each reads through one instance and writes
/// back with `If-Match` through the other, starting over on 412. Answers the 412s met.
pub async fn count_across(
    http: &reqwest::Client,
    bases: [&str; 2],
    path: &str,
    clients: usize,
    increments: usize,
) -> usize {
    let tickets = Arc::new(std::sync::atomic::AtomicUsize::new(increments));
    let conflicts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let clients: Vec<_> = (0..clients)
        .map(|i| {
            let (http, tickets, conflicts) = (http.clone(), tickets.clone(), conflicts.clone());
            let read = format!("{}{path}", bases[i % 2]);
            let write = format!("{}{path}", bases[(i + 1) % 2]);
            tokio::spawn(async move {
                while tickets
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    let met = increment(&http, &read, &write).await;
                    conflicts.fetch_add(met, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    conflicts.load(Ordering::Relaxed)
}

/// Reads the counter at `read`, writes it back plus one with `If-Match` to `write`; on 412,
/// starts over. Answers the 412s met.
async fn increment(http: &reqwest::Client, read: &str, write: &str) -> usize {
    let mut conflicts = 0;
    loop {
        let r = get(http, read).await;
        assert_eq!(r.status(), 200);
        let tag = header(&r, "etag").unwrap();
        let value: u64 = r.text().await.unwrap().parse().unwrap();
        let next = (value + 1).to_string();
        let r = send(http, "PUT", write, &[("if-match", &tag)], next).await;
        match r.status().as_u16() {
            201 => return conflicts,
            412 => conflicts += 1,
            other => panic!("unexpected {other}"),
        }
    }
}

/// Creates container `name` on the account at `base` (201, or the test fails).
pub async fn create_container(client: &reqwest::Client, base: &str, name: &str) {
    let url = format!("{base}/{name}?restype=container");
    let r = send(client, "PUT", &url, &[], Vec::new()).await;
    assert_eq!(r.status(), 201, "create container {name}");
}

pub fn header(response: &Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

pub fn code(response: &Response) -> Option<String> {
    header(response, "x-ms-error-code")
}

/// A refusal's status and error code, to compare with `(409, "InvalidBlobType".into())`.
pub fn refusal(response: &Response) -> (u16, String) {
    (
        response.status().as_u16(),
        code(response).unwrap_or_default(),
    )
}

pub fn sha256_tag(bytes: &[u8]) -> String {
    ifmatch_core::strong_etag(bytes).to_string()
}

/// Sends a request line exactly as given, bypassing any client-side URL normalization, and
/// returns the status and the error code.
pub async fn raw(server: &Server, method: &str, target: &str) -> (u16, Option<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = &server.addr;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "{method} /{ACCOUNT}{target} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response.split(' ').nth(1).unwrap().parse().unwrap();
    let error = response
        .lines()
        .find_map(|l| l.strip_prefix("x-ms-error-code: "))
        .map(|v| v.trim().to_owned());
    (status, error)
}

/// An `ifmatch` process of a test's own, killed when dropped.
pub struct Ifmatch {
    pub child: std::process::Child,
    /// `http://127.0.0.1:PORT`, and for `serve` the account's root,
    /// `http://127.0.0.1:PORT/devstoreaccount1`.
    pub base: String,
}

impl Ifmatch {
    /// Starts the binary with `args` on a free loopback port and waits until it listens.
    pub fn start<I, S>(args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let (child, base) = spawn_ifmatch(args);
        Self { child, base }
    }
}

impl Drop for Ifmatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A request with no body signed with Shared Key Lite by the development account's key, its
/// string-to-sign written out from Azure's reference: for setting up what a client under test
/// cannot (object_store makes no containers).
pub async fn signed_lite(method: &str, url: &str) -> Response {
    use base64::Engine;
    let key = base64::engine::general_purpose::STANDARD
        .decode(ifmatch_azure::DEV_KEY)
        .unwrap();
    let date = httpdate_now();
    let parsed = reqwest::Url::parse(url).unwrap();
    let comp = parsed
        .query_pairs()
        .find(|(n, _)| n == "comp")
        .map(|(_, v)| format!("?comp={v}"))
        .unwrap_or_default();
    let text = format!(
        "{method}\n\n\n\nx-ms-date:{date}\nx-ms-version:2021-12-02\n/{ACCOUNT}{}{comp}",
        parsed.path()
    );
    send_signed(
        method,
        url,
        &date,
        &format!(
            "SharedKeyLite {ACCOUNT}:{}",
            ifmatch_azure::auth::sign(&key, &text)
        ),
    )
    .await
}

/// A request with no body signed with Shared Key (not Lite, which Azurite does not take) by
/// the development account's key, its string-to-sign written out from Azure's reference.
pub async fn signed_key(method: &str, url: &str) -> Response {
    signed_key_with(method, url, &[], Vec::new()).await
}

/// [`signed_key`] with `x-ms-*` fields and a body.
pub async fn signed_key_with(
    method: &str,
    url: &str,
    fields: &[(&str, &str)],
    body: Vec<u8>,
) -> Response {
    let length = (!body.is_empty()).then_some(body.len() as u64);
    let signed = shared_key(method, url, fields, length);
    let mut request = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .request(Method::from_bytes(method.as_bytes()).unwrap(), url);
    for (name, value) in &signed {
        request = request.header(name, value);
    }
    request.body(body).send().await.unwrap()
}

/// The fields that sign a request with Shared Key by the development account's key, its
/// string-to-sign written out from Azure's reference: `x-ms-date`, `x-ms-version`, `fields`
/// (lowercase) and `authorization`, for a body of `length` bytes.
pub fn shared_key(
    method: &str,
    url: &str,
    fields: &[(&str, &str)],
    length: Option<u64>,
) -> Vec<(String, String)> {
    use base64::Engine;
    let key = base64::engine::general_purpose::STANDARD
        .decode(ifmatch_azure::DEV_KEY)
        .unwrap();
    let date = httpdate_now();
    let parsed = reqwest::Url::parse(url).unwrap();
    let mut query: Vec<(String, String)> = parsed
        .query_pairs()
        .map(|(n, v)| (n.to_lowercase(), v.into_owned()))
        .collect();
    query.sort();
    let params: String = query.iter().map(|(n, v)| format!("\n{n}:{v}")).collect();
    let mut signed: Vec<(String, String)> = vec![
        ("x-ms-date".into(), date.clone()),
        ("x-ms-version".into(), "2021-12-02".into()),
    ];
    signed.extend(
        fields
            .iter()
            .map(|(n, v)| (n.to_lowercase(), (*v).to_owned())),
    );
    signed.sort();
    let canonical: String = signed.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();
    let length = length.map_or(String::new(), |len| len.to_string());
    let text = format!(
        "{method}\n\n\n{length}\n\n\n\n\n\n\n\n\n{canonical}/{ACCOUNT}{}{params}",
        parsed.path()
    );
    let authorization = format!(
        "SharedKey {ACCOUNT}:{}",
        ifmatch_azure::auth::sign(&key, &text)
    );
    signed.push(("authorization".into(), authorization));
    signed
}

/// Sends a request with no body, dated `date` and carrying `authorization`.
async fn send_signed(method: &str, url: &str, date: &str, authorization: &str) -> Response {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .request(Method::from_bytes(method.as_bytes()).unwrap(), url)
        .header("x-ms-date", date)
        .header("x-ms-version", "2021-12-02")
        .header("authorization", authorization)
        .send()
        .await
        .unwrap()
}

fn httpdate_now() -> String {
    ifmatch_core::date::date_header_value(ifmatch_core::date::to_http_date(SystemTime::now()))
        .to_str()
        .unwrap()
        .to_owned()
}

/// `HOST:PORT` of a base URL.
pub fn host_of(base: &str) -> String {
    let rest = base.trim_start_matches("http://");
    rest.split('/').next().unwrap_or(rest).to_owned()
}

/// The median and the 99th percentile of `times`, in milliseconds.
pub fn p50_p99(times: &mut [Duration]) -> (f64, f64) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e3;
    (at(0.5), at(0.99))
}

/// The `ifmatch` binary under test: this build's, or `IFMATCH_TEST_BIN` (to show that a test
/// fails against another build, say an older one).
pub fn binary() -> std::path::PathBuf {
    std::env::var_os("IFMATCH_TEST_BIN")
        .map_or_else(|| env!("CARGO_BIN_EXE_ifmatch").into(), Into::into)
}

/// Starts the `ifmatch` binary with `args`, listening on a free loopback port, and answers the
/// process and its base URL once it accepts connections. `serve` is started with
/// `--anonymous` (see [`spawn_signed`] for one that is not) and its base URL is the development account's root.
pub fn spawn_ifmatch<I, S>(args: I) -> (std::process::Child, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let serve = args.first().is_some_and(|a| a == "serve");
    let extra: &[&str] = if serve { &["--anonymous"] } else { &[] };
    let (child, base) = spawn_exact(
        args.iter()
            .map(|a| a.as_os_str())
            .chain(extra.iter().map(std::ffi::OsStr::new)),
    );
    let base = if serve {
        format!("{base}/{ACCOUNT}")
    } else {
        base
    };
    (child, base)
}

/// Starts `ifmatch serve` with `args` as a user would, without `--anonymous`: requests must
/// be signed. Answers the process and `http://127.0.0.1:PORT`.
pub fn spawn_signed<I, S>(args: I) -> (std::process::Child, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    spawn_exact(args)
}

fn spawn_exact<I, S>(args: I) -> (std::process::Child, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    spawn_with_env(args, &[])
}

/// `ifmatch serve --anonymous` over a data directory of its own with `args` (its backend, its
/// store) and `env`: what keeps it running, and the development account's base URL.
pub fn serve_anonymous(args: &[&str], env: &[(&str, &str)]) -> (Running, String) {
    let data = tempfile::tempdir().unwrap();
    let mut all = vec![
        "serve",
        "--anonymous",
        "--data",
        data.path().to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let (child, origin) = spawn_with_env(all, env);
    (Running(Process(child), data), format!("{origin}/{ACCOUNT}"))
}

/// A server of [`serve_anonymous`] while it is held: its process, stopped first when dropped,
/// then its data directory.
pub struct Running(pub Process, tempfile::TempDir);

/// [`spawn_signed`] with these environment variables.
pub fn spawn_with_env<I, S>(args: I, env: &[(&str, &str)]) -> (std::process::Child, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new(binary())
        .args(args)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(logs())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "ifmatch did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, format!("http://127.0.0.1:{port}"))
}

/// Where a started binary's log goes: nowhere, or the test's own stderr when
/// `IFMATCH_TEST_LOGS` is set (to see why a server answered as it did).
fn logs() -> std::process::Stdio {
    match std::env::var_os("IFMATCH_TEST_LOGS") {
        Some(_) => std::process::Stdio::inherit(),
        None => std::process::Stdio::null(),
    }
}

/// A client that never goes through a proxy.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// The body of a GET of `url`, as text.
pub async fn text_of(url: impl reqwest::IntoUrl) -> String {
    let response = client().get(url).send().await.unwrap();
    response.text().await.unwrap()
}

/// A client that never goes through a proxy and opens a connection per request.
pub fn unpooled_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

/// Serves `app` on a free loopback port for the rest of the test: its base URL.
pub async fn serve_app(app: axum::Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// Runs the Python script `script` of `tests/sdk` with `args`, in the virtual environment the
/// test command makes (its Azure SDK, boto3): it must succeed and print `tally`.
pub fn python_script<S: AsRef<std::ffi::OsStr>>(script: &str, args: &[S], tally: &str) {
    python_script_with(script, args, &[], tally);
}

/// [`python_script`], with the variables `vars` set for it.
pub fn python_script_with<S: AsRef<std::ffi::OsStr>>(
    script: &str,
    args: &[S],
    vars: &[(&str, &std::ffi::OsStr)],
    tally: &str,
) {
    let python = tool("IFMATCH_PYTHON", ".venv/bin/python");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/sdk");
    let output = std::process::Command::new(python)
        .arg(path.join(script))
        .args(args)
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    assert_ran(script, &output, tally);
}

/// Checks that a tool's run ended well and printed `tally`; what it printed on either stream
/// is the failure's message.
pub fn assert_ran(what: &str, output: &std::process::Output, tally: &str) {
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what}: {text}");
    assert!(text.contains(tally), "{what}: {text}");
}

/// A tool the test command installs, under the repository (or where `variable` says).
pub fn tool(variable: &str, relative: &str) -> std::path::PathBuf {
    let path = std::env::var_os(variable).map_or_else(
        || {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(relative)
        },
        std::path::PathBuf::from,
    );
    assert!(
        path.exists(),
        "{} is missing: run scripts/test, which installs it (or set {variable})",
        path.display()
    );
    path
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A port that refuses every connection while the returned socket lives: bound and never
/// listening. A port found free and let go (`free_port`) may be taken meanwhile by a server
/// another test starts, which answers, or not at all.
pub fn refusing_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(([127, 0, 0, 1], 0).into()).unwrap();
    let port = socket.local_addr().unwrap().port();
    (socket, port)
}

/// Waits up to a minute for `what` to listen on `port`.
pub fn wait_for(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server process of the test's own, killed when dropped.
pub struct Process(pub std::process::Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Process {
    /// Starts `command`, its output discarded, and waits until it listens on `port`.
    pub fn listening(mut command: std::process::Command, port: u16, what: &str) -> Self {
        let quiet = std::process::Stdio::null;
        // IFMATCH_TEST_LOG names a file that collects the processes' output.
        let log = || match std::env::var_os("IFMATCH_TEST_LOG") {
            Some(log) => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap()
                .into(),
            None => quiet(),
        };
        let child = command.stdout(log()).stderr(log()).spawn().unwrap();
        let process = Process(child);
        wait_for(port, what);
        process
    }
}

/// moto's S3 server on `port` (installed by the test command), listening.
pub fn moto(port: u16) -> Process {
    let mut command = std::process::Command::new(tool("IFMATCH_MOTO", ".venv/bin/moto_server"));
    command.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
    Process::listening(command, port, "moto_server")
}

/// Azurite's blob service (installed by the test command) keeping its data in `work`,
/// listening: the process and its port.
pub fn azurite(work: &std::path::Path) -> (Process, u16) {
    azurite_with(work, None)
}

/// Azurite's blob service, as [`azurite`], over HTTPS with `certificates`' server certificate
/// when given.
pub fn azurite_with(
    work: &std::path::Path,
    certificates: Option<&TestCertificates>,
) -> (Process, u16) {
    // A port another test's server took meanwhile answers as that server: another port.
    for _ in 0..4 {
        let (process, port) = azurite_on(work, certificates, free_port());
        if certificates.is_some() || answered_by(port, "Azurite-Blob") {
            return (process, port);
        }
    }
    panic!("azurite found no free port in four tries")
}

/// Whether the server answering a plain HTTP `GET /` on `port` names itself `server` in its
/// `Server` header.
fn answered_by(port: u16, server: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut answer = Vec::new();
    // What came before a failure is read as well as a whole answer; nothing answers nobody.
    if stream
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_ok()
    {
        let _ = stream.read_to_end(&mut answer);
    }
    let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    let head = answer.split("\r\n\r\n").next().unwrap_or_default();
    let wanted = format!("\r\nserver: {}", server.to_ascii_lowercase());
    head.contains(&wanted)
}

/// [`azurite_with`] on `port`: started again on the same port and `work`, Azurite is back with
/// what it held.
pub fn azurite_on(
    work: &std::path::Path,
    certificates: Option<&TestCertificates>,
    port: u16,
) -> (Process, u16) {
    let bin = tool(
        "IFMATCH_AZURITE",
        "target/azurite/node_modules/.bin/azurite-blob",
    );
    let mut command = std::process::Command::new(bin);
    command
        .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
        .arg("--location")
        .arg(work)
        .args([
            "--silent",
            "--skipApiVersionCheck",
            "--loose",
            "--disableTelemetry",
        ]);
    if let Some(certificates) = certificates {
        command.arg("--cert").arg(&certificates.cert);
        command.arg("--key").arg(&certificates.key);
    }
    (Process::listening(command, port, "azurite"), port)
}

/// The next request head on a raw origin's connection (without its blank line), what came
/// after it left in `buffer`; `None` once the peer closed or failed.
pub async fn next_head(stream: &mut tokio::net::TcpStream, buffer: &mut Vec<u8>) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            buffer.drain(..end + 4);
            return Some(head);
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A certificate authority made for one test, and a server certificate it issued for
/// `localhost` only, as PEM files in a temporary directory; or one self-signed certificate
/// for `localhost` that says `CA:TRUE`, as `openssl req -x509` makes them.
pub struct TestCertificates {
    pub dir: tempfile::TempDir,
    /// The authority's certificate: what a client is told to trust.
    pub ca: std::path::PathBuf,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

impl TestCertificates {
    pub fn new() -> Self {
        Self::made(false)
    }

    /// One certificate, its own authority.
    pub fn self_signed() -> Self {
        Self::made(true)
    }

    fn made(self_signed: bool) -> Self {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
        // Each its own subject: OpenSSL takes a certificate whose issuer is its subject for
        // a self-signed one.
        let params = |names: &[&str], subject: &str| {
            let mut params =
                CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                    .unwrap();
            params.distinguished_name.push(DnType::CommonName, subject);
            params
        };
        let mut authority = if self_signed {
            params(&["localhost"], "localhost")
        } else {
            params(&[], "ifmatch test authority")
        };
        authority.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let authority_key = KeyPair::generate().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        if self_signed {
            let cert = write(
                "cert.pem",
                authority.self_signed(&authority_key).unwrap().pem(),
            );
            return Self {
                ca: cert.clone(),
                cert,
                key: write("key.pem", authority_key.serialize_pem()),
                dir,
            };
        }
        let issuer = CertifiedIssuer::self_signed(authority, authority_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let server = params(&["localhost"], "localhost");
        let cert = server.signed_by(&key, &issuer).unwrap();
        Self {
            ca: write("ca.pem", issuer.pem()),
            cert: write("cert.pem", cert.pem()),
            key: write("key.pem", key.serialize_pem()),
            dir,
        }
    }

    /// A TLS server's configuration with the server certificate, offering HTTP/1.1 by ALPN.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};
        let chain = vec![CertificateDer::from_pem_file(&self.cert).unwrap()];
        let key = PrivateKeyDer::from_pem_file(&self.key).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

/// A bucket for `--backend az://...`: Azurite's blob service (whose conditional puts are
/// atomic), or `ifmatch serve` itself, with a container `fleet`, and what an instance needs to
/// reach it.
pub struct Bucket {
    process: Option<Process>,
    work: tempfile::TempDir,
    port: u16,
    served: bool,
    /// The variables object_store's Azure builder reads, for this store.
    pub env: Vec<(&'static str, String)>,
}

impl Bucket {
    /// Over Azurite.
    pub async fn start() -> Self {
        Self::start_as(false).await
    }

    /// Over `ifmatch serve` itself, whose data is durable: killed and started again, it is
    /// back with what it held (Azurite saves its metadata every few seconds).
    pub async fn served() -> Self {
        Self::start_as(true).await
    }

    async fn start_as(served: bool) -> Self {
        let work = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut bucket = Self {
            process: None,
            work,
            port,
            served,
            env: Vec::new(),
        };
        bucket.restart();
        let endpoint = format!("http://127.0.0.1:{port}/{ACCOUNT}");
        let made = signed_key("PUT", &format!("{endpoint}/fleet?restype=container")).await;
        assert_eq!(made.status(), 201);
        bucket.env = vec![
            ("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT.to_owned()),
            (
                "AZURE_STORAGE_ACCOUNT_KEY",
                ifmatch_azure::DEV_KEY.to_owned(),
            ),
            ("AZURE_STORAGE_ENDPOINT", endpoint),
            ("AZURE_ALLOW_HTTP", "true".to_owned()),
        ];
        bucket
    }

    /// Kills the store: the bucket is gone until [`Bucket::restart`].
    pub fn kill(&mut self) {
        self.process = None;
    }

    /// The store (again), on the same port, with what it held.
    pub fn restart(&mut self) {
        self.process = Some(if self.served {
            let mut command = std::process::Command::new(binary());
            command
                .arg("serve")
                .arg("--data")
                .arg(self.work.path())
                .args([
                    "--listen",
                    &format!("127.0.0.1:{}", self.port),
                    "--table-listen",
                    "off",
                    "--cosmos-listen",
                    "off",
                ]);
            Process::listening(command, self.port, "ifmatch serve, the bucket")
        } else {
            azurite_on(self.work.path(), None, self.port).0
        });
    }

    /// The `--backend` URL of records, tables and bytes under `prefix` in the container.
    pub fn url(&self, prefix: &str) -> String {
        format!("az://fleet/{prefix}")
    }

    /// [`Bucket::env`] as `spawn_with_env` takes it.
    pub fn vars(&self) -> Vec<(&str, &str)> {
        self.env.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }
}

/// A lease taken through instance `a` on the blob at `path` binds instance `b`: another
/// acquire is 409 `LeaseAlreadyPresent`, a write without the lease 412, a write with it 201.
pub async fn a_lease_binds(a: &str, b: &str, path: &str) {
    let http = client();
    let lease = [
        ("x-ms-lease-action", "acquire"),
        ("x-ms-lease-duration", "15"),
    ];
    let url = |base: &str, query: &str| format!("{base}{path}{query}");
    let taken = send(&http, "PUT", &url(a, "?comp=lease"), &lease, Vec::new()).await;
    assert_eq!(taken.status(), 201);
    let id = header(&taken, "x-ms-lease-id").unwrap();
    let other = send(&http, "PUT", &url(b, "?comp=lease"), &lease, Vec::new()).await;
    assert_eq!(
        (other.status().as_u16(), code(&other).as_deref()),
        (409, Some("LeaseAlreadyPresent"))
    );
    let blob = [("x-ms-blob-type", "BlockBlob")];
    let blind = send(&http, "PUT", &url(b, ""), &blob, "x").await;
    assert_eq!(blind.status(), 412);
    let held = [
        ("x-ms-blob-type", "BlockBlob"),
        ("x-ms-lease-id", id.as_str()),
    ];
    assert_eq!(
        send(&http, "PUT", &url(b, ""), &held, "y").await.status(),
        201
    );
}

/// A blob PUT to `url` through an instance whose store is gone: refused with 503 `ServerBusy`,
/// promptly (within 15 s, not after the store client's retries).
pub async fn a_put_is_refused_promptly(url: &str) {
    let blob = [("x-ms-blob-type", "BlockBlob")];
    let started = std::time::Instant::now();
    let put = send(&client(), "PUT", url, &blob, "lost?").await;
    let took = started.elapsed();
    assert_eq!(
        (put.status().as_u16(), code(&put).as_deref()),
        (503, Some("ServerBusy"))
    );
    assert!(took < Duration::from_secs(15), "answered after {took:?}");
}

/// The request of a batch on a partition: `(client, endpoint, pk)`.
pub type BatchRequest =
    dyn Fn(&reqwest::Client, &str, &str) -> reqwest::RequestBuilder + Send + Sync;

/// How a SIGKILL test sends one batch of `rows` operations on partition `pk`: its request to
/// `endpoint`, the status that acknowledges it, and what each operation's success leaves in the
/// answer.
pub struct BatchSent {
    pub request: Arc<BatchRequest>,
    pub acknowledged: u16,
    pub each: &'static str,
    pub rows: usize,
}

/// Four writers sending batches, the server (`start`: it and its endpoint) SIGKILLed under them
/// after `running` and three batches acknowledged, and started again, three rounds (`setup`
/// runs once, on the first): every partition whole or absent (`partitions` counts them), every
/// acknowledged batch there.
pub async fn sigkill_under_batches(
    start: impl Fn() -> (Process, String),
    setup: impl AsyncFn(&str),
    sent: BatchSent,
    partitions: impl AsyncFn(&str) -> std::collections::HashMap<String, usize>,
    running: Duration,
) {
    let acknowledged: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let sent = Arc::new(sent);
    for round in 0..3 {
        let (server, endpoint) = start();
        if round == 0 {
            setup(&endpoint).await;
        }
        let http = client();
        let before = acknowledged.lock().unwrap().len();
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let (http, endpoint) = (http.clone(), endpoint.clone());
                let (acknowledged, sent) = (acknowledged.clone(), sent.clone());
                tokio::spawn(async move {
                    for i in 0.. {
                        let pk = format!("r{round}w{w}b{i}");
                        let Ok(answer) = (sent.request)(&http, &endpoint, &pk).send().await else {
                            return;
                        };
                        let applied = answer.status() == sent.acknowledged;
                        let Ok(text) = answer.text().await else {
                            return;
                        };
                        let whole = text.matches(sent.each).count() == sent.rows;
                        assert!(applied && whole, "{text}");
                        acknowledged.lock().unwrap().push(pk);
                    }
                })
            })
            .collect();
        // `running`, and at least three batches acknowledged this round: on a loaded host a
        // fixed time alone has ended before a second batch was.
        tokio::time::sleep(running).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while acknowledged.lock().unwrap().len() < before + 3
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(server);
        for writer in writers {
            writer.await.unwrap();
        }
        let (_server, endpoint) = start();
        let counts = partitions(&endpoint).await;
        for (pk, count) in &counts {
            assert_eq!(*count, sent.rows, "partition {pk}: a batch applied in part");
        }
        for pk in acknowledged.lock().unwrap().iter() {
            let count = counts.get(pk);
            assert_eq!(count, Some(&sent.rows), "acknowledged batch {pk} was lost");
        }
        let applied = counts.len();
        assert!(
            applied >= 3,
            "round {round}: only {applied} batches applied before the kill"
        );
    }
}

/// `ifmatch serve` on `data` with `extra` arguments and `env` set, the blob front on a free
/// port and the listener `--{side}` (`table-listen`, `cosmos-listen`) on another, waited for:
/// the process and the two ports.
pub fn serve_beside(
    data: &std::path::Path,
    side: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Process, u16, u16) {
    let (blobs, beside) = (free_port(), free_port());
    let mut command = std::process::Command::new(binary());
    command.envs(env.iter().copied());
    command.arg("serve").arg("--data").arg(data);
    command.args(["--listen", &format!("127.0.0.1:{blobs}")]);
    command
        .arg(format!("--{side}"))
        .arg(format!("127.0.0.1:{beside}"));
    command.args(extra);
    let process = Process::listening(command, blobs, "ifmatch serve");
    wait_for(beside, side);
    (process, blobs, beside)
}
