//! What every [`VersionStore`] must do, as one async function a backend's tests call
//! (`conformance` feature). The in-memory backend runs it in this crate, the Redis one in
//! `ifmatch-redis`. And how a race of conditional writers must end ([`one_won`]), for the
//! tests of every front that takes them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ifmatch_core::precondition::Validators;
use ifmatch_core::strong_etag;

use crate::store::VersionStore;

/// Awaits `racers`, writers that raced with the same precondition (`If-None-Match: *`, or
/// `If-Match` of one tag), each answering its status, and checks that exactly one wrote (201)
/// and every other was refused (412). Answers the statuses.
pub async fn one_won(racers: impl IntoIterator<Item = tokio::task::JoinHandle<u16>>) -> Vec<u16> {
    let mut statuses = Vec::new();
    for racer in racers {
        statuses.push(racer.await.expect("a racer panicked"));
    }
    let won = statuses.iter().filter(|&&s| s == 201).count();
    assert_eq!(won, 1, "one writer wins: {statuses:?}");
    assert!(
        statuses.iter().all(|&s| s == 201 || s == 412),
        "the others get 412: {statuses:?}"
    );
    statuses
}

/// Runs the suite against `store`, whose clones share their versions and locks (as
/// instances sharing one backend do). Uses keys under `/conformance/`. Sixteen writers queue
/// for one lock: the store's wait for a lock must cover fifteen handoffs.
pub async fn versions<V: VersionStore + Clone>(store: &V) {
    remembers_and_forgets(store).await;
    one_holder_per_key(store).await;
    keys_are_independent(store).await;
    fencing_tokens_grow(store).await;
}

async fn remembers_and_forgets<V: VersionStore + Clone>(store: &V) {
    let key = "/conformance/remember";
    assert_eq!(store.get(key).await.unwrap(), None, "unknown at first");
    let first = Validators::etag(strong_etag(b"one"));
    let guard = store.lock(key).await.unwrap();
    store.set(&guard, first.clone()).await.unwrap();
    assert_eq!(store.get(key).await.unwrap(), Some(first), "recorded");
    let second = Validators::new(
        Some(strong_etag(b"two")),
        Some(std::time::UNIX_EPOCH.into()),
    );
    store.set(&guard, second.clone()).await.unwrap();
    drop(guard);
    assert_eq!(
        store.clone().get(key).await.unwrap(),
        Some(second),
        "replaced"
    );
    store.forget(key).await.unwrap();
    assert_eq!(store.get(key).await.unwrap(), None, "forgotten");
    store.forget(key).await.unwrap();
}

async fn one_holder_per_key<V: VersionStore + Clone>(store: &V) {
    let inside = Arc::new(AtomicUsize::new(0));
    let entered = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (store, inside, entered) = (store.clone(), inside.clone(), entered.clone());
            tokio::spawn(async move {
                let _guard = store.lock("/conformance/same").await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                entered.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(
        entered.load(Ordering::SeqCst),
        16,
        "every waiter got the lock"
    );
}

async fn keys_are_independent<V: VersionStore + Clone>(store: &V) {
    let _a = store.lock("/conformance/a").await.unwrap();
    let b = tokio::time::timeout(Duration::from_secs(2), store.lock("/conformance/b")).await;
    assert!(b.is_ok(), "a lock on another key waited");
    // try_lock answers at once: nothing for a held key (from another clone too), a guard for
    // a free one.
    let held = tokio::time::timeout(
        Duration::from_secs(1),
        store.clone().try_lock("/conformance/a"),
    )
    .await
    .expect("try_lock waited");
    assert!(held.unwrap().is_none(), "try_lock took a held lock");
    let free = store.try_lock("/conformance/c").await.unwrap();
    assert!(free.is_some(), "try_lock missed a free lock");
}

async fn fencing_tokens_grow<V: VersionStore + Clone>(store: &V) {
    let key = "/conformance/fence";
    let first = store.lock(key).await.unwrap();
    let a = store.fencing_token(&first);
    drop(first);
    let second = store.lock(key).await.unwrap();
    let b = store.fencing_token(&second);
    if let (Some(a), Some(b)) = (a, b) {
        assert!(b > a, "fencing tokens must grow: {a} then {b}");
    } else {
        assert_eq!((a, b), (None, None), "a backend has tokens or has none");
    }
}

/// What a store whose locks expire must do, `open(lock_ttl, lock_wait)` opening one more
/// instance over the same backend each time it is called: a live holder keeps its lock past
/// the time to live (renewed), so another instance gives up waiting; a dead holder (its
/// runtime stopped while it held the lock, as a crash or a stall would) loses it after the
/// time to live, to a holder with a greater fencing token, and can then record nothing.
pub fn expiring_locks<V, F, Fut>(open: F)
where
    V: VersionStore,
    F: Fn(Duration, Duration) -> Fut,
    Fut: std::future::Future<Output = V>,
{
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
    };
    // Renewed every third of the time to live: only a stall of two thirds of it could lose the
    // lock, which a loaded two-core machine did to a 300 ms one.
    let ttl = Duration::from_secs(1);
    runtime().block_on(async {
        let (a, b) = (open(ttl, ttl).await, open(ttl, ttl * 3).await);
        let guard = a.lock("/conformance/slow").await.unwrap();
        // Three times the time to live: renewed all along, so B gives up.
        assert!(
            b.lock("/conformance/slow").await.is_err(),
            "B took a live lock"
        );
        let slow = Validators::etag(strong_etag(b"slow"));
        a.set(&guard, slow).await.expect("the live holder records");
    });

    let ttl = Duration::from_millis(400);
    // `asked` is taken before the lock is asked for: the lock cannot expire sooner than a time
    // to live after it, however long the machine takes to hand the guard back.
    let dead = runtime();
    let (stale, asked, fence) = dead.block_on(async {
        let versions = open(ttl, ttl * 10).await;
        let asked = std::time::Instant::now();
        let guard = versions.lock("/conformance/dead").await.unwrap();
        let fence = versions.fencing_token(&guard);
        (guard, asked, fence)
    });
    dead.shutdown_background();
    runtime().block_on(async {
        let versions = open(ttl, ttl * 10).await;
        let guard = versions.lock("/conformance/dead").await.unwrap();
        // Not sooner than the time to live; and not held for ever (a renewal may have run
        // before the runtime stopped, and a loaded machine is slow to stop it).
        let waited = asked.elapsed();
        assert!(
            waited >= ttl && waited < ttl * 10,
            "the key was writable again after {waited:?} (lock time to live {ttl:?})"
        );
        assert!(
            versions.fencing_token(&guard) > fence,
            "fencing tokens grow"
        );
        let fresh = Validators::etag(strong_etag(b"fresh"));
        versions.set(&guard, fresh.clone()).await.unwrap();
        // The dead holder's late record is refused and changes nothing.
        let late = Validators::etag(strong_etag(b"late"));
        assert!(versions.set(&stale, late).await.is_err(), "a late record");
        assert_eq!(
            versions.get("/conformance/dead").await.unwrap(),
            Some(fresh)
        );
    });
}
