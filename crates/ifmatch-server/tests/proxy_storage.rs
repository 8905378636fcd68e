//! `ifmatch proxy` in front of real storage, each serving a public object: moto's S3 server,
//! Azurite and `ifmatch serve` (installed by the test command). Through the proxy, each
//! object keeps the storage's own `ETag` byte for byte, is revalidated with it (the storage
//! answers 304), answers clients' revalidations and ranges from the store, and a change made
//! at the storage is seen at the next revalidation. Azure's Python SDK downloads a blob
//! through the proxy in parts (`x-ms-range`), from the store the second time, and writes
//! through it signed with the account's key, as the Azure CLI does; boto3 reads an S3 object
//! by ranges through it, checking every answer's checksum.

use crate::common;

use common::client;
use common::{TestCertificates, free_port, signed_key_with};

/// Where an object lives, and how to change it there.
struct Storage {
    /// The endpoint the proxy is put in front of.
    endpoint: String,
    /// The object's path under it.
    path: String,
    kind: Kind,
}

enum Kind {
    S3,
    Azurite,
    Ifmatch,
}

impl Storage {
    fn url(&self) -> String {
        format!("{}{}", self.endpoint, self.path)
    }

    /// Writes `body` as the object, straight to the storage.
    async fn write(&self, body: &[u8]) {
        let field = match self.kind {
            Kind::S3 => ("x-amz-acl", "public-read"),
            Kind::Azurite | Kind::Ifmatch => ("x-ms-blob-type", "BlockBlob"),
        };
        let (url, body) = (self.url(), body.to_vec());
        let response = match self.kind {
            Kind::Azurite => signed_key_with("PUT", &url, &[field], body).await,
            _ => (client()
                .put(url)
                .header(field.0, field.1)
                .body(body)
                .send()
                .await)
                .unwrap(),
        };
        let status = response.status();
        assert!(status.is_success(), "{status}");
    }
}

