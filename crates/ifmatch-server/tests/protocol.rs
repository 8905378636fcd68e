//! The blob dialect over real sockets: containers, blobs, conditional headers, ranges, errors.

mod common;

use std::time::Duration;

use common::{Server, code, header, sha256_tag};
use ifmatch_core::date::{HttpDate, date_header_value};

/// (method, blob exists, headers, status, error code)
type TableRow<'a> = (&'a str, bool, Vec<(&'a str, &'a str)>, u16, Option<&'a str>);
/// (method, path, headers, status, error code)
type BadInput<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, u16, &'a str);

async fn text(r: reqwest::Response) -> String {
    r.text().await.unwrap()
}

#[tokio::test]
async fn containers() {
    let s = Server::start().await;
    let r = s.put("/box?restype=container", &[], Vec::new()).await;
    assert_eq!(r.status(), 201);
    assert!(header(&r, "etag").is_some() && header(&r, "last-modified").is_some());
    assert!(header(&r, "x-ms-request-id").is_some());

    let r = s.put("/box?restype=container", &[], Vec::new()).await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (409, Some("ContainerAlreadyExists"))
    );
    let body = text(r).await;
    assert!(
        body.contains("<Code>ContainerAlreadyExists</Code>"),
        "{body}"
    );

    for method in ["GET", "HEAD"] {
        let r = s
            .send(method, "/box?restype=container", &[], Vec::new())
            .await;
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "x-ms-lease-state").as_deref(), Some("available"));
        assert_eq!(header(&r, "x-ms-lease-status").as_deref(), Some("unlocked"));
        assert!(header(&r, "etag").is_some());
    }

    s.put_blob("/box/a/1", b"one").await;
    s.put_blob("/box/a/2", b"two").await;
    s.put_blob("/box/b", b"three").await;
    let r = s.delete("/box?restype=container", &[]).await;
    assert_eq!(r.status(), 202);
    let r = s.head("/box?restype=container", &[]).await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (404, Some("ContainerNotFound"))
    );
    let r = s.get("/box/a/1", &[]).await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (404, Some("ContainerNotFound"))
    );
    let r = s.put("/box/a/1", &[], b"x".to_vec()).await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (404, Some("ContainerNotFound"))
    );
    let r = s.delete("/box?restype=container", &[]).await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (404, Some("ContainerNotFound"))
    );

    // Everything in it is gone from the disk too, and the name can be used again, empty.
    let objects = std::fs::read_dir(s.dir.path().join("objects"))
        .unwrap()
        .count();
    assert_eq!(objects, 0);
    s.create_container("box").await;
    let r = s.get("/box/a/1", &[]).await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (404, Some("BlobNotFound"))
    );
}

#[tokio::test]
async fn listing() {
    let s = Server::start().await;
    s.create_container("box").await;
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
    let xml = text(r).await;
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

    let xml = text(
        s.get("/box?restype=container&comp=list&prefix=a/", &[])
            .await,
    )
    .await;
    assert_eq!(xml.matches("<Blob>").count(), 3);
    let xml = text(
        s.get(
            "/box?restype=container&comp=list&prefix=a/&maxresults=2",
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(xml.matches("<Blob>").count(), 2);
    assert!(xml.contains("<NextMarker>a/2</NextMarker>"), "{xml}");
    let xml = text(
        s.get(
            "/box?restype=container&comp=list&prefix=a/&maxresults=2&marker=a/2",
            &[],
        )
        .await,
    )
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
    let s = Server::start().await;
    s.create_container("box").await;
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
            &[("x-ms-blob-type", "PageBlob")],
            b"x".to_vec(),
        )
        .await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (400, Some("InvalidHeaderValue"))
    );

    let r = s.delete("/box/dir/sub/file.txt", &[]).await;
    assert_eq!(r.status(), 202);
    let r = s.get("/box/dir/sub/file.txt", &[]).await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (404, Some("BlobNotFound"))
    );
    let r = s.head("/box/dir/sub/file.txt", &[]).await;
    assert_eq!(r.status(), 404);
    assert!(
        r.bytes().await.unwrap().is_empty(),
        "a HEAD error has no body"
    );
    let r = s.delete("/box/dir/sub/file.txt", &[]).await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (404, Some("BlobNotFound"))
    );
}

