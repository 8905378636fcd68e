//! The conformance suite every backend runs: a backend is done when it passes the same suite
//! as the in-memory one. Enabled by the `conformance` feature; each check panics with what
//! went wrong.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use ifmatch_blob::{conformance, memory::{MemoryObjects, MemoryRecords}};
//! conformance::every(|_| MemoryRecords::default()).await;
//! conformance::objects(&MemoryObjects::default()).await;
//! # }
//! ```

use std::collections::VecDeque;
use std::time::{Duration, UNIX_EPOCH};

use crate::lease::{Lease, LeaseDuration, LeaseId};
use bytes::Bytes;
use http_body_util::BodyExt;
use ifmatch_core::strong_etag;

use crate::record::Block;
use crate::record::Content;
use crate::record::Record;
use crate::store::BlockToStage;
use crate::store::Key;
use crate::store::Objects;
use crate::store::PutMode;
use crate::store::Records;
use crate::store::Scan;
use crate::store::StoreError;

fn container(name: &str) -> Key {
    Key::Container(name.to_owned())
}

fn blob(container: &str, name: &str) -> Key {
    Key::Blob(container.to_owned(), name.to_owned())
}

fn record(tag: &str, generation: u64) -> Record {
    let content = Content::new(
        format!("object-{tag}"),
        tag.len() as u64,
        Some("text/plain".into()),
    );
    Record::blob(
        strong_etag(tag.as_bytes()),
        UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        content,
    )
    .with_generation(generation)
}

fn container_record(generation: u64) -> Record {
    Record::container(
        strong_etag(b"container"),
        UNIX_EPOCH + Duration::from_secs(1_700_000_000),
    )
    .with_generation(generation)
}

#[track_caller]
fn expect_err<T>(result: Result<T, StoreError>, want: fn(&StoreError) -> bool, what: &str) {
    match result {
        Err(e) if want(&e) => {}
        Err(e) => panic!("{what}: got the error {e:?}"),
        Ok(_) => panic!("{what}: succeeded"),
    }
}

