//! Snapshots over the front (memory backend, no socket): Snapshot Blob, reads and copies of a
//! snapshot (`snapshot=`), listing with `include=snapshots`, Delete Blob with and without
//! `x-ms-delete-snapshots`, a snapshot's own deletion; and no snapshot outliving its blob when a
//! snapshot and a delete race.

use crate::common;

use std::sync::Arc;

use common::{Server, code, field, header, meta, refusal};

/// Snapshot Blob of `path`: its id.
async fn snapshot(s: &Server, path: &str, headers: &[(&str, &str)]) -> String {
    let r = s.put(&format!("{path}?comp=snapshot"), headers, "").await;
    assert_eq!(r.status(), 201, "{:?}", code(&r));
    header(&r, "x-ms-snapshot").expect("x-ms-snapshot")
}

fn at(path: &str, id: &str) -> String {
    format!("{path}?snapshot={id}")
}

/// The `(name, snapshot)` of each blob a listing names.
fn listed(xml: &str) -> Vec<(String, Option<String>)> {
    (xml.split("<Blob>").skip(1))
        .map(|b| (field(b, "Name").unwrap(), field(b, "Snapshot")))
        .collect()
}

#[tokio::test]
async fn a_snapshot_keeps_the_blob_as_it_was() {
    let s = Server::with_container("box").await;
    let headers = [("x-ms-blob-type", "BlockBlob"), ("x-ms-meta-v", "1")];
    assert_eq!(s.put("/box/b", &headers, "one").await.status(), 201);
    let before = s.head("/box/b", &[]).await;
    let r = s.put("/box/b?comp=snapshot", &[], "").await;
    assert_eq!(r.status(), 201);
    let first = header(&r, "x-ms-snapshot").unwrap();
    assert_eq!(first.len(), "2026-11-28T09:00:00.0000000Z".len(), "{first}");
    assert_eq!(header(&r, "etag"), header(&before, "etag"));
    assert_eq!(
        header(&r, "last-modified"),
        header(&before, "last-modified")
    );
    // The same instant again (the test's clock stands still): another id.
    let second = snapshot(&s, "/box/b", &[("x-ms-meta-v", "2")]).await;
    assert!(second > first, "{second} after {first}");
    assert_eq!(
        header(&s.head("/box/b", &[]).await, "etag"),
        header(&before, "etag"),
        "a snapshot leaves its blob's ETag"
    );

    assert_eq!(s.put("/box/b", &[], "two").await.status(), 201);
    let r = s.get(&at("/box/b", &first), &[]).await;
    assert_eq!(
        (meta(&r, "v"), header(&r, "etag")),
        (Some("1".into()), header(&before, "etag"))
    );
    assert_eq!(r.text().await.unwrap(), "one");
    let r = s.get(&at("/box/b", &second), &[]).await;
    assert_eq!(meta(&r, "v").as_deref(), Some("2"), "its own metadata");
    assert_ne!(header(&r, "etag"), header(&before, "etag"));
    assert_eq!(r.text().await.unwrap(), "one");
    assert_eq!(s.read_text("/box/b").await, "two");
    let r = s
        .get(&format!("{}&comp=metadata", at("/box/b", &first)), &[])
        .await;
    assert_eq!(meta(&r, "v").as_deref(), Some("1"));

    // A copy of a snapshot.
    let source = format!("http://127.0.0.1:10000/devstoreaccount1/box/b?snapshot={first}");
    let r = s.put("/box/c", &[("x-ms-copy-source", &source)], "").await;
    assert_eq!(r.status(), 202);
    assert_eq!(s.read_text("/box/c").await, "one");

    // Listed only when asked for, after their blob, oldest first.
    let plain = s.get("/box?restype=container&comp=list", &[]).await;
    let plain = listed(&plain.text().await.unwrap());
    assert_eq!(plain, [("b".into(), None), ("c".into(), None)]);
    let all = "/box?restype=container&comp=list&include=snapshots,metadata";
    let all = listed(&s.read_text(all).await);
    let want = [
        ("b".to_owned(), None),
        ("b".to_owned(), Some(first.clone())),
        ("b".to_owned(), Some(second.clone())),
        ("c".to_owned(), None),
    ];
    assert_eq!(all, want);
    // Paged one at a time, the markers lead through the snapshots.
    let mut paged = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let mut path = "/box?restype=container&comp=list&include=snapshots&maxresults=1".to_owned();
        if let Some(m) = &next {
            path += &format!("&marker={}", m.replace('\t', "%09"));
        }
        let xml = s.read_text(&path).await;
        paged.extend(listed(&xml));
        next = xml.find("<NextMarker>").map(|start| {
            let start = start + "<NextMarker>".len();
            xml[start..start + xml[start..].find('<').unwrap()].to_owned()
        });
        if next.is_none() {
            break;
        }
    }
    assert_eq!(paged, want);
}

