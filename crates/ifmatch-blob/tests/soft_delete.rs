//! Soft delete over the front (memory backend, no socket): with a `DeleteRetentionPolicy`, a
//! deleted blob and its snapshots are kept, listed with `include=deleted`, brought back by
//! Undelete Blob, and gone for good once their days are over; its limits one past each refused.

use crate::common;

use std::time::Duration;

use common::{Server, code, field, header};

fn policy(days: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><StorageServiceProperties><DeleteRetentionPolicy>\
         <Enabled>true</Enabled><Days>{days}</Days></DeleteRetentionPolicy></StorageServiceProperties>"
    )
}

async fn retaining(days: u32) -> Server {
    let s = Server::start().await;
    let r = s
        .put(
            "/?restype=service&comp=properties",
            &[],
            policy(&days.to_string()),
        )
        .await;
    assert_eq!(r.status(), 202);
    s.create_container("box").await;
    s
}

/// `(name, snapshot, deleted, remaining days)` of each blob a listing names.
fn listed(xml: &str) -> Vec<(String, Option<String>, bool, Option<String>)> {
    (xml.split("<Blob>").skip(1))
        .map(|b| {
            let deleted = b.contains("<Deleted>true</Deleted>");
            let left = field(b, "RemainingRetentionDays");
            (
                field(b, "Name").unwrap(),
                field(b, "Snapshot"),
                deleted,
                left,
            )
        })
        .collect()
}

async fn list(s: &Server, include: &str) -> Vec<(String, Option<String>, bool, Option<String>)> {
    let path = format!("/box?restype=container&comp=list&include={include}");
    listed(&s.read_text(&path).await)
}

#[tokio::test]
async fn the_retention_days_are_one_to_365() {
    let s = Server::start().await;
    for days in ["0", "366", "-1", "seven"] {
        let r = s
            .put("/?restype=service&comp=properties", &[], policy(days))
            .await;
        assert_eq!(code(&r).as_deref(), Some("InvalidXmlDocument"), "{days}");
    }
    for days in ["1", "365"] {
        let r = s
            .put("/?restype=service&comp=properties", &[], policy(days))
            .await;
        assert_eq!(r.status(), 202, "{days}");
    }
}

#[tokio::test]
async fn a_deleted_blob_is_kept_listed_and_brought_back() {
    let s = retaining(7).await;
    let etag = s.put_blob("/box/b", b"bytes").await;
    let r = s.put("/box/b?comp=snapshot", &[], "").await;
    let snapshot = header(&r, "x-ms-snapshot").unwrap();
    let r = s
        .delete("/box/b", &[("x-ms-delete-snapshots", "include")])
        .await;
    assert_eq!(r.status(), 202);
    assert_eq!(s.get("/box/b", &[]).await.status(), 404);
    let at_snapshot = format!("/box/b?snapshot={snapshot}");
    assert_eq!(s.get(&at_snapshot, &[]).await.status(), 404);
    assert_eq!(list(&s, "").await, []);
    assert_eq!(list(&s, "snapshots").await, []);
    let days = Some("7".to_owned());
    assert_eq!(
        list(&s, "deleted").await,
        [("b".into(), None, true, days.clone())]
    );
    let both = list(&s, "deleted,snapshots").await;
    assert_eq!(both.len(), 2, "{both:?}");
    assert!(both.iter().all(|(_, _, deleted, _)| *deleted));
    s.advance(Duration::from_secs(2 * 86_400));
    let left = list(&s, "deleted").await;
    assert_eq!(left[0].3.as_deref(), Some("5"));

    let r = s.put("/box/b?comp=undelete", &[], "").await;
    assert_eq!(r.status(), 200);
    let r = s.get("/box/b", &[]).await;
    assert_eq!(header(&r, "etag"), Some(etag));
    assert_eq!(r.text().await.unwrap(), "bytes");
    assert_eq!(s.get(&at_snapshot, &[]).await.status(), 200);
    assert_eq!(
        list(&s, "deleted,snapshots").await.len(),
        2,
        "nothing deleted left"
    );
    assert!(list(&s, "deleted,snapshots").await.iter().all(|e| !e.2));

    // A snapshot deleted alone is kept too.
    assert_eq!(s.delete(&at_snapshot, &[]).await.status(), 202);
    assert_eq!(s.get(&at_snapshot, &[]).await.status(), 404);
    assert_eq!(
        s.delete("/box/b", &[]).await.status(),
        202,
        "no snapshot left to refuse it"
    );
    let r = s.put("/box/b?comp=undelete", &[], "").await;
    assert_eq!(r.status(), 200);
    assert_eq!(s.get(&at_snapshot, &[]).await.status(), 200);
    let r = s.put("/box/none?comp=undelete", &[], "").await;
    assert_eq!(code(&r).as_deref(), Some("BlobNotFound"));
}

/// A new blob of a deleted one's name stays; Undelete Blob brings back the deleted one only
/// when the name is free, the latest first.
#[tokio::test]
async fn undelete_never_overwrites_a_blob() {
    let s = retaining(3).await;
    s.put_blob("/box/b", b"first").await;
    assert_eq!(s.delete("/box/b", &[]).await.status(), 202);
    s.put_blob("/box/b", b"second").await;
    assert_eq!(s.put("/box/b?comp=undelete", &[], "").await.status(), 200);
    assert_eq!(s.read_text("/box/b").await, "second");
    assert_eq!(s.delete("/box/b", &[]).await.status(), 202);
    assert_eq!(list(&s, "deleted").await.len(), 2);
    assert_eq!(s.put("/box/b?comp=undelete", &[], "").await.status(), 200);
    assert_eq!(s.read_text("/box/b").await, "second");
    assert_eq!(
        list(&s, "deleted").await.len(),
        2,
        "the other deleted one stays"
    );
}

/// Past their days the sweep removes them: nothing to bring back, nothing listed.
#[tokio::test]
async fn deleted_blobs_go_for_good_after_their_days() {
    let s = retaining(1).await;
    s.put_blob("/box/b", b"x").await;
    s.put_blob("/box/keep", b"x").await;
    assert_eq!(s.delete("/box/b", &[]).await.status(), 202);
    s.advance(Duration::from_secs(86_400 + 1));
    s.sweep(Duration::from_secs(3600)).await;
    assert_eq!(
        list(&s, "deleted").await,
        [("keep".into(), None, false, None)]
    );
    let r = s.put("/box/b?comp=undelete", &[], "").await;
    assert_eq!(code(&r).as_deref(), Some("BlobNotFound"));
}
