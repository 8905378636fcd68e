//! No conditional header is dropped: every condition of the dialect that an operation does not
//! evaluate (a source lease; index tags where the operation takes none; a copy's source
//! conditions, its source's tags among them, without a copy, an append's elsewhere, a page
//! blob's sequence numbers but on Put Page) is refused
//! with 400 `UnsupportedHeader` naming it, on every operation, and nothing changes. The same
//! request without it is served. Where `x-ms-if-tags` is taken, a false one is 412.

use crate::common;

use common::{Server, code};
use ifmatch_blob::precondition::{
    APPEND_CONDITIONS, SEQUENCE_CONDITIONS, SOURCE_CONDITIONS, UNSERVED,
};

const COPY_SOURCE: &str = "http://127.0.0.1:10000/devstoreaccount1/box/b";

/// (name, method, path, headers, body): one request of each operation the front serves.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
);

const CASES: &[Case] = &[
    ("ListContainers", "GET", "/?comp=list", &[], ""),
    ("CreateContainer", "PUT", "/new?restype=container", &[], ""),
    (
        "DeleteContainer",
        "DELETE",
        "/box2?restype=container",
        &[],
        "",
    ),
    (
        "GetContainerProperties",
        "GET",
        "/box?restype=container",
        &[],
        "",
    ),
    (
        "ListBlobs",
        "GET",
        "/box?restype=container&comp=list",
        &[],
        "",
    ),
    (
        "LeaseContainer",
        "PUT",
        "/box?restype=container&comp=lease",
        &[
            ("x-ms-lease-action", "acquire"),
            ("x-ms-lease-duration", "-1"),
        ],
        "",
    ),
    (
        "GetContainerACL",
        "GET",
        "/box?restype=container&comp=acl",
        &[],
        "",
    ),
    (
        "SetContainerACL",
        "PUT",
        "/box?restype=container&comp=acl",
        &[("x-ms-blob-public-access", "blob")],
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><SignedIdentifiers />",
    ),
    (
        "GetContainerMetadata",
        "GET",
        "/box?restype=container&comp=metadata",
        &[],
        "",
    ),
    (
        "SetContainerMetadata",
        "PUT",
        "/box?restype=container&comp=metadata",
        &[("x-ms-meta-k", "v")],
        "",
    ),
    ("GetBlobMetadata", "GET", "/box/b?comp=metadata", &[], ""),
    (
        "SetBlobMetadata",
        "PUT",
        "/box/b?comp=metadata",
        &[("x-ms-meta-k", "v")],
        "",
    ),
    (
        "SetBlobProperties",
        "PUT",
        "/box/b?comp=properties",
        &[("x-ms-blob-content-type", "text/plain")],
        "",
    ),
    ("PutBlob", "PUT", "/box/b", &[], "v2"),
    ("GetBlob", "GET", "/box/b", &[], ""),
    ("GetBlobProperties", "HEAD", "/box/b", &[], ""),
    ("DeleteBlob", "DELETE", "/box/b", &[], ""),
    (
        "LeaseBlob",
        "PUT",
        "/box/b?comp=lease",
        &[
            ("x-ms-lease-action", "acquire"),
            ("x-ms-lease-duration", "-1"),
        ],
        "",
    ),
    (
        "PutBlock",
        "PUT",
        "/box/b?comp=block&blockid=QUFBQQ==",
        &[],
        "blk",
    ),
    (
        "PutBlockList",
        "PUT",
        "/box/b?comp=blocklist",
        &[],
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList></BlockList>",
    ),
    ("GetBlockList", "GET", "/box/b?comp=blocklist", &[], ""),
    ("AppendBlock", "PUT", "/box/a?comp=appendblock", &[], "more"),
    (
        "AppendBlockFromURL",
        "PUT",
        "/box/a?comp=appendblock",
        &[("x-ms-copy-source", COPY_SOURCE)],
        "",
    ),
    ("SealBlob", "PUT", "/box/a?comp=seal", &[], ""),
    (
        "PutPage",
        "PUT",
        "/box/p?comp=page",
        &[("x-ms-page-write", "update"), ("x-ms-range", "bytes=0-511")],
        PAGE,
    ),
    ("GetPageRanges", "GET", "/box/p?comp=pagelist", &[], ""),
    (
        "CopyBlob",
        "PUT",
        "/box/c",
        &[("x-ms-copy-source", COPY_SOURCE)],
        "",
    ),
    (
        "AbortCopyBlob",
        "PUT",
        "/box/b?comp=copy&copyid=c0000000-0000-4000-8000-00000000000c",
        &[("x-ms-copy-action", "abort")],
        "",
    ),
];

