//! The shared cache's disk tier through the real binary: `ifmatch proxy
//! --cache-dir` killed with SIGKILL while it stores hundreds of answers comes back serving
//! every answer it kept whole, byte for byte, without the origin, and fetches the rest again:
//! no answer is ever served torn.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;

const OBJECTS: usize = 400;

/// The host the clients ask for: the cache's keys name it, and the restarted proxy listens on
/// another port.
const HOST: &str = "cache.example";

/// The bytes of `/obj/{n}`: 8 KiB to about 200 KiB, each byte a function of `n` and its place.
fn object(n: usize) -> Vec<u8> {
    let len = 8192 + n * 523 % (192 << 10);
    (0..len).map(|i| (i * 31 + n * 7 % 251) as u8).collect()
}

/// An origin of `/obj/{n}`, fresh for an hour, that counts the GETs reaching it.
async fn start_origin() -> (Arc<AtomicUsize>, String) {
    let gets = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route(
            "/obj/{n}",
            get(
                |State(gets): State<Arc<AtomicUsize>>, Path(n): Path<usize>| async move {
                    gets.fetch_add(1, Ordering::SeqCst);
                    // Slow enough that the kill finds writes under way.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    ([("cache-control", "max-age=3600")], object(n))
                },
            ),
        )
        .with_state(gets.clone());
    let base = common::serve_app(app).await;
    (gets, base)
}

fn proxy(upstream: &str, dir: &std::path::Path) -> common::Ifmatch {
    let dir = dir.to_str().unwrap();
    common::Ifmatch::start([
        "proxy",
        "--upstream",
        upstream,
        "--cache-dir",
        dir,
        "--metrics",
    ])
}

/// The value of the counter `name` on the proxy's metrics page `page`.
fn counter(page: &str, name: &str) -> Option<usize> {
    page.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sigkill_leaves_every_answer_on_disk_whole_or_absent() {
    let (gets, origin) = start_origin().await;
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    // Eight clients store the objects; the proxy is killed half way through.
    let first = proxy(&origin, dir.path());
    let done = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let (http, base, done) = (http.clone(), first.base.clone(), done.clone());
            tokio::spawn(async move {
                for n in (c..OBJECTS).step_by(8) {
                    let get = http.get(format!("{base}/obj/{n}")).header("host", HOST);
                    let Ok(response) = get.send().await else {
                        return;
                    };
                    if response.bytes().await.is_err() {
                        return;
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    while done.load(Ordering::SeqCst) < OBJECTS / 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut first = first;
    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();
    for client in clients {
        client.await.unwrap();
    }

    // Back on the same directory: every answer is the origin's bytes, from disk or fetched.
    let fetched_before = gets.load(Ordering::SeqCst);
    let second = proxy(&origin, dir.path());
    let leftovers = std::fs::read_dir(dir.path().join("tmp")).unwrap().count();
    assert_eq!(leftovers, 0, "half-written files are cleared at start");
    let mut from_disk = 0;
    for n in 0..OBJECTS {
        let response = http
            .get(format!("{}/obj/{n}", second.base))
            .header("host", HOST)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "/obj/{n}");
        let status = response.headers()["cache-status"]
            .to_str()
            .unwrap()
            .to_owned();
        let body = response.bytes().await.unwrap();
        assert!(
            body[..] == object(n)[..],
            "/obj/{n} ({status}): not the origin's bytes"
        );
        if status == "ifmatch; hit" {
            from_disk += 1;
        }
    }
    let fetched_after = gets.load(Ordering::SeqCst) - fetched_before;
    assert!(from_disk > 0, "nothing survived the kill");
    assert_eq!(
        from_disk + fetched_after,
        OBJECTS,
        "every answer from disk or from the origin, once"
    );
    eprintln!("{from_disk} of {OBJECTS} answers came back from disk after the SIGKILL");

    // What was fetched again is written to disk by the tier's writer, none of it skipped at
    // this pace.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = http.get(format!("{}/metrics", second.base)).send();
        let page = metrics.await.unwrap().text().await.unwrap();
        if counter(&page, "ifmatch_cache_disk_writes_total") == Some(fetched_after) {
            assert_eq!(counter(&page, "ifmatch_cache_disk_skipped_total"), Some(0));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{page}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