#[tokio::test]
async fn overwrites_replace_bytes_and_tag_together() {
    let s = Server::start().await;
    s.create_container("box").await;
    let mut last = String::new();
    // Small and large in turn: kept in the record, then in an object, and back.
    for i in 0..20 {
        let body = format!("version {i:02}").repeat(if i % 2 == 1 { 500 } else { i + 1 });
        last = s.put_blob("/box/x", body.as_bytes()).await;
        let r = s.get("/box/x", &[]).await;
        assert_eq!(header(&r, "etag"), Some(last.clone()));
        assert_eq!(r.bytes().await.unwrap(), body.as_bytes());
    }
    assert!(!last.is_empty());
    // Every superseded object is gone: one object for one (large) blob.
    let objects = std::fs::read_dir(s.dir.path().join("objects"))
        .unwrap()
        .count();
    assert_eq!(objects, 1);
}

#[tokio::test]
async fn spec_scenarios_of_conditional_requests() {
    let s = Server::start().await;
    s.create_container("box").await;
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
    let r = s
        .get(
            "/box/doc",
            &[
                ("if-none-match", "\"other\""),
                ("if-modified-since", "Sun, 01 Jan 2090 00:00:00 GMT"),
            ],
        )
        .await;
    assert_eq!(r.status(), 200);

    // 4. PUT with If-Match of the previous tag after another client wrote: 412, blob unchanged.
    let v2 = s.put_blob("/box/doc", b"v2").await;
    let r = s
        .put("/box/doc", &[("if-match", &v1)], b"v3".to_vec())
        .await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (412, Some("ConditionNotMet"))
    );
    let r = s.get("/box/doc", &[]).await;
    assert_eq!(header(&r, "etag"), Some(v2.clone()));
    assert_eq!(r.bytes().await.unwrap(), &b"v2"[..]);

    // 5. PUT with `If-None-Match: *` on an existing blob: 409 BlobAlreadyExists.
    let r = s
        .put("/box/doc", &[("if-none-match", "*")], b"v3".to_vec())
        .await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (409, Some("BlobAlreadyExists"))
    );
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
        (r.status().as_u16(), code(&r).as_deref()),
        (400, Some("MultipleConditionHeadersNotSupported"))
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
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (412, Some("ConditionNotMet"))
    );
    // A read of a missing one: 404 whatever its conditions, as live Azure answers.
    let r = s.get("/box/doc", &[("if-match", &v2)]).await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (404, Some("BlobNotFound"))
    );
}