/// Every check of [`Records`] but [`objects`]'s: [`records`] on the store `fresh` makes for
/// `records`, the others (each in containers of its own) one after another on the one it makes
/// for `others`. A fresh store each, or prefixes of one.
pub async fn every<R: Records>(fresh: impl Fn(&'static str) -> R) {
    records(&fresh("records")).await;
    let store = fresh("others");
    errors(&store).await;
    race(&store).await;
    listing(&store).await;
    staging(&store).await;
}

/// The contract of [`Records`]: create-only and generation-checked puts, deletes, containers
/// owning their blobs, sorted prefix listing, and records that round-trip whole; each a
/// behaviour of its own below, run one after the other on a fresh store.
pub async fn records<R: Records>(store: &R) {
    blobs_need_their_container(store).await;
    creates_once(store).await;
    swaps_on_the_generation(store).await;
    round_trips_whole(store).await;
    scans_in_name_order(store).await;
    keeps_qualified_names_after_their_blob(store).await;
    deletes_on_the_generation(store).await;
}

/// The container `conformance`, made with generation 10, and these blobs in it (generation 1
/// each, but `dir/a`, generation 5).
async fn setup<R: Records>(store: &R, blobs: &[&str]) -> Key {
    let c = container("conformance");
    create(store, &c, &container_record(10)).await;
    for name in blobs {
        let generation = if *name == "dir/a" { 5 } else { 1 };
        store
            .put(
                &blob("conformance", name),
                &record(if *name == "dir/a" { "v1" } else { name }, generation),
                PutMode::Create,
            )
            .await
            .unwrap();
    }
    c
}

/// Puts `record` at `key`, which holds none yet.
async fn create<R: Records>(store: &R, key: &Key, record: &Record) {
    store.put(key, record, PutMode::Create).await.unwrap();
}

/// Removes the container `conformance` and what it holds, whatever its generation.
async fn teardown<R: Records>(store: &R) {
    let c = container("conformance");
    if let Some(current) = store.get(&c).await.unwrap() {
        store.delete(&c, current.generation).await.unwrap();
    }
}

/// A blob record is refused while its container has none.
pub async fn blobs_need_their_container<R: Records>(store: &R) {
    let c = container("conformance");
    assert!(
        store.get(&c).await.unwrap().is_none(),
        "a fresh store has no record"
    );

    // Blobs need their container.
    let orphan = store
        .put(&blob("conformance", "a"), &record("a", 1), PutMode::Create)
        .await;
    expect_err(
        orphan,
        |e| matches!(e, StoreError::ContainerNotFound),
        "blob put without container",
    );
}

/// [`PutMode::Create`] creates once; the containers are listed (where the backend can).
pub async fn creates_once<R: Records>(store: &R) {
    let c = container("conformance");
    create(store, &c, &container_record(10)).await;
    let again = store.put(&c, &container_record(10), PutMode::Create).await;
    expect_err(
        again,
        |e| matches!(e, StoreError::AlreadyExists { .. }),
        "second create",
    );
    assert_eq!(*store.get(&c).await.unwrap().unwrap(), container_record(10));
    match store.containers().await {
        Ok(names) => assert_eq!(names, vec!["conformance".to_owned()], "the containers"),
        Err(StoreError::Unsupported(_)) => {}
        Err(e) => panic!("listing containers: {e}"),
    }
    teardown(store).await;
}

/// [`PutMode::Update`] replaces only the generation it names: of two writers holding one
/// generation, one wins; a missing record is a conflict.
pub async fn swaps_on_the_generation<R: Records>(store: &R) {
    setup(store, &[]).await;
    // Create, then compare-and-swap on the generation.
    let a = blob("conformance", "dir/a");
    create(store, &a, &record("v1", 5)).await;
    let stale = store.put(&a, &record("v2", 6), PutMode::Update(4)).await;
    expect_err(
        stale,
        |e| matches!(e, StoreError::Conflict { .. }),
        "update with a stale generation",
    );
    store
        .put(&a, &record("v2", 6), PutMode::Update(5))
        .await
        .unwrap();
    let lost = store.put(&a, &record("v3", 6), PutMode::Update(5)).await;
    expect_err(
        lost,
        |e| matches!(e, StoreError::Conflict { .. }),
        "the second of two writers with one generation",
    );
    let missing = store
        .put(
            &blob("conformance", "nope"),
            &record("x", 1),
            PutMode::Update(1),
        )
        .await;
    expect_err(
        missing,
        |e| matches!(e, StoreError::Conflict { .. }),
        "update of a missing record",
    );
    teardown(store).await;
}

/// A record reads back as it was written: its lease, and the bytes it keeps.
pub async fn round_trips_whole<R: Records>(store: &R) {
    setup(store, &["dir/a"]).await;
    let a = blob("conformance", "dir/a");
    store
        .put(&a, &record("v2", 6), PutMode::Update(5))
        .await
        .unwrap();
    // A record round-trips whole, lease included.
    let mut leased = record("v3", 7);
    leased.lease = Lease::Leased {
        id: LeaseId::from_uuid(uuid::Uuid::from_u128(0x1234)),
        duration: LeaseDuration::Fixed(30),
        expires_ms: Some(1_700_000_030_000),
    };
    store.put(&a, &leased, PutMode::Update(6)).await.unwrap();
    assert_eq!(
        *store.get(&a).await.unwrap().unwrap(),
        leased,
        "the record read back is the record written"
    );
    // So does one that keeps its blob's bytes (any bytes: not text).
    let bytes: bytes::Bytes = (0..=255u8).collect();
    let mut kept = record("v4", 8);
    kept.content = Some(Content::inline(bytes.clone(), None));
    store.put(&a, &kept, PutMode::Update(7)).await.unwrap();
    let read = store.get(&a).await.unwrap().unwrap();
    assert_eq!(*read, kept, "a record keeping bytes reads back whole");
    let content = read.content.as_ref().unwrap();
    assert_eq!((content.inline.as_ref(), content.len), (Some(&bytes), 256));
    assert_eq!(read.objects().count(), 0, "it names no object");
    teardown(store).await;
}

/// A scan lists a container's blobs by prefix, in name order, from a name on, up to a limit,
/// and sees the puts and deletes made since an earlier one.
pub async fn scans_in_name_order<R: Records>(store: &R) {
    setup(store, &["dir/a"]).await;
    // Listing: by prefix, sorted by name.
    for name in ["dir/c", "dir/b", "other", "dir"] {
        store
            .put(
                &blob("conformance", name),
                &record(name, 1),
                PutMode::Create,
            )
            .await
            .unwrap();
    }
    let names = list(store, "dir/", "", 100).await;
    assert_eq!(names, ["dir/a", "dir/b", "dir/c"]);
    assert_eq!(
        list(store, "", "", 100).await,
        ["dir", "dir/a", "dir/b", "dir/c", "other"]
    );
    // A scan starts at `from` (inclusive), within the prefix, and stops at `limit`.
    assert_eq!(list(store, "dir/", "dir/b", 100).await, ["dir/b", "dir/c"]);
    assert_eq!(list(store, "dir/", "dir/a\0", 1).await, ["dir/b"]);
    assert_eq!(list(store, "", "dir/", 2).await, ["dir/a", "dir/b"]);
    assert_eq!(list(store, "dir/", "", 2).await, ["dir/a", "dir/b"]);
    assert_eq!(list(store, "", "dir0", 100).await, ["other"]);
    assert!(list(store, "", "p", 100).await.is_empty());
    // Scans after a listing see later puts and deletes.
    let d = blob("conformance", "dir/d");
    create(store, &d, &record("dir/d", 1)).await;
    assert_eq!(list(store, "dir/", "dir/c", 100).await, ["dir/c", "dir/d"]);
    store.delete(&d, 1).await.unwrap();
    assert_eq!(list(store, "dir/", "dir/c", 100).await, ["dir/c"]);
    teardown(store).await;
}

/// The records of a blob's snapshots, versions and deleted selves ([`crate::record_name`]:
/// its name, a control character, an id) round-trip and scan right after the blob, before any
/// longer name, each kind found by its own prefix.
pub async fn keeps_qualified_names_after_their_blob<R: Records>(store: &R) {
    use crate::record_name::{deleted, deleted_of, snapshot, snapshots_of, version, versions_of};
    let id = "2026-11-28T09:00:00.0000000Z";
    let later = "2026-11-28T09:00:00.0000001Z";
    let names = [
        "dir/a".to_owned(),
        snapshot("dir/a", id),
        snapshot("dir/a", later),
        version("dir/a", id),
        deleted("dir/a", id),
        "dir/a b".to_owned(),
        "dir/a/b".to_owned(),
    ];
    setup(store, &[]).await;
    // Put in another order than they sort.
    for name in names.iter().rev() {
        let (key, written) = (blob("conformance", name), record(name, 1));
        store.put(&key, &written, PutMode::Create).await.unwrap();
    }
    assert_eq!(list(store, "dir/", "", 100).await, names);
    assert_eq!(
        list(store, &snapshots_of("dir/a"), "", 100).await,
        [snapshot("dir/a", id), snapshot("dir/a", later)]
    );
    assert_eq!(
        list(store, &versions_of("dir/a"), "", 100).await,
        [version("dir/a", id)]
    );
    assert_eq!(
        list(store, &deleted_of("dir/a"), "", 100).await,
        [deleted("dir/a", id)]
    );
    let from = format!("{}\0", snapshot("dir/a", id));
    assert_eq!(
        list(store, "dir/", &from, 1).await,
        [snapshot("dir/a", later)]
    );
    let read = store
        .get(&blob("conformance", &version("dir/a", id)))
        .await
        .unwrap();
    assert_eq!(read.map(|r| r.generation), Some(1));
    teardown(store).await;
}

/// A delete removes only the generation it names; a container's takes its blobs with it and
/// returns their records, and its name can be used again, empty.
pub async fn deletes_on_the_generation<R: Records>(store: &R) {
    let c = setup(store, &["dir/a", "dir/c", "dir/b", "other", "dir"]).await;
    let a = blob("conformance", "dir/a");
    // Deletes check the generation.
    let b = blob("conformance", "dir/b");
    expect_err(
        store.delete(&b, 2).await,
        |e| matches!(e, StoreError::Conflict { .. }),
        "delete with a stale generation",
    );
    assert!(
        store.delete(&b, 1).await.unwrap().is_empty(),
        "a blob delete returns nothing"
    );
    assert!(store.get(&b).await.unwrap().is_none());
    expect_err(
        store.delete(&b, 1).await,
        |e| matches!(e, StoreError::NotFound { .. }),
        "delete of a missing record",
    );

    // A container's delete takes its blobs with it and returns their records.
    expect_err(
        store.delete(&c, 11).await,
        |e| matches!(e, StoreError::Conflict { .. }),
        "container delete, stale",
    );
    let mut removed = store.delete(&c, 10).await.unwrap();
    removed.sort_by(|x, y| x.etag.opaque().cmp(y.etag.opaque()));
    assert_eq!(
        removed.len(),
        4,
        "the container's blobs come back from its delete"
    );
    assert!(store.get(&a).await.unwrap().is_none());
    assert!(store.get(&c).await.unwrap().is_none());
    let late = store.put(&a, &record("late", 1), PutMode::Create).await;
    expect_err(
        late,
        |e| matches!(e, StoreError::ContainerNotFound),
        "blob put after its container's delete",
    );

    // The name can be used again, empty.
    create(store, &c, &container_record(20)).await;
    assert!(list(store, "", "", 100).await.is_empty());
    assert!(store.get(&a).await.unwrap().is_none());
    teardown(store).await;
}

/// Racing writers lose no update: 5 workers make 10 increments each to one record, each a
/// read, then a compare-and-swap on the generation it read, retried after a conflict (as
/// object_store's integration suite races `put_opts`). Every increment lands once: the record
/// ends 50 generations on, and no two writes claimed one generation.
pub async fn race<R: Records>(store: &R) {
    let c = container("race");
    create(store, &c, &container_record(1)).await;
    let counter = blob("race", "counter");
    create(store, &counter, &record("start", 1)).await;
    let worker = |w: usize| {
        let counter = counter.clone();
        async move {
            let mut won = Vec::new();
            for i in 0..10 {
                loop {
                    let current = store.get(&counter).await.unwrap().expect("the counter");
                    let next = current.generation + 1;
                    let write = record(&format!("w{w}-{i}"), next);
                    match store
                        .put(&counter, &write, PutMode::Update(current.generation))
                        .await
                    {
                        Ok(_) => {
                            won.push(next);
                            break;
                        }
                        Err(StoreError::Conflict { .. }) => {}
                        Err(e) => panic!("worker {w}, increment {i}: {e}"),
                    }
                }
            }
            won
        }
    };
    let results = futures_util::future::join_all((0..5).map(worker)).await;
    let mut won: Vec<u64> = results.into_iter().flatten().collect();
    won.sort_unstable();
    assert_eq!(won, (2..52).collect::<Vec<_>>(), "each generation won once");
    let end = store.get(&counter).await.unwrap().expect("the counter");
    assert_eq!(end.generation, 51, "50 increments on one record");
    store.delete(&counter, end.generation).await.unwrap();
    let c_now = store.get(&c).await.unwrap().expect("the container");
    store.delete(&c, c_now.generation).await.unwrap();
}

/// Errors say which record: a create over a record, an update or a delete of another
/// generation, a delete of nothing each fail with the record's key as it displays
/// (`container NAME`, `blob CONTAINER/NAME`), so a log line names what failed.
pub async fn errors<R: Records>(store: &R) {
    let c = container("errors");
    create(store, &c, &container_record(1)).await;
    let b = blob("errors", "named");
    create(store, &b, &record("a", 1)).await;
    let says = |result: Result<(), StoreError>, want: &str, key: &str| {
        let error = result.expect_err(want);
        let (StoreError::AlreadyExists { key: said }
        | StoreError::Conflict { key: said }
        | StoreError::NotFound { key: said }) = &error
        else {
            panic!("{want}: got {error:?}");
        };
        assert_eq!(said, key, "{want}: {error}");
        assert!(error.to_string().contains(key), "{want}: {error}");
    };
    let created = store.put(&b, &record("b", 1), PutMode::Create).await;
    says(created, "a create over a blob", "blob errors/named");
    let stale = store.put(&b, &record("b", 2), PutMode::Update(7)).await;
    says(
        stale,
        "an update of another generation",
        "blob errors/named",
    );
    let stale = store
        .put(&c, &container_record(2), PutMode::Update(7))
        .await;
    says(stale, "an update of another generation", "container errors");
    let deleted = store.delete(&b, 7).await.map(drop);
    says(
        deleted,
        "a delete of another generation",
        "blob errors/named",
    );
    let gone = blob("errors", "gone");
    let deleted = store.delete(&gone, 1).await.map(drop);
    says(deleted, "a delete of nothing", "blob errors/gone");
    store.delete(&b, 1).await.unwrap();
    store.delete(&c, 1).await.unwrap();
}

/// The contract of staged blocks ([`Records::stage_block`]): a set per blob and epoch, kept
/// in the order blocks came, up to its limit, apart from other blobs' and other epochs' sets
/// and from the records; dropped on request. Concurrent stagings into one set all land.
pub async fn staging<R: Records>(store: &R) {
    let block = |i: usize| crate::record::Block {
        id: format!("{i:04}"),
        object: format!("object-{i}"),
        len: i as u64,
        sha256: strong_etag(&i.to_le_bytes()),
        staged: 1_700_000_000 + i as u64,
    };
    let a = blob("staging", "a");
    expect_err(
        stage_in(store, &a, 1, &block(0), 10).await,
        |e| matches!(e, StoreError::ContainerNotFound),
        "staging into a container that does not exist",
    );
    let c = container("staging");
    create(store, &c, &container_record(1)).await;
    create(store, &a, &record("a", 1)).await;
    for i in 0..3 {
        assert!(stage_in(store, &a, 7, &block(i), 3).await.unwrap());
    }
    assert!(
        !stage_in(store, &a, 7, &block(3), 3).await.unwrap(),
        "a full set takes no more"
    );
    assert!(
        stage_in(store, &a, 7, &block(0), 4).await.unwrap(),
        "an id again"
    );
    assert_eq!(
        store.staged_blocks(&a, 7).await.unwrap(),
        [block(0), block(1), block(2), block(0)],
        "in the order they came"
    );
    assert!(
        store.staged_blocks(&a, 8).await.unwrap().is_empty(),
        "another epoch"
    );
    let b = blob("staging", "b");
    assert!(
        store.staged_blocks(&b, 7).await.unwrap().is_empty(),
        "another blob"
    );
    assert_eq!(
        *store.get(&a).await.unwrap().unwrap(),
        record("a", 1),
        "the record as it was"
    );
    assert_eq!(
        list_in(store, "staging").await,
        ["a"],
        "no listing shows a set"
    );

    // Writers racing into one set (a client uploading blocks in parallel) all land.
    let (b, block) = (&b, &block);
    let writes = (0..8).map(|w| async move {
        for i in 0..25 {
            assert!(
                stage_in(store, b, 9, &block(100 + w * 25 + i), 1000)
                    .await
                    .unwrap()
            );
        }
    });
    futures_util::future::join_all(writes).await;
    let mut raced: Vec<String> = (store.staged_blocks(b, 9).await.unwrap())
        .into_iter()
        .map(|b| b.id)
        .collect();
    raced.sort();
    let all: Vec<String> = (100..300).map(|i| block(i).id).collect();
    assert_eq!(raced, all, "every staging of the race, once");

    store.drop_staged(&a, 7).await.unwrap();
    assert!(
        store.staged_blocks(&a, 7).await.unwrap().is_empty(),
        "dropped"
    );
    store.drop_staged(&a, 7).await.unwrap();
    assert_eq!(
        store.staged_blocks(b, 9).await.unwrap().len(),
        200,
        "the other set stays"
    );
    store.delete(&c, 1).await.unwrap();
}

async fn list_in<R: Records>(store: &R, container: &str) -> Vec<String> {
    let scan = Scan {
        container,
        prefix: "",
        from: "",
        limit: 100,
    };
    let scanned = store.list(scan).await.unwrap();
    scanned.into_iter().map(|(name, _)| name).collect()
}

/// Paged listings built from the backend's scans list every blob exactly once, whatever the
/// delimiter, the prefix, the page size and the names' shapes: pseudo-random names over an
/// alphabet that holds the delimiters (blobs named like the prefixes they would roll up into,
/// `a/` and `a//` among them), every page size from 1 to one past the whole, each paging
/// compared with the listing in one page.
pub async fn listing<R: Records>(store: &R) {
    let c = container("paging");
    create(store, &c, &container_record(1)).await;
    let mut names: Vec<String> = ["a/", "a/b", "a/c", "a//"].map(String::from).into();
    // xorshift64: the same names on every backend and every run.
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    while names.len() < 40 {
        let len = 1 + next() % 4;
        names.push(
            (0..len)
                .map(|_| ['a', 'b', '/'][(next() % 3) as usize])
                .collect(),
        );
    }
    names.sort();
    names.dedup();
    for name in &names {
        create(store, &blob("paging", name), &record(name, 1)).await;
    }
    for delimiter in [None, Some("/"), Some("b"), Some("/a")] {
        for prefix in ["", "a", "a/", "a//", "b/"] {
            let options = |max_results, marker| crate::operation::ListOptions {
                prefix: prefix.to_owned(),
                marker,
                max_results,
                delimiter: delimiter.map(str::to_owned),
                ..crate::operation::ListOptions::default()
            };
            let shown = |entries: Vec<crate::enumeration::Entry>| -> Vec<String> {
                entries
                    .into_iter()
                    .map(|entry| match entry {
                        crate::enumeration::Entry::Blob(name, _) => name,
                        crate::enumeration::Entry::Prefix(prefix) => format!("{prefix}*"),
                    })
                    .collect()
            };
            let (whole, none) = crate::enumeration::page(store, "paging", &options(5000, None))
                .await
                .unwrap();
            assert!(none.is_none(), "one page holds them all");
            let whole = shown(whole);
            let under: Vec<&String> = names.iter().filter(|n| n.starts_with(prefix)).collect();
            if delimiter.is_none() {
                assert_eq!(whole.iter().collect::<Vec<_>>(), under, "prefix {prefix:?}");
            }
            for size in 1..=whole.len() + 1 {
                let (mut paged, mut marker) = (Vec::new(), None);
                for _ in 0..=whole.len() {
                    let (entries, next) =
                        crate::enumeration::page(store, "paging", &options(size, marker))
                            .await
                            .unwrap();
                    assert!(entries.len() <= size, "a page holds at most its size");
                    paged.extend(shown(entries));
                    marker = next;
                    if marker.is_none() {
                        break;
                    }
                }
                assert!(marker.is_none(), "the paging ends");
                assert_eq!(
                    paged, whole,
                    "pages of {size}, delimiter {delimiter:?}, prefix {prefix:?}"
                );
            }
        }
    }
    let removed = store.delete(&c, 1).await.unwrap();
    assert_eq!(removed.len(), names.len());
}

/// The names a scan of the conformance container finds.
async fn list<R: Records>(store: &R, prefix: &str, from: &str, limit: usize) -> Vec<String> {
    let container = "conformance";
    let scan = Scan {
        container,
        prefix,
        from,
        limit,
    };
    let scanned = store.list(scan).await.unwrap();
    scanned.into_iter().map(|(name, _)| name).collect()
}

/// The contract of [`Objects`]: staging hashes and counts what streamed in, reads return the
/// bytes and ranges of them, a body over the limit is refused, a share names the same bytes
/// anew and outlives what it shares, discards are idempotent.
pub async fn objects<O: Objects>(store: &O) {
    let frames: VecDeque<Bytes> = (0..64u8)
        .map(|i| Bytes::from(vec![i; 1000 + usize::from(i)]))
        .collect();
    let whole: Vec<u8> = frames.iter().flat_map(|f| f.to_vec()).collect();
    let body = Frames(frames);
    let staged = store.stage(body, 1 << 20).await.unwrap();
    assert_eq!(
        staged.etag,
        strong_etag(&whole),
        "the tag is the SHA-256 of the streamed bytes"
    );
    assert_eq!(staged.len, whole.len() as u64);

    let len = staged.len;
    let read = store.read(&staged.object, len, None).await.unwrap();
    assert_eq!(read.collect().await.unwrap().to_bytes(), whole);
    let read = store
        .read(&staged.object, len, Some(1500..60_000))
        .await
        .unwrap();
    assert_eq!(
        read.collect().await.unwrap().to_bytes(),
        &whole[1500..60_000]
    );
    for (wrong, range) in [
        (len + 1, None),
        (len - 1, None),
        (len + 10, Some(len..len + 10)),
    ] {
        expect_err(
            store.read(&staged.object, wrong, range).await,
            |e| matches!(e, StoreError::Corrupt { .. }),
            "an object whose length is not its record's",
        );
    }

    let too_big = store
        .stage(
            http_body_util::Full::new(Bytes::from(vec![0u8; 2048])),
            1024,
        )
        .await;
    expect_err(
        too_big,
        |e| matches!(e, StoreError::TooLarge { limit: 1024 }),
        "a body over the limit",
    );

    let empty = store
        .stage(http_body_util::Empty::<Bytes>::new(), 1024)
        .await
        .unwrap();
    assert_eq!((empty.len, empty.etag), (0, strong_etag(b"")));
    assert_ne!(
        empty.object, staged.object,
        "every staged body is a new object"
    );

    // Shared: the same bytes under a new name, each name discarded on its own.
    let shared = store.share(&staged.object, len).await.unwrap();
    assert_ne!(shared, staged.object, "a share is a new name");
    expect_err(
        store.share(&staged.object, len + 1).await,
        |e| matches!(e, StoreError::Corrupt { .. }),
        "a share of an object whose length is not its record's",
    );
    expect_err(
        store.share("no-such-object", 0).await,
        |e| matches!(e, StoreError::NotFound { .. }),
        "a share of an unknown object",
    );

    store.discard(&staged.object).await.unwrap();
    let read = store.read(&shared, len, None).await.unwrap();
    assert_eq!(
        read.collect().await.unwrap().to_bytes(),
        whole,
        "a share outlives the object it shares"
    );
    store.discard(&shared).await.unwrap();
    expect_err(
        store.read(&staged.object, len, None).await,
        |e| matches!(e, StoreError::NotFound { .. }),
        "a discarded object",
    );
    store.discard(&staged.object).await.unwrap();
    expect_err(
        store.read("no-such-object", 0, None).await,
        |e| matches!(e, StoreError::NotFound { .. }),
        "an unknown object",
    );
}

/// A body that arrives in several frames, as a real upload does.
struct Frames(VecDeque<Bytes>);

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
    }
}

/// Stages `block` for `key` under `epoch`, in a set of at most `max`.
async fn stage_in<S: Records>(
    store: &S,
    key: &Key,
    epoch: u64,
    block: &Block,
    max: usize,
) -> Result<bool, StoreError> {
    store
        .stage_block(BlockToStage {
            key,
            epoch,
            block,
            max,
        })
        .await
}
