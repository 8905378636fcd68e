//! Immutability over the front (memory backend, no socket): legal holds and time-based
//! retention policies on a blob or a version, set at creation or after; while in force no write
//! nor delete of the blob lands, whatever the caller's key, nor does its container's delete; a
//! locked policy is only extended; a container delete racing a hold never takes a held blob.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use common::{Server, code, header};

/// The test clock's start (`ManualEnv`), plus `seconds`, as an HTTP date.
fn date(seconds: u64) -> String {
    let at = UNIX_EPOCH + Duration::from_secs(1_700_000_000 + seconds);
    let value = ifmatch_core::date::date_header_value(at.into());
    value.to_str().unwrap().to_owned()
}

/// Every way of changing `/box/b` answers `code`; reads, tags and snapshots are served.
async fn refused_all(s: &Server, want: &str) {
    let tags = "<?xml version=\"1.0\" encoding=\"utf-8\"?><Tags><TagSet /></Tags>";
    let writes = [
        s.put("/box/b", &[], "new").await,
        s.put("/box/b?comp=metadata", &[("x-ms-meta-k", "v")], "")
            .await,
        s.put("/box/b?comp=properties", &[], "").await,
        s.delete("/box/b", &[]).await,
        s.delete("/box?restype=container", &[]).await,
    ];
    for r in writes {
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (409, Some(want))
        );
    }
    assert_eq!(s.read_text("/box/b").await, "kept");
    assert_eq!(s.put("/box/b?comp=tags", &[], tags).await.status(), 204);
    assert_eq!(s.put("/box/b?comp=snapshot", &[], "").await.status(), 201);
}

#[tokio::test]
async fn a_legal_hold_keeps_a_blob_as_it_is_until_cleared() {
    let s = Server::with_container("box").await;
    let etag = s.put_blob("/box/b", b"kept").await;
    let r = s
        .put("/box/b?comp=legalhold", &[("x-ms-legal-hold", "true")], "")
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ms-legal-hold").as_deref(), Some("true"));
    let r = s.head("/box/b", &[]).await;
    assert_eq!(header(&r, "x-ms-legal-hold").as_deref(), Some("true"));
    assert_eq!(
        header(&r, "etag"),
        Some(etag),
        "a hold is not a change of the blob"
    );
    refused_all(&s, "BlobImmutableDueToLegalHold").await;
    for bad in [None, Some("maybe")] {
        let headers: Vec<(&str, &str)> = bad.iter().map(|v| ("x-ms-legal-hold", *v)).collect();
        let r = s.put("/box/b?comp=legalhold", &headers, "").await;
        assert_eq!(r.status(), 400, "{bad:?}");
    }
    let r = s
        .put("/box/b?comp=legalhold", &[("x-ms-legal-hold", "false")], "")
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        s.delete("/box/b", &[("x-ms-delete-snapshots", "include")])
            .await
            .status(),
        202
    );
}

#[tokio::test]
async fn a_policy_holds_until_its_date_and_a_locked_one_is_only_extended() {
    let s = Server::with_container("box").await;
    s.put_blob("/box/b", b"kept").await;
    let day = date(86_400);
    let policy = |until: &str, mode: &str| {
        let (s, until, mode) = (&s, until.to_owned(), mode.to_owned());
        async move {
            let headers = [
                ("x-ms-immutability-policy-until-date", until.as_str()),
                ("x-ms-immutability-policy-mode", mode.as_str()),
            ];
            s.put("/box/b?comp=immutabilityPolicies", &headers, "")
                .await
        }
    };
    let r = policy(&day, "Unlocked").await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "x-ms-immutability-policy-mode").as_deref(),
        Some("Unlocked")
    );
    assert_eq!(
        header(&r, "x-ms-immutability-policy-until-date"),
        Some(day.clone())
    );
    refused_all(&s, "BlobImmutableDueToPolicy").await;
    // Unlocked: removed, and the blob may change again.
    assert_eq!(
        s.delete("/box/b?comp=immutabilityPolicies", &[])
            .await
            .status(),
        200
    );
    assert_eq!(s.put("/box/b?comp=metadata", &[], "").await.status(), 200);
    // Locked: extended only, never shortened, unlocked or removed.
    assert_eq!(policy(&day, "Locked").await.status(), 200);
    for (until, mode) in [(date(3600), "Locked"), (date(2 * 86_400), "Unlocked")] {
        let r = policy(&until, mode).await;
        assert_eq!(
            code(&r).as_deref(),
            Some("BlobImmutableDueToPolicy"),
            "{until} {mode}"
        );
    }
    let r = s.delete("/box/b?comp=immutabilityPolicies", &[]).await;
    assert_eq!(code(&r).as_deref(), Some("BlobImmutableDueToPolicy"));
    assert_eq!(policy(&date(2 * 86_400), "Locked").await.status(), 200);
    // What is not a policy.
    for (until, mode) in [
        (date(0), "Locked"),
        ("yesterday".to_owned(), "Locked"),
        (day.clone(), "Forever"),
    ] {
        assert_eq!(policy(&until, mode).await.status(), 400, "{until} {mode}");
    }
    s.advance(Duration::from_secs(2 * 86_400));
    assert_eq!(
        s.delete("/box/b", &[("x-ms-delete-snapshots", "include")])
            .await
            .status(),
        202,
        "over"
    );
}