/// The conditional-header table of the blob dialect, over HTTP, against a blob whose tag and
/// Last-Modified are known.
#[tokio::test]
async fn blob_dialect_table_over_http() {
    let s = Server::start().await;
    s.create_container("box").await;
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

    let rows: Vec<TableRow<'_>> = vec![
        ("GET", true, vec![("if-match", &tag)], 200, None),
        (
            "GET",
            true,
            vec![("if-match", &other)],
            412,
            Some("ConditionNotMet"),
        ),
        ("GET", true, vec![("if-match", &two)], 200, None),
        (
            "GET",
            true,
            vec![("if-none-match", &tag)],
            304,
            Some("ConditionNotMet"),
        ),
        (
            "GET",
            true,
            vec![("if-none-match", &two)],
            304,
            Some("ConditionNotMet"),
        ),
        ("GET", true, vec![("if-none-match", &other)], 200, None),
        (
            "GET",
            true,
            vec![("if-modified-since", &same)],
            304,
            Some("ConditionNotMet"),
        ),
        ("GET", true, vec![("if-modified-since", &before)], 200, None),
        ("GET", true, vec![("if-unmodified-since", &same)], 200, None),
        (
            "GET",
            true,
            vec![("if-unmodified-since", &before)],
            412,
            Some("ConditionNotMet"),
        ),
        (
            "GET",
            true,
            vec![("if-none-match", &tag), ("if-modified-since", &before)],
            200,
            None,
        ),
        (
            "GET",
            true,
            vec![("if-match", &tag), ("if-unmodified-since", &before)],
            412,
            Some("ConditionNotMet"),
        ),
        (
            "HEAD",
            true,
            vec![("if-none-match", &tag)],
            304,
            Some("ConditionNotMet"),
        ),
        (
            "HEAD",
            true,
            vec![("if-match", &other)],
            412,
            Some("ConditionNotMet"),
        ),
        // A read of a missing blob is 404 whatever its conditions (live Azure).
        (
            "GET",
            false,
            vec![("if-match", "*")],
            404,
            Some("BlobNotFound"),
        ),
        (
            "GET",
            false,
            vec![("if-none-match", "*")],
            404,
            Some("BlobNotFound"),
        ),
        (
            "PUT",
            true,
            vec![("if-match", &other)],
            412,
            Some("ConditionNotMet"),
        ),
        (
            "PUT",
            true,
            vec![("if-match", &two)],
            400,
            Some("MultipleConditionHeadersNotSupported"),
        ),
        (
            "PUT",
            true,
            vec![("if-none-match", "*")],
            409,
            Some("BlobAlreadyExists"),
        ),
        (
            "PUT",
            true,
            vec![("if-none-match", &tag)],
            412,
            Some("ConditionNotMet"),
        ),
        (
            "PUT",
            true,
            vec![("if-modified-since", &same)],
            412,
            Some("ConditionNotMet"),
        ),
        (
            "PUT",
            true,
            vec![("if-unmodified-since", &before)],
            412,
            Some("ConditionNotMet"),
        ),
        (
            "PUT",
            true,
            vec![
                ("if-unmodified-since", &same),
                ("if-modified-since", &before),
            ],
            400,
            Some("MultipleConditionHeadersNotSupported"),
        ),
        (
            "PUT",
            true,
            vec![("if-match", &tag), ("if-unmodified-since", &before)],
            201,
            None,
        ),
        (
            "PUT",
            false,
            vec![("if-match", "*")],
            412,
            Some("ConditionNotMet"),
        ),
        ("PUT", false, vec![("if-none-match", "*")], 201, None),
        (
            "DELETE",
            true,
            vec![("if-none-match", "*")],
            412,
            Some("ConditionNotMet"),
        ),
        (
            "DELETE",
            true,
            vec![("if-match", &other)],
            412,
            Some("ConditionNotMet"),
        ),
        (
            "DELETE",
            true,
            vec![("if-unmodified-since", &after)],
            202,
            None,
        ),
        (
            "DELETE",
            false,
            vec![("if-match", &tag)],
            412,
            Some("ConditionNotMet"),
        ),
        ("DELETE", false, vec![], 404, Some("BlobNotFound")),
    ];
    for (i, (method, exists, headers, status, error)) in rows.iter().enumerate() {
        // A fresh blob with the same bytes for every row, written in the same second or a later one.
        let path = format!("/box/row-{i}");
        if *exists {
            let r = s.put(&path, &[], b"table".to_vec()).await;
            assert_eq!(header(&r, "etag"), Some(tag.clone()));
            if header(&r, "last-modified").unwrap() != same {
                // The clock ticked over a second boundary: this row's dates would be off by one.
                eprintln!("row {i}: skipped, Last-Modified moved");
                continue;
            }
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
    let s = Server::start().await;
    s.create_container("box").await;
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
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (416, Some("InvalidRange"))
    );
    let r = s.get("/box/r", &[("x-ms-range", "bytes=1-2")]).await;
    assert_eq!(r.bytes().await.unwrap(), &body[1..3]);
    // HEAD ignores the range: the whole length.
    let r = s.head("/box/r", &[("range", "bytes=0-9")]).await;
    assert_eq!(
        (r.status().as_u16(), header(&r, "content-length").as_deref()),
        (200, Some("256"))
    );
}

