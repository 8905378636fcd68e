//! What a hostile client and a bad day in production do to `ifmatch serve`: a full disk under
//! concurrent uploads and deletes, slow and idle clients, damaged files, a data directory
//! opened in the wrong mode, containers deleted under uploads, clients that leave mid-upload,
//! and requests that are not what they seem.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{ACCOUNT, Ifmatch, Server, code, header, sha256_tag, unpooled_client as client};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn serve(data: &Path, extra: &[&str]) -> Ifmatch {
    let mut args = vec!["serve".to_owned(), "--data".to_owned()];
    args.push(data.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    Ifmatch::start(args)
}

fn ifmatch() -> Command {
    Command::new(common::binary())
}

fn files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

/// A tmpfs of `size`, unmounted when dropped. Where this process may not mount one, the test
/// fails, saying why, unless `IFMATCH_SKIP_DISK_FULL` is set: then `None`, and the test is
/// skipped knowingly (a test that passes without running would say nothing).
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        let why = match mounted {
            Ok(out) if out.status.success() => return Some(Self(dir)),
            Ok(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
            Err(e) => format!("no mount command: {e}"),
        };
        if std::env::var_os("IFMATCH_SKIP_DISK_FULL").is_some() {
            println!("SKIPPED (IFMATCH_SKIP_DISK_FULL): cannot mount a tmpfs here: {why}");
            return None;
        }
        panic!(
            "cannot mount a tmpfs for the full-disk test ({why}): run as root, as the test \
             command does in CI, or set IFMATCH_SKIP_DISK_FULL=1 to skip it knowingly"
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

/// A disk that fills up under 4 uploaders and a deleter never turns a 201 into lost
/// or torn bytes: every acknowledged blob that was not deleted reads back whole, as a whole
/// and by ranges, with the tag it was acknowledged with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_never_loses_an_acknowledged_upload() {
    let Some(disk) = Tmpfs::mount("4m") else {
        return;
    };
    let data = disk.0.path().join("data");
    let server = serve(&data, &[]);
    let http = client();
    let base = server.base.clone();
    common::create_container(&http, &base, "full").await;

    // name -> (tag, bytes) of acknowledged, not deleted blobs.
    type Known = HashMap<String, (String, Vec<u8>)>;
    let acknowledged: Arc<Mutex<Known>> = Arc::default();
    let refused = Arc::new(Mutex::new(HashMap::<u16, usize>::new()));
    let uploaders: Vec<_> = (0..4u32)
        .map(|w| {
            let (http, base) = (http.clone(), base.clone());
            let (acknowledged, refused) = (acknowledged.clone(), refused.clone());
            tokio::spawn(async move {
                for i in 0..400u32 {
                    let body: Vec<u8> = (0..3000u32)
                        .map(|b| (b.wrapping_mul(31) ^ i ^ (w << 5)) as u8)
                        .collect();
                    let name = format!("u{w}-{i}");
                    let url = format!("{base}/full/{name}");
                    let r = common::send(&http, "PUT", &url, &[], body.clone()).await;
                    match r.status().as_u16() {
                        201 => {
                            let tag = header(&r, "etag").unwrap();
                            assert_eq!(tag, sha256_tag(&body), "a 201 carries its bytes' tag");
                            acknowledged.lock().unwrap().insert(name, (tag, body));
                        }
                        status => {
                            assert!(status >= 500, "{name}: {status} {:?}", code(&r));
                            *refused.lock().unwrap().entry(status).or_default() += 1;
                        }
                    }
                }
            })
        })
        .collect();
    let deleter = {
        let (http, base, acknowledged) = (http.clone(), base.clone(), acknowledged.clone());
        tokio::spawn(async move {
            let mut deleted = 0;
            for round in 0..400u32 {
                let victim = {
                    let mut known = acknowledged.lock().unwrap();
                    let name = known.keys().nth(round as usize % 7).cloned();
                    name.map(|n| (n.clone(), known.remove(&n).unwrap()))
                };
                let Some((name, kept)) = victim else {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                };
                let r =
                    common::send(&http, "DELETE", &format!("{base}/full/{name}"), &[], "").await;
                if r.status() == 202 {
                    deleted += 1;
                } else {
                    // Not deleted: it must still be whole.
                    acknowledged.lock().unwrap().insert(name, kept);
                }
            }
            deleted
        })
    };
    for u in uploaders {
        u.await.unwrap();
    }
    let deleted = deleter.await.unwrap();
    let refused = refused.lock().unwrap().clone();
    let acknowledged = acknowledged.lock().unwrap().clone();
    println!(
        "full disk: {} acknowledged and kept, {deleted} deleted, refused {refused:?}",
        acknowledged.len()
    );
    assert!(
        refused.values().sum::<usize>() > 0,
        "the disk never filled: the test proves nothing"
    );
    assert!(acknowledged.len() > 100);
    for (name, (tag, body)) in &acknowledged {
        let url = format!("{base}/full/{name}");
        let r = common::get(&http, &url).await;
        assert_eq!(r.status(), 200, "{name}");
        assert_eq!(header(&r, "etag").as_deref(), Some(tag.as_str()));
        assert_eq!(r.bytes().await.unwrap(), &body[..], "{name}: bytes differ");
        let r = common::send(&http, "GET", &url, &[("range", "bytes=1000-2999")], "").await;
        assert_eq!(r.status(), 206, "{name}");
        assert_eq!(r.bytes().await.unwrap(), &body[1000..3000]);
    }
    assert_eq!(
        files(&data.join("tmp")),
        0,
        "failed writes left temporary files"
    );
    drop(server);
    let check = ifmatch()
        .args(["check", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "ifmatch check after a full disk: {said}"
    );
}

/// A record is updated over the other slot of its file, which needs no new block: with the
/// disk full, a small blob (a counter, a lock) still takes conditional writes and its lease
/// still renews, each acknowledged write durable across a restart, while a new blob is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_still_updates_small_blobs_and_renews_leases() {
    let Some(disk) = Tmpfs::mount("1m") else {
        return;
    };
    let data = disk.0.path().join("data");
    let http = client();
    let mut server = serve(&data, &[]);
    let base = server.base.clone();
    let send = |method: &'static str, path: String, headers: Vec<(&'static str, String)>| {
        let (http, url) = (http.clone(), format!("{base}/full/{path}"));
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let body = if method == "PUT" && !path.contains("comp=") {
                path.clone()
            } else {
                String::new()
            };
            common::send(&http, method, &url, &headers, body).await
        }
    };
    let r = send("PUT", "?restype=container".into(), vec![]).await;
    assert_eq!(r.status(), 201);
    let r = send("PUT", "counter".into(), vec![]).await;
    assert_eq!(r.status(), 201);
    let mut tag = header(&r, "etag").unwrap();
    let lease = "0f6b5c7e-1d2a-4b3c-8d4e-5f6a7b8c9d0e".to_owned();
    let acquire = vec![
        ("x-ms-lease-action", "acquire".into()),
        ("x-ms-lease-duration", "15".into()),
        ("x-ms-proposed-lease-id", lease.clone()),
    ];
    let r = send("PUT", "counter?comp=lease".into(), acquire).await;
    assert_eq!(r.status(), 201);

    // Fill the disk to its last byte.
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(disk.0.path().join("filler")).unwrap();
        let block = vec![0u8; 4096];
        while filler.write_all(&block).is_ok() {}
        let _ = filler.sync_all();
    }
    let r = send("PUT", "new-blob".into(), vec![]).await;
    assert!(
        r.status().is_server_error(),
        "a new blob on a full disk: {}",
        r.status()
    );

    for n in 0..20 {
        let headers = vec![("if-match", tag.clone()), ("x-ms-lease-id", lease.clone())];
        // The body is the path: `counter` and a query that only changes the bytes.
        let r = send("PUT", format!("counter?n={n}"), headers).await;
        assert_eq!(r.status(), 201, "update {n} on a full disk: {:?}", code(&r));
        tag = header(&r, "etag").unwrap();
        let renew = vec![
            ("x-ms-lease-action", "renew".into()),
            ("x-ms-lease-id", lease.clone()),
        ];
        let r = send("PUT", "counter?comp=lease".into(), renew).await;
        assert_eq!(
            r.status(),
            200,
            "renewal {n} on a full disk: {:?}",
            code(&r)
        );
    }

    // What was acknowledged is what a restarted server serves.
    drop(server);
    server = serve(&data, &[]);
    let url = format!("{}/full/counter", server.base);
    let r = common::get(&http, &url).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "etag").as_deref(), Some(tag.as_str()));
    assert_eq!(header(&r, "x-ms-lease-state").as_deref(), Some("leased"));
    assert_eq!(r.bytes().await.unwrap(), "counter?n=19");
}

