use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;

use super::failure::Result;
use super::state::Front;
use crate::memory::{MemoryObjects, MemoryRecords};
use crate::record::Record;
use crate::store::{Key, PutMode, Records, Scan, StoreError};
use ifmatch_azure::ERROR_CODE;
use ifmatch_azure::ManualEnv;

/// Memory records that fail as a test asks: every blob put with `fail()`, if set; every
/// container delete while `failing_deletes` is set (what a crash between a container soft
/// delete's copies and its removal leaves); every write of a blob record of the container
/// `down` names, while it names one; and, with `vanished`, a container listed among the others
/// that is gone when it is scanned (deleted between the two).
#[derive(Default)]
struct Failing {
    inner: MemoryRecords,
    fail: Option<fn() -> StoreError>,
    failing_deletes: std::sync::atomic::AtomicBool,
    down: std::sync::Mutex<Option<&'static str>>,
    vanished: Option<&'static str>,
}

impl Failing {
    fn is_down(&self, key: &Key) -> bool {
        let down = *self.down.lock().unwrap();
        matches!(key, Key::Blob(c, _) if Some(c.as_str()) == down)
    }
}

impl Records for Failing {
    async fn get(&self, key: &Key) -> Result<Option<Arc<Record>>, StoreError> {
        self.inner.get(key).await
    }

    async fn put(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
        if self.is_down(key) {
            return Err(StoreError::Unavailable("the machine went down".into()));
        }
        match (key, self.fail) {
            (Key::Blob(..), Some(fail)) => Err(fail()),
            _ => self.inner.put(key, record, mode).await,
        }
    }

    async fn delete(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
        let failing = self
            .failing_deletes
            .load(std::sync::atomic::Ordering::SeqCst);
        if failing && matches!(key, Key::Container(_)) || self.is_down(key) {
            return Err(StoreError::Unavailable("the machine went down".into()));
        }
        self.inner.delete(key, generation).await
    }

    async fn list(&self, scan: Scan<'_>) -> Result<Vec<(String, Record)>, StoreError> {
        if Some(scan.container) == self.vanished {
            return Err(StoreError::ContainerNotFound);
        }
        self.inner.list(scan).await
    }

    async fn stage_block(&self, stage: crate::store::BlockToStage<'_>) -> Result<bool, StoreError> {
        self.inner.stage_block(stage).await
    }

    async fn staged_blocks(
        &self,
        key: &Key,
        epoch: u64,
    ) -> Result<Vec<crate::record::Block>, StoreError> {
        self.inner.staged_blocks(key, epoch).await
    }

    async fn drop_staged(&self, key: &Key, epoch: u64) -> Result<(), StoreError> {
        self.inner.drop_staged(key, epoch).await
    }

    async fn containers(&self) -> Result<Vec<String>, StoreError> {
        let mut listed = self.inner.containers().await?;
        listed.extend(self.vanished.map(str::to_owned));
        Ok(listed)
    }
}

/// A front over [`Failing`] records, open to unsigned requests, and its clock.
fn failing_front() -> (
    Front<Failing, MemoryObjects, Arc<ManualEnv>>,
    Arc<ManualEnv>,
) {
    let env = Arc::new(ManualEnv::default());
    let front = Front::new(Failing::default(), MemoryObjects::default(), env.clone())
        .with_anonymous_access(true);
    (front, env)
}

/// [`failing_front`] with the account's change feed kept, the container `box` and a blob at
/// each of `blobs` (paths below the account).
async fn feeding_front(
    blobs: &[&str],
) -> (
    Front<Failing, MemoryObjects, Arc<ManualEnv>>,
    Arc<ManualEnv>,
) {
    let (front, env) = failing_front();
    let on = b"<StorageServiceProperties><ChangeFeed><Enabled>true</Enabled></ChangeFeed>\
        </StorageServiceProperties>";
    let settings = front.handle(send_to("PUT", "/?restype=service&comp=properties", on));
    assert_eq!(settings.await.status(), 202);
    let created = front.handle(send_to("PUT", "/box?restype=container", b""));
    assert_eq!(created.await.status(), 201);
    for blob in blobs {
        assert_eq!(
            front.handle(send_to("PUT", blob, b"bytes")).await.status(),
            201
        );
    }
    (front, env)
}

/// A request to the development account (`uri` below it), as a block blob's Put would be.
fn send_to(method: &str, uri: &str, body: &'static [u8]) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(format!("/devstoreaccount1{uri}"))
        .header("x-ms-blob-type", "BlockBlob")
        .body(Full::new(Bytes::from_static(body)))
        .unwrap()
}