fn header(response: &reqwest::Response, name: &str) -> String {
    (response.headers().get(name))
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// The object at `storage` through a proxy in front of it, as a client sees it.
async fn through_a_proxy(storage: &Storage) {
    storage.write(b"version one of the object").await;
    let direct = client().get(storage.url()).send().await.unwrap();
    assert_eq!(direct.status(), 200);
    let tag = header(&direct, "etag");
    assert!(!tag.is_empty());

    let (_proxy, base) = proxy_in_front_of(&storage.endpoint);
    let url = format!("{base}{}", storage.path);
    let get = |extra: Option<(&'static str, String)>| {
        let mut request = client().get(&url);
        if let Some((name, value)) = extra {
            request = request.header(name, value);
        }
        request.send()
    };
    let first = get(None).await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(
        header(&first, "etag"),
        tag,
        "the storage's tag, byte for byte"
    );
    assert!(header(&first, "cache-status").contains("stored"));
    assert_eq!(
        first.bytes().await.unwrap(),
        &b"version one of the object"[..]
    );

    // No freshness given: revalidated with the storage's tag, which answers 304.
    let again = get(None).await.unwrap();
    assert_eq!(header(&again, "etag"), tag);
    let status = header(&again, "cache-status");
    assert!(
        status.contains("hit") || status.contains("fwd-status=304"),
        "{status}"
    );
    assert_eq!(
        again.bytes().await.unwrap(),
        &b"version one of the object"[..]
    );

    // A client holding the tag: 304 from the proxy; a range: 206 from the store.
    let revalidated = get(Some(("if-none-match", tag.clone()))).await.unwrap();
    assert_eq!(revalidated.status(), 304);
    let part = get(Some(("range", "bytes=8-10".into()))).await.unwrap();
    assert_eq!(part.status(), 206);
    assert_eq!(part.bytes().await.unwrap(), &b"one"[..]);

    // Changed at the storage: the next revalidation brings the new bytes and tag.
    storage.write(b"version two").await;
    let changed = get(None).await.unwrap();
    assert_eq!(changed.status(), 200);
    let new_tag = header(&changed, "etag");
    assert_ne!(new_tag, tag);
    assert_eq!(changed.bytes().await.unwrap(), &b"version two"[..]);
    let direct = client().get(storage.url()).send().await.unwrap();
    assert_eq!(header(&direct, "etag"), new_tag);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_front_of_moto_s3() {
    let port = free_port();
    let _moto = common::moto(port);
    let endpoint = format!("http://127.0.0.1:{port}");
    let made = (client().put(format!("{endpoint}/public")))
        .header("x-amz-acl", "public-read")
        .send()
        .await;
    assert!(made.unwrap().status().is_success());
    let storage = Storage {
        endpoint,
        path: "/public/docs/object.txt".into(),
        kind: Kind::S3,
    };
    through_a_proxy(&storage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_front_of_azurite() {
    let work = tempfile::tempdir().unwrap();
    let (_azurite, port) = common::azurite(work.path());
    let endpoint = format!("http://127.0.0.1:{port}");
    let container = format!(
        "{endpoint}/{}/public?restype=container",
        ifmatch_azure::DEV_ACCOUNT
    );
    let public = [("x-ms-blob-public-access", "blob")];
    let made = signed_key_with("PUT", &container, &public, Vec::new()).await;
    assert_eq!(made.status(), 201);
    let storage = Storage {
        endpoint,
        path: format!("/{}/public/docs/object.txt", ifmatch_azure::DEV_ACCOUNT),
        kind: Kind::Azurite,
    };
    through_a_proxy(&storage).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_front_of_ifmatch_serve() {
    let data = tempfile::tempdir().unwrap();
    let (serve, base) =
        common::spawn_ifmatch(["serve".as_ref(), "--data".as_ref(), data.path().as_os_str()]);
    let _serve = common::Process(serve);
    let made = (client().put(format!("{base}/public?restype=container")))
        .header("x-ms-blob-public-access", "blob")
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    let (endpoint, account) = base.rsplit_once('/').unwrap();
    let storage = Storage {
        endpoint: endpoint.to_owned(),
        path: format!("/{account}/public/docs/object.txt"),
        kind: Kind::Ifmatch,
    };
    through_a_proxy(&storage).await;
}

/// `ifmatch proxy` in front of `origin`: the process, and its base URL.
fn proxy_in_front_of(origin: &str) -> (common::Process, String) {
    proxy_in_front_of_with(origin, None)
}

/// `ifmatch proxy` in front of `origin`, trusting the authority of `tls` for an `https://`
/// origin.
fn proxy_in_front_of_with(
    origin: &str,
    tls: Option<&TestCertificates>,
) -> (common::Process, String) {
    let mut args = vec!["proxy".as_ref(), "--upstream".as_ref(), origin.as_ref()];
    if let Some(tls) = tls {
        args.extend(["--upstream-ca".as_ref(), tls.ca.as_os_str()]);
    }
    let (proxy, base) = common::spawn_ifmatch::<_, &std::ffi::OsStr>(args);
    (common::Process(proxy), base)
}

/// The variables that make the Python SDK trust the authority of `tls`, if any, when it
/// speaks to the storage itself.
fn trusting(tls: Option<&TestCertificates>) -> Vec<(&'static str, &std::ffi::OsStr)> {
    tls.map(|tls| ("REQUESTS_CA_BUNDLE", tls.ca.as_os_str()))
        .into_iter()
        .collect()
}

/// A signed `ifmatch serve` over a temporary directory: the directory, the process, its origin
/// (dropped in that order's reverse).
fn signed_serve() -> (tempfile::TempDir, common::Process, String) {
    let data = tempfile::tempdir().unwrap();
    let (serve, origin) =
        common::spawn_signed(["serve".as_ref(), "--data".as_ref(), data.path().as_os_str()]);
    (data, common::Process(serve), origin)
}

/// Azurite over HTTP on a temporary directory: the directory, the process, its origin.
fn plain_azurite() -> (tempfile::TempDir, common::Process, String) {
    let work = tempfile::tempdir().unwrap();
    let (azurite, port) = common::azurite(work.path());
    (work, azurite, format!("http://127.0.0.1:{port}"))
}

/// Azurite over HTTPS with a certificate for `localhost` from an authority made for the test:
/// the process, its origin, and the certificates.
fn azurite_over_https(work: &std::path::Path) -> (common::Process, String, TestCertificates) {
    let tls = TestCertificates::new();
    let (azurite, port) = common::azurite_with(work, Some(&tls));
    (azurite, format!("https://localhost:{port}"), tls)
}

/// The connection string of the development account's blobs at `endpoint` (a host's root).
fn connection_to(endpoint: &str) -> String {
    let account = ifmatch_azure::DEV_ACCOUNT;
    format!(
        "DefaultEndpointsProtocol=http;AccountName={account};AccountKey={};\
         BlobEndpoint={endpoint}/{account};",
        ifmatch_azure::DEV_KEY
    )
}

/// Runs `tests/sdk/proxy_download.py`: Azure's Python SDK downloads a blob in parts through a
/// proxy in front of `origin` (the development account's storage): before anything is
/// stored, again from the parts stored, after a plain GET stored it whole, with each part's
/// MD5, and signed with the account's key (fresh and stale).
/// With `tls`, the origin is spoken to over HTTPS (see [`proxy_in_front_of_with`]).
fn python_downloads_through_a_proxy(origin: &str, tls: Option<&TestCertificates>) {
    let (_proxy, base) = proxy_in_front_of_with(origin, tls);
    let args = [
        connection_to(origin),
        format!("{base}/{}", ifmatch_azure::DEV_ACCOUNT),
    ];
    common::python_script_with(
        "proxy_download.py",
        &args,
        &trusting(tls),
        "python proxy downloads: 7 passed",
    );
}

#[test]
fn the_python_sdk_downloads_in_parts_through_a_proxy_in_front_of_ifmatch_serve() {
    let data = tempfile::tempdir().unwrap();
    let (serve, base) =
        common::spawn_ifmatch(["serve".as_ref(), "--data".as_ref(), data.path().as_os_str()]);
    let _serve = common::Process(serve);
    let (origin, _) = base.rsplit_once('/').unwrap();
    python_downloads_through_a_proxy(origin, None);
}

#[test]
fn the_python_sdk_downloads_in_parts_through_a_proxy_in_front_of_azurite() {
    let (_work, _azurite, origin) = plain_azurite();
    python_downloads_through_a_proxy(&origin, None);
}

#[test]
fn the_python_sdk_downloads_in_parts_through_a_proxy_in_front_of_azurite_over_https() {
    let work = tempfile::tempdir().unwrap();
    let (_azurite, origin, tls) = azurite_over_https(work.path());
    python_downloads_through_a_proxy(&origin, Some(&tls));
}

#[test]
fn boto3_reads_ranges_through_a_proxy_in_front_of_moto_s3() {
    let port = free_port();
    let _moto = common::moto(port);
    let origin = format!("http://127.0.0.1:{port}");
    let (_proxy, base) = proxy_in_front_of(&origin);
    common::python_script(
        "proxy_s3.py",
        &[origin, base],
        "boto3 proxy reads: 7 passed",
    );
}

/// Runs `tests/sdk/proxy_upload.py`: Azure's Python SDK writes through a proxy in front of
/// `origin` (a private container, every request signed).
/// With `tls`, the origin is spoken to over HTTPS (see [`proxy_in_front_of_with`]).
fn python_writes_through_a_proxy(origin: &str, tls: Option<&TestCertificates>) {
    let (_proxy, base) = proxy_in_front_of_with(origin, tls);
    common::python_script(
        "proxy_upload.py",
        &[connection_to(&base)],
        "python proxy writes: 7 passed",
    );
}

#[test]
fn the_python_sdk_writes_through_a_proxy_in_front_of_a_signed_ifmatch_serve() {
    let (_data, _serve, origin) = signed_serve();
    python_writes_through_a_proxy(&origin, None);
}

#[test]
fn the_python_sdk_writes_through_a_proxy_in_front_of_azurite() {
    let (_work, _azurite, origin) = plain_azurite();
    python_writes_through_a_proxy(&origin, None);
}

#[test]
fn the_python_sdk_writes_through_a_proxy_in_front_of_azurite_over_https() {
    let work = tempfile::tempdir().unwrap();
    let (_azurite, origin, tls) = azurite_over_https(work.path());
    python_writes_through_a_proxy(&origin, Some(&tls));
}

/// Runs `tests/sdk/proxy_rclone.py`: Debian's rclone uploads, copies and moves server-side,
/// lists and reads through a proxy in front of `origin`, with a container SAS naming the proxy;
/// with `signed_copy`, the Python SDK copies with the account's key too.
fn rclone_through_a_proxy(origin: &str, signed_copy: bool) {
    let (_proxy, base) = proxy_in_front_of(origin);
    let mut args = vec![connection_to(&base), ifmatch_azure::DEV_KEY.to_owned()];
    let tally = if signed_copy {
        args.push("--signed-copy".into());
        "rclone through the proxy: 8 passed"
    } else {
        "rclone through the proxy: 7 passed"
    };
    common::python_script("proxy_rclone.py", &args, tally);
}

#[test]
fn rclone_copies_and_moves_server_side_through_a_proxy_in_front_of_a_signed_ifmatch_serve() {
    let (_data, _serve, origin) = signed_serve();
    rclone_through_a_proxy(&origin, true);
}

#[test]
fn rclone_copies_and_moves_server_side_through_a_proxy_in_front_of_azurite() {
    let (_work, _azurite, origin) = plain_azurite();
    rclone_through_a_proxy(&origin, false);
}

#[test]
fn the_azure_cli_uploads_and_downloads_through_a_proxy_in_front_of_a_signed_ifmatch_serve() {
    let (_data, _serve, origin) = signed_serve();
    let (_proxy, base) = proxy_in_front_of(&origin);
    let connection = connection_to(&base);
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("up.bin");
    let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&file, &bytes).unwrap();
    let az = |args: &[&str]| {
        let output =
            std::process::Command::new(common::tool("IFMATCH_AZ", "target/az-venv/bin/az"))
                .args(args)
                .args(["--connection-string", &connection, "--only-show-errors"])
                .env("AZURE_CONFIG_DIR", work.path().join("az"))
                .output()
                .unwrap();
        let text = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.success(), text)
    };
    let up = file.to_str().unwrap();
    let (made, text) = az(&["storage", "container", "create", "-n", "cli"]);
    assert!(made, "{text}");
    // Create-only, the CLI's default: `If-None-Match: *`, signed.
    let upload = [
        "storage", "blob", "upload", "-c", "cli", "-n", "b.bin", "-f", up,
    ];
    let (uploaded, text) = az(&upload);
    assert!(uploaded, "{text}");
    let (again, text) = az(&upload);
    assert!(!again && text.contains("already exists"), "{text}");
    let down = work.path().join("down.bin");
    let download = ["storage", "blob", "download", "-c", "cli", "-n", "b.bin"];
    let (downloaded, text) = az(&[&download[..], &["-f", down.to_str().unwrap()]].concat());
    assert!(downloaded, "{text}");
    assert!(std::fs::read(&down).unwrap() == bytes, "the bytes uploaded");
    let (deleted, text) = az(&["storage", "blob", "delete", "-c", "cli", "-n", "b.bin"]);
    assert!(deleted, "{text}");
}

/// A site kept in a public container of `ifmatch serve`, visited through the proxy with a real
/// browser (Debian's Chromium, driven by playwright-core; `tests/browser/site.mjs`, both
/// installed by the test command): it renders, a second user gets every part the site keeps an
/// hour from the proxy's store, a reload revalidates, and a write through the proxy reaches the
/// next visitor at once.
#[test]
fn a_browser_visits_a_site_kept_in_ifmatch_serve_through_the_proxy() {
    let data = tempfile::tempdir().unwrap();
    let (serve, origin) =
        common::spawn_ifmatch(["serve".as_ref(), "--data".as_ref(), data.path().as_os_str()]);
    let _serve = common::Process(serve);
    let (endpoint, account) = origin.rsplit_once('/').unwrap();
    let (_proxy, base) = proxy_in_front_of(endpoint);
    common::tool(
        "IFMATCH_PLAYWRIGHT",
        "tests/browser/node_modules/playwright-core",
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "{chromium} is missing: run scripts/test, which installs it (or set CHROMIUM)"
    );
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser/site.mjs");
    let output = std::process::Command::new("node")
        .arg(script)
        .arg(format!("{base}/{account}/site"))
        .env("CHROMIUM", &chromium)
        .output()
        .unwrap();
    common::assert_ran("site.mjs", &output, "browser through the proxy: 4 passed");
}
