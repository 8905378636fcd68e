//! The client's patterns against a blob front over a real loopback socket (the blob dialect in
//! memory, with the system's clock, so leases expire as they do on a server): read-modify-write
//! keeps an exact count under contention, a stale write is refused and says so, create-only
//! creates once, a lock excludes and times out, a lease broken by someone else is lost loudly,
//! and a read cache revalidates with 304.

use std::sync::Arc;
use std::time::Duration;

use ifmatch_azure::SystemEnv;
use ifmatch_blob::Front;
use ifmatch_blob::memory::{MemoryObjects, MemoryRecords};
use ifmatch_client::{Backoff, Client, Conditions, LeaseGuard, Lock, ReadCache, update};

/// The blob `name` in the new container `container` of a new [`server`].
async fn blob_in(container: &str, name: &str) -> ifmatch_client::BlobClient {
    let client = server().await;
    client.create_container(container).await.unwrap();
    client.blob(container, name)
}

/// A blob front in memory, open without credentials, on a loopback port: its client.
async fn server() -> Client {
    let front = Front::new(
        MemoryRecords::default(),
        MemoryObjects::default(),
        SystemEnv,
    )
    .with_anonymous_access(true);
    let front = Arc::new(front);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let front = front.clone();
            let service = hyper::service::service_fn(move |request| {
                let front = front.clone();
                async move { Ok::<_, std::convert::Infallible>(front.handle(request).await) }
            });
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    Client::anonymous(&format!("http://{address}/devstoreaccount1")).unwrap()
}

fn fast_backoff() -> Backoff {
    Backoff {
        base: Duration::from_millis(1),
        max: Duration::from_millis(20),
        attempts: 1000,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_writers_keep_an_exact_count_and_some_of_them_retried() {
    let client = server().await;
    client.create_container("jobs").await.unwrap();
    let writers: Vec<_> = (0..16)
        .map(|_| {
            let counter = client.blob("jobs", "counter");
            tokio::spawn(async move {
                let mut retried = 0;
                for _ in 0..20 {
                    let done = update(&counter, &fast_backoff(), None, |old| {
                        let n: u64 = old
                            .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
                            .unwrap_or(0);
                        Some((n + 1).to_string().into_bytes())
                    })
                    .await
                    .unwrap();
                    retried += done.attempts - 1;
                }
                retried
            })
        })
        .collect();
    let mut retried = 0;
    for writer in writers {
        retried += writer.await.unwrap();
    }
    let blob = (client.blob("jobs", "counter"))
        .get(&Conditions::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(blob.bytes, "320");
    assert!(
        retried > 0,
        "sixteen writers never met: the test proved nothing"
    );
}

#[tokio::test]
async fn a_stale_write_is_refused_and_create_only_creates_once() {
    let doc = blob_in("docs", "a").await;
    let first = doc.put("v1", &Conditions::create_only()).await.unwrap();
    let again = doc
        .put("v1 again", &Conditions::create_only())
        .await
        .unwrap_err();
    assert!(
        again.is_already_exists() || again.is_precondition_failed(),
        "{again}"
    );
    doc.put("v2", &Conditions::if_match(first.clone()))
        .await
        .unwrap();
    let stale = doc
        .put("v3", &Conditions::if_match(first))
        .await
        .unwrap_err();
    assert!(stale.is_precondition_failed(), "{stale}");
    let now = doc.get(&Conditions::default()).await.unwrap().unwrap();
    assert_eq!(now.bytes, "v2", "the refused writes changed nothing");
}

#[tokio::test]
async fn a_lock_excludes_times_out_and_passes_on_when_released() {
    let client = server().await;
    let blob = client.blob("locks", "job");
    // The lock makes its container and blob.
    let held = Lock::acquire(&blob, Duration::from_secs(15), None)
        .await
        .unwrap();
    let waited = Lock::acquire(
        &blob,
        Duration::from_secs(15),
        Some(Duration::from_millis(300)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(waited, ifmatch_client::Error::Timeout(_)),
        "{waited}"
    );
    let next = tokio::spawn({
        let blob = blob.clone();
        async move {
            Lock::acquire(
                &blob,
                Duration::from_secs(15),
                Some(Duration::from_secs(10)),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !next.is_finished(),
        "a second holder while the first holds it"
    );
    held.release().await.unwrap();
    next.await.unwrap().unwrap();
}

/// A lock that could not be asked for (nothing listens) is not reported as held by another:
/// the wait ends with the failure itself.
#[tokio::test]
async fn a_lock_nobody_could_ask_for_is_not_said_to_be_taken() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/devstoreaccount1", closed.local_addr().unwrap());
    drop(closed);
    let client = Client::anonymous(&endpoint).unwrap();
    let failed = Lock::acquire(
        &client.blob("locks", "job"),
        Duration::from_secs(15),
        Some(Duration::from_millis(300)),
    )
    .await
    .unwrap_err();
    assert!(failed.is_transient(), "{failed}");
    assert!(
        !matches!(failed, ifmatch_client::Error::Timeout(_)),
        "{failed}"
    );
}

#[tokio::test]
async fn a_lease_broken_by_someone_else_is_lost_loudly() {
    let blob = blob_in("leases", "x").await;
    blob.put("x", &Conditions::default()).await.unwrap();
    let guard = LeaseGuard::acquire(&blob, Duration::from_secs(15))
        .await
        .unwrap();
    assert!(!guard.is_lost());
    blob.break_lease(Some(Duration::ZERO)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), guard.lost())
        .await
        .expect("the guard learns its lease was broken within a renewal");
    assert!(guard.is_lost());
    assert!(guard.check().is_err());
}

#[tokio::test]
async fn a_read_cache_revalidates_with_304_and_sees_a_change() {
    let blob = blob_in("cfg", "settings").await;
    blob.put("one", &Conditions::default()).await.unwrap();
    let cache = ReadCache::new();
    let (first, sent) = cache.get(&blob).await.unwrap();
    assert_eq!((&first.bytes[..], sent), (&b"one"[..], true));
    let (again, sent) = cache.get(&blob).await.unwrap();
    assert_eq!(
        (&again.bytes[..], sent),
        (&b"one"[..], false),
        "a 304: no bytes sent"
    );
    blob.put("two", &Conditions::default()).await.unwrap();
    let (changed, sent) = cache.get(&blob).await.unwrap();
    assert_eq!((&changed.bytes[..], sent), (&b"two"[..], true));
}