async fn put_through(fail: fn() -> StoreError) -> (StatusCode, Option<String>, usize) {
    let records = Failing {
        fail: Some(fail),
        ..Failing::default()
    };
    let front = Front::new(records, MemoryObjects::default(), ManualEnv::default())
        .with_anonymous_access(true);
    let put = |uri: &str| {
        Request::put(uri)
            .header("x-ms-blob-type", "BlockBlob")
            .body(Full::new(Bytes::from_static(b"bytes")))
            .unwrap()
    };
    front
        .handle(put("/devstoreaccount1/box?restype=container"))
        .await;
    let answer = front.handle(put("/devstoreaccount1/box/b")).await;
    let code = answer
        .headers()
        .get(ERROR_CODE)
        .map(|c| c.to_str().unwrap().to_owned());
    (answer.status(), code, front.objects().len())
}

#[tokio::test]
async fn a_staged_object_is_kept_only_when_the_commit_may_have_landed() {
    // 64 lost races: nothing landed, the object goes.
    let lost = put_through(|| StoreError::conflict("blob c/b")).await;
    assert_eq!(
        lost,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Some("ServerBusy".into()),
            0
        )
    );
    // A refusal or a local failure: nothing landed.
    let refused = put_through(|| StoreError::Io(std::io::Error::other("disk"))).await;
    assert_eq!(refused.2, 0);
    // The backend could not say: the object stays (an orphan at worst, for the sweep).
    let unknown = put_through(|| StoreError::Unavailable("timeout".into())).await;
    assert_eq!(
        unknown,
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Some("ServerBusy".into()),
            1
        )
    );
}

#[tokio::test]
async fn staged_blocks_never_committed_expire_after_a_week_with_their_objects() {
    let env = Arc::new(ManualEnv::default());
    let front = Front::new(
        MemoryRecords::default(),
        MemoryObjects::default(),
        env.clone(),
    )
    .with_anonymous_access(true);
    let put = |uri: &str, body: &'static [u8]| {
        Request::put(uri)
            .header("x-ms-blob-type", "BlockBlob")
            .body(Full::new(Bytes::from_static(body)))
            .unwrap()
    };
    let base = "/devstoreaccount1/box";
    front
        .handle(put(&format!("{base}?restype=container"), b""))
        .await;
    // A blob with a committed block and a staged one, and a blob with a staged one only.
    for (blob, id) in [("kept", "QQ=="), ("kept", "Qg=="), ("gone", "QQ==")] {
        let uri = format!("{base}/{blob}?comp=block&blockid={id}");
        assert_eq!(front.handle(put(&uri, b"bytes")).await.status(), 201);
    }
    let list = b"<BlockList><Latest>QQ==</Latest></BlockList>";
    let commit = front
        .handle(put(&format!("{base}/kept?comp=blocklist"), list))
        .await;
    assert_eq!(commit.status(), 201);
    let uri = format!("{base}/kept?comp=block&blockid=Qg==");
    assert_eq!(front.handle(put(&uri, b"later")).await.status(), 201);
    assert_eq!(front.objects().len(), 3);

    env.advance(std::time::Duration::from_secs(6 * 86_400));
    assert_eq!(front.expire_blocks().await.unwrap(), 0, "not a week yet");
    env.advance(std::time::Duration::from_secs(86_401));
    assert_eq!(front.expire_blocks().await.unwrap(), 2);
    assert_eq!(
        front.objects().len(),
        1,
        "the committed block's object stays"
    );
    let gone = Key::Blob("box".into(), "gone".into());
    assert!(front.records().get(&gone).await.unwrap().is_none());
    let kept = Key::Blob("box".into(), "kept".into());
    let kept = front.records().get(&kept).await.unwrap().unwrap();
    assert!(kept.uncommitted.is_empty() && kept.staging.is_none() && kept.content.is_some());
    let get = Request::get(format!("{base}/kept"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let answer = front.handle(get).await;
    assert_eq!(answer.status(), 200);
    use http_body_util::BodyExt;
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"bytes");
}

