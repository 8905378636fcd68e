//! Versions over the front (memory backend, no socket): the account's `IsVersioningEnabled` in
//! Set Blob Service Properties; every write of a blob keeping the one before (`x-ms-version-id`
//! on each); reads, tags and deletion of a version (`versionid=`); listing with
//! `include=versions`; a version copied back over its blob; and no version lost when writers
//! race.

use crate::common;

use std::sync::Arc;

use common::{Server, code, field, header, meta};

const ON: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?><StorageServiceProperties>\
    <IsVersioningEnabled>true</IsVersioningEnabled></StorageServiceProperties>";

async fn versioned() -> Server {
    let s = Server::start().await;
    s.set_properties(ON).await;
    s.create_container("box").await;
    s.put_blob("/box/other", b"x").await;
    s
}

/// A write's `x-ms-version-id`.
fn version(r: &common::Reply) -> String {
    header(r, "x-ms-version-id").expect("x-ms-version-id")
}

fn at(path: &str, id: &str) -> String {
    format!("{path}?versionid={id}")
}

/// The `(name, version id, current)` of each blob a listing names.
fn listed(xml: &str) -> Vec<(String, Option<String>, bool)> {
    (xml.split("<Blob>").skip(1))
        .map(|b| {
            let current = b.contains("<IsCurrentVersion>true</IsCurrentVersion>");
            (field(b, "Name").unwrap(), field(b, "VersionId"), current)
        })
        .collect()
}

#[tokio::test]
async fn the_service_properties_say_whether_versions_are_kept() {
    let s = Server::start().await;
    let r = s.get("/?restype=service&comp=properties", &[]).await;
    assert_eq!(r.status(), 200);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("<IsVersioningEnabled>false")
    );
    s.create_container("box").await;
    let r = s.put("/box/b", &[], "one").await;
    assert_eq!(
        header(&r, "x-ms-version-id"),
        None,
        "no versions kept by default"
    );
    assert_eq!(s.put("/box/b", &[], "two").await.status(), 201);
    let list = "/box?restype=container&comp=list&include=versions";
    assert_eq!(listed(&s.read_text(list).await).len(), 1);
    s.set_properties(ON).await;
    // Another setting later keeps this one (an element left out keeps its setting).
    let cors = "<StorageServiceProperties><Cors /></StorageServiceProperties>";
    s.set_properties(cors).await;
    let r = s.get("/?restype=service&comp=properties", &[]).await;
    let xml = r.text().await.unwrap();
    assert!(
        xml.contains("<IsVersioningEnabled>true</IsVersioningEnabled>") && xml.contains("<Cors"),
        "{xml}"
    );
    let r = s
        .put("/?restype=service&comp=properties", &[], "not xml <")
        .await;
    assert_eq!(code(&r).as_deref(), Some("InvalidXmlDocument"));
    // The account's record is no container.
    let containers = s.read_text("/?comp=list").await;
    assert!(!containers.contains("$service"), "{containers}");
    let r = s.put("/box/b", &[], "three").await;
    assert!(header(&r, "x-ms-version-id").is_some());
}

