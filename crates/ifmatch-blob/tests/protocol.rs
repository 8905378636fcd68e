//! The blob dialect's protocol tables: containers, listings, blobs, the conditional headers
//! row by row, ranges; the front over the memory backends, without a socket.

use crate::common;

use std::time::Duration;

use common::{Server, code, header, refusal, sha256_tag};
use ifmatch_core::date::{HttpDate, date_header_value};

/// (method, blob exists, headers, status, error code)
type TableRow<'a> = (&'a str, bool, Vec<(&'a str, &'a str)>, u16, Option<&'a str>);

#[tokio::test]
async fn listing() {
    let s = Server::with_container("box").await;
    for name in ["a/1", "a/2", "a/3", "b&<x>", "c"] {
        s.put_blob(
            &format!("/box/{}", name.replace('&', "%26")),
            name.as_bytes(),
        )
        .await;
    }
    let r = s.get("/box?restype=container&comp=list", &[]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "content-type").as_deref(),
        Some("application/xml")
    );
    let xml = r.text().await.unwrap();
    assert!(
        xml.starts_with("<?xml") && xml.contains("<EnumerationResults"),
        "{xml}"
    );
    assert_eq!(xml.matches("<Blob>").count(), 5);
    assert!(xml.contains("<Name>b&amp;&lt;x&gt;</Name>"), "{xml}");
    assert!(
        xml.contains(&format!(
            "<Etag>{}</Etag>",
            sha256_tag(b"c").replace('"', "&quot;")
        )),
        "{xml}"
    );
    assert!(xml.contains("<Content-Length>3</Content-Length>"));
    assert!(xml.contains("<Last-Modified>"));

    let xml = s
        .read_text("/box?restype=container&comp=list&prefix=a/")
        .await;
    assert_eq!(xml.matches("<Blob>").count(), 3);
    let xml = s
        .read_text("/box?restype=container&comp=list&prefix=a/&maxresults=2")
        .await;
    assert_eq!(xml.matches("<Blob>").count(), 2);
    assert!(xml.contains("<NextMarker>a/2</NextMarker>"), "{xml}");
    let xml = s
        .read_text("/box?restype=container&comp=list&prefix=a/&maxresults=2&marker=a/2")
        .await;
    assert_eq!(xml.matches("<Blob>").count(), 1);
    assert!(
        xml.contains("<Name>a/3</Name>") && xml.contains("<NextMarker />"),
        "{xml}"
    );
    let r = s.get("/nobox?restype=container&comp=list", &[]).await;
    assert_eq!(code(&r).as_deref(), Some("ContainerNotFound"));
}