#[tokio::test]
async fn snapshots_are_read_only_and_refused_where_they_do_not_apply() {
    let s = Server::with_container("box").await;
    s.put_blob("/box/b", b"x").await;
    let id = snapshot(&s, "/box/b", &[]).await;
    for (method, path) in [
        ("PUT", at("/box/b", &id)),
        ("PUT", format!("{}&comp=metadata", at("/box/b", &id))),
        ("PUT", format!("{}&comp=tags", at("/box/b", &id))),
        ("PUT", format!("{}&comp=lease", at("/box/b", &id))),
        ("PUT", format!("{}&comp=snapshot", at("/box/b", &id))),
        ("GET", "/box/b?snapshot=yesterday".to_owned()),
        ("GET", "/box/b?snapshot=2026-11-28T09:00:00Z".to_owned()),
    ] {
        let r = s
            .send(method, &path, &[("x-ms-lease-action", "acquire")], "")
            .await;
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (400, Some("InvalidQueryParameterValue")),
            "{method} {path}"
        );
    }
    assert_eq!(
        s.get(&at("/box/b", &id), &[]).await.status(),
        200,
        "unchanged"
    );
    let r = s
        .get("/box/b?snapshot=2000-01-01T00:00:00.0000000Z", &[])
        .await;
    assert_eq!(code(&r).as_deref(), Some("BlobNotFound"));
    let r = s.put("/box/none?comp=snapshot", &[], "").await;
    assert_eq!(code(&r).as_deref(), Some("BlobNotFound"));
    let r = s
        .put("/box/b?comp=snapshot", &[("if-match", "\"other\"")], "")
        .await;
    assert_eq!(r.status(), 412);
    let r = s
        .put(
            "/box/b?comp=snapshot",
            &[("x-ms-if-tags", "\"a\" = 'b'")],
            "",
        )
        .await;
    assert_eq!(code(&r).as_deref(), Some("ConditionNotMet"));
    let listing = "/box?restype=container&comp=list&include=snapshots";
    let snapshots = listed(&s.read_text(listing).await).len() - 1;
    assert_eq!(snapshots, 1, "a refused snapshot leaves none");
}

