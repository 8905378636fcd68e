//! Page blobs, container soft delete and a container's own protection through two instances of
//! one fleet (over Redis, over nothing but a bucket): what each backend must keep alike for the
//! rules of the blob front, which live once, to hold.

use std::time::Duration;

use super::{get, send};

/// Sixteen writers, half through each instance, each its own page of one page blob: every page
/// lands; one clear through A and the ranges through B agree. Then, with deleted containers
/// kept (enabled through A, in force through B within a second), the container deleted
/// through B is listed as deleted through A, restored through A, and its page blob reads
/// through B as it was.
pub async fn pages_and_kept_containers(http: &reqwest::Client, a: &str, b: &str) {
    container_protection(http, a, b).await;
    const WRITERS: usize = 16;
    super::create_container(http, a, "disks").await;
    let size = (WRITERS * 512).to_string();
    let page_blob = [
        ("x-ms-blob-type", "PageBlob"),
        ("x-ms-blob-content-length", size.as_str()),
    ];
    let r = send(
        http,
        "PUT",
        &format!("{b}/disks/d.vhd"),
        &page_blob,
        Vec::new(),
    )
    .await;
    assert_eq!(r.status(), 201);
    let writers: Vec<_> = (0..WRITERS)
        .map(|n| {
            let (http, base) = (http.clone(), [a, b][n % 2].to_owned());
            tokio::spawn(async move {
                let range = format!("bytes={}-{}", n * 512, n * 512 + 511);
                let headers = [
                    ("x-ms-page-write", "update"),
                    ("x-ms-range", range.as_str()),
                ];
                let url = format!("{base}/disks/d.vhd?comp=page");
                send(&http, "PUT", &url, &headers, vec![n as u8 + 1; 512])
                    .await
                    .status()
            })
        })
        .collect();
    for writer in writers {
        assert_eq!(writer.await.unwrap(), 201);
    }
    let clear = [("x-ms-page-write", "clear"), ("x-ms-range", "bytes=0-511")];
    let url = format!("{a}/disks/d.vhd?comp=page");
    assert_eq!(
        send(http, "PUT", &url, &clear, Vec::new()).await.status(),
        201
    );
    let ranges = get(http, &format!("{b}/disks/d.vhd?comp=pagelist")).await;
    let end = WRITERS * 512 - 1;
    assert!(
        (ranges.text().await.unwrap()).contains(&format!(
            "<PageRange><Start>512</Start><End>{end}</End></PageRange>"
        )),
        "every page but the cleared one"
    );
    let body = get(http, &format!("{a}/disks/d.vhd"))
        .await
        .bytes()
        .await
        .unwrap();
    for n in 0..WRITERS {
        let expected = if n == 0 { 0 } else { n as u8 + 1 };
        assert!(
            body[n * 512..(n + 1) * 512].iter().all(|b| *b == expected),
            "page {n}"
        );
    }

    let on = "<StorageServiceProperties><ContainerDeleteRetentionPolicy><Enabled>true</Enabled>\
              <Days>2</Days></ContainerDeleteRetentionPolicy></StorageServiceProperties>";
    let url = format!("{a}/?restype=service&comp=properties");
    assert_eq!(send(http, "PUT", &url, &[], on).await.status(), 202);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let url = format!("{b}/disks?restype=container");
    assert_eq!(
        send(http, "DELETE", &url, &[], Vec::new()).await.status(),
        202
    );
    let r = get(http, &format!("{a}/disks/d.vhd")).await;
    assert_eq!(r.status(), 404);
    let listed = get(http, &format!("{a}/?comp=list&include=deleted")).await;
    let xml = listed.text().await.unwrap();
    let version = xml
        .split_once("<Name>disks</Name><Deleted>true</Deleted><Version>")
        .and_then(|(_, rest)| rest.split_once('<'))
        .map(|(version, _)| version.to_owned())
        .unwrap_or_else(|| panic!("kept and listed: {xml}"));
    let restore = [
        ("x-ms-deleted-container-name", "disks"),
        ("x-ms-deleted-container-version", version.as_str()),
    ];
    let url = format!("{a}/disks?restype=container&comp=undelete");
    assert_eq!(
        send(http, "PUT", &url, &restore, Vec::new()).await.status(),
        201
    );
    let again = get(http, &format!("{b}/disks/d.vhd"))
        .await
        .bytes()
        .await
        .unwrap();
    assert_eq!(again, body, "restored as it was");
    let off = "<StorageServiceProperties><ContainerDeleteRetentionPolicy><Enabled>false</Enabled>\
               </ContainerDeleteRetentionPolicy></StorageServiceProperties>";
    let url = format!("{b}/?restype=service&comp=properties");
    assert_eq!(send(http, "PUT", &url, &[], off).await.status(), 202);
}