/// One page of bytes.
const PAGE: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\
0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A value of the form each header takes.
fn value(name: &str) -> &'static str {
    match name {
        "x-ms-if-tags" | "x-ms-source-if-tags" => "\"team\" = 'a'",
        "x-ms-source-lease-id" => "a0000000-0000-4000-8000-00000000000a",
        "x-ms-source-if-match" => "\"0x8D\"",
        "x-ms-source-if-none-match" => "*",
        "x-ms-source-if-modified-since" | "x-ms-source-if-unmodified-since" => {
            "Sat, 01 Jan 2000 00:00:00 GMT"
        }
        "x-ms-copy-source" => COPY_SOURCE,
        _ => "0",
    }
}

/// The headers `case` must refuse: the conditions no operation serves, those of a copy's source
/// where it copies nothing, an append's where it appends nothing, and a copy source where the
/// operation reads none.
fn refused(case: &Case) -> Vec<&'static str> {
    let (name, ..) = *case;
    let copies = matches!(name, "CopyBlob" | "AppendBlockFromURL");
    let appends = matches!(name, "AppendBlock" | "AppendBlockFromURL");
    let pages = name == "PutPage";
    let reads_source = matches!(
        name,
        "PutBlob" | "CopyBlob" | "PutBlock" | "AppendBlock" | "AppendBlockFromURL" | "PutPage"
    );
    let mut out = UNSERVED.to_vec();
    if !takes_tags(name) {
        out.push("x-ms-if-tags");
    }
    if !copies {
        out.extend(SOURCE_CONDITIONS);
        out.push("x-ms-source-if-tags");
    }
    if !appends {
        out.extend(APPEND_CONDITIONS);
    }
    if !pages {
        out.extend(SEQUENCE_CONDITIONS);
    }
    if !reads_source {
        out.push("x-ms-copy-source");
    }
    out
}

/// Whether the operation named `name` evaluates `x-ms-if-tags` (on the blob it changes or
/// reads), as Azure's reference lists it.
fn takes_tags(name: &str) -> bool {
    matches!(
        name,
        "GetBlobMetadata"
            | "SetBlobMetadata"
            | "SetBlobProperties"
            | "PutBlob"
            | "GetBlob"
            | "GetBlobProperties"
            | "DeleteBlob"
            | "LeaseBlob"
            | "PutBlockList"
            | "AppendBlock"
            | "AppendBlockFromURL"
            | "SealBlob"
            | "PutPage"
            | "GetPageRanges"
            | "CopyBlob"
    )
}

/// A server with container `box` (blob `b`, append blob `a`, page blob `p`) and container
/// `box2`.
async fn fixture() -> Server {
    let s = Server::with_container("box").await;
    s.create_container("box2").await;
    s.put_blob("/box/b", b"v1").await;
    let r = s
        .put_empty("/box/a", &[("x-ms-blob-type", "AppendBlob")])
        .await;
    assert_eq!(r.status(), 201);
    let page_blob = [
        ("x-ms-blob-type", "PageBlob"),
        ("x-ms-blob-content-length", "1024"),
    ];
    assert_eq!(s.put_empty("/box/p", &page_blob).await.status(), 201);
    s
}