#[tokio::test]
async fn a_blob_goes_with_its_snapshots_or_after_them() {
    let s = Server::with_container("box").await;
    s.put_blob("/box/b", b"x").await;
    let ids = [
        snapshot(&s, "/box/b", &[]).await,
        snapshot(&s, "/box/b", &[]).await,
        snapshot(&s, "/box/b", &[]).await,
    ];
    let r = s.delete("/box/b", &[]).await;
    assert_eq!(refusal(&r), (409, "SnapshotsPresent".into()));
    let r = s
        .delete("/box/b", &[("x-ms-delete-snapshots", "some")])
        .await;
    assert_eq!(r.status(), 400);
    // One snapshot by its id; the header is for a blob.
    let r = s
        .delete(&at("/box/b", &ids[0]), &[("x-ms-delete-snapshots", "only")])
        .await;
    assert_eq!(r.status(), 400);
    assert_eq!(s.delete(&at("/box/b", &ids[0]), &[]).await.status(), 202);
    assert_eq!(s.get(&at("/box/b", &ids[0]), &[]).await.status(), 404);
    assert_eq!(s.get(&at("/box/b", &ids[1]), &[]).await.status(), 200);
    // Only the snapshots.
    let r = s
        .delete("/box/b", &[("x-ms-delete-snapshots", "only")])
        .await;
    assert_eq!(r.status(), 202);
    assert_eq!(s.get(&at("/box/b", &ids[1]), &[]).await.status(), 404);
    assert_eq!(s.get("/box/b", &[]).await.status(), 200);
    assert_eq!(s.delete("/box/b", &[]).await.status(), 202, "none left");
    // The blob and its snapshots.
    s.put_blob("/box/d", b"x").await;
    let id = snapshot(&s, "/box/d", &[]).await;
    let r = s
        .delete("/box/d", &[("x-ms-delete-snapshots", "include")])
        .await;
    assert_eq!(r.status(), 202);
    assert_eq!(s.get("/box/d", &[]).await.status(), 404);
    assert_eq!(s.get(&at("/box/d", &id), &[]).await.status(), 404);
    let listing = "/box?restype=container&comp=list&include=snapshots";
    assert_eq!(listed(&s.read_text(listing).await), []);
}

/// Of an append blob: appends to the blob after it leave the snapshot as it was.
#[tokio::test]
async fn a_snapshot_of_an_append_blob_stays_as_it_was() {
    let s = Server::with_container("box").await;
    let r = s
        .put("/box/log", &[("x-ms-blob-type", "AppendBlob")], "")
        .await;
    assert_eq!(r.status(), 201);
    assert_eq!(
        s.put("/box/log?comp=appendblock", &[], "one ")
            .await
            .status(),
        201
    );
    let id = snapshot(&s, "/box/log", &[]).await;
    assert_eq!(
        s.put("/box/log?comp=appendblock", &[], "two")
            .await
            .status(),
        201
    );
    assert_eq!(s.read_text("/box/log").await, "one two");
    let r = s.get(&at("/box/log", &id), &[]).await;
    assert_eq!(header(&r, "x-ms-blob-type").as_deref(), Some("AppendBlob"));
    assert_eq!(r.text().await.unwrap(), "one ");
    let r = s
        .delete("/box/log", &[("x-ms-delete-snapshots", "include")])
        .await;
    assert_eq!(r.status(), 202);
}

/// Snapshot Blob and Delete Blob (no header) at once, again and again: either the delete is
/// refused for the snapshot, or it landed first and no snapshot is left; never a snapshot of
/// a blob that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_snapshot_outlives_its_blob_when_they_race() {
    let s = Arc::new(Server::start().await);
    s.create_container("box").await;
    let (mut refused, mut deleted_first) = (0, 0);
    for n in 0..100 {
        let path = format!("/box/b{n}");
        s.put_blob(&path, b"x").await;
        let (a, b) = (s.clone(), s.clone());
        let (p1, p2) = (path.clone(), path.clone());
        let snap =
            tokio::spawn(async move { a.put(&format!("{p1}?comp=snapshot"), &[], "").await });
        let delete = tokio::spawn(async move { b.delete(&p2, &[]).await });
        let (snap, delete) = (snap.await.unwrap(), delete.await.unwrap());
        let blob = s.head(&path, &[]).await.status().as_u16();
        let listing = format!("/box?restype=container&comp=list&include=snapshots&prefix=b{n}");
        let names = listed(&s.read_text(&listing).await);
        let snapshots = names.iter().filter(|(_, id)| id.is_some()).count();
        match delete.status().as_u16() {
            202 => {
                assert_eq!((blob, snapshots), (404, 0), "deleted, yet a snapshot");
                deleted_first += 1;
                assert_ne!(snap.status(), 201, "a snapshot of a blob deleted first");
            }
            409 => {
                assert_eq!((blob, snapshots, snap.status().as_u16()), (200, 1, 201));
                refused += 1;
            }
            other => panic!("delete: {other}"),
        }
    }
    eprintln!("{refused} deletes refused for a snapshot, {deleted_first} landed first");
}
