//! Append blobs: created empty, appended to block by block under the position and size
//! conditions, read whole and in ranges across blocks, sealed; and many appenders racing for
//! one blob with `x-ms-blob-condition-appendpos`, none of whose records is lost or doubled.
//! The front over the memory backends, without a socket.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::{Server, code, header, header_values, refusal};

const APPEND: (&str, &str) = ("x-ms-blob-type", "AppendBlob");

async fn create(s: &Server, path: &str) -> String {
    let r = s.put_empty(path, &[APPEND]).await;
    assert_eq!(r.status(), 201, "{:?}", code(&r));
    header(&r, "etag").unwrap()
}

#[tokio::test]
async fn an_append_blob_grows_block_by_block_under_its_conditions() {
    let s = Server::with_container("logs").await;
    let path = "/logs/app.log";
    let created = create(&s, path).await;
    let r = s.head(path, &[]).await;
    let names = "x-ms-blob-type x-ms-blob-committed-block-count content-length";
    assert_eq!(header_values(&r, names), ["AppendBlob", "0", "0"]);
    assert_eq!(s.read_text(path).await, "");

    let r = s
        .put(&format!("{path}?comp=appendblock"), &[], "hello ")
        .await;
    assert_eq!(r.status(), 201);
    assert_eq!(header(&r, "x-ms-blob-append-offset").as_deref(), Some("0"));
    let first = header(&r, "etag").unwrap();
    assert_ne!(first, created, "a new tag per append");
    let at = [("x-ms-blob-condition-appendpos", "6")];
    let r = s
        .put(&format!("{path}?comp=appendblock"), &at, "world")
        .await;
    assert_eq!(
        (r.status().as_u16(), header(&r, "x-ms-blob-append-offset")),
        (201, Some("6".to_owned()))
    );
    assert_eq!(
        header(&r, "x-ms-blob-committed-block-count").as_deref(),
        Some("2")
    );
    let second = header(&r, "etag").unwrap();
    assert_ne!(second, first);

    // The conditions, each refused with its code, nothing appended.
    let stale = [("x-ms-blob-condition-appendpos", "6")];
    let too_big = [("x-ms-blob-condition-maxsize", "12")];
    let old_tag = [("if-match", first.as_str())];
    for (headers, status, expected) in [
        (&stale[..], 412, "AppendPositionConditionNotMet"),
        (&too_big[..], 412, "MaxBlobSizeConditionNotMet"),
        (&old_tag[..], 412, "ConditionNotMet"),
    ] {
        let r = s
            .put(&format!("{path}?comp=appendblock"), headers, "!!")
            .await;
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (status, Some(expected))
        );
    }
    let r = s.put_empty(&format!("{path}?comp=appendblock"), &[]).await;
    assert_eq!(r.status(), 400, "an empty block");
    let r = s.get(path, &[]).await;
    assert_eq!(header(&r, "etag").unwrap(), second);
    assert_eq!(r.text().await.unwrap(), "hello world");
    let r = s.get(path, &[("x-ms-range", "bytes=3-7")]).await;
    assert_eq!(r.status(), 206);
    assert_eq!(
        r.text().await.unwrap(),
        "lo wo",
        "a range across two blocks"
    );

    // Block operations are for block blobs, and appends for append blobs.
    let r = s
        .put(&format!("{path}?comp=block&blockid=YQ%3D%3D"), &[], "x")
        .await;
    assert_eq!(code(&r).as_deref(), Some("InvalidBlobType"));
    s.put_blob("/logs/block.bin", b"block").await;
    let r = s.put("/logs/block.bin?comp=appendblock", &[], "x").await;
    assert_eq!(refusal(&r), (409, "InvalidBlobType".into()));

    // Append Block From URL: a range of another blob.
    let source = "http://127.0.0.1:10000/devstoreaccount1/logs/block.bin";
    let from = [
        ("x-ms-copy-source", source),
        ("x-ms-source-range", "bytes=1-3"),
    ];
    let r = s
        .put_empty(&format!("{path}?comp=appendblock"), &from)
        .await;
    assert_eq!(r.status(), 201, "{:?}", code(&r));
    assert_eq!(s.read_text(path).await, "hello worldloc");

    // Sealed: read-only, its tag kept, sealing again succeeds.
    let before = header(&s.head(path, &[]).await, "etag").unwrap();
    let r = s.put_empty(&format!("{path}?comp=seal"), &[]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ms-blob-sealed").as_deref(), Some("true"));
    assert_eq!(header(&r, "etag").unwrap(), before);
    let r = s
        .put(&format!("{path}?comp=appendblock"), &[], "late")
        .await;
    assert_eq!(refusal(&r), (409, "BlobIsSealed".into()));
    assert_eq!(
        s.put_empty(&format!("{path}?comp=seal"), &[])
            .await
            .status(),
        200
    );
    let listing = s.read_text("/logs?restype=container&comp=list").await;
    assert!(
        listing.contains("<BlobType>AppendBlob</BlobType>"),
        "{listing}"
    );
    assert!(listing.contains("<Sealed>true</Sealed>"), "{listing}");

    // Put Blob replaces an append blob, as any blob.
    s.put_blob(path, b"whole").await;
    let r = s.get(path, &[]).await;
    assert_eq!(header(&r, "x-ms-blob-type").as_deref(), Some("BlockBlob"));
    assert_eq!(r.text().await.unwrap(), "whole");
}