/// Everything a refused request could have changed: the containers, the blobs with their
/// metadata, properties and leases, the staged blocks.
async fn state(s: &Server) -> String {
    let mut out = String::new();
    for path in [
        "/?comp=list&include=metadata",
        "/box?restype=container&comp=list&include=metadata,uncommittedblobs,copy",
        "/box?restype=container&comp=acl",
        "/box/b?comp=blocklist&blocklisttype=all",
        "/box/a",
        "/box/p",
    ] {
        let r = s.get(path, &[]).await;
        out.push_str(&format!("{path}: {} ", r.status()));
        for name in [
            "etag",
            "x-ms-lease-state",
            "x-ms-blob-sealed",
            "content-length",
        ] {
            out.push_str(&format!("{name}={:?} ", r.headers().get(name)));
        }
        out.push_str(&r.text().await.unwrap());
        out.push('\n');
    }
    out
}

#[tokio::test]
async fn every_unserved_condition_is_refused_on_every_operation() {
    for case in CASES {
        let (name, method, path, headers, body) = *case;
        let s = fixture().await;
        let before = state(&s).await;
        for header in refused(case) {
            let mut sent = headers.to_vec();
            sent.push((header, value(header)));
            let r = s.send(method, path, &sent, body.as_bytes().to_vec()).await;
            let status = r.status();
            let error = code(&r);
            let text = r.text().await.unwrap();
            assert_eq!(
                (status.as_u16(), error.as_deref()),
                (400, Some("UnsupportedHeader")),
                "{name} with {header}: {text}"
            );
            if method != "HEAD" {
                assert!(
                    text.contains(header),
                    "{name} with {header} names it: {text}"
                );
            }
            assert_eq!(
                state(&s).await,
                before,
                "{name} with {header} changed nothing"
            );
        }
        // The same request without it is no unsupported header.
        let r = s
            .send(method, path, headers, body.as_bytes().to_vec())
            .await;
        assert_ne!(
            code(&r).as_deref(),
            Some("UnsupportedHeader"),
            "{name} alone"
        );
    }
}

/// The conditions a copy does evaluate are still evaluated: a source condition that fails
/// is 412, not ignored and not refused.
#[tokio::test]
async fn a_copy_still_evaluates_its_source_conditions() {
    let s = fixture().await;
    let r = s
        .put_empty(
            "/box/c",
            &[
                ("x-ms-copy-source", COPY_SOURCE),
                ("x-ms-source-if-match", "\"not-it\""),
            ],
        )
        .await;
    assert_eq!(r.status(), 412, "{:?}", code(&r));
    let r = s
        .put(
            "/box/a?comp=appendblock",
            &[("x-ms-blob-condition-appendpos", "7")],
            b"x".to_vec(),
        )
        .await;
    assert_eq!(code(&r).as_deref(), Some("AppendPositionConditionNotMet"));
}

/// Every operation that takes `x-ms-if-tags` evaluates it against the blob it addresses: a
/// false condition (the blobs have no tags) is 412 `ConditionNotMet` and changes nothing; once
/// the blobs carry the tag, the same request is served.
#[tokio::test]
async fn a_false_tags_condition_is_412_on_every_operation_that_takes_it() {
    let tagged = "<Tags><TagSet><Tag><Key>team</Key><Value>a</Value></Tag></TagSet></Tags>";
    for case in CASES.iter().filter(|case| takes_tags(case.0)) {
        let (name, method, path, headers, body) = *case;
        let s = fixture().await;
        let before = state(&s).await;
        let mut sent = headers.to_vec();
        sent.push(("x-ms-if-tags", "\"team\" = 'a'"));
        let r = s.send(method, path, &sent, body.as_bytes().to_vec()).await;
        let status = r.status().as_u16();
        if method != "HEAD" {
            assert_eq!(code(&r).as_deref(), Some("ConditionNotMet"), "{name}");
        }
        assert_eq!(status, 412, "{name}");
        assert_eq!(state(&s).await, before, "{name} changed nothing");
        for blob in ["/box/a?comp=tags", "/box/b?comp=tags", "/box/p?comp=tags"] {
            let r = s.put(blob, &[], tagged.as_bytes().to_vec()).await;
            assert_eq!(r.status(), 204, "{blob}");
        }
        if path.starts_with("/box/c") {
            continue; // A copy's new destination has no tags to match.
        }
        let r = s.send(method, path, &sent, body.as_bytes().to_vec()).await;
        assert!(
            r.status().is_success(),
            "{name} with the tag: {}",
            r.status()
        );
    }
}