#[tokio::test]
async fn every_write_keeps_the_blob_as_it_was() {
    let s = versioned().await;
    let a = version(&s.put("/box/b", &[], "one").await);
    let b = version(&s.put("/box/b", &[], "two").await);
    let c = version(
        &s.put("/box/b?comp=metadata", &[("x-ms-meta-k", "v")], "")
            .await,
    );
    assert!(a < b && b < c, "{a} {b} {c}");
    // Neither tags nor a lease make a version.
    let tags = "<?xml version=\"1.0\" encoding=\"utf-8\"?><Tags><TagSet><Tag><Key>t</Key><Value>1</Value></Tag></TagSet></Tags>";
    assert_eq!(s.put("/box/b?comp=tags", &[], tags).await.status(), 204);
    let r = s.head("/box/b", &[]).await;
    assert_eq!(version(&r), c, "a read names the current version");

    assert_eq!(s.read_text(&at("/box/b", &a)).await, "one");
    let r = s.get(&at("/box/b", &b), &[]).await;
    assert_eq!(meta(&r, "k"), None);
    assert_eq!(r.text().await.unwrap(), "two");
    let r = s.get(&at("/box/b", &c), &[]).await;
    assert_eq!(meta(&r, "k").as_deref(), Some("v"), "the current one");
    let r = s
        .get(&at("/box/b", "2000-01-01T00:00:00.0000000Z"), &[])
        .await;
    assert_eq!(code(&r).as_deref(), Some("BlobNotFound"));
    for path in [
        at("/box/b", &a),
        format!("{}&comp=metadata", at("/box/b", &a)),
    ] {
        let r = s.put(&path, &[("x-ms-meta-k", "w")], "x").await;
        assert_eq!(
            code(&r).as_deref(),
            Some("InvalidQueryParameterValue"),
            "{path}"
        );
    }
    let r = s
        .get(&format!("{}&snapshot={a}", at("/box/b", &a)), &[])
        .await;
    assert_eq!(r.status(), 400, "a snapshot and a version at once");

    let list = "/box?restype=container&comp=list&include=versions&prefix=b";
    let all = listed(&s.read_text(list).await);
    let want = vec![
        ("b".to_owned(), Some(c.clone()), true),
        ("b".to_owned(), Some(a.clone()), false),
        ("b".to_owned(), Some(b.clone()), false),
    ];
    assert_eq!(all, want);
    let plain = "/box?restype=container&comp=list&prefix=b";
    assert_eq!(listed(&s.read_text(plain).await).len(), 1);

    // Deleted: its versions stay, the last of them the blob as it was.
    assert_eq!(s.delete("/box/b", &[]).await.status(), 202);
    assert_eq!(s.get("/box/b", &[]).await.status(), 404);
    let r = s.get(&at("/box/b", &c), &[]).await;
    assert_eq!(meta(&r, "k").as_deref(), Some("v"));
    let all = listed(&s.read_text(list).await);
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(all.iter().all(|(_, _, current)| !current));

    // Promoted: an old version copied over the blob.
    let source = format!("http://127.0.0.1:10000/devstoreaccount1/box/b?versionid={a}");
    let r = s.put("/box/b", &[("x-ms-copy-source", &source)], "").await;
    assert_eq!(r.status(), 202);
    assert_eq!(s.read_text("/box/b").await, "one");

    // A version deleted by its id.
    assert_eq!(s.delete(&at("/box/b", &b), &[]).await.status(), 202);
    assert_eq!(s.get(&at("/box/b", &b), &[]).await.status(), 404);
    assert_eq!(s.get(&at("/box/b", &a), &[]).await.status(), 200);
}

/// While the account also keeps deleted blobs, a version deleted by its id is kept: gone to
/// reads and listings but `include=versions,deleted`, brought back by Undelete Blob, removed
/// for good after its days.
#[tokio::test]
async fn a_deleted_version_is_kept_while_deleted_blobs_are() {
    let s = versioned().await;
    let both = "<?xml version=\"1.0\" encoding=\"utf-8\"?><StorageServiceProperties>\
        <DeleteRetentionPolicy><Enabled>true</Enabled><Days>1</Days></DeleteRetentionPolicy>\
        </StorageServiceProperties>";
    s.set_properties(both).await;
    let first = version(&s.put("/box/b", &[], "one").await);
    s.put("/box/b", &[], "two").await;
    assert_eq!(s.delete(&at("/box/b", &first), &[]).await.status(), 202);
    assert_eq!(s.get(&at("/box/b", &first), &[]).await.status(), 404);
    let versions = "/box?restype=container&comp=list&prefix=b&include=versions";
    let ids = |xml: String| {
        listed(&xml)
            .into_iter()
            .map(|(_, id, _)| id.unwrap())
            .collect::<Vec<_>>()
    };
    let listed_now = ids(s.read_text(versions).await);
    assert!(!listed_now.contains(&first), "{listed_now:?}");
    let with_deleted = format!("{versions},deleted");
    let xml = s.read_text(&with_deleted).await;
    assert!(
        ids(xml.clone()).contains(&first) && xml.contains("<Deleted>true</Deleted>"),
        "{xml}"
    );

    assert_eq!(s.put("/box/b?comp=undelete", &[], "").await.status(), 200);
    let r = s.get(&at("/box/b", &first), &[]).await;
    assert_eq!(
        (r.status().as_u16(), r.text().await.unwrap()),
        (200, "one".to_owned())
    );

    assert_eq!(s.delete(&at("/box/b", &first), &[]).await.status(), 202);
    s.advance(std::time::Duration::from_secs(86_400 + 1));
    s.sweep(std::time::Duration::from_secs(3600)).await;
    assert!(!ids(s.read_text(&with_deleted).await).contains(&first));
    assert_eq!(s.put("/box/b?comp=undelete", &[], "").await.status(), 200);
    assert_eq!(
        s.get(&at("/box/b", &first), &[]).await.status(),
        404,
        "gone for good"
    );
}