#[tokio::test]
async fn blobs() {
    let s = Server::with_container("box").await;
    let body = b"hello, blob".to_vec();
    let r = s
        .put(
            "/box/dir/sub/file.txt",
            &[
                ("content-type", "text/plain"),
                ("x-ms-blob-type", "BlockBlob"),
            ],
            body.clone(),
        )
        .await;
    assert_eq!(r.status(), 201);
    let etag = header(&r, "etag").unwrap();
    assert_eq!(
        etag,
        sha256_tag(&body),
        "the ETag is the SHA-256 of the bytes"
    );
    let last_modified = header(&r, "last-modified").unwrap();

    let r = s.get("/box/dir/sub/file.txt", &[]).await;
    assert_eq!(r.status(), 200);
    for (name, want) in [
        ("etag", etag.as_str()),
        ("last-modified", last_modified.as_str()),
        ("content-type", "text/plain"),
        ("content-length", "11"),
        ("accept-ranges", "bytes"),
        ("x-ms-lease-state", "available"),
        ("x-ms-lease-status", "unlocked"),
        ("x-ms-blob-type", "BlockBlob"),
    ] {
        assert_eq!(header(&r, name).as_deref(), Some(want), "{name}");
    }
    assert!(header(&r, "x-ms-lease-duration").is_none());
    assert_eq!(r.bytes().await.unwrap(), body);

    let r = s.head("/box/dir/sub/file.txt", &[]).await;
    assert_eq!(
        (r.status().as_u16(), header(&r, "etag")),
        (200, Some(etag.clone()))
    );
    assert_eq!(header(&r, "content-length").as_deref(), Some("11"));
    assert!(r.bytes().await.unwrap().is_empty());

    // Without a Content-Type, the blob is served as octets; an empty blob is a blob.
    s.put_blob("/box/empty", b"").await;
    let r = s.get("/box/empty", &[]).await;
    assert_eq!(
        header(&r, "content-type").as_deref(),
        Some("application/octet-stream")
    );
    assert_eq!(header(&r, "etag"), Some(sha256_tag(b"")));

    let r = s
        .put(
            "/box/page",
            &[("x-ms-blob-type", "FileBlob")],
            b"x".to_vec(),
        )
        .await;
    assert_eq!(refusal(&r), (400, "InvalidHeaderValue".into()));

    let r = s.delete("/box/dir/sub/file.txt", &[]).await;
    assert_eq!(r.status(), 202);
    let r = s.get("/box/dir/sub/file.txt", &[]).await;
    assert_eq!(refusal(&r), (404, "BlobNotFound".into()));
    let r = s.head("/box/dir/sub/file.txt", &[]).await;
    assert_eq!(r.status(), 404);
    assert!(
        r.bytes().await.unwrap().is_empty(),
        "a HEAD error has no body"
    );
    let r = s.delete("/box/dir/sub/file.txt", &[]).await;
    assert_eq!(refusal(&r), (404, "BlobNotFound".into()));
}

#[tokio::test]
async fn spec_scenarios_of_conditional_requests() {
    let s = Server::with_container("box").await;
    let v1 = s.put_blob("/box/doc", b"v1").await;

    // 1. GET with If-None-Match equal to the current tag: 304 with ETag, no body.
    let r = s.get("/box/doc", &[("if-none-match", &v1)]).await;
    assert_eq!(r.status(), 304);
    assert_eq!(header(&r, "etag"), Some(v1.clone()));
    assert!(header(&r, "content-type").is_none() && header(&r, "content-length").is_none());
    assert!(r.bytes().await.unwrap().is_empty());

    // 2. GET with `If-None-Match: "x", W/"<current>"`: 304 (weak comparison).
    let weak = format!("\"x\", W/{v1}");
    assert_eq!(
        s.get("/box/doc", &[("if-none-match", &weak)])
            .await
            .status(),
        304
    );

    // 3. If-None-Match present and a stale If-Modified-Since: If-Modified-Since ignored.
    let conditions = [
        ("if-none-match", "\"other\""),
        ("if-modified-since", "Sun, 01 Jan 2090 00:00:00 GMT"),
    ];
    let r = s.get("/box/doc", &conditions).await;
    assert_eq!(r.status(), 200);

    // 4. PUT with If-Match of the previous tag after another client wrote: 412, blob unchanged.
    let v2 = s.put_blob("/box/doc", b"v2").await;
    let r = s
        .put("/box/doc", &[("if-match", &v1)], b"v3".to_vec())
        .await;
    assert_eq!(refusal(&r), (412, "ConditionNotMet".into()));
    let r = s.get("/box/doc", &[]).await;
    assert_eq!(header(&r, "etag"), Some(v2.clone()));
    assert_eq!(r.bytes().await.unwrap(), &b"v2"[..]);

    // 5. PUT with `If-None-Match: *` on an existing blob: 409 BlobAlreadyExists.
    let r = s
        .put("/box/doc", &[("if-none-match", "*")], b"v3".to_vec())
        .await;
    assert_eq!(refusal(&r), (409, "BlobAlreadyExists".into()));
    let r = s
        .put("/box/new", &[("if-none-match", "*")], b"n".to_vec())
        .await;
    assert_eq!(r.status(), 201, "create-only on a new name succeeds");

    // 7. PUT with If-Match and If-None-Match together: 400.
    let r = s
        .put(
            "/box/doc",
            &[("if-match", &v2), ("if-none-match", "\"x\"")],
            b"v3".to_vec(),
        )
        .await;
    assert_eq!(
        refusal(&r),
        (400, "MultipleConditionHeadersNotSupported".into())
    );

    // 8. GET with Range and an If-Range of an old tag: 200 with the whole body.
    let r = s
        .get("/box/doc", &[("range", "bytes=0-0"), ("if-range", &v1)])
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap(), &b"v2"[..]);
    let r = s
        .get("/box/doc", &[("range", "bytes=0-0"), ("if-range", &v2)])
        .await;
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().await.unwrap(), &b"v"[..]);

    // 6. DELETE with `If-Match: *` on an existing blob: 202.
    assert_eq!(
        s.delete("/box/doc", &[("if-match", "*")]).await.status(),
        202
    );
    // And on a missing one: 412 before 404.
    let r = s.delete("/box/doc", &[("if-match", "*")]).await;
    assert_eq!(refusal(&r), (412, "ConditionNotMet".into()));
    // A read of a missing one: 404 whatever its conditions, as live Azure answers.
    let r = s.get("/box/doc", &[("if-match", &v2)]).await;
    assert_eq!(refusal(&r), (404, "BlobNotFound".into()));
}

