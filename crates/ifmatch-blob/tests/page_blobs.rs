//! Page blobs: created with a size and read as zeros, written and cleared page by page, their
//! ranges listed (and the difference from a snapshot), resized, their sequence number set and
//! used as a condition; every limit of the dialect refused one past it; and writers racing for
//! one blob, none of whose pages is lost. The front over the memory backends, without a socket.

use crate::common;

use std::sync::Arc;

use common::{Server, code, header, header_values, refusal};

const PAGE_BLOB: (&str, &str) = ("x-ms-blob-type", "PageBlob");

async fn create(s: &Server, path: &str, size: u64) -> String {
    let size = size.to_string();
    let r = s
        .put_empty(path, &[PAGE_BLOB, ("x-ms-blob-content-length", &size)])
        .await;
    assert_eq!(r.status(), 201, "{:?}", code(&r));
    header(&r, "etag").unwrap()
}

async fn write(
    s: &Server,
    path: &str,
    at: u64,
    bytes: Vec<u8>,
    extra: &[(&str, &str)],
) -> common::Reply {
    let range = format!("bytes={}-{}", at, at + bytes.len() as u64 - 1);
    let mut headers = vec![
        ("x-ms-page-write", "update"),
        ("x-ms-range", range.as_str()),
    ];
    headers.extend_from_slice(extra);
    s.put(&format!("{path}?comp=page"), &headers, bytes).await
}

/// A server with the container `disks` and in it the page blob `path` of `size` bytes, its
/// first pages written with `bytes`.
async fn with_page_blob(path: &str, size: u64, bytes: Vec<u8>) -> Server {
    let s = Server::with_container("disks").await;
    create(&s, path, size).await;
    assert_eq!(write(&s, path, 0, bytes, &[]).await.status(), 201);
    s
}

async fn clear(s: &Server, path: &str, range: &str) -> common::Reply {
    let headers = [("x-ms-page-write", "clear"), ("x-ms-range", range)];
    s.put_empty(&format!("{path}?comp=page"), &headers).await
}

/// Get Page Ranges' answer as (`PageRange` or `ClearRange`, start, end) triples, and its
/// `NextMarker`.
async fn ranges(s: &Server, path: &str, query: &str) -> (Vec<(String, u64, u64)>, Option<String>) {
    let r = s.get(&format!("{path}?comp=pagelist{query}"), &[]).await;
    assert_eq!(r.status(), 200, "{:?}", code(&r));
    let xml = r.text().await.unwrap();
    let mut out = Vec::new();
    let mut rest = xml.as_str();
    while let Some(at) = rest.find("Range><Start>") {
        let kind = if rest[..at].ends_with("<Clear") {
            "ClearRange"
        } else {
            "PageRange"
        };
        let tail = &rest[at + "Range><Start>".len()..];
        let (start, tail) = tail.split_once("</Start><End>").unwrap();
        let (end, tail) = tail.split_once("</End>").unwrap();
        out.push((
            kind.to_owned(),
            start.parse().unwrap(),
            end.parse().unwrap(),
        ));
        rest = tail;
    }
    let next = xml
        .split_once("<NextMarker>")
        .map(|(_, t)| t.split_once("</NextMarker>").unwrap().0.to_owned());
    (out, next)
}

fn page(range: (u64, u64)) -> (String, u64, u64) {
    ("PageRange".to_owned(), range.0, range.1)
}