/// An append adds to the blob's current version; its creation and overwrite keep versions.
#[tokio::test]
async fn appends_make_no_version() {
    let s = versioned().await;
    let r = s
        .put("/box/log", &[("x-ms-blob-type", "AppendBlob")], "")
        .await;
    let created = version(&r);
    for block in ["a", "b", "c"] {
        assert_eq!(
            s.put("/box/log?comp=appendblock", &[], block)
                .await
                .status(),
            201
        );
    }
    let list = "/box?restype=container&comp=list&include=versions&prefix=log";
    let all = listed(&s.read_text(list).await);
    assert_eq!(all, [("log".to_owned(), Some(created.clone()), true)]);
    assert_eq!(s.read_text("/box/log").await, "abc");
    // Set Blob Metadata keeps a version, as on any blob; a page write keeps none.
    let r = s
        .put("/box/log?comp=metadata", &[("x-ms-meta-k", "v")], "")
        .await;
    assert_eq!(r.status(), 200);
    let all = listed(&s.read_text(list).await);
    assert_eq!(all.len(), 2, "{all:?}");
    let page_blob = [
        ("x-ms-blob-type", "PageBlob"),
        ("x-ms-blob-content-length", "512"),
    ];
    assert_eq!(s.put("/box/disk", &page_blob, "").await.status(), 201);
    let write = [("x-ms-page-write", "update"), ("x-ms-range", "bytes=0-511")];
    let r = s.put("/box/disk?comp=page", &write, vec![1u8; 512]).await;
    assert_eq!(r.status(), 201);
    let disks = "/box?restype=container&comp=list&include=versions&prefix=disk";
    assert_eq!(listed(&s.read_text(disks).await).len(), 1);
}

/// Sixteen writers overwrite one blob at once, twice each: every write is kept, as the
/// current blob or one of its versions, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_lose_no_version() {
    let s = Arc::new(versioned().await);
    s.put_blob("/box/b", b"first").await;
    let writers: Vec<_> = (0..16)
        .map(|w| {
            let s = s.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for n in 0..2 {
                    let r = s.put("/box/b", &[], format!("w{w}-{n}")).await;
                    assert_eq!(r.status(), 201);
                    ids.push(version(&r));
                }
                ids
            })
        })
        .collect();
    let mut ids = Vec::new();
    for writer in writers {
        ids.extend(writer.await.unwrap());
    }
    let list = "/box?restype=container&comp=list&include=versions&prefix=b";
    let all = listed(&s.read_text(list).await);
    assert_eq!(all.len(), 33, "the first write, and 32 more: {all:?}");
    let mut bodies = Vec::new();
    for (_, id, _) in &all {
        let id = id.as_ref().unwrap();
        bodies.push(s.read_text(&at("/box/b", id)).await);
    }
    bodies.sort();
    let mut want: Vec<String> = (0..16)
        .flat_map(|w| (0..2).map(move |n| format!("w{w}-{n}")))
        .chain(["first".to_owned()])
        .collect();
    want.sort();
    assert_eq!(bodies, want);
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 32, "each write its own id");
}
