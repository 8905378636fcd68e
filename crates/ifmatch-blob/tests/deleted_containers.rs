//! Container soft delete over the front (memory backend, no socket): with a
//! `ContainerDeleteRetentionPolicy`, a deleted container is kept with all its blobs (block,
//! append and page blobs, snapshots), listed with `include=deleted` by name and version,
//! restored by Restore Container as it was, and gone for good once its days are over; a new
//! container may take its name meanwhile. Its limits one past each refused.

use crate::common;

use std::time::Duration;

use common::{Server, code, field, header, refusal};

fn policy(days: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><StorageServiceProperties>\
         <ContainerDeleteRetentionPolicy><Enabled>true</Enabled><Days>{days}</Days>\
         </ContainerDeleteRetentionPolicy></StorageServiceProperties>"
    )
}

async fn retaining(days: &str) -> Server {
    let s = Server::start().await;
    let r = s
        .put("/?restype=service&comp=properties", &[], policy(days))
        .await;
    assert_eq!(r.status(), 202, "{:?}", code(&r));
    s
}

/// `(name, version, remaining days)` of each container a listing names.
async fn containers(s: &Server, query: &str) -> Vec<(String, Option<String>, Option<String>)> {
    let xml = s.read_text(&format!("/?comp=list{query}")).await;
    (xml.split("<Container>").skip(1))
        .map(|c| {
            (
                field(c, "Name").unwrap(),
                field(c, "Version"),
                field(c, "RemainingRetentionDays"),
            )
        })
        .collect()
}

async fn restore(s: &Server, name: &str, version: &str) -> common::Reply {
    let headers = [
        ("x-ms-deleted-container-name", name),
        ("x-ms-deleted-container-version", version),
    ];
    let path = format!("/{name}?restype=container&comp=undelete");
    s.put_empty(&path, &headers).await
}

#[tokio::test]
async fn a_deleted_container_is_kept_with_its_blobs_and_restored_as_it_was() {
    let s = retaining("2").await;
    s.create_container("box").await;
    let meta = [("x-ms-meta-team", "a")];
    assert_eq!(
        s.put_empty("/box?restype=container&comp=metadata", &meta)
            .await
            .status(),
        200
    );
    let block_tag = s.put_blob("/box/doc.txt", b"kept").await;
    let snapshot = header(
        &s.put_empty("/box/doc.txt?comp=snapshot", &[]).await,
        "x-ms-snapshot",
    )
    .unwrap();
    s.put_blob("/box/doc.txt", b"kept, v2").await;
    assert_eq!(
        s.put_empty("/box/log", &[("x-ms-blob-type", "AppendBlob")])
            .await
            .status(),
        201
    );
    for line in ["one\n", "two\n"] {
        assert_eq!(
            s.put("/box/log?comp=appendblock", &[], line).await.status(),
            201
        );
    }
    let page = [
        ("x-ms-blob-type", "PageBlob"),
        ("x-ms-blob-content-length", "1024"),
    ];
    assert_eq!(s.put_empty("/box/disk", &page).await.status(), 201);
    let write = [
        ("x-ms-page-write", "update"),
        ("x-ms-range", "bytes=512-1023"),
    ];
    assert_eq!(
        s.put("/box/disk?comp=page", &write, vec![9u8; 512])
            .await
            .status(),
        201
    );
    let listing = "/box?restype=container&comp=list&include=snapshots,metadata";
    let before = s.read_text(listing).await;

    assert_eq!(s.delete("/box?restype=container", &[]).await.status(), 202);
    let r = s.get("/box/doc.txt", &[]).await;
    assert_eq!(refusal(&r), (404, "ContainerNotFound".into()));
    assert_eq!(
        containers(&s, "").await,
        vec![],
        "not listed without include=deleted"
    );
    let deleted = containers(&s, "&include=deleted").await;
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    let (name, Some(first), days) = deleted[0].clone() else {
        panic!("{deleted:?}")
    };
    assert_eq!((name.as_str(), days.as_deref()), ("box", Some("2")));

    // The name is free meanwhile; a restore then finds it taken.
    s.create_container("box").await;
    s.put_blob("/box/other", b"new").await;
    let r = restore(&s, "box", &first).await;
    assert_eq!(refusal(&r), (409, "ContainerAlreadyExists".into()));
    s.advance(Duration::from_secs(1));
    assert_eq!(s.delete("/box?restype=container", &[]).await.status(), 202);
    let deleted = containers(&s, "&include=deleted").await;
    assert_eq!(
        deleted.len(),
        2,
        "two deleted containers of one name: {deleted:?}"
    );

    let r = restore(&s, "box", &first).await;
    assert_eq!(r.status(), 201, "{:?}", code(&r));
    let after = s.read_text(listing).await;
    assert_eq!(after, before, "every blob back as it was");
    assert_eq!(s.read_text("/box/doc.txt").await, "kept, v2");
    let old = s
        .get(&format!("/box/doc.txt?snapshot={snapshot}"), &[])
        .await;
    assert_eq!(
        (header(&old, "etag"), old.text().await.unwrap()),
        (Some(block_tag), "kept".to_owned())
    );
    assert_eq!(s.read_text("/box/log").await, "one\ntwo\n");
    assert_eq!(
        s.put("/box/log?comp=appendblock", &[], "three\n")
            .await
            .status(),
        201,
        "still appendable"
    );
    assert_eq!(s.read_text("/box/log").await, "one\ntwo\nthree\n");
    let disk = s.read("/box/disk").await;
    assert_eq!(
        (&disk[..512], &disk[512..]),
        (&[0u8; 512][..], &[9u8; 512][..])
    );
    let r = s.head("/box?restype=container", &[]).await;
    assert_eq!(common::meta(&r, "team").as_deref(), Some("a"));
    // Restored once: that version is no longer kept; the other still is.
    let deleted = containers(&s, "&include=deleted").await;
    assert_eq!(
        deleted.iter().filter(|c| c.1.is_some()).count(),
        1,
        "{deleted:?}"
    );
    let r = restore(&s, "box", &first).await;
    assert_eq!(r.status(), 404, "that version is no longer kept");
}