/// The conditional-header table of the blob dialect, over HTTP, against a blob whose tag and
/// Last-Modified are known.

#[tokio::test]
async fn blob_dialect_table_over_http() {
    let s = Server::with_container("box").await;
    let r = s.put("/box/t", &[], b"table".to_vec()).await;
    let tag = header(&r, "etag").unwrap();
    let lm: HttpDate = header(&r, "last-modified").unwrap().parse().unwrap();
    let at = |offset: i64| {
        let t = std::time::SystemTime::from(lm);
        let t = if offset >= 0 {
            t + Duration::from_secs(offset as u64)
        } else {
            t - Duration::from_secs((-offset) as u64)
        };
        date_header_value(HttpDate::from(t))
            .to_str()
            .unwrap()
            .to_owned()
    };
    let (before, same, after) = (at(-1), at(0), at(1));
    let other = "\"0000\"".to_owned();
    let two = format!("{tag}, {other}");

    // The codes most rows answer with.
    const NOT_MET: Option<&str> = Some("ConditionNotMet");
    const MULTIPLE: Option<&str> = Some("MultipleConditionHeadersNotSupported");
    #[rustfmt::skip]
    let rows: Vec<TableRow<'_>> = vec![
        ("GET", true, vec![("if-match", &tag)], 200, None),
        ("GET", true, vec![("if-match", &other)], 412, NOT_MET),
        ("GET", true, vec![("if-match", &two)], 200, None),
        ("GET", true, vec![("if-none-match", &tag)], 304, NOT_MET),
        ("GET", true, vec![("if-none-match", &two)], 304, NOT_MET),
        ("GET", true, vec![("if-none-match", &other)], 200, None),
        ("GET", true, vec![("if-modified-since", &same)], 304, NOT_MET),
        ("GET", true, vec![("if-modified-since", &before)], 200, None),
        ("GET", true, vec![("if-unmodified-since", &same)], 200, None),
        ("GET", true, vec![("if-unmodified-since", &before)], 412, NOT_MET),
        ("GET", true, vec![("if-none-match", &tag), ("if-modified-since", &before)], 200, None),
        ("GET", true, vec![("if-match", &tag), ("if-unmodified-since", &before)], 412, NOT_MET),
        ("HEAD", true, vec![("if-none-match", &tag)], 304, NOT_MET),
        ("HEAD", true, vec![("if-match", &other)], 412, NOT_MET),
        // A read of a missing blob is 404 whatever its conditions (live Azure).
        ("GET", false, vec![("if-match", "*")], 404, Some("BlobNotFound")),
        ("GET", false, vec![("if-none-match", "*")], 404, Some("BlobNotFound")),
        ("PUT", true, vec![("if-match", &other)], 412, NOT_MET),
        ("PUT", true, vec![("if-match", &two)], 400, MULTIPLE),
        ("PUT", true, vec![("if-none-match", "*")], 409, Some("BlobAlreadyExists")),
        ("PUT", true, vec![("if-none-match", &tag)], 412, NOT_MET),
        ("PUT", true, vec![("if-modified-since", &same)], 412, NOT_MET),
        ("PUT", true, vec![("if-unmodified-since", &before)], 412, NOT_MET),
        ("PUT", true, vec![("if-unmodified-since", &same), ("if-modified-since", &before)], 400, MULTIPLE),
        ("PUT", true, vec![("if-match", &tag), ("if-unmodified-since", &before)], 201, None),
        ("PUT", false, vec![("if-match", "*")], 412, NOT_MET),
        ("PUT", false, vec![("if-none-match", "*")], 201, None),
        ("DELETE", true, vec![("if-none-match", "*")], 412, NOT_MET),
        ("DELETE", true, vec![("if-match", &other)], 412, NOT_MET),
        ("DELETE", true, vec![("if-unmodified-since", &after)], 202, None),
        ("DELETE", false, vec![("if-match", &tag)], 412, NOT_MET),
        ("DELETE", false, vec![], 404, Some("BlobNotFound")),
    ];
    for (i, (method, exists, headers, status, error)) in rows.iter().enumerate() {
        // A fresh blob with the same bytes for every row, written at the same instant: the
        // server's clock is a manual one, which never moves by itself, so every row runs.
        let path = format!("/box/row-{i}");
        if *exists {
            let r = s.put(&path, &[], b"table".to_vec()).await;
            assert_eq!(header(&r, "etag"), Some(tag.clone()));
            assert_eq!(header(&r, "last-modified"), Some(same.clone()), "row {i}");
        }
        let r = s.send(method, &path, headers, b"new".to_vec()).await;
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (*status, *error),
            "row {i}: {method} exists={exists} {headers:?}"
        );
    }
}

