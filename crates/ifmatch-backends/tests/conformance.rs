//! The local-disk backends pass the same conformance suite as the in-memory ones, cold (every
//! read from disk) and warm (through the caches).

use std::sync::Arc;

use ifmatch_backends::local::{DataDir, INLINE_MAX, LocalObjects, LocalRecords};
use ifmatch_blob::conformance;

/// A fresh data directory (kept while the first is alive).
fn data() -> (tempfile::TempDir, Arc<DataDir>) {
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::open(dir.path()).unwrap();
    (dir, data)
}

/// Every check of the records' suite, each in a data directory of its own: with a cache and
/// small blobs kept in their records (warm), and with neither (every answer from the files).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_records_conform() {
    for (cache, inline) in [(10_000, INLINE_MAX), (0, 0)] {
        let dir = tempfile::tempdir().unwrap();
        conformance::every(|name| {
            let data = DataDir::open(dir.path().join(name)).unwrap();
            LocalRecords::new(data, cache, inline).unwrap()
        })
        .await;
    }
}

#[tokio::test]
async fn local_objects_conform() {
    let (_dir, data) = data();
    conformance::objects(&LocalObjects::new(data.clone(), 64 << 20)).await;
    conformance::objects(&LocalObjects::new(data, 0)).await;
}

/// A share on the local disk is a hard link: no byte copied, whatever the object's size, and
/// its time is the share's, for the sweep.
#[cfg(unix)]
#[tokio::test]
async fn a_local_share_is_a_link_with_its_own_time() {
    use ifmatch_blob::Objects;
    use std::os::unix::fs::MetadataExt;

    let (dir, data) = data();
    let objects = LocalObjects::new(data, 0);
    let body = http_body_util::Full::new(bytes::Bytes::from(vec![7u8; 3 << 20]));
    let staged = objects.stage(body, 4 << 20).await.unwrap();
    objects.persist(&staged).await.unwrap();
    let path = |name: &str| {
        let found = walk(dir.path()).into_iter().find(|p| p.ends_with(name));
        found.unwrap_or_else(|| panic!("no file {name}"))
    };
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options()
        .write(true)
        .open(path(&staged.object))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let shared = objects.share(&staged.object, staged.len).await.unwrap();
    let (a, b) = (
        std::fs::metadata(path(&staged.object)).unwrap(),
        std::fs::metadata(path(&shared)).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2), "one file, two names");
    assert!(b.modified().unwrap() > old, "the share's time is now");
}

#[cfg(unix)]
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
