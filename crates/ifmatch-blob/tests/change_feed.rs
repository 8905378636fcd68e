//! The change feed over the front (memory backend, no socket): `<ChangeFeed>` in the Blob
//! service properties; each change of a blob kept in the commit that makes it and published,
//! once, in the account's read-only `$blobchangefeed` as Azure lays it out (segments naming
//! shards, Avro chunks). The Python SDK reads it in `tests/sdk/patterns.py`.

use crate::common;

use common::{Server, code, refusal};

const ON: &str = "<StorageServiceProperties><ChangeFeed><Enabled>true</Enabled></ChangeFeed>\
    </StorageServiceProperties>";

async fn feeding() -> Server {
    let s = Server::start().await;
    s.set_properties(ON).await;
    s.create_container("box").await;
    s
}

/// The names of the feed's blobs.
async fn feed_blobs(s: &Server) -> Vec<String> {
    let r = s
        .get("/$blobchangefeed?restype=container&comp=list", &[])
        .await;
    assert_eq!(r.status(), 200, "{:?}", code(&r));
    let xml = r.text().await.unwrap();
    (xml.split("<Name>").skip(1))
        .map(|n| n[..n.find('<').unwrap()].to_owned())
        .collect()
}

/// The `(eventType, blob)` of each record of the feed's chunks, in the feed's order, found
/// by the strings the records hold (the SDK's Avro reader decodes them in patterns.py).
async fn events(s: &Server) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for name in feed_blobs(s).await.iter().filter(|n| n.ends_with(".avro")) {
        let bytes = s.read(&format!("/$blobchangefeed/{name}")).await;
        assert!(bytes.starts_with(b"Obj\x01"), "{name} is an Avro container");
        let text = String::from_utf8_lossy(&bytes);
        let subjects: Vec<&str> = text
            .split("/blobServices/default/containers/box/blobs/")
            .skip(1)
            .collect();
        for subject in subjects {
            let kinds = [
                "BlobCreated",
                "BlobDeleted",
                "BlobPropertiesUpdated",
                "BlobSnapshotCreated",
            ];
            let kind = kinds
                .iter()
                .find(|k| subject.contains(*k))
                .expect("an event type");
            let blob: String = subject
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            out.push((kind.to_string(), blob));
        }
    }
    out
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, b)| (k.to_string(), b.to_string()))
        .collect()
}

#[tokio::test]
async fn each_change_is_published_once_in_order() {
    let s = feeding().await;
    // The test's clock stands still unless moved: each step a moment after the one before.
    let tick = || s.advance(std::time::Duration::from_millis(1));
    s.put_blob("/box/apple", b"one").await;
    tick();
    let r = s
        .put("/box/apple?comp=metadata", &[("x-ms-meta-k", "v")], "")
        .await;
    assert_eq!(r.status(), 200);
    // A lease changes no bytes and no properties: the feed says nothing of it.
    let lease = [
        ("x-ms-lease-action", "acquire"),
        ("x-ms-lease-duration", "-1"),
    ];
    let r = s.put("/box/apple?comp=lease", &lease, "").await;
    assert_eq!(r.status(), 201);
    let id = common::header(&r, "x-ms-lease-id").unwrap();
    let r = s
        .put(
            "/box/apple?comp=lease",
            &[("x-ms-lease-action", "release"), ("x-ms-lease-id", &id)],
            "",
        )
        .await;
    assert_eq!(r.status(), 200);
    tick();
    assert_eq!(
        s.put("/box/apple?comp=snapshot", &[], "").await.status(),
        201
    );
    tick();
    s.put_blob("/box/berry", b"two").await;
    tick();
    let r = s
        .delete("/box/apple", &[("x-ms-delete-snapshots", "include")])
        .await;
    assert_eq!(r.status(), 202);
    // Nothing published yet; the deletion is one, the blob gone.
    assert!(events(&s).await.is_empty());
    assert_eq!(s.get("/box/apple", &[]).await.status(), 404);
    let listed = s
        .get("/box?restype=container&comp=list&include=uncommitted", &[])
        .await;
    assert!(!listed.text().await.unwrap().contains("apple"));
    assert_eq!(s.publish().await, 5);
    let want = pairs(&[
        ("BlobCreated", "apple"),
        ("BlobPropertiesUpdated", "apple"),
        ("BlobSnapshotCreated", "apple"),
        ("BlobCreated", "berry"),
        ("BlobDeleted", "apple"),
    ]);
    assert_eq!(events(&s).await, want);
    // Published once: another pass finds nothing, and the deletion's record is gone.
    assert_eq!(s.publish().await, 0);
    assert_eq!(events(&s).await, want);
    assert!(!s.has_record("box", "apple").await);
    assert!(s.record("box", "berry").await.feed.is_empty());
    let names = feed_blobs(&s).await;
    assert!(
        names.contains(&"meta/segments.json".to_owned()),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("idx/segments/") && n.ends_with("/meta.json"))
    );
    // Later changes go to the hour's next chunk.
    s.put_blob("/box/berry", b"three").await;
    assert_eq!(s.publish().await, 1);
    assert_eq!(
        feed_blobs(&s)
            .await
            .iter()
            .filter(|n| n.ends_with(".avro"))
            .count(),
        2
    );
}