#[tokio::test]
async fn a_deleted_container_goes_for_good_after_its_days() {
    let s = retaining("1").await;
    s.create_container("box").await;
    s.put_blob("/box/a", b"bytes").await;
    assert_eq!(s.delete("/box?restype=container", &[]).await.status(), 202);
    let version = containers(&s, "&include=deleted").await[0]
        .1
        .clone()
        .unwrap();
    s.advance(Duration::from_secs(86_400 - 60));
    s.sweep(Duration::from_secs(3600)).await;
    assert_eq!(
        containers(&s, "&include=deleted").await.len(),
        1,
        "kept until its days are over"
    );
    s.advance(Duration::from_secs(120));
    s.sweep(Duration::from_secs(3600)).await;
    assert_eq!(containers(&s, "&include=deleted").await, vec![]);
    let r = restore(&s, "box", &version).await;
    assert_eq!(refusal(&r), (404, "ContainerNotFound".into()));
}

#[tokio::test]
async fn without_the_policy_a_deleted_container_is_gone_and_restore_is_refused_as_azure_does() {
    let s = Server::with_container("box").await;
    s.put_blob("/box/a", b"bytes").await;
    assert_eq!(s.delete("/box?restype=container", &[]).await.status(), 202);
    assert_eq!(containers(&s, "&include=deleted").await, vec![]);
    let r = restore(&s, "box", "01DB6B1D8F0E7D3A").await;
    assert_eq!(refusal(&r), (404, "ContainerNotFound".into()));
    // Each header required; another name is not restored here.
    let path = "/box?restype=container&comp=undelete";
    let r = s
        .put_empty(path, &[("x-ms-deleted-container-name", "box")])
        .await;
    assert_eq!(refusal(&r), (400, "MissingRequiredHeader".into()));
    let r = restore(&s, "other", "01DB6B1D8F0E7D3A").await;
    assert_eq!(
        r.status(),
        404,
        "the container restored to is the one named"
    );
    let headers = [
        ("x-ms-deleted-container-name", "other"),
        ("x-ms-deleted-container-version", "01DB6B1D8F0E7D3A"),
    ];
    let r = s.put_empty(path, &headers).await;
    assert_eq!(refusal(&r), (400, "InvalidHeaderValue".into()));
    // The policy's days: 1 to 365.
    for days in ["0", "366"] {
        let r = s
            .put("/?restype=service&comp=properties", &[], policy(days))
            .await;
        assert_eq!(refusal(&r), (400, "InvalidXmlDocument".into()), "{days}");
    }
    let r = s
        .put("/?restype=service&comp=properties", &[], policy("365"))
        .await;
    assert_eq!(r.status(), 202);
}