/// The change feed through two instances: kept (enabled through A, in force through B within a
/// second), sixteen writers, half through each instance, each its own blob, and eight racing
/// through both on one blob with the ETag they read; both instances publish at once, every
/// second. Each write that landed is in the feed once, and nothing else is.
pub async fn change_feed_once(http: &reqwest::Client, a: &str, b: &str) {
    const WRITERS: usize = 16;
    let on = "<StorageServiceProperties><ChangeFeed><Enabled>true</Enabled></ChangeFeed>\
              </StorageServiceProperties>";
    let url = format!("{a}/?restype=service&comp=properties");
    assert_eq!(send(http, "PUT", &url, &[], on).await.status(), 202);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    super::create_container(http, a, "fed").await;
    let r = send(http, "PUT", &format!("{a}/fed/hot"), &[], "0").await;
    assert_eq!(r.status(), 201);
    let etag = r.headers()["etag"].to_str().unwrap().to_owned();
    let writers: Vec<_> = (0..WRITERS)
        .map(|n| {
            let (http, base, etag) = (http.clone(), [a, b][n % 2].to_owned(), etag.clone());
            tokio::spawn(async move {
                let own = send(&http, "PUT", &format!("{base}/fed/w{n:02}"), &[], "x").await;
                assert_eq!(own.status(), 201);
                if n < 8 {
                    let hot = format!("{base}/fed/hot");
                    let r = send(&http, "PUT", &hot, &[("if-match", &etag)], "y").await;
                    return r.status() == 201;
                }
                false
            })
        })
        .collect();
    let mut landed = 0;
    for writer in writers {
        landed += usize::from(writer.await.unwrap());
    }
    assert_eq!(landed, 1, "one of the racing writes lands");
    // Each blob's `BlobCreated` records: a subject, then the event type (its length first).
    let count = |feed: &[u8], blob: &str| {
        let needle = format!("/fed/blobs/{blob}\x16BlobCreated");
        feed.windows(needle.len())
            .filter(|w| *w == needle.as_bytes())
            .count()
    };
    let want = |feed: &[u8]| {
        count(feed, "hot") == 2 && (0..WRITERS).all(|n| count(feed, &format!("w{n:02}")) == 1)
    };
    let mut feed = Vec::new();
    for _ in 0..40 {
        feed = read_feed(http, b).await;
        if want(&feed) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(want(&feed), "every write once: hot {}", count(&feed, "hot"));
    // Passes go on at both instances: still once.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(want(&read_feed(http, a).await), "published once");
    let off = "<StorageServiceProperties><ChangeFeed><Enabled>false</Enabled></ChangeFeed>\
               </StorageServiceProperties>";
    let url = format!("{b}/?restype=service&comp=properties");
    assert_eq!(send(http, "PUT", &url, &[], off).await.status(), 202);
}

/// Every chunk of the feed, one after the other, read through `base`.
async fn read_feed(http: &reqwest::Client, base: &str) -> Vec<u8> {
    let list = get(
        http,
        &format!("{base}/$blobchangefeed?restype=container&comp=list&prefix=log/"),
    )
    .await;
    assert_eq!(list.status(), 200);
    let xml = list.text().await.unwrap();
    let mut feed = Vec::new();
    for name in xml
        .split("<Name>")
        .skip(1)
        .filter_map(|n| n.split_once('<'))
    {
        let chunk = get(http, &format!("{base}/$blobchangefeed/{}", name.0)).await;
        feed.extend_from_slice(&chunk.bytes().await.unwrap());
    }
    feed
}

/// The checks of `tests/sdk/patterns.py` for data protection (index tags, snapshots, versions,
/// soft delete of blobs and containers, the change feed, immutability, copies from a URL, page
/// blobs), with the Python SDK, through the instance at `base` (its account's Blob endpoint).
pub async fn python_sdk_checks(base: &str) {
    const CHECKS: &str = "index tags,find_blobs_by_tags,snapshots,versions,soft delete,\
                          container soft delete,change feed,immutability,stage_block_from_url,\
                          page blobs";
    let connection = format!(
        "DefaultEndpointsProtocol=http;AccountName={};AccountKey={};BlobEndpoint={base}",
        super::ACCOUNT,
        ifmatch_azure::DEV_KEY
    );
    tokio::task::spawn_blocking(move || {
        let only = std::ffi::OsStr::new(CHECKS);
        let tally = "python sdk: 10 passed, 0 failed";
        super::python_script_with(
            "patterns.py",
            &[connection],
            &[("IFMATCH_ONLY", only)],
            tally,
        );
    })
    .await
    .unwrap();
}

/// A container's legal hold and retention policy set through the management API of A hold
/// through B at once, and a hold cleared through B frees the blob through A.
async fn container_protection(http: &reqwest::Client, a: &str, b: &str) {
    super::create_container(http, a, "held").await;
    let blob = |base: &str| format!("{base}/held/b");
    assert_eq!(
        send(
            http,
            "PUT",
            &blob(a),
            &[("x-ms-blob-type", "BlockBlob")],
            "kept"
        )
        .await
        .status(),
        201
    );
    let manage = |base: &str, what: &str| {
        let (origin, account) = base.rsplit_once('/').expect("a base names its account");
        format!(
            "{origin}/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/\
             storageAccounts/{account}/blobServices/default/containers/held{what}\
             ?api-version=2023-05-01"
        )
    };
    let tags = r#"{"tags":["case7"]}"#;
    let r = send(http, "POST", &manage(a, "/setLegalHold"), &[], tags).await;
    assert_eq!(r.status(), 200);
    let r = send(http, "DELETE", &blob(b), &[], Vec::new()).await;
    assert_eq!(r.status(), 409, "held through A, refused through B");
    let r = send(http, "POST", &manage(b, "/clearLegalHold"), &[], tags).await;
    assert_eq!(r.status(), 200);
    let policy = r#"{"properties":{"immutabilityPeriodSinceCreationInDays":1}}"#;
    let r = send(
        http,
        "PUT",
        &manage(b, "/immutabilityPolicies/default"),
        &[],
        policy,
    )
    .await;
    assert_eq!(r.status(), 200);
    let over = [("x-ms-blob-type", "BlockBlob")];
    let r = send(http, "PUT", &blob(a), &over, "over").await;
    assert_eq!(r.status(), 409, "a policy through B, refused through A");
    assert_eq!(get(http, &blob(a)).await.text().await.unwrap(), "kept");
}
