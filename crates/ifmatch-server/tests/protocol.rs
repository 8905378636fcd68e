//! The blob dialect over real sockets and the local disk: containers and blobs on disk, bad
//! input, restarts, checksums. The protocol tables run over memory in `crates/ifmatch-blob/tests`.

use crate::common;

use common::{Server, code, header, refusal, sha256_tag};

/// (method, path, headers, status, error code)
type BadInput<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, u16, &'a str);

async fn text(r: reqwest::Response) -> String {
    r.text().await.unwrap()
}

#[tokio::test]
async fn containers() {
    let s = Server::start().await;
    let r = s.put_empty("/box?restype=container", &[]).await;
    assert_eq!(r.status(), 201);
    assert!(header(&r, "etag").is_some() && header(&r, "last-modified").is_some());
    assert!(header(&r, "x-ms-request-id").is_some());

    let r = s.put_empty("/box?restype=container", &[]).await;
    assert_eq!(refusal(&r), (409, "ContainerAlreadyExists".into()));
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
    assert_eq!(refusal(&r), (404, "ContainerNotFound".into()));
    let r = s.get("/box/a/1", &[]).await;
    assert_eq!(refusal(&r), (404, "ContainerNotFound".into()));
    let r = s.put("/box/a/1", &[], b"x".to_vec()).await;
    assert_eq!(refusal(&r), (404, "ContainerNotFound".into()));
    let r = s.delete("/box?restype=container", &[]).await;
    assert_eq!(refusal(&r), (404, "ContainerNotFound".into()));

    // Everything in it is gone from the disk too, and the name can be used again, empty.
    let objects = std::fs::read_dir(s.dir.path().join("objects"))
        .unwrap()
        .count();
    assert_eq!(objects, 0);
    s.create_container("box").await;
    let r = s.get("/box/a/1", &[]).await;
    assert_eq!(refusal(&r), (404, "BlobNotFound".into()));
}

#[tokio::test]
async fn overwrites_replace_bytes_and_tag_together() {
    let s = Server::with_container("box").await;
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
    assert_eq!(refusal(&r), (413, "RequestBodyTooLarge".into()));
    let chunks =
        futures_util::stream::iter((0..4).map(|_| Ok::<_, std::io::Error>(vec![7u8; 512])));
    let r = s
        .put("/box/big", &[], reqwest::Body::wrap_stream(chunks))
        .await;
    assert_eq!(refusal(&r), (413, "RequestBodyTooLarge".into()));
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
    let s = Server::with_container("box").await;
    let tag = s.put_blob("/box/keep", b"kept").await;
    let r = s.acquire("/box/keep", "-1").await;
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
    let s = Server::with_container("box").await;
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
    let s = Server::with_container("box").await;
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
    assert_eq!(refusal(&r), (400, "Md5Mismatch".into()));
    assert_eq!(s.get("/box/a", &[]).await.text().await.unwrap(), "hello");
    assert_eq!(objects(), before);
    // x-ms-content-crc64 (CRC-64/NVME, little-endian, base64): the catalogue's check value.
    let check = "iJh5CoYUi64=";
    let crc = [("x-ms-content-crc64", check)];
    let r = s.put("/box/c", &crc, b"123456789".to_vec()).await;
    assert_eq!(r.status(), 201);
    assert_eq!(header(&r, "x-ms-content-crc64").as_deref(), Some(check));
    let r = s.put("/box/c", &crc, b"123456780".to_vec()).await;
    assert_eq!(refusal(&r), (400, "Crc64Mismatch".into()));
    let kept = || async { s.get("/box/c", &[]).await.text().await.unwrap() };
    assert_eq!(kept().await, "123456789");
    // A structured message body (segments with their CRC64s) would be stored as other bytes
    // than the client's: refused, nothing kept.
    let structured = [("x-ms-structured-body", "XSM/1.0; properties=crc64")];
    let r = s.put("/box/c", &structured, b"wrapped".to_vec()).await;
    assert_eq!(refusal(&r), (400, "UnsupportedHeader".into()));
    assert_eq!(kept().await, "123456789");
    // Without one, the server's own digest is stored and served.
    let r = s.put_empty("/box/b", &[]).await;
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
    let s = Server::with_container("small").await;
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
        .put_empty("/small/empty", &[("content-length", "0")])
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
    let server = Server::with_container("xmlbox").await;
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
