//! Copies whose source another server holds: two `ifmatch serve` processes, one the origin,
//! the other told `--copy-from` its address. Put Blob From URL, Copy Blob (pending, then
//! finished in the background, or aborted, or failed), Put Block From URL (a range) and Append
//! Block From URL read the origin's blob, streamed into the destination's objects; the
//! source's conditions become the origin's; an origin not named, an answer that
//! is not the blob, a source larger than the destination takes are refused, and nothing is
//! written.

use crate::common;

use common::{client, code, header, refusal, send};

/// `ifmatch serve --anonymous` with `args`, over a data directory of its own: its base URL.
fn start(args: &[&str]) -> (common::Running, String) {
    common::serve_anonymous(args, &[])
}

/// Copy Blob, sent raw (`send` would make it a Put Blob From URL, `x-ms-blob-type`).
async fn copy_blob(
    http: &reqwest::Client,
    url: &str,
    source: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = http.put(url).header("x-ms-copy-source", source);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// The properties of the copy's destination at `url` once its copy is no longer pending (the
/// copier passes every second).
async fn finished(http: &reqwest::Client, url: &str) -> reqwest::Response {
    for _ in 0..100 {
        let r = send(http, "HEAD", url, &[], Vec::new()).await;
        if header(&r, "x-ms-copy-status").as_deref() != Some("pending") {
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{url}: the copy is still pending after 10 s");
}

/// A copy's headers, the status it is refused with, and the code.
type Refusal<'a> = (&'a [(&'a str, &'a str)], u16, &'a str);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_read_another_server_only_where_the_operator_lets_them() {
    let http = client();
    let (_origin, origin) = start(&[]);
    common::create_container(&http, &origin, "src").await;
    let source = format!("{origin}/src/a.txt");
    let headers = [
        ("content-type", "text/plain"),
        ("x-ms-meta-team", "a"),
        ("x-ms-blob-type", "BlockBlob"),
    ];
    let r = send(&http, "PUT", &source, &headers, "hello, world").await;
    assert_eq!(r.status(), 201);
    let source_tag = header(&r, "etag").unwrap();
    let host = source.split('/').nth(2).unwrap().to_owned();

    // Not named by --copy-from: refused, never fetched.
    let (_closed, closed) = start(&[]);
    common::create_container(&http, &closed, "dst").await;
    let from_url = [
        ("x-ms-blob-type", "BlockBlob"),
        ("x-ms-copy-source", source.as_str()),
    ];
    let r = common::put(&http, &format!("{closed}/dst/b"), &from_url).await;
    assert_eq!(refusal(&r), (403, "CannotVerifyCopySource".into()));

    let (_open, open) = start(&["--copy-from", &host, "--max-body", "65536"]);
    common::create_container(&http, &open, "dst").await;
    // Put Blob From URL: the bytes and the origin's properties.
    let r = common::put(&http, &format!("{open}/dst/b"), &from_url).await;
    assert_eq!(r.status(), 201, "{:?}", code(&r));
    let r = common::get(&http, &format!("{open}/dst/b")).await;
    assert_eq!(header(&r, "content-type").as_deref(), Some("text/plain"));
    assert_eq!(r.text().await.unwrap(), "hello, world");
    // Copy Blob: pending at its answer, finished in the background; its source kept without
    // its query, the origin's metadata.
    let signed = format!("{source}?token=secret");
    let r = copy_blob(&http, &format!("{open}/dst/c"), &signed, &[]).await;
    assert_eq!(r.status(), 202, "{:?}", code(&r));
    assert_eq!(header(&r, "x-ms-copy-status").as_deref(), Some("pending"));
    let r = finished(&http, &format!("{open}/dst/c")).await;
    assert_eq!(header(&r, "x-ms-copy-status").as_deref(), Some("success"));
    assert_eq!(header(&r, "x-ms-copy-progress").as_deref(), Some("12/12"));
    assert_eq!(
        header(&r, "x-ms-copy-source").as_deref(),
        Some(source.as_str())
    );
    assert_eq!(header(&r, "x-ms-meta-team").as_deref(), Some("a"));
    let r = common::get(&http, &format!("{open}/dst/c")).await;
    assert_eq!(r.text().await.unwrap(), "hello, world");
    // Copy Blob From URL (x-ms-requires-sync): finished at its answer.
    let sync = [("x-ms-requires-sync", "true")];
    let r = copy_blob(&http, &format!("{open}/dst/s"), &source, &sync).await;
    assert_eq!(header(&r, "x-ms-copy-status").as_deref(), Some("success"));
    // Aborted while pending: empty, and stays so once the copier passes. (The copier may
    // have finished it in the few milliseconds before the abort: then it is no longer pending,
    // and whole.)
    let r = copy_blob(&http, &format!("{open}/dst/aborted"), &source, &[]).await;
    let id = header(&r, "x-ms-copy-id").unwrap();
    let abort = format!("{open}/dst/aborted?comp=copy&copyid={id}");
    let abort_copy = [("x-ms-copy-action", "abort")];
    let r = common::put(&http, &abort, &abort_copy).await;
    let expected = match r.status().as_u16() {
        204 => [Some("aborted".to_owned()), Some("0".to_owned())],
        _ => {
            assert_eq!(code(&r).as_deref(), Some("NoPendingCopyOperation"));
            [Some("success".to_owned()), Some("12".to_owned())]
        }
    };
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let r = send(
        &http,
        "HEAD",
        &format!("{open}/dst/aborted"),
        &[],
        Vec::new(),
    )
    .await;
    let state = ["x-ms-copy-status", "content-length"].map(|n| header(&r, n));
    assert_eq!(state, expected);
    let r = common::put(&http, &abort, &abort_copy).await;
    assert_eq!(code(&r).as_deref(), Some("NoPendingCopyOperation"));
    // A source gone: failed, saying why.
    let gone = format!("{origin}/src/none");
    let r = copy_blob(&http, &format!("{open}/dst/failed"), &gone, &[]).await;
    assert_eq!(header(&r, "x-ms-copy-status").as_deref(), Some("pending"));
    let r = finished(&http, &format!("{open}/dst/failed")).await;
    assert_eq!(header(&r, "x-ms-copy-status").as_deref(), Some("failed"));
    let why = header(&r, "x-ms-copy-status-description").unwrap_or_default();
    assert!(why.contains("404"), "{why}");
    // Put Block From URL with a range, then the list.
    let range = [
        ("x-ms-copy-source", source.as_str()),
        ("x-ms-source-range", "bytes=0-4"),
    ];
    let url = format!("{open}/dst/blocks?comp=block&blockid=YQ==");
    assert_eq!(common::put(&http, &url, &range).await.status(), 201);
    let list = "<BlockList><Latest>YQ==</Latest></BlockList>";
    let url = format!("{open}/dst/blocks?comp=blocklist");
    assert_eq!(send(&http, "PUT", &url, &[], list).await.status(), 201);
    let r = common::get(&http, &format!("{open}/dst/blocks")).await;
    assert_eq!(r.text().await.unwrap(), "hello");
    // Append Block From URL, under the source's If-Match: the origin evaluates it.
    let log = format!("{open}/dst/log");
    let append = [("x-ms-blob-type", "AppendBlob")];
    assert_eq!(common::put(&http, &log, &append).await.status(), 201);
    let url = format!("{log}?comp=appendblock");
    for (tag, status, expected) in [
        ("\"other\"", 412, Some("SourceConditionNotMet")),
        (source_tag.as_str(), 201, None),
    ] {
        let conditional = [
            ("x-ms-copy-source", source.as_str()),
            ("x-ms-source-range", "bytes=7-11"),
            ("x-ms-source-if-match", tag),
        ];
        let r = common::put(&http, &url, &conditional).await;
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (status, expected)
        );
    }
    assert_eq!(
        common::get(&http, &log).await.text().await.unwrap(),
        "world"
    );

    // What the origin answers that is not the blob; what cannot be evaluated there; what is
    // larger than this server takes: refused, nothing written.
    let missing = format!("{origin}/src/missing");
    let refusals: [Refusal<'_>; 3] = [
        (
            &[("x-ms-copy-source", missing.as_str())],
            403,
            "CannotVerifyCopySource",
        ),
        (
            &[
                ("x-ms-copy-source", source.as_str()),
                ("x-ms-source-if-tags", "\"a\" = 'b'"),
            ],
            400,
            "UnsupportedHeader",
        ),
        (
            &[(
                "x-ms-copy-source",
                "http://169.254.169.254/latest/meta-data",
            )],
            403,
            "CannotVerifyCopySource",
        ),
    ];
    for (headers, status, expected) in refusals {
        let r = common::put(&http, &format!("{open}/dst/refused"), headers).await;
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (status, Some(expected)),
            "{headers:?}"
        );
    }
    let big = vec![b'x'; 65537];
    let r = send(
        &http,
        "PUT",
        &format!("{origin}/src/big"),
        &[("x-ms-blob-type", "BlockBlob")],
        big,
    )
    .await;
    assert_eq!(r.status(), 201);
    let too_big = [("x-ms-copy-source", format!("{origin}/src/big"))];
    let too_big: Vec<(&str, &str)> = too_big.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let r = common::put(&http, &format!("{open}/dst/refused"), &too_big).await;
    assert_eq!(refusal(&r), (413, "RequestBodyTooLarge".into()));
    let r = common::get(&http, &format!("{open}/dst/refused")).await;
    assert_eq!(r.status(), 404, "nothing refused was written");
}