#[tokio::test]
async fn bad_input_gets_a_clear_4xx_and_the_server_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start_with(dir, ifmatch_server::Options::default().max_body(1024)).await;
    s.create_container("box").await;
    let cases: Vec<BadInput<'_>> = vec![
        ("PUT", "/box/a%00b", vec![], 400, "InvalidResourceName"),
        (
            "PUT",
            "/Bad_Name?restype=container",
            vec![],
            400,
            "InvalidResourceName",
        ),
        ("GET", "/box/%FF%FE", vec![], 400, "InvalidUri"),
        ("PUT", "/box", vec![], 400, "InvalidQueryParameterValue"),
        (
            "PUT",
            "/box/x?comp=block",
            vec![],
            400,
            "InvalidQueryParameterValue",
        ),
        ("POST", "/box/x", vec![], 405, "UnsupportedHttpVerb"),
        (
            "PUT",
            "/box/x",
            vec![("x-ms-lease-id", "not-a-guid")],
            400,
            "InvalidHeaderValue",
        ),
        (
            "PUT",
            "/box/x?comp=lease",
            vec![],
            400,
            "MissingRequiredHeader",
        ),
        (
            "PUT",
            "/box/x?comp=lease",
            vec![("x-ms-lease-action", "steal")],
            400,
            "InvalidHeaderValue",
        ),
        (
            "PUT",
            "/box/x",
            vec![("content-length-hint", "x"), ("if-match", "\"a\", \"b\"")],
            400,
            "MultipleConditionHeadersNotSupported",
        ),
    ];
    for (method, path, headers, status, error) in &cases {
        let r = s.send(method, path, headers, Vec::new()).await;
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (*status, Some(*error)),
            "{method} {path}"
        );
    }
    // Dot segments, sent raw: an HTTP client library would normalize them away before sending.
    for target in [
        "/box/../etc/passwd",
        "/box/%2e%2e/%2e%2e/etc/passwd",
        "/box/a/../../x",
        "/box/..%2F..%2Fx",
    ] {
        for method in ["GET", "PUT", "DELETE"] {
            let (status, error) = common::raw(&s, method, target).await;
            assert_eq!(
                (status, error.as_deref()),
                (400, Some("InvalidResourceName")),
                "{method} {target}"
            );
        }
    }
    // Over the limit: 413, whether the length is declared or streamed.
    let r = s.put("/box/big", &[], vec![7u8; 2048]).await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (413, Some("RequestBodyTooLarge"))
    );
    let chunks =
        futures_util::stream::iter((0..4).map(|_| Ok::<_, std::io::Error>(vec![7u8; 512])));
    let r = s
        .put("/box/big", &[], reqwest::Body::wrap_stream(chunks))
        .await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (413, Some("RequestBodyTooLarge"))
    );
    assert_eq!(
        s.get("/box/big", &[]).await.status(),
        404,
        "nothing was stored"
    );
    assert_eq!(
        std::fs::read_dir(s.dir.path().join("objects"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(
        std::fs::read_dir(s.dir.path().join("tmp")).unwrap().count(),
        0
    );
    // Nothing outside the data directory was touched, and the server still serves.
    s.put_blob("/box/fine", b"ok").await;
}

#[tokio::test]
async fn records_and_leases_survive_a_restart() {
    let s = Server::start().await;
    s.create_container("box").await;
    let tag = s.put_blob("/box/keep", b"kept").await;
    let r = s
        .lease(
            "/box/keep",
            &[
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "-1"),
            ],
        )
        .await;
    let id = header(&r, "x-ms-lease-id").unwrap();
    let dir = s.stop().await;

    let s = Server::start_with(dir, ifmatch_server::Options::default()).await;
    let r = s.get("/box/keep", &[]).await;
    assert_eq!(header(&r, "etag"), Some(tag));
    assert_eq!(header(&r, "x-ms-lease-state").as_deref(), Some("leased"));
    assert_eq!(r.bytes().await.unwrap(), &b"kept"[..]);
    let r = s.put("/box/keep", &[], b"x".to_vec()).await;
    assert_eq!(code(&r).as_deref(), Some("LeaseIdMissing"));
    let r = s
        .put("/box/keep", &[("x-ms-lease-id", &id)], b"x".to_vec())
        .await;
    assert_eq!(r.status(), 201);
}

#[tokio::test]
async fn a_data_directory_serves_one_server_at_a_time() {
    let s = Server::start().await;
    let second = ifmatch_server::open(s.dir.path(), ifmatch_server::Options::default());
    let error = second.expect_err("the lock is held");
    assert!(error.to_string().contains("in use"), "{error}");
}

#[tokio::test]
async fn a_304_reads_no_blob_data() {
    let s = Server::start().await;
    s.create_container("box").await;
    let tag = s.put_blob("/box/doc", b"the bytes").await;
    // Take every object away behind the server's back: revalidation still answers, from the
    // records alone.
    for entry in std::fs::read_dir(s.dir.path().join("objects")).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let r = s.get("/box/doc", &[("if-none-match", &tag)]).await;
    assert_eq!(r.status(), 304);
    assert_eq!(header(&r, "etag"), Some(tag));
}

#[tokio::test]
async fn content_md5_and_crc64_are_verified_and_returned() {
    let s = Server::start().await;
    s.create_container("box").await;
    // MD5("hello"), base64: a published test vector (RFC 1321's algorithm).
    let hello = "XUFAKrxLKna5cZ2REBfFkg==";
    let r = s
        .put("/box/a", &[("content-md5", hello)], b"hello".to_vec())
        .await;
    assert_eq!(r.status(), 201);
    assert_eq!(header(&r, "content-md5").as_deref(), Some(hello));
    let r = s.get("/box/a", &[]).await;
    assert_eq!(header(&r, "content-md5").as_deref(), Some(hello));
    // A digest that is not the body's: 400 Md5Mismatch, the blob unchanged, no object left.
    let objects = || std::fs::read_dir(s.dir.path().join("objects")).map_or(0, |d| d.count());
    let before = objects();
    let r = s
        .put("/box/a", &[("content-md5", hello)], b"HELLO".to_vec())
        .await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (400, Some("Md5Mismatch"))
    );
    assert_eq!(s.get("/box/a", &[]).await.text().await.unwrap(), "hello");
    assert_eq!(objects(), before);
    // x-ms-content-crc64 (CRC-64/NVME, little-endian, base64): the catalogue's check value.
    let check = "iJh5CoYUi64=";
    let r = s
        .put(
            "/box/c",
            &[("x-ms-content-crc64", check)],
            b"123456789".to_vec(),
        )
        .await;
    assert_eq!(r.status(), 201);
    assert_eq!(header(&r, "x-ms-content-crc64").as_deref(), Some(check));
    let r = s
        .put(
            "/box/c",
            &[("x-ms-content-crc64", check)],
            b"123456780".to_vec(),
        )
        .await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (400, Some("Crc64Mismatch"))
    );
    assert_eq!(
        s.get("/box/c", &[]).await.text().await.unwrap(),
        "123456789"
    );
    // A structured message body (segments with their CRC64s) would be stored as other bytes
    // than the client's: refused, nothing kept.
    let r = s
        .put(
            "/box/c",
            &[("x-ms-structured-body", "XSM/1.0; properties=crc64")],
            b"wrapped".to_vec(),
        )
        .await;
    assert_eq!(
        (r.status().as_u16(), code(&r).as_deref()),
        (400, Some("UnsupportedHeader"))
    );
    assert_eq!(
        s.get("/box/c", &[]).await.text().await.unwrap(),
        "123456789"
    );
    // Without one, the server's own digest is stored and served.
    let r = s.put("/box/b", &[], Vec::new()).await;
    assert_eq!(
        header(&r, "content-md5").as_deref(),
        Some("1B2M2Y8AsgTpgAmY7PhCfg==")
    );
}