/// Creates the container `name` under `base` with one blob, `x`, holding `payload`: what the
/// well-behaved client of a crowd test reads ([`gets_get_through`]).
/// Makes the container `name` on `server`; answers a client, the server's base URL and its
/// host and port.
async fn with_container(server: &Ifmatch, name: &str) -> (reqwest::Client, String, String) {
    let (http, base) = (client(), server.base.clone());
    common::create_container(&http, &base, name).await;
    let addr = common::host_of(&base);
    (http, base, addr)
}

/// [`with_container`], with the blob `x` in the container.
async fn container_with_x(server: &Ifmatch, name: &str) -> (reqwest::Client, String, String) {
    let (http, base, addr) = with_container(server, name).await;
    let r = common::send(&http, "PUT", &format!("{base}/{name}/x"), &[], "payload").await;
    assert_eq!(r.status(), 201);
    (http, base, addr)
}

/// `times` GETs of `{base}/{container}/x`, one every `pause`, each answered within
/// `patience`: the slowest.
async fn gets_get_through(
    http: &reqwest::Client,
    base: &str,
    container: &str,
    (times, pause, patience): (usize, Duration, Duration),
) -> Duration {
    let mut worst = Duration::ZERO;
    for _ in 0..times {
        let start = Instant::now();
        let r = tokio::time::timeout(
            patience,
            common::get(http, &format!("{base}/{container}/x")),
        )
        .await
        .unwrap_or_else(|_| {
            panic!("a well-behaved GET waited more than {patience:?} behind the crowd")
        });
        assert_eq!(r.status(), 200);
        assert_eq!(r.text().await.unwrap(), "payload");
        worst = worst.max(start.elapsed());
        tokio::time::sleep(pause).await;
    }
    worst
}