#[tokio::test]
async fn a_blob_deleted_and_written_again_keeps_both_changes() {
    let s = feeding().await;
    s.put_blob("/box/apple", b"one").await;
    assert_eq!(s.delete("/box/apple", &[]).await.status(), 202);
    // Deleted again: nothing there to delete.
    assert_eq!(s.delete("/box/apple", &[]).await.status(), 404);
    s.put_blob("/box/apple", b"two").await;
    assert_eq!(s.read_text("/box/apple").await, "two");
    assert_eq!(s.publish().await, 3);
    let want = pairs(&[
        ("BlobCreated", "apple"),
        ("BlobDeleted", "apple"),
        ("BlobCreated", "apple"),
    ]);
    assert_eq!(events(&s).await, want);
    assert!(s.record("box", "apple").await.feed.is_empty());
}

#[tokio::test]
async fn a_container_deleted_publishes_its_blobs_changes_first() {
    let s = feeding().await;
    s.put_blob("/box/apple", b"one").await;
    assert_eq!(s.delete("/box?restype=container", &[]).await.status(), 202);
    assert_eq!(events(&s).await, pairs(&[("BlobCreated", "apple")]));
    assert_eq!(s.publish().await, 0);
}

#[tokio::test]
async fn racing_writers_publish_one_change_per_write_that_landed() {
    let s = std::sync::Arc::new(feeding().await);
    s.put_blob("/box/hot", b"0").await;
    let etag = common::header(&s.head("/box/hot", &[]).await, "etag").unwrap();
    let writers = (0..8).map(|i| {
        let (s, etag) = (s.clone(), etag.clone());
        tokio::spawn(async move {
            let r = s
                .put("/box/hot", &[("if-match", &etag)], format!("w{i}"))
                .await;
            r.status().as_u16()
        })
    });
    let statuses: Vec<u16> = futures_join(writers).await;
    let landed = statuses.iter().filter(|&&c| c == 201).count();
    assert_eq!(landed, 1, "{statuses:?}");
    assert_eq!(s.publish().await, 2);
    assert_eq!(events(&s).await.len(), 2);
}

/// Snapshot Blob while a pass of the publisher takes the blob's earlier changes (a write to
/// the blob's record, which the snapshot's commit may lose a race to): each snapshot taken
/// (201) is one `BlobSnapshotCreated`, and one taken back and made again is none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_racing_the_publisher_is_one_change() {
    let s = std::sync::Arc::new(feeding().await);
    let mut taken = 0;
    for n in 0..60 {
        let path = format!("/box/b{n}");
        s.put_blob(&path, b"x").await;
        let (a, b) = (s.clone(), s.clone());
        let snap = tokio::spawn(async move {
            let r = a.put(&format!("{path}?comp=snapshot"), &[], "").await;
            r.status().as_u16()
        });
        let publish = tokio::spawn(async move { b.publish().await });
        assert_eq!(snap.await.unwrap(), 201);
        publish.await.unwrap();
        taken += 1;
    }
    s.publish().await;
    let events = events(&s).await;
    let snapshots = (events.iter())
        .filter(|(kind, _)| kind == "BlobSnapshotCreated")
        .count();
    assert_eq!(snapshots, taken, "{events:?}");
    let listing = "/box?restype=container&comp=list&include=snapshots";
    let listed = s.read_text(listing).await.matches("<Snapshot>").count();
    assert_eq!(listed, taken);
}

async fn futures_join(tasks: impl Iterator<Item = tokio::task::JoinHandle<u16>>) -> Vec<u16> {
    let mut out = Vec::new();
    for task in tasks.collect::<Vec<_>>() {
        out.push(task.await.unwrap());
    }
    out
}