/// A blob of up to `INLINE_MAX` bytes is kept in its record: no object, the same answers
/// (whole, by range, 304, Content-MD5, a checksum refused), before and after a restart, and a
/// blob that grows past the bound moves to an object and back without leaving one behind.
#[tokio::test]
async fn small_blobs_live_in_their_records_and_answer_the_same() {
    use base64::Engine;
    use ifmatch_server::local::INLINE_MAX;
    let s = Server::start().await;
    s.create_container("small").await;
    let objects = |s: &Server| {
        std::fs::read_dir(s.dir.path().join("objects"))
            .unwrap()
            .count()
    };
    let md5 = |bytes: &[u8]| {
        use md5::Digest;
        base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(bytes))
    };

    let body: Vec<u8> = (0..100u8).collect();
    let r = s
        .put("/small/a", &[("content-md5", &md5(&body))], body.clone())
        .await;
    assert_eq!(r.status(), 201);
    assert_eq!(header(&r, "etag"), Some(sha256_tag(&body)));
    assert_eq!(header(&r, "content-md5"), Some(md5(&body)));
    let bound = vec![7u8; INLINE_MAX as usize];
    let bound_tag = s.put_blob("/small/bound", &bound).await;
    // (reqwest sends no Content-Length with an empty body; the SDKs always do.)
    let r = s
        .put("/small/empty", &[("content-length", "0")], Vec::new())
        .await;
    let empty_tag = header(&r, "etag").unwrap();
    assert_eq!(objects(&s), 0, "small blobs staged objects");

    // A checksum that does not match keeps nothing, as for an object.
    let r = s
        .put(
            "/small/a",
            &[("content-md5", &md5(b"other"))],
            b"changed".to_vec(),
        )
        .await;
    assert_eq!(code(&r).as_deref(), Some("Md5Mismatch"));

    let s = Server::start_with(s.stop().await, ifmatch_server::Options::default()).await;
    for _cold_then_cached in 0..2 {
        let r = s.get("/small/a", &[]).await;
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "content-length"), Some("100".into()));
        assert_eq!(header(&r, "content-md5"), Some(md5(&body)));
        let tag = header(&r, "etag").unwrap();
        assert_eq!(r.bytes().await.unwrap(), body);
        let r = s.get("/small/a", &[("range", "bytes=10-19")]).await;
        assert_eq!(r.status(), 206);
        assert_eq!(header(&r, "content-range"), Some("bytes 10-19/100".into()));
        assert_eq!(r.bytes().await.unwrap(), body[10..20]);
        let r = s.get("/small/a", &[("if-none-match", &tag)]).await;
        assert_eq!(r.status(), 304);
        let r = s.head("/small/bound", &[]).await;
        assert_eq!(header(&r, "etag"), Some(bound_tag.clone()));
        assert_eq!(header(&r, "content-length"), Some(INLINE_MAX.to_string()));
        let r = s.get("/small/empty", &[]).await;
        assert_eq!(header(&r, "etag"), Some(empty_tag.clone()));
        assert!(r.bytes().await.unwrap().is_empty());
    }

    // One byte more has an object; shrunk again, the object goes.
    let large = vec![9u8; INLINE_MAX as usize + 1];
    s.put_blob("/small/bound", &large).await;
    assert_eq!(objects(&s), 1);
    assert_eq!(
        s.get("/small/bound", &[]).await.bytes().await.unwrap(),
        large
    );
    s.put_blob("/small/bound", &bound).await;
    assert_eq!(objects(&s), 0);
    assert_eq!(
        s.get("/small/bound", &[]).await.bytes().await.unwrap(),
        bound
    );
}

