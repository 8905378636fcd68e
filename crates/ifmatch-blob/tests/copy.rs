//! Copy Blob over the memory backends, the cases the SDK tests do not reach: a blob copied
//! onto itself, a block-list blob and an empty append blob as sources, a copy that outlives its
//! source, Put Blob From URL of an append blob, and Put Block From URL.

use crate::common;

use common::{Server, code, header, refusal};

const SOURCE: &str = "http://127.0.0.1:10000/devstoreaccount1/box/";

async fn copy(s: &Server, to: &str, from: &str) -> common::Reply {
    let source = format!("{SOURCE}{from}");
    s.put_empty(
        &format!("/box/{to}"),
        &[("x-ms-copy-source", source.as_str())],
    )
    .await
}

/// A copy of `box/self` to `box/by-host`, its source named host-style in `account`.
async fn by_host(s: &Server, account: &str) -> common::Reply {
    let url = format!("https://{account}.blob.core.windows.net/box/self");
    s.put_empty("/box/by-host", &[("x-ms-copy-source", url.as_str())])
        .await
}

#[tokio::test]
async fn copies_of_every_kind_of_blob_own_their_bytes() {
    let s = Server::with_container("box").await;

    // A blob of two committed blocks.
    for (id, part) in [("YQ==", "first,"), ("Yg==", "second")] {
        let r = s
            .put(&format!("/box/blocks?comp=block&blockid={id}"), &[], part)
            .await;
        assert_eq!(r.status(), 201);
    }
    let list = "<BlockList><Latest>YQ==</Latest><Latest>Yg==</Latest></BlockList>";
    let r = s.put("/box/blocks?comp=blocklist", &[], list).await;
    assert_eq!(r.status(), 201);
    let r = copy(&s, "blocks-copy", "blocks").await;
    assert_eq!(
        (r.status().as_u16(), header(&r, "x-ms-copy-status")),
        (202, Some("success".to_owned()))
    );
    let r = s.get("/box/blocks-copy?comp=blocklist", &[]).await;
    let blocks = r.text().await.unwrap();
    assert!(
        blocks.contains("YQ==") && blocks.contains("Yg=="),
        "{blocks}"
    );
    s.delete("/box/blocks", &[]).await;
    let r = s
        .get("/box/blocks-copy", &[("x-ms-range", "bytes=3-8")])
        .await;
    assert_eq!(
        r.text().await.unwrap(),
        "st,sec",
        "whole after its source is gone"
    );

    // Onto itself: the same bytes, a new copy id, nothing lost.
    s.put_blob("/box/self", b"itself").await;
    let first = header(&copy(&s, "self", "self").await, "x-ms-copy-id");
    let again = copy(&s, "self", "self").await;
    assert_eq!(again.status(), 202);
    assert_ne!(header(&again, "x-ms-copy-id"), first);
    assert_eq!(s.read_text("/box/self").await, "itself");

    // An empty append blob stays an append blob; Put Blob From URL makes a block blob.
    let r = s
        .put_empty("/box/log", &[("x-ms-blob-type", "AppendBlob")])
        .await;
    assert_eq!(r.status(), 201);
    let r = copy(&s, "log-copy", "log").await;
    assert_eq!(r.status(), 202);
    let r = s.head("/box/log-copy", &[]).await;
    assert_eq!(
        (header(&r, "x-ms-blob-type"), header(&r, "content-length")),
        (Some("AppendBlob".to_owned()), Some("0".to_owned()))
    );
    s.put("/box/log?comp=appendblock", &[], "line\n").await;
    let source = format!("{SOURCE}log");
    let r = s
        .put_empty(
            "/box/flat",
            &[
                ("x-ms-copy-source", source.as_str()),
                ("x-ms-blob-type", "BlockBlob"),
            ],
        )
        .await;
    assert_eq!(r.status(), 201, "{:?}", code(&r));
    let r = s.get("/box/flat", &[]).await;
    assert_eq!(header(&r, "x-ms-blob-type").as_deref(), Some("BlockBlob"));
    assert_eq!(r.text().await.unwrap(), "line\n");

    // Host-style, as the Azure CLI names a source whatever its endpoint: a blob of this
    // server's account, not of another.
    let r = by_host(&s, "devstoreaccount1").await;
    assert_eq!(r.status(), 202, "{:?}", code(&r));
    assert_eq!(s.read_text("/box/by-host").await, "itself");
    let r = by_host(&s, "someoneelse").await;
    assert_eq!(refusal(&r), (403, "CannotVerifyCopySource".into()));

    // A source that is not there, or not a blob of this server.
    let r = copy(&s, "nothing", "missing").await;
    assert_eq!(refusal(&r), (404, "BlobNotFound".into()));
    let r = s
        .put_empty(
            "/box/elsewhere",
            &[(
                "x-ms-copy-source",
                "http://example.com/devstoreaccount1/box/self",
            )],
        )
        .await;
    assert_eq!(refusal(&r), (403, "CannotVerifyCopySource".into()));
}

/// Put Block From URL: a range of another blob (a snapshot's too) staged as a block, then
/// committed; the source's conditions hold first; what is not a range of it is refused.
#[tokio::test]
async fn put_block_from_url_stages_a_range_of_a_blob() {
    let s = Server::with_container("box").await;
    let source_tag = s.put_blob("/box/src", b"0123456789").await;
    let snapshot = s.put("/box/src?comp=snapshot", &[], "").await;
    let snapshot = header(&snapshot, "x-ms-snapshot").unwrap();
    s.put_blob("/box/src", b"changed!!!").await;
    let source = format!("{SOURCE}src");
    let at_snapshot = format!("{source}?snapshot={snapshot}");
    let stage = |id: &'static str, headers: Vec<(&'static str, String)>| {
        let s = &s;
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            s.put(&format!("/box/dst?comp=block&blockid={id}"), &headers, "")
                .await
        }
    };
    let r = stage(
        "QUFB",
        vec![
            ("x-ms-copy-source", at_snapshot.clone()),
            ("x-ms-source-range", "bytes=2-5".into()),
        ],
    )
    .await;
    assert_eq!(r.status(), 201, "{:?}", code(&r));
    let r = stage("QkJC", vec![("x-ms-copy-source", source.clone())]).await;
    assert_eq!(r.status(), 201);
    let r = stage(
        "Q0ND",
        vec![
            ("x-ms-copy-source", source.clone()),
            ("x-ms-source-if-match", source_tag),
        ],
    )
    .await;
    assert_eq!(
        code(&r).as_deref(),
        Some("SourceConditionNotMet"),
        "the source changed since"
    );
    let r = stage(
        "Q0ND",
        vec![
            ("x-ms-copy-source", source.clone()),
            ("x-ms-source-range", "bytes=20-30".into()),
        ],
    )
    .await;
    assert_eq!(code(&r).as_deref(), Some("InvalidRange"));
    let list = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList><Latest>QUFB</Latest><Latest>QkJC</Latest></BlockList>";
    assert_eq!(
        s.put("/box/dst?comp=blocklist", &[], list).await.status(),
        201
    );
    assert_eq!(s.read_text("/box/dst").await, "2345changed!!!");
}