#[tokio::test]
async fn a_leased_append_blob_takes_appends_with_its_lease_only() {
    let s = Server::with_container("logs").await;
    create(&s, "/logs/leased").await;
    let lease = "11111111-2222-3333-4444-555555555555";
    let r = s
        .put_empty(
            "/logs/leased?comp=lease",
            &[
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "-1"),
                ("x-ms-proposed-lease-id", lease),
            ],
        )
        .await;
    assert_eq!(r.status(), 201);
    let r = s.put("/logs/leased?comp=appendblock", &[], "x").await;
    assert_eq!(code(&r).as_deref(), Some("LeaseIdMissing"));
    let r = s
        .put(
            "/logs/leased?comp=appendblock",
            &[("x-ms-lease-id", lease)],
            "x",
        )
        .await;
    assert_eq!(r.status(), 201);
}

/// 16 appenders, 200 records each, all at once, each append at the position it last read
/// (`x-ms-blob-condition-appendpos`), read again after a 412: every record lands exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_appenders_at_their_positions_lose_nothing_and_double_nothing() {
    const APPENDERS: usize = 16;
    const RECORDS: usize = 200;
    let s = Arc::new(Server::start().await);
    s.create_container("logs").await;
    create(&s, "/logs/race").await;
    let mut tasks = Vec::new();
    for appender in 0..APPENDERS {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut lost = 0;
            let mut at: u64 = 0;
            for n in 0..RECORDS {
                let record = format!("{appender:02}-{n:03}\n");
                loop {
                    let position = at.to_string();
                    let r = s
                        .put(
                            "/logs/race?comp=appendblock",
                            &[("x-ms-blob-condition-appendpos", &position)],
                            record.clone(),
                        )
                        .await;
                    match r.status().as_u16() {
                        201 => {
                            let offset: u64 = header(&r, "x-ms-blob-append-offset")
                                .unwrap()
                                .parse()
                                .unwrap();
                            at = offset + record.len() as u64;
                            break;
                        }
                        412 => {
                            assert_eq!(code(&r).as_deref(), Some("AppendPositionConditionNotMet"));
                            lost += 1;
                            let head = s.head("/logs/race", &[]).await;
                            at = header(&head, "content-length").unwrap().parse().unwrap();
                        }
                        status => panic!("append answered {status} {:?}", code(&r)),
                    }
                }
            }
            lost
        }));
    }
    let mut lost = 0;
    for task in tasks {
        lost += task.await.unwrap();
    }
    let text = s.read_text("/logs/race").await;
    let lines: Vec<&str> = text.lines().collect();
    let distinct: BTreeSet<&str> = lines.iter().copied().collect();
    assert_eq!(
        (lines.len(), distinct.len()),
        (APPENDERS * RECORDS, APPENDERS * RECORDS),
        "every record once ({lost} appends lost their race and were retried)"
    );
    let r = s.head("/logs/race", &[]).await;
    assert_eq!(
        header(&r, "x-ms-blob-committed-block-count"),
        Some((APPENDERS * RECORDS).to_string())
    );
}

/// An append writes one entry and a record that does not grow with the blob: the record after
/// 1,000 appends is as large as after one (but for the digits of its counts).
#[tokio::test]
async fn an_append_costs_the_same_at_one_block_and_at_a_thousand() {
    let s = Server::with_container("logs").await;
    create(&s, "/logs/long").await;
    let size = |record: ifmatch_blob::Record| serde_json::to_vec(&record).unwrap().len();
    s.put("/logs/long?comp=appendblock", &[], "0\n").await;
    let after_one = size(s.record("logs", "long").await);
    for n in 1..1000 {
        let r = s
            .put("/logs/long?comp=appendblock", &[], format!("{n}\n"))
            .await;
        assert_eq!(r.status(), 201);
    }
    let after_many = size(s.record("logs", "long").await);
    assert!(
        after_many <= after_one + 8,
        "the record grew from {after_one} to {after_many} bytes"
    );
    let text = s.read_text("/logs/long").await;
    let expected: String = (0..1000).map(|n| format!("{n}\n")).collect();
    assert_eq!(text, expected);
    let r = s.head("/logs/long", &[]).await;
    assert_eq!(
        header(&r, "x-ms-blob-committed-block-count").as_deref(),
        Some("1000")
    );
}