#[tokio::test]
async fn a_page_blob_is_written_and_cleared_page_by_page_and_reads_zeros_between() {
    let s = Server::with_container("disks").await;
    let path = "/disks/a.vhd";
    let created = create(&s, path, 8192).await;
    let r = s.head(path, &[]).await;
    let names = "x-ms-blob-type x-ms-blob-sequence-number content-length";
    assert_eq!(header_values(&r, names), ["PageBlob", "0", "8192"]);
    let body = s.read(path).await;
    assert_eq!(body, vec![0u8; 8192], "a new page blob reads as zeros");
    assert_eq!(ranges(&s, path, "").await.0, vec![]);

    let r = write(&s, path, 512, vec![b'a'; 1024], &[]).await;
    assert_eq!(r.status(), 201, "{:?}", code(&r));
    assert!(header(&r, "content-md5").is_some());
    assert_eq!(
        header(&r, "x-ms-blob-sequence-number").as_deref(),
        Some("0")
    );
    let first = header(&r, "etag").unwrap();
    assert_ne!(first, created, "a write is a new tag");
    // Over the second half of that run and the page after it.
    let r = write(&s, path, 1024, vec![b'b'; 1024], &[]).await;
    assert_eq!(r.status(), 201);
    let mut expected = vec![0u8; 8192];
    expected[512..1024].fill(b'a');
    expected[1024..2048].fill(b'b');
    assert_eq!(s.read(path).await, expected);
    // A range across zeros and both writes.
    let r = s.get(path, &[("x-ms-range", "bytes=256-1279")]).await;
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().await.unwrap(), expected[256..1280]);
    assert_eq!(ranges(&s, path, "").await.0, vec![page((512, 2047))]);

    let r = clear(&s, path, "bytes=1024-1535").await;
    assert_eq!(r.status(), 201, "{:?}", code(&r));
    expected[1024..1536].fill(0);
    assert_eq!(s.read(path).await, expected);
    assert_eq!(
        ranges(&s, path, "").await.0,
        vec![page((512, 1023)), page((1536, 2047))]
    );
    // Within a range only, and paged.
    let r = s
        .get(
            &format!("{path}?comp=pagelist"),
            &[("x-ms-range", "bytes=0-1023")],
        )
        .await;
    assert_eq!(
        header(&r, "x-ms-blob-content-length").as_deref(),
        Some("8192")
    );
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("<PageRange><Start>512</Start><End>1023</End></PageRange></PageList>")
    );
    let (one, next) = ranges(&s, path, "&maxresults=1").await;
    assert_eq!(
        (one, next.as_deref()),
        (vec![page((512, 1023))], Some("1536"))
    );
    let (two, next) = ranges(&s, path, "&maxresults=1&marker=1536").await;
    assert_eq!((two, next), (vec![page((1536, 2047))], None));

    // A listing says what it is.
    let list = s.read_text("/disks?restype=container&comp=list").await;
    assert!(list.contains("<BlobType>PageBlob</BlobType>"), "{list}");
    assert!(
        list.contains("<x-ms-blob-sequence-number>0</x-ms-blob-sequence-number>"),
        "{list}"
    );
}