#[tokio::test]
async fn ranges() {
    let s = Server::with_container("box").await;
    let body: Vec<u8> = (0..=255u8).collect();
    let tag = s.put_blob("/box/r", &body).await;
    let cases: &[(&str, u16, Option<&str>, std::ops::Range<usize>)] = &[
        ("bytes=0-9", 206, Some("bytes 0-9/256"), 0..10),
        ("bytes=250-", 206, Some("bytes 250-255/256"), 250..256),
        ("bytes=-6", 206, Some("bytes 250-255/256"), 250..256),
        ("bytes=200-999", 206, Some("bytes 200-255/256"), 200..256),
        ("bytes=0-1,5-6", 200, None, 0..256),
        ("bytes=9-3", 200, None, 0..256),
    ];
    for (range, status, content_range, want) in cases {
        let r = s.get("/box/r", &[("range", range)]).await;
        assert_eq!(r.status().as_u16(), *status, "{range}");
        assert_eq!(
            header(&r, "content-range").as_deref(),
            *content_range,
            "{range}"
        );
        assert_eq!(header(&r, "etag"), Some(tag.clone()));
        assert_eq!(
            &r.bytes().await.unwrap()[..],
            &body[want.clone()],
            "{range}"
        );
    }
    let r = s.get("/box/r", &[("range", "bytes=256-")]).await;
    assert_eq!(refusal(&r), (416, "InvalidRange".into()));
    let r = s.get("/box/r", &[("x-ms-range", "bytes=1-2")]).await;
    assert_eq!(r.bytes().await.unwrap(), &body[1..3]);
    // HEAD ignores the range: the whole length.
    let r = s.head("/box/r", &[("range", "bytes=0-9")]).await;
    assert_eq!(
        (r.status().as_u16(), header(&r, "content-length").as_deref()),
        (200, Some("256"))
    );
}