/// Sends a request head one byte every `pace`, never finishing it; answers when the server
/// closed the connection (or `None` if it never did within `patience`).
async fn slowloris(addr: String, pace: Duration, patience: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut stream = TcpStream::connect(&addr).await.ok()?;
    let head =
        b"GET /devstoreaccount1/crowd/x HTTP/1.1\r\nHost: victim\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for byte in head.iter().cycle() {
        if start.elapsed() > patience {
            return None;
        }
        if stream.write_all(&[*byte]).await.is_err() {
            return Some(start.elapsed());
        }
        let mut buf = [0u8; 64];
        match tokio::time::timeout(pace, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return Some(start.elapsed()),
            // A 408 or 400 then close, as hyper may answer.
            Ok(Ok(_)) => return Some(start.elapsed()),
            Err(_) => {}
        }
    }
    None
}

/// A slowloris crowd three times larger than the connection cap cannot keep a
/// well-behaved client out, and its connections are closed at the header timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_crowd_cannot_starve_a_well_behaved_client() {
    let data = tempfile::tempdir().unwrap();
    let server = serve(
        data.path(),
        &["--max-connections", "64", "--header-timeout", "2"],
    );
    let (http, base, addr) = container_with_x(&server, "crowd").await;
    let crowd: Vec<_> = (0..192)
        .map(|_| {
            let addr = addr.clone();
            tokio::spawn(slowloris(
                addr,
                Duration::from_millis(300),
                Duration::from_secs(8),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pace = (20, Duration::from_millis(100), Duration::from_secs(3));
    let worst = gets_get_through(&http, &base, "crowd", pace).await;
    let mut closed = Vec::new();
    for c in crowd {
        closed.push(c.await.unwrap());
    }
    let never = closed.iter().filter(|c| c.is_none()).count();
    let late = closed
        .iter()
        .flatten()
        .filter(|d| **d > Duration::from_secs(4))
        .count();
    println!(
        "slowloris: worst well-behaved GET {:.0} ms; crowd connections never closed: {never}, closed after 4 s: {late}",
        worst.as_secs_f64() * 1e3
    );
    assert_eq!(never, 0, "slow connections outlived the header timeout");
    assert_eq!(late, 0, "slow connections outlived the header timeout");
}

/// A kept-alive HTTP/1 connection has the header timeout to send its next request's head, from
/// when its last answer ended (the connection table's rule, not a timer armed a request): one
/// asking every quarter of it stays open, one that stops is closed soon after the timeout.
#[tokio::test]
async fn a_kept_alive_connection_waits_for_its_next_head_under_the_header_timeout() {
    let data = tempfile::tempdir().unwrap();
    let server = serve(data.path(), &["--header-timeout", "2"]);
    let mut stream = TcpStream::connect(common::host_of(&server.base))
        .await
        .unwrap();
    async fn answered(stream: &mut TcpStream) {
        let head = b"HEAD /devstoreaccount1/kept/x HTTP/1.1\r\nHost: kept\r\n\r\n";
        stream.write_all(head).await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed while a request was asked");
            seen.extend_from_slice(&buf[..n]);
        }
    }
    for _ in 0..6 {
        answered(&mut stream).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    answered(&mut stream).await;
    let waiting = Instant::now();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await;
    let waited = waiting.elapsed();
    assert!(matches!(read, Ok(Ok(0) | Err(_))), "not closed: {read:?}");
    assert!(
        (Duration::from_millis(1800)..Duration::from_millis(4500)).contains(&waited),
        "closed after {waited:?}, the header timeout being 2 s"
    );
}

/// An upload that stops sending is abandoned at the body timeout and leaves nothing;
/// a client that leaves mid-upload leaves nothing either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_and_abandoned_uploads_leave_nothing() {
    let data = tempfile::tempdir().unwrap();
    let server = serve(data.path(), &["--body-timeout", "1"]);
    let (http, base, addr) = with_container(&server, "slow").await;
    let head = |len: usize| {
        format!(
            "PUT /devstoreaccount1/slow/b HTTP/1.1\r\nHost: x\r\nx-ms-blob-type: BlockBlob\r\ncontent-length: {len}\r\n\r\n"
        )
    };

    // Stalls after 64 KiB of 1 MiB: answered (or closed) within the timeout and a margin.
    let mut stalled = TcpStream::connect(&addr).await.unwrap();
    stalled.write_all(head(1 << 20).as_bytes()).await.unwrap();
    stalled.write_all(&vec![7u8; 64 << 10]).await.unwrap();
    let start = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stalled.read_to_end(&mut answer)).await;
    assert!(
        read.is_ok(),
        "a stalled upload held its connection past the body timeout"
    );
    println!("stalled upload ended after {:?}", start.elapsed());

    // Leaves after 64 KiB.
    let mut gone = TcpStream::connect(&addr).await.unwrap();
    gone.write_all(head(1 << 20).as_bytes()).await.unwrap();
    gone.write_all(&vec![7u8; 64 << 10]).await.unwrap();
    drop(gone);

    // The same for a blob small enough to be kept in its record (read whole before its
    // record is written): one stalls after 100 of 4,000 bytes, one leaves after them.
    let small = "PUT /devstoreaccount1/slow/s HTTP/1.1\r\nHost: x\r\nx-ms-blob-type: BlockBlob\r\ncontent-length: 4000\r\n\r\n";
    let mut stalled = TcpStream::connect(&addr).await.unwrap();
    stalled.write_all(small.as_bytes()).await.unwrap();
    stalled.write_all(&[7u8; 100]).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stalled.read_to_end(&mut answer)).await;
    assert!(
        read.is_ok(),
        "a stalled small upload outlived the body timeout"
    );
    assert!(!String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 201"));
    let mut gone = TcpStream::connect(&addr).await.unwrap();
    gone.write_all(small.as_bytes()).await.unwrap();
    gone.write_all(&[7u8; 100]).await.unwrap();
    drop(gone);

    tokio::time::sleep(Duration::from_millis(500)).await;
    for blob in ["b", "s"] {
        let r = common::get(&http, &format!("{base}/slow/{blob}")).await;
        assert_eq!(code(&r).as_deref(), Some("BlobNotFound"), "{blob}");
    }
    assert_eq!(files(&data.path().join("tmp")), 0, "temporary files left");
    assert_eq!(files(&data.path().join("objects")), 0, "objects left");
}

/// One damaged record is moved aside and named; the rest serves. `ifmatch check`
/// finds damaged records and objects that do not match their records, and exits 1; a read of
/// a blob whose object is short answers 500, whole or by range, and the server stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_files_are_named_and_the_rest_serves() {
    let data = tempfile::tempdir().unwrap();
    let path = data.path();
    let http = client();
    {
        let server = serve(path, &[]);
        let base = &server.base;
        common::send(
            &http,
            "PUT",
            &format!("{base}/box?restype=container"),
            &[],
            "",
        )
        .await;
        for name in ["a", "b", "c"] {
            let r = common::send(
                &http,
                "PUT",
                &format!("{base}/box/{name}"),
                &[],
                vec![b'x'; 5000],
            )
            .await;
            assert_eq!(r.status(), 201);
        }
        // And one small enough to be kept in its record.
        let r = common::send(&http, "PUT", &format!("{base}/box/d"), &[], "ten bytes!").await;
        assert_eq!(r.status(), 201);
        let busy = ifmatch()
            .args(["check", "--data"])
            .arg(path)
            .output()
            .unwrap();
        assert!(!busy.status.success(), "check ran beside a server");
        assert!(String::from_utf8_lossy(&busy.stderr).contains("in use"));
    }
    let clean = ifmatch()
        .args(["check", "--data"])
        .arg(path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&clean.stdout).into_owned();
    assert!(clean.status.success(), "{said}");
    assert!(
        said.contains("4 blobs (15010 bytes) verified, 0 damaged"),
        "{said}"
    );

    // Damage the record of `a`: the next start moves it aside and serves b and c.
    let blobs = path.join("containers/box/blobs");
    let record_of = |name: &str| {
        use sha2::Digest;
        blobs.join(format!("{}.json", hex::encode(sha2::Sha256::digest(name))))
    };
    std::fs::write(record_of("a"), b"{\"name\":\"a\",\"rec").unwrap();
    let server = serve(path, &[]);
    let base = server.base.clone();
    let r = common::get(&http, &format!("{base}/box/a")).await;
    assert_eq!(r.status(), 404);
    for name in ["b", "c"] {
        let r = common::get(&http, &format!("{base}/box/{name}")).await;
        assert_eq!(r.status(), 200, "{name}");
    }
    assert_eq!(files(&path.join("damaged")), 1);
    // The objects stay: the damaged record may name one of them.
    assert_eq!(files(&path.join("objects")), 3);

    // Shorten the object of `b` and remove the object of `c`: reads answer 500 at once, whole
    // or by range, and never panic or serve wrong bytes.
    // A record file holds the record's JSON in one of its two slots.
    let json_of = |name: &str| -> serde_json::Value {
        let bytes = std::fs::read(record_of(name)).unwrap();
        let (payload, _) = ifmatch_server::local::record_file::read(&bytes).unwrap();
        serde_json::from_slice(payload).unwrap()
    };
    let object_of = |name: &str| {
        json_of(name)["record"]["content"]["object"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (object, gone) = (object_of("b"), object_of("c"));
    // Change the bytes `d`'s record keeps, keeping their length: only a hash finds it. (Written
    // back whole as JSON, as records were before their slots: still read.)
    let mut record = json_of("d");
    record["record"]["content"]["inline"] = "VEVOIEJZVEVTIQ==".into(); // "TEN BYTES!"
    std::fs::write(record_of("d"), serde_json::to_vec(&record).unwrap()).unwrap();
    std::fs::write(path.join("objects").join(&object), b"short").unwrap();
    std::fs::remove_file(path.join("objects").join(&gone)).unwrap();
    // (A fresh process, so the byte cache does not hold the old bytes.)
    drop(server);
    let server = serve(path, &[]);
    let base = server.base.clone();
    for name in ["b", "c"] {
        for range in [None, Some("bytes=100-200"), Some("bytes=4000-")] {
            let headers: Vec<(&str, &str)> = range.iter().map(|r| ("range", *r)).collect();
            let r = common::send(&http, "GET", &format!("{base}/box/{name}"), &headers, "").await;
            assert_eq!(r.status(), 500, "{name} {range:?}");
            assert_eq!(code(&r).as_deref(), Some("InternalError"));
        }
    }
    let r = common::get(&http, &format!("{base}/box?restype=container")).await;
    assert_eq!(r.status(), 200, "the server stays up");
    drop(server);

    let check = ifmatch()
        .args(["check", "--data"])
        .arg(path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout).into_owned();
    assert_eq!(check.status.code(), Some(1), "{said}");
    assert!(
        said.contains("holds 5 bytes, the record says 5000"),
        "{said}"
    );
    assert!(said.contains(&object), "{said}");
    assert!(said.contains(&gone), "{said}");
    assert!(
        said.contains("blob \"d\"") && said.contains("the bytes hash to"),
        "{said}"
    );
    assert!(
        said.contains("damaged record the server moved aside"),
        "{said}"
    );
}

/// A data directory remembers how it is used; a plain `serve` refuses the shared
/// directory of Redis-mode instances (it would take their objects for orphans), and the other
/// way round, saying why.
#[test]
fn a_data_directory_refuses_the_other_mode() {
    let run = |data: &Path, backend: Option<&str>| {
        let mut command = ifmatch();
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(data);
        if let Some(backend) = backend {
            command.args(["--backend", backend]);
        }
        let out = command.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Shared: the mode file says so (as the first Redis-mode instance writes it).
    let shared = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(shared.path().join("objects")).unwrap();
    std::fs::write(shared.path().join("mode"), "shared\n").unwrap();
    std::fs::write(
        shared
            .path()
            .join("objects/0123456789abcdef0123456789abcdef"),
        "live",
    )
    .unwrap();
    let (ok, said) = run(shared.path(), None);
    assert!(!ok);
    assert!(said.contains("--backend redis://"), "{said}");
    assert_eq!(
        files(&shared.path().join("objects")),
        1,
        "the shared objects are untouched"
    );

    // A directory from before the mode file with objects and no records is taken as shared.
    std::fs::remove_file(shared.path().join("mode")).unwrap();
    let (ok, _) = run(shared.path(), None);
    assert!(!ok);
    assert_eq!(files(&shared.path().join("objects")), 1);

    // Embedded: refused by an instance with a backend, before it even reaches Redis.
    let embedded = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(embedded.path()).unwrap();
    std::fs::write(embedded.path().join("mode"), "embedded\n").unwrap();
    let (ok, said) = run(embedded.path(), Some("redis://127.0.0.1:1/0"));
    assert!(!ok);
    assert!(said.contains("Serve it without --backend"), "{said}");
}

/// Deleting a container while uploads stream into it answers 202, nothing is
/// committed into it afterwards, and every object is reclaimed at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_container_under_uploads_is_atomic_and_reclaims_everything() {
    let server = Server::start().await;
    for round in 0..10 {
        let name = format!("del{round}");
        server.create_container(&name).await;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let uploaders: Vec<_> = (0..6)
            .map(|w| {
                let (client, base, name, stop) = (
                    server.client.clone(),
                    server.base.clone(),
                    name.clone(),
                    stop.clone(),
                );
                tokio::spawn(async move {
                    let mut statuses = Vec::new();
                    for i in 0.. {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        let url = format!("{base}/{name}/w{w}/{i}");
                        let r = common::send(&client, "PUT", &url, &[], vec![1u8; 20_000]).await;
                        statuses.push((r.status().as_u16(), code(&r)));
                    }
                    statuses
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let r = server
            .delete(&format!("/{name}?restype=container"), &[])
            .await;
        assert_eq!(r.status(), 202, "round {round}: {:?}", code(&r));
        let after = server.get(&format!("/{name}/w0/0"), &[]).await;
        assert_eq!(code(&after).as_deref(), Some("ContainerNotFound"));
        tokio::time::sleep(Duration::from_millis(30)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for u in uploaders {
            for (status, code) in u.await.unwrap() {
                assert!(
                    status == 201
                        || (status == 404 && code.as_deref() == Some("ContainerNotFound")),
                    "round {round}: {status} {code:?}"
                );
            }
        }
        assert_eq!(
            files(&server.dir.path().join("objects")),
            0,
            "round {round}: objects outlived their container"
        );
        let listed = server
            .get(&format!("/{name}?restype=container&comp=list"), &[])
            .await;
        assert_eq!(listed.status(), 404);
    }
    assert_eq!(files(&server.dir.path().join("tmp")), 0);
}

/// Objects no record names, older than the orphan age, are swept while the server
/// runs; younger ones and named ones stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_swept_while_serving_and_live_objects_stay() {
    let data = tempfile::tempdir().unwrap();
    let server = serve(data.path(), &["--orphan-age", "1", "--sweep-every", "0.5"]);
    let http = client();
    let base = server.base.clone();
    common::send(
        &http,
        "PUT",
        &format!("{base}/sweep?restype=container"),
        &[],
        "",
    )
    .await;
    // Larger than a blob kept in its record: it has an object, which must stay.
    let live = "live bytes".repeat(500);
    let r = common::send(
        &http,
        "PUT",
        &format!("{base}/sweep/live"),
        &[],
        live.clone(),
    )
    .await;
    assert_eq!(r.status(), 201);
    let orphan = data.path().join("objects/00000000000000000000000000000001");
    std::fs::write(&orphan, "left by a crash").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while orphan.exists() {
        assert!(Instant::now() < deadline, "the orphan was never swept");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = common::get(&http, &format!("{base}/sweep/live")).await;
    assert_eq!(r.text().await.unwrap(), live);
    assert_eq!(files(&data.path().join("objects")), 1);
}

/// HTTP/1.1 needs exactly one Host (RFC 9112 3.2); HTTP/1.0 may go without.
#[tokio::test]
async fn http_1_1_without_exactly_one_host_is_400() {
    let server = Server::with_container("hosts").await;
    let addr = server.addr.clone();
    let cases = [
        (
            "GET /devstoreaccount1/hosts?restype=container HTTP/1.1\r\n\r\n",
            400,
        ),
        (
            "GET /devstoreaccount1/hosts?restype=container HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            400,
        ),
        (
            "GET /devstoreaccount1/hosts?restype=container HTTP/1.1\r\nHost: a\r\n\r\n",
            200,
        ),
        (
            "GET /devstoreaccount1/hosts?restype=container HTTP/1.0\r\n\r\n",
            200,
        ),
    ];
    for (request, want) in cases {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 64];
        let n = stream.read(&mut buf).await.unwrap();
        let line = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(
            line.starts_with(&format!("HTTP/1.1 {want}"))
                || line.starts_with(&format!("HTTP/1.0 {want}")),
            "{request:?}: {line}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upload_is_read_so_its_client_reads_the_refusal() {
    // Refused before its body is read (no such container): a body of up to 8 MiB is read and
    // discarded before the answer goes, so a client that writes it all, then reads, gets the
    // 404, not a broken pipe (Node's, and the JS SDK's, case).
    let server = Server::start().await;
    let body = vec![b'x'; 6 << 20];
    let mut stream = TcpStream::connect(&server.addr).await.unwrap();
    let head = format!(
        "PUT /devstoreaccount1/nocontainer/blob HTTP/1.1\r\nHost: {}\r\nx-ms-blob-type: BlockBlob\r\nContent-Length: {}\r\n\r\n",
        server.addr,
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
        .write_all(&body)
        .await
        .expect("the whole body is taken");
    let mut answer = vec![0; 512];
    let n = stream.read(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(answer.contains("ContainerNotFound"), "{answer}");
}

/// Sends `head` on a new connection and answers what the server sends within `wait` (until it
/// closes or the time is up).
async fn exchange(addr: &str, head: &str, wait: Duration) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + wait;
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline.into(), stream.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// An upload with `Expect: 100-continue` that will be refused gets the refusal at once and no
/// `100 Continue` (RFC 9110 10.1.1): too large by its length, unsigned, or into a container
/// that does not exist. One that will be taken gets its `100 Continue`, then its 201.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_go_before_100_continue() {
    let data = tempfile::tempdir().unwrap();
    let server = serve(data.path(), &["--max-body", "1048576"]);
    let (_, _, addr) = with_container(&server, "box").await;
    let head = |path: &str, len: u64| {
        format!(
            "PUT /devstoreaccount1/{path} HTTP/1.1\r\nHost: x\r\nx-ms-blob-type: BlockBlob\r\n\
             Expect: 100-continue\r\nContent-Length: {len}\r\n\r\n"
        )
    };
    for (path, len, status, code) in [
        ("box/big", 2 << 20, "413", "RequestBodyTooLarge"),
        ("box/huge", 10 << 40, "413", "RequestBodyTooLarge"),
        ("box/max", u64::MAX - 2, "413", "RequestBodyTooLarge"),
        // The two lengths hyper keeps for itself.
        ("box/max1", u64::MAX - 1, "413", "RequestBodyTooLarge"),
        ("box/max2", u64::MAX, "413", "RequestBodyTooLarge"),
        ("nocontainer/b", 100, "404", "ContainerNotFound"),
    ] {
        let start = Instant::now();
        let answer = exchange(&addr, &head(path, len), Duration::from_secs(3)).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{path}: {answer}"
        );
        assert!(answer.contains(code), "{path}: {answer}");
        assert!(!answer.contains("100 Continue"), "{path}: {answer}");
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{path}: {:?}",
            start.elapsed()
        );
    }

    // Taken: 100 Continue, then the body, then 201.
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(head("box/ok", 5).as_bytes())
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(3), stream.read(&mut buf))
        .await
        .expect("a 100 Continue")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 100 Continue"));
    stream.write_all(b"hello").await.unwrap();
    let n = stream.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 201"));

    // Unsigned, on a server that wants credentials: 403 at once.
    let (child, signed) = common::spawn_signed([
        "serve",
        "--data",
        &data.path().join("signed").display().to_string(),
    ]);
    let _signed = common::Ifmatch {
        child,
        base: signed.clone(),
    };
    let start = Instant::now();
    let answer = exchange(
        &common::host_of(&signed),
        &head("box/b", 2 << 20),
        Duration::from_secs(3),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(!answer.contains("100 Continue"), "{answer}");
    assert!(start.elapsed() < Duration::from_secs(2));
}

/// A client that sends its head and waits for an answer before its body, without `Expect`:
/// a refusal by the declared length goes at once (the body is read, if it comes, while the
/// answer goes), and a length past what the server takes is 413 whatever signs it, even the
/// two lengths the server lowers before hyper sees them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_by_length_go_at_once_signed_or_not() {
    let data = tempfile::tempdir().unwrap();
    let (child, signed) = common::spawn_signed([
        "serve",
        "--data",
        &data.path().display().to_string(),
        "--max-body",
        "1048576",
    ]);
    let _signed = common::Ifmatch {
        child,
        base: signed.clone(),
    };
    let addr = common::host_of(&signed);
    common::signed_key("PUT", &format!("{signed}/{ACCOUNT}/box?restype=container")).await;
    for len in [2 << 20, u64::MAX - 2, u64::MAX - 1, u64::MAX] {
        let url = format!("{signed}/{ACCOUNT}/box/b");
        let fields = common::shared_key("PUT", &url, &[("x-ms-blob-type", "BlockBlob")], Some(len));
        let fields: String = fields
            .iter()
            .map(|(n, v)| format!("{n}: {v}\r\n"))
            .collect();
        let head = format!(
            "PUT /{ACCOUNT}/box/b HTTP/1.1\r\nHost: {addr}\r\n{fields}Content-Length: {len}\r\n\r\n"
        );
        let start = Instant::now();
        let answer = exchange_first(&addr, &head).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{len}: {answer}");
        assert!(answer.contains("RequestBodyTooLarge"), "{len}: {answer}");
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{len}: {:?}",
            start.elapsed()
        );
    }
}

/// Sends `head` on a new connection and answers the first bytes the server sends.
async fn exchange_first(addr: &str, head: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Uploads that trickle their bodies (a byte a second) are cut off after one --body-timeout
/// window, leaving nothing; while they wait, they are shed at the cap on connections as idle
/// connections are, so a well-behaved client still gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickling_uploads_are_cut_off_and_shed() {
    let data = tempfile::tempdir().unwrap();
    let server = serve(
        data.path(),
        &[
            "--max-connections",
            "40",
            "--body-timeout",
            "3",
            "--min-body-rate",
            "100",
        ],
    );
    let (http, base, addr) = container_with_x(&server, "trk").await;

    // 40 uploads of 1 MiB sending a byte a second: every connection is taken.
    let trickles: Vec<_> = (0..40)
        .map(|i| {
            let addr = addr.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                let mut stream = TcpStream::connect(&addr).await.ok()?;
                let head = format!(
                    "PUT /devstoreaccount1/trk/slow{i} HTTP/1.1\r\nHost: x\r\nx-ms-blob-type: BlockBlob\r\ncontent-length: 1048576\r\n\r\n"
                );
                stream.write_all(head.as_bytes()).await.ok()?;
                let mut buf = [0u8; 512];
                while start.elapsed() < Duration::from_secs(20) {
                    if stream.write_all(b"x").await.is_err() {
                        return Some(start.elapsed());
                    }
                    let read = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf));
                    if read.await.is_ok() {
                        return Some(start.elapsed());
                    }
                }
                None
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let temporary = files(&data.path().join("tmp"));
    assert!(temporary > 0, "the trickling uploads are under way");
    let pace = (5, Duration::ZERO, Duration::from_secs(2));
    gets_get_through(&http, &base, "trk", pace).await;
    let mut ended = Vec::new();
    for t in trickles {
        ended.push(t.await.unwrap());
    }
    assert!(
        ended.iter().all(Option::is_some),
        "a trickling upload outlived 20 s: {ended:?}"
    );
    let late = ended
        .iter()
        .flatten()
        .filter(|d| **d > Duration::from_secs(6))
        .count();
    assert_eq!(
        late, 0,
        "trickling uploads outlived one window and a margin: {ended:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(files(&data.path().join("tmp")), 0, "temporary files left");
    assert_eq!(
        files(&data.path().join("objects")),
        0,
        "objects left (x is kept in its record)"
    );
}

/// A record whose newest copy fails its checksum (a torn write, or bit rot) is served from the
/// copy before; `ifmatch check` names it, so an operator can tell the two apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_a_record_served_from_its_older_copy() {
    let data = tempfile::tempdir().unwrap();
    let path = data.path();
    let http = client();
    {
        let server = serve(path, &[]);
        let base = server.base.clone();
        common::create_container(&http, &base, "rot").await;
        for body in ["first", "second"] {
            let r = common::send(&http, "PUT", &format!("{base}/rot/n"), &[], body).await;
            assert_eq!(r.status(), 201);
        }
    }
    let check = || {
        let out = ifmatch()
            .args(["check", "--data"])
            .arg(path)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (status, said) = check();
    assert_eq!(status, Some(0), "{said}");

    // The second write went to the file's second slot: one bit of it flips.
    let blobs = path.join("containers/rot/blobs");
    let file = std::fs::read_dir(&blobs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2 + 60;
    bytes[at] ^= 0x02;
    std::fs::write(&file, &bytes).unwrap();

    let (status, said) = check();
    assert_eq!(status, Some(1), "{said}");
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        said.contains(&name) && said.contains("fails its checksum"),
        "{said}"
    );
    let server = serve(path, &[]);
    let r = common::get(&http, &format!("{}/rot/n", server.base)).await;
    assert_eq!(
        r.text().await.unwrap(),
        "first",
        "served from the copy before"
    );
}

/// The blob front's serving threads stop when the future serving them is dropped (its task
/// aborted), as when it is asked to: its port is closed, not left to threads that outlive it.
#[tokio::test]
async fn dropping_the_serving_future_stops_its_threads() {
    let dir = tempfile::tempdir().unwrap();
    let options = ifmatch_server::Options::default();
    let front = ifmatch_server::open(dir.path(), options.clone()).unwrap();
    let listeners = ifmatch_server::bind_threads("127.0.0.1:0".parse().unwrap(), 2).unwrap();
    let address = listeners[0].local_addr().unwrap();
    let serving = tokio::spawn(ifmatch_server::serve(
        listeners,
        front,
        options,
        std::future::pending(),
    ));
    let url = format!("http://{address}/{ACCOUNT}?comp=list");
    let answered = client().get(url).send().await.unwrap();
    assert_eq!(
        answered.status(),
        403,
        "served before the drop (no credentials)"
    );
    serving.abort();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(address).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "still listening 10 s after the serving future was dropped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// With a change feed kept, a blob deleted and not yet published leaves its record, empty but
/// for its changes, and the markers of those: `ifmatch check` takes them for what they are, not
/// for damage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_takes_the_change_feeds_records_for_what_they_are() {
    let data = tempfile::tempdir().unwrap();
    let path = data.path();
    let http = client();
    let markers = path.join("containers/$changes/blobs");
    // The server publishes every second: stopped a moment after the deletion, it has not yet
    // (tried again in the rare case it had).
    for attempt in 0..5 {
        let server = serve(path, &[]);
        let base = server.base.clone();
        let on = "<StorageServiceProperties><ChangeFeed><Enabled>true</Enabled></ChangeFeed>\
                  </StorageServiceProperties>";
        let url = format!("{base}/?restype=service&comp=properties");
        assert_eq!(
            common::send(&http, "PUT", &url, &[], on).await.status(),
            202
        );
        let container = format!("fed{attempt}");
        common::create_container(&http, &base, &container).await;
        let blob = format!("{base}/{container}/gone");
        assert_eq!(
            common::send(&http, "PUT", &blob, &[], "x").await.status(),
            201
        );
        assert_eq!(
            common::send(&http, "DELETE", &blob, &[], "").await.status(),
            202
        );
        drop(server);
        if files(&markers) >= 2 {
            break;
        }
    }
    assert!(files(&markers) >= 2, "created and deleted, unpublished");
    let out = ifmatch()
        .args(["check", "--data"])
        .arg(path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{said}");
}
