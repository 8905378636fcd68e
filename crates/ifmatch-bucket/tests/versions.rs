//! The bucket version backend passes the conformance suite of every version backend, over
//! object stores whose conditional puts are atomic (the emulator checked first): memory,
//! Azurite, and `ifmatch serve` itself through object_store's Azure backend (each instance a
//! client of its own); its locks expire with their holders only. Not over moto's S3 server:
//! its conditional puts are not atomic under concurrency (two of 16 writers with one `If-Match`
//! both won a round on a loaded CI machine), so it serves only the tests without races.

use crate::common;

use std::sync::Arc;

use ifmatch_bucket::BucketVersions;
use ifmatch_tower::Shared;
use ifmatch_tower::conformance;
use object_store::memory::InMemory;

/// The conformance suite over `store`, a server in another process. Its sixteen writers
/// queue for one lock, and a handoff is a release and an acquisition, two requests each: over
/// Azurite, on disk, 1.6 s in all on an idle 2-core host, 4.6 s with three busy loops beside
/// it, and past the default wait of 10 s once in CI, where this binary's other tests ran
/// beside it. The suite checks what a lock guarantees, not how fast a loaded emulator hands it
/// over: the wait here is a minute.
async fn conforms(store: Arc<dyn object_store::ObjectStore>) {
    let versions = Shared::new(BucketVersions::new(store, "versions"));
    conformance::versions(&versions.lock_wait(std::time::Duration::from_secs(60))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_memory_it_conforms() {
    let store = Arc::new(InMemory::new());
    conformance::versions(&Shared::new(BucketVersions::new(store.clone(), "versions"))).await;
    // Another prefix is another backend in the same bucket.
    conformance::versions(&Shared::new(BucketVersions::new(store, "other"))).await;
}

#[test]
fn over_memory_locks_expire_with_their_holders_only() {
    let store = Arc::new(InMemory::new());
    conformance::expiring_locks(|ttl, wait| {
        let versions = Shared::new(BucketVersions::new(store.clone(), "versions"));
        async move { versions.lock_ttl(ttl).lock_wait(wait) }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_ifmatch_serve_it_conforms() {
    let served = common::Served::start().await;
    conforms(served.client()).await;
}

#[test]
fn over_ifmatch_serve_locks_expire_with_their_holders_only() {
    // The server lives on a runtime of its own: the suite stops the runtime of a "dead" holder.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let served = runtime.block_on(common::Served::start());
    conformance::expiring_locks(|ttl, wait| {
        let versions = Shared::new(BucketVersions::new(served.client(), "versions"));
        async move { versions.lock_ttl(ttl).lock_wait(wait) }
    });
    drop(runtime);
}

/// Whether `store`'s conditional puts hold under concurrency, before it stands for a real store
/// in these tests: of 16 concurrent writers with one precondition, one wins, in each of 20
/// rounds of create-only and of `If-Match`. (Each writer's bytes are its own: an S3 ETag is
/// the MD5 of the bytes.)
async fn one_writer_of_sixteen_wins(store: Arc<dyn object_store::ObjectStore>) {
    use object_store::path::Path;
    use object_store::{ObjectStoreExt, PutMode, PutOptions, UpdateVersion};
    for round in 0..20 {
        let path = Path::from(format!("race/{round}"));
        let put = |mode: PutMode, writer: usize| {
            let (store, path) = (store.clone(), path.clone());
            tokio::spawn(async move {
                let options = PutOptions::from(mode);
                let body = format!("writer {writer}");
                store.put_opts(&path, body.into(), options).await.is_ok()
            })
        };
        let creators: Vec<_> = (0..16).map(|i| put(PutMode::Create, i)).collect();
        let mut won = 0;
        for creator in creators {
            won += usize::from(creator.await.unwrap());
        }
        assert_eq!(won, 1, "round {round}: create-only");
        let current = store.head(&path).await.unwrap();
        let version = UpdateVersion {
            e_tag: current.e_tag,
            version: current.version,
        };
        let updaters: Vec<_> = (0..16)
            .map(|i| put(PutMode::Update(version.clone()), 16 + i))
            .collect();
        let mut won = 0;
        for updater in updaters {
            won += usize::from(updater.await.unwrap());
        }
        assert_eq!(won, 1, "round {round}: If-Match");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_writer_of_sixteen_wins_on_azurite() {
    let azurite = common::Azurite::start().await;
    one_writer_of_sixteen_wins(azurite.client()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_azurite_it_conforms() {
    let azurite = common::Azurite::start().await;
    conforms(azurite.client()).await;
}

/// The local filesystem offers create-only puts but no `If-Match` update (nor the metadata a
/// conditional put is stamped with): `check` refuses it at start-up, and a step fails with the
/// same refusal, naming the fix;
/// never a silent success. A store that offers both passes the check and leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_without_conditional_updates_is_refused() {
    use ifmatch_bucket::VersionsError;
    use ifmatch_tower::SharedBackend;
    use object_store::ObjectStore;

    let dir = tempfile::tempdir().unwrap();
    let local = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    let versions = BucketVersions::new(Arc::new(local), "versions");
    let refused = versions.check().await.unwrap_err();
    assert!(
        matches!(refused, VersionsError::Unsupported(..)),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("conditional updates"),
        "{refused}"
    );

    // Without the check: the first lock's create-only put, stamped (metadata the local
    // filesystem keeps none of), is refused the same way.
    let failed = versions.acquire("/a", "token", 10_000).await.unwrap_err();
    let failed = failed
        .downcast_ref::<VersionsError>()
        .expect("a VersionsError");
    assert!(
        matches!(failed, VersionsError::Unsupported(..)),
        "{failed:?}"
    );

    let memory = Arc::new(InMemory::new());
    BucketVersions::new(memory.clone(), "versions")
        .check()
        .await
        .unwrap();
    let left = memory.list_with_delimiter(None).await.unwrap();
    assert!(
        left.objects.is_empty() && left.common_prefixes.is_empty(),
        "{left:?}"
    );
}