/// What XML 1.0 cannot carry (control characters, U+FFFE) is refused in a listing's prefix,
/// marker and delimiter, and in blob names, never echoed into a document that is not
/// well-formed; the listings around them still answer.
#[tokio::test]
async fn listing_parameters_xml_cannot_carry_are_refused() {
    let server = Server::start().await;
    server.create_container("xmlbox").await;
    server.put_blob("/xmlbox/a", b"a").await;
    for bad in ["%00", "%01", "%0B", "%1F", "a%EF%BF%BE", "%EF%BF%BF"] {
        for param in ["prefix", "marker", "delimiter"] {
            for list in ["/xmlbox?restype=container&comp=list", "/?comp=list"] {
                let target = format!("{list}&{param}={bad}");
                let (status, code) = common::raw(&server, "GET", &target).await;
                assert_eq!(
                    (status, code.as_deref()),
                    (400, Some("InvalidQueryParameterValue")),
                    "{target}"
                );
            }
        }
        let (status, code) = common::raw(&server, "PUT", &format!("/xmlbox/n{bad}")).await;
        assert_eq!(
            (status, code.as_deref()),
            (400, Some("InvalidResourceName")),
            "{bad}"
        );
    }
    let (status, _) = common::raw(
        &server,
        "GET",
        "/xmlbox?restype=container&comp=list&prefix=%09",
    )
    .await;
    assert_eq!(status, 200, "a tab is XML text");
    let r = server.get("/xmlbox?restype=container&comp=list", &[]).await;
    assert!(text(r).await.contains("<Name>a</Name>"));
}
