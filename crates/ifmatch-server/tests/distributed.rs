//! The distributed mode: two `ifmatch serve --backend redis://...` processes on one data
//! directory and one real redis-server.

use crate::common;

use common::client;
use std::time::{Duration, Instant};

use common::{Ifmatch, header};
use ifmatch_redis::testing::RedisServer;
use sha2::{Digest, Sha256};

/// An instance sharing records through Redis, bytes under `data`.
fn shared(data: &std::path::Path, backend: &str) -> Ifmatch {
    Ifmatch::start([
        std::ffi::OsStr::new("serve"),
        "--data".as_ref(),
        data.as_os_str(),
        "--backend".as_ref(),
        backend.as_ref(),
    ])
}

/// An instance with the embedded default: everything in its data directory.
fn embedded(data: &std::path::Path) -> Ifmatch {
    Ifmatch::start([
        std::ffi::OsStr::new("serve"),
        "--data".as_ref(),
        data.as_os_str(),
    ])
}

/// Two instances over one Redis and one data directory, a client, and container `container`
/// made through the first (the server and the directory are kept for the test's length).
async fn pair(
    container: &str,
) -> (
    RedisServer,
    tempfile::TempDir,
    Ifmatch,
    Ifmatch,
    reqwest::Client,
) {
    let redis = RedisServer::start();
    let data = tempfile::tempdir().unwrap();
    let a = shared(data.path(), &redis.url());
    let b = shared(data.path(), &redis.url());
    let http = client();
    common::create_container(&http, &a.base, container).await;
    (redis, data, a, b, http)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_thirty_two_clients_five_hundred_increments_none_lost() {
    const CLIENTS: usize = 32;
    const INCREMENTS: usize = 500;
    let (_redis, _data, a, b, http) = pair("cnt").await;
    let r = common::send(&http, "PUT", &format!("{}/cnt/counter", b.base), &[], "0").await;
    assert_eq!(r.status(), 201, "the container made through A is seen by B");

    let bases = [a.base.as_str(), b.base.as_str()];
    let started = Instant::now();
    let conflicts = common::count_across(&http, bases, "/cnt/counter", CLIENTS, INCREMENTS).await;
    let elapsed = started.elapsed();
    for base in &bases {
        let r = common::get(&http, &format!("{base}/cnt/counter")).await;
        let tag = header(&r, "etag").unwrap();
        let body = r.text().await.unwrap();
        assert_eq!(body, INCREMENTS.to_string(), "every increment counted once");
        assert_eq!(tag, format!("\"{}\"", hex::encode(Sha256::digest(&body))));
    }
    assert!(conflicts > 0, "the test did not contend");
    eprintln!(
        "{INCREMENTS} increments by {CLIENTS} clients over two instances in {elapsed:?} \
         ({:.0} commits/s), {conflicts} answered 412 and retried",
        INCREMENTS as f64 / elapsed.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_taken_through_one_instance_holds_on_the_other() {
    const LEASE: &str = "6b0c7a47-0f6c-4b36-9d0b-7f6f1f8a2c11";
    let redis = RedisServer::start();
    let data = tempfile::tempdir().unwrap();
    let a = shared(data.path(), &redis.url());
    let b = shared(data.path(), &redis.url());
    let http = client();
    let send = |method: &'static str,
                url: String,
                headers: &'static [(&'static str, &'static str)],
                body: &'static str| {
        let http = http.clone();
        async move { common::send(&http, method, &url, headers, body).await }
    };
    let r = send("PUT", format!("{}/box?restype=container", a.base), &[], "").await;
    assert_eq!(r.status(), 201);
    let r = send("PUT", format!("{}/box/doc", a.base), &[], "v1").await;
    assert_eq!(r.status(), 201);
    const ACQUIRE: [(&str, &str); 3] = [
        ("x-ms-lease-action", "acquire"),
        ("x-ms-lease-duration", "-1"),
        ("x-ms-proposed-lease-id", LEASE),
    ];
    let r = send(
        "PUT",
        format!("{}/box/doc?comp=lease", a.base),
        &ACQUIRE,
        "",
    )
    .await;
    assert_eq!(r.status(), 201);

    let r = send("PUT", format!("{}/box/doc", b.base), &[], "v2").await;
    assert_eq!(r.status(), 412);
    assert_eq!(
        header(&r, "x-ms-error-code").as_deref(),
        Some("LeaseIdMissing")
    );
    let r = send("DELETE", format!("{}/box/doc", b.base), &[], "").await;
    assert_eq!(r.status(), 412);
    let r = send(
        "PUT",
        format!("{}/box/doc?comp=lease", b.base),
        &[ACQUIRE[0], ACQUIRE[1]],
        "",
    )
    .await;
    assert_eq!(r.status(), 409, "already leased, seen through B");
    assert_eq!(
        header(&r, "x-ms-error-code").as_deref(),
        Some("LeaseAlreadyPresent")
    );

    let r = send(
        "PUT",
        format!("{}/box/doc", b.base),
        &[("x-ms-lease-id", LEASE)],
        "v2",
    )
    .await;
    assert_eq!(r.status(), 201, "with the id, through B");
    let r = common::get(&http, &format!("{}/box/doc", a.base)).await;
    assert_eq!(r.text().await.unwrap(), "v2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_and_restarted_fails_cleanly_then_recovers() {
    let mut redis = RedisServer::start();
    let data = tempfile::tempdir().unwrap();
    let a = shared(data.path(), &redis.url());
    let http = client();
    common::create_container(&http, &a.base, "fault").await;
    let doc = format!("{}/fault/doc", a.base);
    let put = |fields: &'static [(&'static str, &'static str)], body: &'static str| {
        common::send(&http, "PUT", &doc, fields, body)
    };
    let r = put(&[], "before").await;
    assert_eq!(r.status(), 201);
    let before = header(&r, "etag").unwrap();

    redis.kill();
    let started = Instant::now();
    let r = put(&[], "during").await;
    assert_eq!(r.status(), 503);
    assert_eq!(header(&r, "x-ms-error-code").as_deref(), Some("ServerBusy"));
    assert_eq!(common::get(&http, &doc).await.status(), 503);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "{took:?}");

    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    let r = loop {
        let r = common::get(&http, &doc).await;
        if r.status() != 503 || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(r.status(), 200, "service resumed by itself");
    assert_eq!(header(&r, "etag").as_deref(), Some(before.as_str()));
    assert_eq!(
        r.text().await.unwrap(),
        "before",
        "nothing written half-way"
    );
    let condition = [("if-match", before.as_str())];
    let r = common::send(&http, "PUT", &doc, &condition, "after").await;
    assert_eq!(r.status(), 201);
}

/// The time one conditional write takes, uncontended, through an embedded instance and through
/// one with Redis, measured alternately in one run (the machine is noisy): the figure is the
/// difference at p50 and p99. Asserts only that every write lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_write_latency_embedded_vs_redis() {
    const ROUNDS: usize = 10;
    const EACH: usize = 50;
    let redis = RedisServer::start();
    let (embedded_data, shared_data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let embedded = embedded(embedded_data.path());
    let shared = shared(shared_data.path(), &redis.url());
    let http = client();
    let mut tags = Vec::new();
    for base in [&embedded.base, &shared.base] {
        common::create_container(&http, base, "lat").await;
        let r = common::send(&http, "PUT", &format!("{base}/lat/b"), &[], "0").await;
        assert_eq!(r.status(), 201);
        tags.push(header(&r, "etag").unwrap());
    }
    let mut times = [Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        for (i, base) in [&embedded.base, &shared.base].into_iter().enumerate() {
            let url = format!("{base}/lat/b");
            for n in 0..EACH {
                let body = format!("{round}:{n}");
                let started = Instant::now();
                let r = common::send(&http, "PUT", &url, &[("if-match", &tags[i])], body).await;
                times[i].push(started.elapsed());
                assert_eq!(r.status(), 201);
                tags[i] = header(&r, "etag").unwrap();
            }
        }
    }
    let (e50, e99) = common::p50_p99(&mut times[0]);
    let (r50, r99) = common::p50_p99(&mut times[1]);
    eprintln!(
        "conditional write, {} each: embedded p50 {e50:.3} ms p99 {e99:.3} ms; Redis p50 \
         {r50:.3} ms p99 {r99:.3} ms; added p50 {:+.3} ms p99 {:+.3} ms",
        ROUNDS * EACH,
        r50 - e50,
        r99 - e99
    );
}

/// Orphans in the shared directory (an instance died between staging and committing) are
/// swept by the instances themselves, with no coordination, and no live object goes with them,
/// however many instances sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_sweep_shared_orphans_and_nothing_live() {
    let redis = RedisServer::start();
    let data = tempfile::tempdir().unwrap();
    let sweeping = |data: &std::path::Path| {
        let mut args = vec!["serve".to_owned(), "--data".to_owned()];
        args.push(data.display().to_string());
        args.extend(["--backend".to_owned(), redis.url()]);
        args.extend(["--orphan-age", "1", "--sweep-every", "0.3"].map(str::to_owned));
        Ifmatch::start(args)
    };
    let (a, b) = (sweeping(data.path()), sweeping(data.path()));
    let http = client();
    common::create_container(&http, &a.base, "swp").await;
    for i in 0..20 {
        let base = if i % 2 == 0 { &a.base } else { &b.base };
        let r = common::send(
            &http,
            "PUT",
            &format!("{base}/swp/b{i}"),
            &[],
            format!("v{i}"),
        )
        .await;
        assert_eq!(r.status(), 201);
    }
    let objects = data.path().join("objects");
    let orphan = objects.join("0000000000000000000000000000abcd");
    std::fs::write(&orphan, "staged by an instance that died").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while orphan.exists() {
        assert!(
            Instant::now() < deadline,
            "the shared orphan was never swept"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let both sweep a few more times over objects now older than the orphan age.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..20 {
        for base in [&a.base, &b.base] {
            let r = common::get(&http, &format!("{base}/swp/b{i}")).await;
            assert_eq!(r.text().await.unwrap(), format!("v{i}"));
        }
    }
    assert_eq!(std::fs::read_dir(&objects).unwrap().count(), 20);
}

/// A Set Blob Tags body of `pairs`.
fn tag_body(pairs: &[(&str, &str)]) -> String {
    let tags: String = (pairs.iter())
        .map(|(k, v)| format!("<Tag><Key>{k}</Key><Value>{v}</Value></Tag>"))
        .collect();
    format!("<?xml version=\"1.0\" encoding=\"utf-8\"?><Tags><TagSet>{tags}</TagSet></Tags>")
}

/// `x-ms-if-tags` is evaluated against the tags of the same instant as the write it guards,
/// across two instances over Redis: eight clients take turns through a lock made of nothing
/// but a tag condition (`"owner" = 'free'` to take it, their own name to give it back), and
/// inside it add one to a counter with unconditional writes, which would lose updates if two
/// ever held it at once. Meanwhile finds over blobs whose two tags change together never name
/// a blob with tags from two different writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_condition_holds_at_the_instant_of_its_write_across_instances() {
    const CLIENTS: usize = 8;
    const TURNS: usize = 12;
    let (_redis, _data, a, b, http) = pair("box").await;
    let put = |base: &str, path: &str, tags: &str| {
        let (http, url, tags) = (http.clone(), format!("{base}{path}"), tags.to_owned());
        async move { common::send(&http, "PUT", &url, &[("x-ms-tags", &tags)], "0").await }
    };
    assert_eq!(put(&a.base, "/box/lock", "owner=free").await.status(), 201);
    assert_eq!(put(&a.base, "/box/counter", "").await.status(), 201);
    for n in 0..20 {
        let r = put(&b.base, &format!("/box/pair{n:02}"), "a=1&b=1").await;
        assert_eq!(r.status(), 201);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Flips each pair's two tags together, through either instance.
    let flipper = {
        let (http, bases, stop) = (http.clone(), [a.base.clone(), b.base.clone()], stop.clone());
        tokio::spawn(async move {
            let mut flips = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let v = (flips / 20 % 2 + 1).to_string();
                let url = format!("{}/box/pair{:02}?comp=tags", bases[flips % 2], flips % 20);
                let body = tag_body(&[("a", &v), ("b", &v)]);
                let r = common::send(&http, "PUT", &url, &[], body).await;
                assert_eq!(r.status(), 204);
                flips += 1;
            }
            flips
        })
    };
    let finder = {
        let (http, base, stop) = (http.clone(), b.base.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut finds, mut named) = (0usize, 0usize);
            let url = format!(
                "{base}/box?restype=container&comp=blobs&where=%22a%22%3D%271%27%20AND%20%22b%22%3E%3D%270%27"
            );
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let xml = common::get(&http, &url).await.text().await.unwrap();
                for blob in xml.split("<Blob>").skip(1) {
                    assert!(
                        blob.contains(
                            "<Key>a</Key><Value>1</Value></Tag><Tag><Key>b</Key><Value>1</Value>"
                        ),
                        "a blob named with tags of two writes: {blob}"
                    );
                    named += 1;
                }
                finds += 1;
            }
            (finds, named)
        })
    };
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let http = http.clone();
            let base = [a.base.clone(), b.base.clone()][i % 2].clone();
            tokio::spawn(async move {
                let (lock, counter) = (
                    format!("{base}/box/lock?comp=tags"),
                    format!("{base}/box/counter"),
                );
                let me = format!("c{i}");
                let mut refused = 0;
                for _ in 0..TURNS {
                    loop {
                        let take = [("x-ms-if-tags", "\"owner\" = 'free'")];
                        let r =
                            common::send(&http, "PUT", &lock, &take, tag_body(&[("owner", &me)]))
                                .await;
                        match r.status().as_u16() {
                            204 => break,
                            412 => refused += 1,
                            other => panic!("taking the lock: {other}"),
                        }
                        tokio::time::sleep(Duration::from_millis(3)).await;
                    }
                    let value: u64 = common::get(&http, &counter)
                        .await
                        .text()
                        .await
                        .unwrap()
                        .parse()
                        .unwrap();
                    let r =
                        common::send(&http, "PUT", &counter, &[], (value + 1).to_string()).await;
                    assert_eq!(r.status(), 201);
                    let mine = format!("\"owner\" = '{me}'");
                    let give = [("x-ms-if-tags", mine.as_str())];
                    let r =
                        common::send(&http, "PUT", &lock, &give, tag_body(&[("owner", "free")]))
                            .await;
                    assert_eq!(r.status(), 204, "{me} gave back a lock it held");
                }
                refused
            })
        })
        .collect();
    let mut refused = 0;
    for client in clients {
        refused += client.await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flips = flipper.await.unwrap();
    let (finds, named) = finder.await.unwrap();
    let r = common::get(&http, &format!("{}/box/counter", a.base)).await;
    assert_eq!(
        r.text().await.unwrap(),
        (CLIENTS * TURNS).to_string(),
        "no turn overlapped another"
    );
    assert!(refused > 0, "the lock was never contended");
    assert!(finds > 5 && named > 0, "{finds} finds named {named} blobs");
    eprintln!(
        "{} turns, {refused} refused takes; {flips} tag flips, {finds} finds naming {named} blobs",
        CLIENTS * TURNS
    );
}