#[tokio::test]
async fn every_limit_of_a_page_blob_is_refused_one_past_it() {
    let s = Server::with_container("disks").await;
    let path = "/disks/b.vhd";
    // Sizes: whole pages, at most 8 TiB; a sequence number at most 2^63 - 1; no body.
    for (headers, status, expected) in [
        (vec![PAGE_BLOB], 400, "MissingRequiredHeader"),
        (
            vec![PAGE_BLOB, ("x-ms-blob-content-length", "513")],
            400,
            "InvalidHeaderValue",
        ),
        (
            vec![PAGE_BLOB, ("x-ms-blob-content-length", "8796093022720")],
            400,
            "InvalidHeaderValue",
        ),
        (
            vec![
                PAGE_BLOB,
                ("x-ms-blob-content-length", "512"),
                ("x-ms-blob-sequence-number", "9223372036854775808"),
            ],
            400,
            "InvalidHeaderValue",
        ),
    ] {
        let r = s.put_empty(path, &headers).await;
        assert_eq!(refusal(&r), (status, expected.into()), "{headers:?}");
    }
    let r = s
        .put(path, &[PAGE_BLOB, ("x-ms-blob-content-length", "512")], "x")
        .await;
    assert_eq!(r.status(), 400, "a page blob is created empty");
    let r = s
        .put_empty(
            path,
            &[
                PAGE_BLOB,
                ("x-ms-blob-content-length", "8796093022208"),
                ("x-ms-blob-sequence-number", "9223372036854775807"),
            ],
        )
        .await;
    assert_eq!(
        r.status(),
        201,
        "8 TiB and 2^63 - 1 are taken: {:?}",
        code(&r)
    );
    create(&s, path, 4 << 20 | 1024).await;

    // Ranges: whole pages, within the blob; an update at most 4 MiB, its body the range's length.
    let body = |n: usize| vec![7u8; n];
    for (at, bytes, status, expected) in [
        (1, body(512), 416, "InvalidPageRange"),
        (0, body(511), 416, "InvalidPageRange"),
        ((4 << 20) + 512, body(1024), 416, "InvalidPageRange"),
        (0, body((4 << 20) + 512), 413, "RequestBodyTooLarge"),
    ] {
        let r = write(&s, path, at, bytes, &[]).await;
        assert_eq!(refusal(&r), (status, expected.into()), "at {at}");
    }
    assert_eq!(
        write(&s, path, 0, body(4 << 20), &[]).await.status(),
        201,
        "4 MiB is taken"
    );
    // The range's length not the body's, a body to clear or to an unknown write, no write.
    let update = ("x-ms-page-write", "update");
    let range = |r| ("x-ms-range", r);
    type Fields<'a> = &'a [(&'a str, &'a str)];
    let refused: [(Fields<'_>, usize, &str); 4] = [
        (&[update, range("bytes=0-1023")], 512, "InvalidHeaderValue"),
        (
            &[("x-ms-page-write", "clear"), range("bytes=0-511")],
            512,
            "InvalidHeaderValue",
        ),
        (
            &[("x-ms-page-write", "erase"), range("bytes=0-511")],
            0,
            "InvalidHeaderValue",
        ),
        (&[range("bytes=0-511")], 512, "MissingRequiredHeader"),
    ];
    for (headers, len, expected) in refused {
        let r = s
            .put(&format!("{path}?comp=page"), headers, body(len))
            .await;
        assert_eq!(refusal(&r), (400, expected.into()), "{headers:?}");
    }
    assert!(
        s.read(path).await[..4 << 20].iter().all(|b| *b == 7),
        "nothing refused was written"
    );

    // Each kind of blob takes its own writes only.
    s.put_blob("/disks/block", b"abc").await;
    let r = write(&s, "/disks/block", 0, body(512), &[]).await;
    assert_eq!(refusal(&r), (409, "InvalidBlobType".into()));
    let r = s
        .put(&format!("{path}?comp=block&blockid=YQ=="), &[], "x")
        .await;
    assert_eq!(refusal(&r), (409, "InvalidBlobType".into()));
    let r = s.put(&format!("{path}?comp=appendblock"), &[], "x").await;
    assert_eq!(refusal(&r), (409, "InvalidBlobType".into()));
    let r = s.get("/disks/block?comp=pagelist", &[]).await;
    assert_eq!(refusal(&r), (409, "InvalidBlobType".into()));
}

#[tokio::test]
async fn the_sequence_number_is_set_and_conditions_page_writes() {
    let s = Server::with_container("disks").await;
    let path = "/disks/c.vhd";
    let size = [
        PAGE_BLOB,
        ("x-ms-blob-content-length", "4096"),
        ("x-ms-blob-sequence-number", "5"),
    ];
    assert_eq!(s.put_empty(path, &size).await.status(), 201);
    let set = |action: &'static str, n: Option<&'static str>| {
        let mut headers = vec![("x-ms-sequence-number-action", action)];
        headers.extend(n.map(|n| ("x-ms-blob-sequence-number", n)));
        headers
    };
    for (headers, expected) in [
        (set("max", Some("3")), "5"),
        (set("max", Some("9")), "9"),
        (set("update", Some("2")), "2"),
        (set("increment", None), "3"),
    ] {
        let r = s
            .put_empty(&format!("{path}?comp=properties"), &headers)
            .await;
        assert_eq!(r.status(), 200, "{headers:?}: {:?}", code(&r));
        assert_eq!(
            header(&r, "x-ms-blob-sequence-number").as_deref(),
            Some(expected),
            "{headers:?}"
        );
    }
    for (headers, status, expected) in [
        (set("increment", Some("1")), 400, "InvalidHeaderValue"),
        (set("update", None), 400, "MissingRequiredHeader"),
        (set("double", Some("1")), 400, "InvalidHeaderValue"),
    ] {
        let r = s
            .put_empty(&format!("{path}?comp=properties"), &headers)
            .await;
        assert_eq!(refusal(&r), (status, expected.into()), "{headers:?}");
    }

    // The conditions on it: each met, and each not (nothing written then).
    for (name, value, met) in [
        ("x-ms-if-sequence-number-eq", "3", true),
        ("x-ms-if-sequence-number-eq", "4", false),
        ("x-ms-if-sequence-number-le", "3", true),
        ("x-ms-if-sequence-number-le", "2", false),
        ("x-ms-if-sequence-number-lt", "4", true),
        ("x-ms-if-sequence-number-lt", "3", false),
    ] {
        let byte = if met { b'y' } else { b'n' };
        let r = write(&s, path, 0, vec![byte; 512], &[(name, value)]).await;
        match met {
            true => assert_eq!(r.status(), 201, "{name}: {value}"),
            false => assert_eq!(
                refusal(&r),
                (412, "SequenceNumberConditionNotMet".into()),
                "{name}: {value}"
            ),
        }
        assert_eq!(s.read(path).await[0], b'y');
    }
    let r = clear(&s, path, "bytes=0-511").await;
    assert_eq!(r.status(), 201);
    // Not a number: 400. Past 2^63 - 1 by increment: 409.
    let r = write(
        &s,
        path,
        0,
        vec![1; 512],
        &[("x-ms-if-sequence-number-eq", "three")],
    )
    .await;
    assert_eq!(refusal(&r), (400, "InvalidHeaderValue".into()));
    let top = set("update", Some("9223372036854775807"));
    assert_eq!(
        s.put_empty(&format!("{path}?comp=properties"), &top)
            .await
            .status(),
        200
    );
    let r = s
        .put_empty(&format!("{path}?comp=properties"), &set("increment", None))
        .await;
    assert_eq!(refusal(&r), (409, "SequenceNumberIncrementTooLarge".into()));
    // A block blob has none.
    s.put_blob("/disks/block", b"abc").await;
    let r = s
        .put_empty("/disks/block?comp=properties", &set("increment", None))
        .await;
    assert_eq!(refusal(&r), (409, "InvalidBlobType".into()));
    // Set to its own value, the blob's HTTP headers stay; set with one, they are all set.
    let typed = [("x-ms-blob-content-type", "application/x-vhd")];
    assert_eq!(
        s.put_empty(&format!("{path}?comp=properties"), &typed)
            .await
            .status(),
        200
    );
    assert_eq!(
        s.put_empty(&format!("{path}?comp=properties"), &set("max", Some("0")))
            .await
            .status(),
        200
    );
    let r = s.head(path, &[]).await;
    assert_eq!(
        header(&r, "content-type").as_deref(),
        Some("application/x-vhd")
    );
}

#[tokio::test]
async fn a_resize_drops_the_pages_past_the_end_and_reads_zeros_when_it_grows() {
    let path = "/disks/d.vhd";
    let s = with_page_blob(path, 2048, vec![b'x'; 2048]).await;
    let resize = |n: &'static str| [("x-ms-blob-content-length", n)];
    let before = header(&s.head(path, &[]).await, "etag").unwrap();
    let r = s
        .put_empty(&format!("{path}?comp=properties"), &resize("1024"))
        .await;
    assert_eq!(r.status(), 200);
    assert_ne!(header(&r, "etag").unwrap(), before);
    let r = s
        .put_empty(&format!("{path}?comp=properties"), &resize("3072"))
        .await;
    assert_eq!(r.status(), 200);
    let mut expected = vec![0u8; 3072];
    expected[..1024].fill(b'x');
    assert_eq!(s.read(path).await, expected);
    assert_eq!(ranges(&s, path, "").await.0, vec![page((0, 1023))]);
    let r = s
        .put_empty(&format!("{path}?comp=properties"), &resize("1000"))
        .await;
    assert_eq!(refusal(&r), (400, "InvalidHeaderValue".into()));
}

#[tokio::test]
async fn the_difference_from_a_snapshot_names_pages_written_and_cleared_since() {
    let path = "/disks/e.vhd";
    let s = with_page_blob(path, 8192, vec![b'a'; 2048]).await;
    let r = s.put_empty(&format!("{path}?comp=snapshot"), &[]).await;
    assert_eq!(r.status(), 201);
    let snapshot = header(&r, "x-ms-snapshot").unwrap();
    write(&s, path, 512, vec![b'b'; 512], &[]).await;
    clear(&s, path, "bytes=1536-2047").await;
    write(&s, path, 4096, vec![b'c'; 512], &[]).await;

    let since = format!("&prevsnapshot={snapshot}");
    let (diff, _) = ranges(&s, path, &since).await;
    assert_eq!(
        diff,
        vec![
            page((512, 1023)),
            ("ClearRange".to_owned(), 1536, 2047),
            page((4096, 4607)),
        ]
    );
    // The snapshot is as it was, its pages its own.
    let old = s.read(&format!("{path}?snapshot={snapshot}")).await;
    let mut expected = vec![0u8; 8192];
    expected[..2048].fill(b'a');
    assert_eq!(old, expected);
    assert_eq!(
        ranges(&s, path, &format!("&snapshot={snapshot}")).await.0,
        vec![page((0, 2047))]
    );
    // No such snapshot: 409.
    let r = s
        .get(
            &format!("{path}?comp=pagelist&prevsnapshot=2020-01-01T00:00:00.0000000Z"),
            &[],
        )
        .await;
    assert_eq!(refusal(&r), (409, "PreviousSnapshotNotFound".into()));

    // A copy is a page blob with the same pages.
    let source = format!("http://127.0.0.1:10000/{}{path}", common::ACCOUNT);
    let r = s
        .put_empty("/disks/copy.vhd", &[("x-ms-copy-source", source.as_str())])
        .await;
    assert_eq!(r.status(), 202, "{:?}", code(&r));
    let r = s.head("/disks/copy.vhd", &[]).await;
    assert_eq!(header(&r, "x-ms-blob-type").as_deref(), Some("PageBlob"));
    let now = s.read(path).await;
    assert_eq!(s.read("/disks/copy.vhd").await, now);
    assert_eq!(
        ranges(&s, "/disks/copy.vhd", "").await,
        ranges(&s, path, "").await
    );
}

#[tokio::test]
async fn writers_racing_for_one_page_blob_lose_no_page_and_one_if_match_wins() {
    let s = Arc::new(Server::start().await);
    s.create_container("disks").await;
    let path = "/disks/f.vhd";
    let writers = 32u64;
    create(&s, path, writers * 512).await;
    // Each writer its own page, all at once: every page lands.
    let tasks: Vec<_> = (0..writers)
        .map(|n| {
            let s = s.clone();
            tokio::spawn(async move {
                write(&s, path, n * 512, vec![n as u8 + 1; 512], &[])
                    .await
                    .status()
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), 201);
    }
    let body = s.read(path).await;
    for n in 0..writers as usize {
        assert!(
            body[n * 512..(n + 1) * 512]
                .iter()
                .all(|b| *b == n as u8 + 1),
            "page {n} lost"
        );
    }
    assert_eq!(
        ranges(&s, path, "").await.0,
        vec![page((0, writers * 512 - 1))]
    );
    // Each writer the same page under the same If-Match: one wins, the rest are refused.
    let tag = header(&s.head(path, &[]).await, "etag").unwrap();
    let tasks: Vec<_> = (0..16u8)
        .map(|n| {
            let (s, tag) = (s.clone(), tag.clone());
            tokio::spawn(async move {
                let r = write(
                    &s,
                    path,
                    0,
                    vec![100 + n; 512],
                    &[("if-match", tag.as_str())],
                )
                .await;
                (r.status().as_u16(), n)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        let (status, n) = task.await.unwrap();
        match status {
            201 => winners.push(n),
            412 => {}
            other => panic!("{other}"),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(s.read(path).await[0], 100 + winners[0]);
}

async fn snapshot(s: &Server, path: &str) -> String {
    let r = s.put_empty(&format!("{path}?comp=snapshot"), &[]).await;
    header(&r, "x-ms-snapshot").unwrap()
}

#[tokio::test]
async fn an_incremental_copy_keeps_a_snapshot_per_copy_and_takes_no_other_write() {
    let source = "/disks/src.vhd";
    let s = with_page_blob(source, 2048, vec![b'a'; 512]).await;
    let first = snapshot(&s, source).await;
    let url = |id: &str| {
        format!(
            "http://127.0.0.1:10000/{}{source}?snapshot={id}",
            common::ACCOUNT
        )
    };
    let copy = |id: String| {
        let s = &s;
        let from = url(&id);
        async move {
            let headers = [("x-ms-copy-source", from.as_str())];
            s.put_empty("/disks/backup.vhd?comp=incrementalcopy", &headers)
                .await
        }
    };
    let r = copy(first.clone()).await;
    assert_eq!(r.status(), 202, "{:?}", code(&r));
    assert_eq!(header(&r, "x-ms-copy-status").as_deref(), Some("success"));
    let r = s.head("/disks/backup.vhd", &[]).await;
    assert_eq!(header(&r, "x-ms-incremental-copy").as_deref(), Some("true"));
    let one = header(&r, "x-ms-copy-destination-snapshot").unwrap();
    let kept = s.read(&format!("/disks/backup.vhd?snapshot={one}")).await;
    let mut expected = vec![0u8; 2048];
    expected[..512].fill(b'a');
    assert_eq!(kept, expected);

    // No other write lands on it.
    let r = write(&s, "/disks/backup.vhd", 0, vec![b'x'; 512], &[]).await;
    assert_eq!(
        refusal(&r),
        (409, "OperationNotAllowedOnIncrementalCopyBlob".into())
    );
    let r = s.put("/disks/backup.vhd", &[], "overwritten").await;
    assert_eq!(
        refusal(&r),
        (409, "OperationNotAllowedOnIncrementalCopyBlob".into())
    );

    // The next copy: a later snapshot, its own destination snapshot, the difference between
    // the two the pages written since.
    write(&s, source, 1024, vec![b'b'; 512], &[]).await;
    let second = snapshot(&s, source).await;
    assert_eq!(copy(second.clone()).await.status(), 202);
    let r = s.head("/disks/backup.vhd", &[]).await;
    let two = header(&r, "x-ms-copy-destination-snapshot").unwrap();
    assert_ne!(two, one);
    let (diff, _) = ranges(
        &s,
        "/disks/backup.vhd",
        &format!("&snapshot={two}&prevsnapshot={one}"),
    )
    .await;
    assert_eq!(diff, vec![page((1024, 1535))]);

    // Refused: an earlier snapshot, the blob itself, another blob's snapshot, a destination
    // that is not one of these copies.
    let r = copy(first).await;
    assert_eq!(
        refusal(&r),
        (
            409,
            "IncrementalCopyOfEarlierVersionSnapshotNotAllowed".into()
        )
    );
    let base = format!("http://127.0.0.1:10000/{}{source}", common::ACCOUNT);
    let r = s
        .put_empty(
            "/disks/backup.vhd?comp=incrementalcopy",
            &[("x-ms-copy-source", base.as_str())],
        )
        .await;
    assert_eq!(
        refusal(&r),
        (409, "IncrementalCopySourceMustBeSnapshot".into())
    );
    create(&s, "/disks/other.vhd", 512).await;
    let r = s.put_empty("/disks/other.vhd?comp=snapshot", &[]).await;
    let other = format!(
        "http://127.0.0.1:10000/{}/disks/other.vhd?snapshot={}",
        common::ACCOUNT,
        header(&r, "x-ms-snapshot").unwrap()
    );
    let r = s
        .put_empty(
            "/disks/backup.vhd?comp=incrementalcopy",
            &[("x-ms-copy-source", other.as_str())],
        )
        .await;
    assert_eq!(refusal(&r), (409, "IncrementalCopyBlobMismatch".into()));
    s.put_blob("/disks/plain", b"x").await;
    let r = s
        .put_empty(
            "/disks/plain?comp=incrementalcopy",
            &[("x-ms-copy-source", url(&second).as_str())],
        )
        .await;
    assert_eq!(refusal(&r), (409, "IncrementalCopyBlobMismatch".into()));
    let r = s
        .put_empty("/disks/backup.vhd?comp=incrementalcopy", &[])
        .await;
    assert_eq!(refusal(&r), (400, "MissingRequiredHeader".into()));
    // It is deleted as any blob is, with its snapshots.
    let r = s
        .delete("/disks/backup.vhd", &[("x-ms-delete-snapshots", "include")])
        .await;
    assert_eq!(r.status(), 202);
}

#[tokio::test]
async fn put_page_from_url_writes_a_range_of_another_blob_as_pages() {
    let s = Server::with_container("disks").await;
    let mut bytes = vec![b'a'; 512];
    bytes.extend(vec![b'b'; 512]);
    s.put_blob("/disks/source", &bytes).await;
    create(&s, "/disks/d.vhd", 2048).await;
    let source = format!("http://127.0.0.1:10000/{}/disks/source", common::ACCOUNT);
    let from = |source_range: &'static str, pages: &'static str| {
        let source = source.clone();
        let s = &s;
        async move {
            let headers = [
                ("x-ms-page-write", "update"),
                ("x-ms-copy-source", source.as_str()),
                ("x-ms-source-range", source_range),
                ("x-ms-range", pages),
            ];
            s.put_empty("/disks/d.vhd?comp=page", &headers).await
        }
    };
    let r = from("bytes=512-1023", "bytes=1024-1535").await;
    assert_eq!(r.status(), 201, "{:?}", code(&r));
    let body = s.read("/disks/d.vhd").await;
    assert_eq!(&body[1024..1536], &[b'b'; 512][..]);
    assert_eq!(&body[..1024], &[0u8; 1024][..]);
    // Ranges of two lengths, or no source range: refused, nothing written.
    let r = from("bytes=0-1023", "bytes=0-511").await;
    assert_eq!(refusal(&r), (400, "InvalidHeaderValue".into()));
    let headers = [
        ("x-ms-page-write", "update"),
        ("x-ms-copy-source", source.as_str()),
        ("x-ms-range", "bytes=0-511"),
    ];
    let r = s.put_empty("/disks/d.vhd?comp=page", &headers).await;
    assert_eq!(refusal(&r), (400, "MissingRequiredHeader".into()));
    assert_eq!(s.read("/disks/d.vhd").await, body);
}