#[tokio::test]
async fn a_container_move_cut_short_is_never_listed_and_discards_nothing() {
    let (front, env) = failing_front();
    let policy = b"<StorageServiceProperties><ContainerDeleteRetentionPolicy><Enabled>true\
        </Enabled><Days>1</Days></ContainerDeleteRetentionPolicy></StorageServiceProperties>";
    for (method, uri, body, status) in [
        ("PUT", "/?restype=service&comp=properties", &policy[..], 202),
        ("PUT", "/box?restype=container", b"", 201),
        ("PUT", "/box/b", b"bytes", 201),
    ] {
        assert_eq!(
            front.handle(send_to(method, uri, body)).await.status(),
            status
        );
    }
    // The blob copied under the kept name, then the removal and its undoing both fail: the
    // kept container stays, marked moving, naming the live blob's object.
    (front.records().failing_deletes).store(true, std::sync::atomic::Ordering::SeqCst);
    let deleted = front
        .handle(send_to("DELETE", "/box?restype=container", b""))
        .await;
    assert_eq!(deleted.status(), 503);
    (front.records().failing_deletes).store(false, std::sync::atomic::Ordering::SeqCst);
    let kept: Vec<String> = (front.records().containers().await.unwrap())
        .into_iter()
        .filter(|c| c.starts_with("$deleted."))
        .collect();
    assert_eq!(kept.len(), 1, "left behind, as a crash would");
    let listed = front
        .handle(send_to("GET", "/?comp=list&include=deleted", b""))
        .await;
    let xml = http_body_util::BodyExt::collect(listed.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert!(
        !String::from_utf8_lossy(&xml).contains("<Deleted>"),
        "never listed"
    );

    // An hour on, the sweep (its part for containers: memory objects list none) removes it
    // and discards nothing the live blob names.
    env.advance(std::time::Duration::from_secs(3601));
    front.expire_containers().await.unwrap();
    let left = front.records().containers().await.unwrap();
    assert!(left.iter().all(|c| !c.starts_with("$deleted.")), "{left:?}");
    let read = front.handle(send_to("GET", "/box/b", b"")).await;
    assert_eq!(read.status(), 200);
    let body = http_body_util::BodyExt::collect(read.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(&body[..], b"bytes");
}

#[tokio::test]
async fn a_page_write_past_the_runs_a_record_holds_is_refused_and_one_within_lands() {
    use crate::page_blob::{MAX_RUNS, PAGE, Paged, Run};
    let front = Front::new(
        MemoryRecords::default(),
        MemoryObjects::default(),
        ManualEnv::default(),
    )
    .with_anonymous_access(true);
    let put = |uri: &str, headers: &[(&str, &str)], body: &'static [u8]| {
        let mut request = Request::put(format!("/devstoreaccount1{uri}"))
            .header("content-length", body.len().to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(Full::new(Bytes::from_static(body))).unwrap()
    };
    let created = front.handle(put("/box?restype=container", &[], b"")).await;
    assert_eq!(created.status(), 201);
    let size = (2 * MAX_RUNS as u64 * PAGE).to_string();
    let page_blob = [
        ("x-ms-blob-type", "PageBlob"),
        ("x-ms-blob-content-length", size.as_str()),
    ];
    assert_eq!(
        front.handle(put("/box/d", &page_blob, b"")).await.status(),
        201
    );
    // Every other page written: as many runs as the record holds (laid in directly, as that
    // many writes would leave them).
    let key = Key::Blob("box".into(), "d".into());
    let current = front.records().get(&key).await.unwrap().unwrap();
    let mut full = Record::clone(&current);
    let runs = (0..MAX_RUNS as u64)
        .map(|n| Run {
            at: 2 * n * PAGE,
            len: PAGE,
            object: String::new(),
            object_len: PAGE,
            skip: 0,
            sha256: ifmatch_core::strong_etag(b""),
        })
        .collect();
    full.content.as_mut().unwrap().pages = Some(Paged {
        runs,
        ..Paged::default()
    });
    full.generation += 1;
    let mode = PutMode::Update(current.generation);
    front.records().put(&key, &full, mode).await.unwrap();
    let write = |at: u64| format!("bytes={at}-{}", at + PAGE - 1);
    // A page between two runs: one run more than the record holds.
    let past = write(PAGE);
    let headers = [("x-ms-page-write", "update"), ("x-ms-range", past.as_str())];
    let refused = front
        .handle(put("/box/d?comp=page", &headers, &[7; 512]))
        .await;
    assert_eq!(refused.status(), 416);
    // Over a run, or a clear of one: no more runs than there were.
    let within = write(0);
    let headers = [
        ("x-ms-page-write", "update"),
        ("x-ms-range", within.as_str()),
    ];
    let landed = front
        .handle(put("/box/d?comp=page", &headers, &[7; 512]))
        .await;
    assert_eq!(landed.status(), 201);
    let headers = [
        ("x-ms-page-write", "clear"),
        ("x-ms-range", within.as_str()),
    ];
    let cleared = front.handle(put("/box/d?comp=page", &headers, b"")).await;
    assert_eq!(cleared.status(), 201);
}

#[tokio::test]
async fn a_publication_cut_short_is_finished_by_the_next_pass_without_a_second_chunk() {
    let (front, env) = feeding_front(&["/box/a", "/box/b"]).await;
    let chunks = || async {
        let scan = Scan {
            container: "$blobchangefeed",
            prefix: "log/",
            from: "",
            limit: 100,
        };
        let listed = front.records().list(scan).await.unwrap();
        listed.into_iter().map(|(name, _)| name).collect::<Vec<_>>()
    };
    // The plan and its chunk written, then the machine goes down before the changes leave
    // their records.
    *front.records().down.lock().unwrap() = Some("box");
    assert!(front.publish_changes().await.is_err());
    *front.records().down.lock().unwrap() = None;
    assert_eq!(chunks().await.len(), 1);
    let held = |name: &'static str| {
        let front = &front;
        async move {
            let key = Key::Blob("box".into(), name.into());
            front.records().get(&key).await.unwrap().unwrap().feed.len()
        }
    };
    assert_eq!((held("a").await, held("b").await), (1, 1));
    // A change made meanwhile waits for the plan cut short to be finished.
    env.advance(std::time::Duration::from_millis(1));
    assert_eq!(
        front
            .handle(send_to("PUT", "/box/c", b"three"))
            .await
            .status(),
        201
    );
    // The next call finishes that plan (the same chunk, not written again, the changes out of
    // their records), then publishes the change made meanwhile, in a chunk of its own.
    assert_eq!(front.publish_changes().await.unwrap(), 3);
    assert_eq!(chunks().await.len(), 2);
    assert_eq!((held("a").await, held("b").await), (0, 0));
    assert_eq!(front.publish_changes().await.unwrap(), 0);
    let markers = Scan {
        container: "$changes",
        prefix: "m/",
        from: "",
        limit: 100,
    };
    assert!(front.records().list(markers).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_change_whose_marker_was_given_up_is_marked_again_by_the_sweep() {
    let (front, env) = feeding_front(&["/box/a"]).await;
    // As a write that landed after its marker was given up leaves it: a change held, no marker.
    let markers = Scan {
        container: "$changes",
        prefix: "m/",
        from: "",
        limit: 100,
    };
    for (name, record) in front.records().list(markers).await.unwrap() {
        let key = Key::Blob("$changes".into(), name);
        front
            .records()
            .delete(&key, record.generation)
            .await
            .unwrap();
    }
    assert_eq!(front.publish_changes().await.unwrap(), 0);
    let key = Key::Blob("box".into(), "a".into());
    assert_eq!(
        front.records().get(&key).await.unwrap().unwrap().feed.len(),
        1
    );
    // The sweep walks the records: the change, old enough, is marked again and published.
    front.expire_blocks().await.unwrap();
    assert_eq!(
        front.publish_changes().await.unwrap(),
        0,
        "not before its time"
    );
    env.advance(std::time::Duration::from_secs(121));
    front.expire_blocks().await.unwrap();
    assert_eq!(front.publish_changes().await.unwrap(), 1);
    assert!(
        front
            .records()
            .get(&key)
            .await
            .unwrap()
            .unwrap()
            .feed
            .is_empty()
    );
}

/// Every operation's state is boxed where the dispatch picks it, so that a request's future
/// holds only what every request runs: each layer that wraps it (the server's box, the task a
/// change runs in, hyper's slot for the request in flight) moves it whole, and at 12.5 KiB the
/// copies were a tenth of the server's CPU under many small writes (docs/figures.md).
#[test]
fn a_requests_future_holds_no_operations_state() {
    let front = Front::new(
        MemoryRecords::default(),
        MemoryObjects::default(),
        ManualEnv::default(),
    );
    let future = front.handle(send_to("PUT", "/box/b", b"x"));
    let size = std::mem::size_of_val(&future);
    assert!(size <= 2048, "a request's future takes {size} bytes");
}

/// A search of the account's blobs by their tags passes over a container deleted between its
/// listing of the containers and its scan of that one (a concurrent test's deletion failed the
/// JS SDK's account-wide search with 404 ContainerNotFound); a search within that container
/// answers 404.
#[tokio::test]
async fn a_find_across_containers_passes_over_one_deleted_meanwhile() {
    let records = Failing {
        vanished: Some("gone"),
        ..Failing::default()
    };
    let front = Front::new(records, MemoryObjects::default(), ManualEnv::default())
        .with_anonymous_access(true);
    let created = front.handle(send_to("PUT", "/box?restype=container", b""));
    assert_eq!(created.await.status(), 201);
    let tagged = Request::put("/devstoreaccount1/box/b")
        .header("x-ms-blob-type", "BlockBlob")
        .header("x-ms-tags", "team=x")
        .body(Full::new(Bytes::from_static(b"x")))
        .unwrap();
    assert_eq!(front.handle(tagged).await.status(), 201);
    let find = |path: &'static str| front.handle(send_to("GET", path, b""));
    let across = find("/?comp=blobs&where=%22team%22%3D%27x%27").await;
    assert_eq!(across.status(), 200);
    use http_body_util::BodyExt;
    let body = across.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("<Name>b</Name>"), "{body}");
    let within = find("/gone?restype=container&comp=blobs&where=%22team%22%3D%27x%27").await;
    assert_eq!(within.status(), 404);
}