/// Put Blob's `x-ms-immutability-policy-*` and `x-ms-legal-hold` protect the blob it makes.
#[tokio::test]
async fn a_blob_is_protected_from_its_creation() {
    let s = Server::with_container("box").await;
    let until = date(60);
    let headers = [
        ("x-ms-immutability-policy-until-date", until.as_str()),
        ("x-ms-immutability-policy-mode", "Locked"),
    ];
    assert_eq!(s.put("/box/b", &headers, "kept").await.status(), 201);
    let r = s.head("/box/b", &[]).await;
    assert_eq!(
        header(&r, "x-ms-immutability-policy-mode").as_deref(),
        Some("Locked")
    );
    refused_all(&s, "BlobImmutableDueToPolicy").await;
    assert_eq!(
        s.put("/box/h", &[("x-ms-legal-hold", "true")], "x")
            .await
            .status(),
        201
    );
    assert_eq!(
        code(&s.delete("/box/h", &[]).await).as_deref(),
        Some("BlobImmutableDueToLegalHold")
    );
    let r = s
        .put(
            "/box/c",
            &[("x-ms-immutability-policy-mode", "Locked")],
            "x",
        )
        .await;
    assert_eq!(r.status(), 400, "a mode without its date");
    assert_eq!(s.head("/box/c", &[]).await.status(), 404);
}

/// A version under a hold stays, while its blob goes on changing.
#[tokio::test]
async fn a_version_is_held_on_its_own() {
    let s = Server::start().await;
    let on = "<StorageServiceProperties><IsVersioningEnabled>true</IsVersioningEnabled></StorageServiceProperties>";
    s.set_properties(on).await;
    s.create_container("box").await;
    let first = header(&s.put("/box/b", &[], "one").await, "x-ms-version-id").unwrap();
    assert_eq!(s.put("/box/b", &[], "two").await.status(), 201);
    let held = format!("/box/b?versionid={first}");
    let r = s
        .put(
            &format!("{held}&comp=legalhold"),
            &[("x-ms-legal-hold", "true")],
            "",
        )
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        code(&s.delete(&held, &[]).await).as_deref(),
        Some("BlobImmutableDueToLegalHold")
    );
    assert_eq!(
        s.put("/box/b", &[], "three").await.status(),
        201,
        "the blob is not held"
    );
    assert_eq!(s.read_text(&held).await, "one");
}

/// A container delete and a legal hold at once, again and again: when the hold was answered
/// 200, its blob and container are there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_delete_never_takes_a_blob_held_meanwhile() {
    let s = Arc::new(Server::start().await);
    let (mut held, mut deleted) = (0, 0);
    for n in 0..60 {
        let container = format!("box{n}");
        s.create_container(&container).await;
        let path = format!("/{container}/b");
        s.put_blob(&path, b"x").await;
        let (a, b) = (s.clone(), s.clone());
        let (p1, c2) = (path.clone(), container.clone());
        let hold = tokio::spawn(async move {
            a.put(
                &format!("{p1}?comp=legalhold"),
                &[("x-ms-legal-hold", "true")],
                "",
            )
            .await
        });
        let delete =
            tokio::spawn(async move { b.delete(&format!("/{c2}?restype=container"), &[]).await });
        let (hold, delete) = (hold.await.unwrap(), delete.await.unwrap());
        if hold.status() == 200 {
            held += 1;
            assert_eq!(delete.status(), 409, "a held blob's container deleted");
            assert_eq!(s.head(&path, &[]).await.status(), 200);
        } else {
            deleted += 1;
            assert_eq!(delete.status(), 202);
        }
    }
    eprintln!("{held} holds landed first, {deleted} deletes");
}