#[tokio::test]
async fn no_feed_unless_asked_and_none_written_by_clients() {
    let s = Server::with_container("box").await;
    s.put_blob("/box/apple", b"one").await;
    assert_eq!(s.publish().await, 0);
    let r = s
        .get("/$blobchangefeed?restype=container&comp=list", &[])
        .await;
    assert_eq!(refusal(&r), (404, "ContainerNotFound".into()));
    assert!(s.record("box", "apple").await.feed.is_empty());
    let s = feeding().await;
    for (method, path) in [
        ("PUT", "/$blobchangefeed/log/00/x.avro"),
        ("DELETE", "/$blobchangefeed?restype=container"),
        ("PUT", "/$blobchangefeed/meta/segments.json?comp=metadata"),
    ] {
        let r = match method {
            "PUT" => s.put(path, &[], "x").await,
            _ => s.delete(path, &[]).await,
        };
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (403, Some("AuthorizationPermissionMismatch")),
            "{method} {path}"
        );
    }
    // Readable from the moment the feed is kept.
    assert!(feed_blobs(&s).await.is_empty());
    // Another container name starting with `$` is still refused.
    let r = s.put("/$other?restype=container", &[], "").await;
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn segments_older_than_the_feeds_days_are_swept() {
    let s = Server::start().await;
    for days in ["0", "146001"] {
        let xml = format!(
            "<StorageServiceProperties><ChangeFeed><Enabled>true</Enabled>\
             <RetentionInDays>{days}</RetentionInDays></ChangeFeed></StorageServiceProperties>"
        );
        let r = s.put("/?restype=service&comp=properties", &[], xml).await;
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (400, Some("InvalidXmlDocument")),
            "{days}"
        );
    }
    let one_day = "<StorageServiceProperties><ChangeFeed><Enabled>true</Enabled>\
        <RetentionInDays>1</RetentionInDays></ChangeFeed></StorageServiceProperties>";
    let r = s
        .put("/?restype=service&comp=properties", &[], one_day)
        .await;
    assert_eq!(r.status(), 202);
    s.create_container("box").await;
    s.put_blob("/box/apple", b"one").await;
    assert_eq!(s.publish().await, 1);
    s.advance(std::time::Duration::from_secs(86_400 + 2 * 3600));
    s.put_blob("/box/berry", b"two").await;
    assert_eq!(s.publish().await, 1);
    let segments = |names: Vec<String>| names.into_iter().filter(|n| n.starts_with("idx/")).count();
    assert_eq!(segments(feed_blobs(&s).await), 2);
    s.sweep(std::time::Duration::from_secs(3600)).await;
    assert_eq!(segments(feed_blobs(&s).await), 1, "the day-old hour goes");
    assert_eq!(events(&s).await, pairs(&[("BlobCreated", "berry")]));
}

/// A deleted blob whose deletion is not yet published (its record kept, empty but for its
/// changes) is answered as a blob that was never there, by every operation.
#[tokio::test]
async fn a_deletion_not_yet_published_is_answered_as_no_blob() {
    let s = feeding().await;
    s.put_blob("/box/gone", b"one").await;
    assert_eq!(s.delete("/box/gone", &[]).await.status(), 202);
    let block = [("x-ms-blob-type", "BlockBlob")];
    // The same request to the deleted blob and to one never written: the same answer.
    type Send<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);
    let asks: [Send<'_>; 14] = [
        ("PUT", "?comp=appendblock", &[]),
        ("PUT", "?comp=seal", &[]),
        (
            "PUT",
            "?comp=properties",
            &[("x-ms-blob-content-type", "text/plain")],
        ),
        ("GET", "?comp=pagelist", &[]),
        ("GET", "", &[]),
        ("HEAD", "", &[]),
        ("GET", "?comp=metadata", &[]),
        ("PUT", "?comp=metadata", &[("x-ms-meta-a", "b")]),
        ("GET", "?comp=tags", &[]),
        (
            "PUT",
            "?comp=lease",
            &[
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "-1"),
            ],
        ),
        ("PUT", "?comp=snapshot", &[]),
        ("DELETE", "", &[]),
        ("GET", "?comp=blocklist", &[]),
        ("PUT", "?comp=undelete", &[]),
    ];
    for (method, query, headers) in asks {
        let ask = |name: &str| {
            let path = format!("/box/{name}{query}");
            let s = &s;
            async move {
                let r = match method {
                    "GET" => s.get(&path, headers).await,
                    "HEAD" => s.head(&path, headers).await,
                    "PUT" => s.put_empty(&path, headers).await,
                    _ => s.delete(&path, headers).await,
                };
                (r.status().as_u16(), code(&r))
            }
        };
        assert_eq!(ask("gone").await, ask("never").await, "{method} {query}");
    }
    // Written only if present: as a blob never there, it is not.
    let mut only = block.to_vec();
    only.push(("if-match", "*"));
    let gone = s.put("/box/gone", &only, "x").await;
    let never = s.put("/box/never", &only, "x").await;
    assert_eq!((gone.status(), code(&gone)), (never.status(), code(&never)));
    let list = [("x-ms-blob-type", "BlockBlob"), ("if-match", "*")];
    let gone = s
        .put("/box/gone?comp=blocklist", &list, "<BlockList/>")
        .await;
    let never = s
        .put("/box/never?comp=blocklist", &list, "<BlockList/>")
        .await;
    assert_eq!((gone.status(), code(&gone)), (never.status(), code(&never)));
    assert_eq!(gone.status(), 412);
    // Created again only if absent: as a blob never there, it is.
    let mut create = block.to_vec();
    create.push(("if-none-match", "*"));
    assert_eq!(s.put("/box/gone", &create, "two").await.status(), 201);
    assert_eq!(s.put("/box/never", &create, "two").await.status(), 201);
    let listed = s.read_text("/box?restype=container&comp=list").await;
    assert_eq!(listed.matches("<Name>").count(), 2, "{listed}");
    // Its changes still all published, in order.
    assert_eq!(s.publish().await, 4);
    let want = pairs(&[
        ("BlobCreated", "gone"),
        ("BlobDeleted", "gone"),
        ("BlobCreated", "gone"),
        ("BlobCreated", "never"),
    ]);
    let mut got = events(&s).await;
    got.sort_by_key(|(_, b)| b.clone());
    assert_eq!(got, want);
}