/// Page blobs, deleted containers and the change feed (each write once) through two instances
/// over Redis (see `common::protection`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_blobs_kept_containers_and_the_change_feed_hold_across_instances() {
    let (_redis, _data, a, b, http) = pair("box").await;
    common::protection::pages_and_kept_containers(&http, &a.base, &b.base).await;
    common::protection::change_feed_once(&http, &a.base, &b.base).await;
}

/// The Python SDK's data protection checks through an instance over Redis (see
/// `common::protection`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdks_data_protection_checks_pass_over_redis() {
    let (_redis, _data, a, _b, _http) = pair("box").await;
    common::protection::python_sdk_checks(&a.base).await;
}

/// Versions and snapshots through two instances over Redis: versioning enabled through one
/// holds on the other within a second; eight writers overwriting one blob through both lose
/// no version; a snapshot and a delete racing through different instances never leave a
/// snapshot of a deleted blob.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_and_snapshots_hold_across_instances() {
    let (_redis, _data, a, b, http) = pair("box").await;
    let on = "<StorageServiceProperties><IsVersioningEnabled>true</IsVersioningEnabled></StorageServiceProperties>";
    let url = format!("{}/?restype=service&comp=properties", a.base);
    assert_eq!(
        common::send(&http, "PUT", &url, &[], on).await.status(),
        202
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let first = common::send(&http, "PUT", &format!("{}/box/b", b.base), &[], "first").await;
    assert!(
        header(&first, "x-ms-version-id").is_some(),
        "enabled through A, kept through B"
    );

    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (http, bases) = (http.clone(), [a.base.clone(), b.base.clone()]);
            tokio::spawn(async move {
                for n in 0..4 {
                    let url = format!("{}/box/b", bases[(w + n) % 2]);
                    let r = common::send(&http, "PUT", &url, &[], format!("w{w}-{n}")).await;
                    assert_eq!(r.status(), 201);
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let list = format!(
        "{}/box?restype=container&comp=list&include=versions",
        a.base
    );
    let xml = common::get(&http, &list).await.text().await.unwrap();
    let ids: Vec<&str> = (xml.split("<VersionId>").skip(1))
        .map(|rest| &rest[..rest.find('<').unwrap()])
        .collect();
    assert_eq!(
        ids.len(),
        33,
        "the first write and 32 more, each kept: {xml}"
    );
    let mut bodies = Vec::new();
    for id in &ids {
        let url = format!("{}/box/b?versionid={id}", b.base);
        bodies.push(common::get(&http, &url).await.text().await.unwrap());
    }
    bodies.sort();
    bodies.dedup();
    assert_eq!(bodies.len(), 33, "each write's bytes once");

    // Snapshot through one, delete through the other, at once.
    let url = format!("{}/?restype=service&comp=properties", b.base);
    let off = "<StorageServiceProperties><IsVersioningEnabled>false</IsVersioningEnabled></StorageServiceProperties>";
    assert_eq!(
        common::send(&http, "PUT", &url, &[], off).await.status(),
        202
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for n in 0..20 {
        let path = format!("/box/s{n}");
        let r = common::send(&http, "PUT", &format!("{}{path}", a.base), &[], "x").await;
        assert_eq!(r.status(), 201);
        let (h1, h2) = (http.clone(), http.clone());
        let snap_url = format!("{}{path}?comp=snapshot", a.base);
        let delete_url = format!("{}{path}", b.base);
        let snap = tokio::spawn(async move { common::send(&h1, "PUT", &snap_url, &[], "").await });
        let delete =
            tokio::spawn(async move { common::send(&h2, "DELETE", &delete_url, &[], "").await });
        let (snap, delete) = (snap.await.unwrap(), delete.await.unwrap());
        let listing = format!(
            "{}/box?restype=container&comp=list&include=snapshots&prefix=s{n}",
            b.base
        );
        let xml = common::get(&http, &listing).await.text().await.unwrap();
        let snapshots = xml.matches("<Snapshot>").count();
        match delete.status().as_u16() {
            202 => assert_eq!((snapshots, xml.matches("<Blob>").count()), (0, 0), "{xml}"),
            409 => assert_eq!((snapshots, snap.status().as_u16()), (1, 201)),
            other => panic!("delete: {other}"),
        }
    }
}
