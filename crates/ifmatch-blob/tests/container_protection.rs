//! A container's own protection, set through the management API (ARM) as Azure sets it, over
//! the front (memory backend, no socket): a time-based retention policy keeps each blob its
//! days from its change, then lets it be deleted, never overwritten; append blobs take new
//! blocks when the policy allows it; an unlocked policy is changed or removed under its etag, a
//! locked one only extended, five times; legal hold tags keep every blob and the container;
//! every limit is refused one past it, and what the API does not serve is refused by name.

use crate::common;

use std::time::Duration;

use common::{Server, code, header, refusal};

const POLICY: &str = "box/immutabilityPolicies/default";

fn policy_body(days: i64, appends: bool) -> String {
    format!(
        r#"{{"properties":{{"immutabilityPeriodSinceCreationInDays":{days},"allowProtectedAppendWrites":{appends}}}}}"#
    )
}

async fn json(reply: common::Reply) -> serde_json::Value {
    let text = reply.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The management error's status and code (`{"error": {"code"}}`).
async fn arm_refusal(reply: common::Reply) -> (u16, String) {
    let status = reply.status().as_u16();
    let body = json(reply).await;
    (
        status,
        body["error"]["code"].as_str().unwrap_or("").to_owned(),
    )
}

/// Sets a policy on `box`: its etag.
async fn set_policy(s: &Server, days: i64, appends: bool) -> String {
    let r = s
        .manage("PUT", POLICY, &[], &policy_body(days, appends))
        .await;
    assert_eq!(r.status(), 200);
    let etag = header(&r, "etag").unwrap();
    let body = json(r).await;
    assert_eq!(
        body["properties"]["immutabilityPeriodSinceCreationInDays"],
        days
    );
    assert_eq!(body["etag"], etag.as_str());
    etag
}

async fn append_blob(s: &Server, path: &str) {
    let r = s.put(path, &[("x-ms-blob-type", "AppendBlob")], "").await;
    assert_eq!(r.status(), 201);
}

#[tokio::test]
async fn a_policy_keeps_each_blob_its_days_then_lets_it_be_deleted_never_overwritten() {
    let s = Server::with_container("box").await;
    s.put_blob("/box/old", b"kept").await;
    let r = s.head("/box?restype=container", &[]).await;
    assert_eq!(
        header(&r, "x-ms-has-immutability-policy").as_deref(),
        Some("false")
    );
    set_policy(&s, 1, false).await;
    let r = s.head("/box?restype=container", &[]).await;
    assert_eq!(
        header(&r, "x-ms-has-immutability-policy").as_deref(),
        Some("true")
    );
    assert_eq!(header(&r, "x-ms-has-legal-hold").as_deref(), Some("false"));
    let listed = s.read_text("/?comp=list").await;
    assert!(
        listed.contains("<HasImmutabilityPolicy>true</HasImmutabilityPolicy>"),
        "{listed}"
    );

    // A blob is created once and read; nothing changes or deletes it.
    assert_eq!(s.put("/box/new", &[], "first").await.status(), 201);
    let policy = "BlobImmutableDueToPolicy";
    for path in ["/box/old", "/box/new"] {
        let writes = [
            s.put(path, &[], "over").await,
            s.put(
                &format!("{path}?comp=metadata"),
                &[("x-ms-meta-k", "v")],
                "",
            )
            .await,
            s.put(&format!("{path}?comp=properties"), &[], "").await,
            s.delete(path, &[]).await,
        ];
        for r in writes {
            assert_eq!(refusal(&r), (409, policy.into()), "{path}");
        }
    }
    let tags = "<?xml version=\"1.0\" encoding=\"utf-8\"?><Tags><TagSet /></Tags>";
    assert_eq!(s.put("/box/old?comp=tags", &[], tags).await.status(), 204);
    assert_eq!(s.read_text("/box/old").await, "kept");
    // The container goes only with its blobs (an unlocked policy does not keep it).
    let r = s.delete("/box?restype=container", &[]).await;
    assert_eq!(refusal(&r), (409, policy.into()));

    // A day on: deleted, still never overwritten.
    s.advance(Duration::from_secs(86_400));
    assert_eq!(
        refusal(&s.put("/box/new", &[], "over").await),
        (409, policy.into())
    );
    assert_eq!(s.delete("/box/old", &[]).await.status(), 202);
    assert_eq!(s.delete("/box/new", &[]).await.status(), 202);
    assert_eq!(s.delete("/box?restype=container", &[]).await.status(), 202);
}

#[tokio::test]
async fn append_blobs_take_new_blocks_only_when_the_policy_allows_protected_appends() {
    let s = Server::with_container("box").await;
    append_blob(&s, "/box/log").await;
    s.put_blob("/box/block", b"b").await;
    let etag = set_policy(&s, 7, true).await;
    let append = async |s: &Server, path: &str| {
        s.put(&format!("{path}?comp=appendblock"), &[], "line\n")
            .await
    };
    assert_eq!(append(&s, "/box/log").await.status(), 201);
    let sealed = s.put("/box/log?comp=seal", &[], "").await;
    assert_eq!(refusal(&sealed), (409, "BlobImmutableDueToPolicy".into()));
    let r = s.put("/box/block", &[], "over").await;
    assert_eq!(refusal(&r), (409, "BlobImmutableDueToPolicy".into()));
    // Without protected appends, an append is a change like any other.
    let r = s
        .manage(
            "PUT",
            POLICY,
            &[("if-match", &etag)],
            &policy_body(7, false),
        )
        .await;
    assert_eq!(r.status(), 200);
    let r = append(&s, "/box/log").await;
    assert_eq!(refusal(&r), (409, "BlobImmutableDueToPolicy".into()));
    assert_eq!(s.read_text("/box/log").await, "line\n");
}

#[tokio::test]
async fn an_unlocked_policy_changes_under_its_etag_a_locked_one_is_only_extended_five_times() {
    let s = Server::with_container("box").await;
    let r = s.manage("GET", POLICY, &[], "").await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        json(r).await["properties"]["immutabilityPeriodSinceCreationInDays"],
        0
    );
    let first = set_policy(&s, 3, false).await;
    let second = set_policy(&s, 2, false).await;
    assert_ne!(first, second, "each change its own etag");
    // Shortened while unlocked, and removed under its etag only.
    let stale = [("if-match", first.as_str())];
    let r = s
        .manage("PUT", POLICY, &stale, &policy_body(5, false))
        .await;
    assert_eq!(
        arm_refusal(r).await,
        (412, "ContainerImmutabilityPolicyFailure".into())
    );
    let r = s.manage("DELETE", POLICY, &[], "").await;
    assert_eq!(arm_refusal(r).await, (400, "InvalidParameter".into()));
    let r = s.manage("DELETE", POLICY, &stale, "").await;
    assert_eq!(
        arm_refusal(r).await,
        (412, "ContainerImmutabilityPolicyFailure".into())
    );
    let r = s
        .manage("DELETE", POLICY, &[("if-match", &second)], "")
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(s.put("/box/b", &[], "free").await.status(), 201);
    assert_eq!(s.put("/box/b", &[], "again").await.status(), 201);

    // Locked: neither replaced nor removed, and its container stays.
    let etag = set_policy(&s, 1, false).await;
    let lock = format!("{POLICY}/lock");
    let r = s.manage("POST", &lock, &[("if-match", &etag)], "").await;
    assert_eq!(r.status(), 200);
    let mut etag = header(&r, "etag").unwrap();
    assert_eq!(json(r).await["properties"]["state"], "Locked");
    let r = s.manage("POST", &lock, &[("if-match", &etag)], "").await;
    assert_eq!(arm_refusal(r).await, (409, "OperationNotAllowed".into()));
    let r = s.manage("PUT", POLICY, &[], &policy_body(9, false)).await;
    assert_eq!(
        arm_refusal(r).await,
        (409, "ContainerImmutabilityPolicyLocked".into())
    );
    let r = s.manage("DELETE", POLICY, &[("if-match", &etag)], "").await;
    assert_eq!(
        arm_refusal(r).await,
        (409, "ContainerImmutabilityPolicyLocked".into())
    );
    let r = s.delete("/box?restype=container", &[]).await;
    assert_eq!(
        refusal(&r),
        (409, "ContainerImmutabilityPolicyLocked".into())
    );

    let extend = format!("{POLICY}/extend");
    let extended = |days, etag: &str| {
        let etag = etag.to_owned();
        let (s, extend) = (&s, &extend);
        async move {
            let condition = [("if-match", etag.as_str())];
            s.manage("POST", extend, &condition, &policy_body(days, false))
                .await
        }
    };
    let r = extended(0, &etag).await;
    assert_eq!(
        arm_refusal(r).await,
        (400, "InvalidParameter".into()),
        "shorter"
    );
    for days in 2..=6 {
        let r = extended(days, &etag).await;
        assert_eq!(r.status(), 200, "extension {days}");
        etag = header(&r, "etag").unwrap();
    }
    let r = extended(7, &etag).await;
    assert_eq!(
        arm_refusal(r).await,
        (409, "OperationNotAllowed".into()),
        "a sixth"
    );
    let r = s.manage("GET", "box", &[], "").await;
    let container = json(r).await;
    assert_eq!(container["properties"]["hasImmutabilityPolicy"], true);
    assert_eq!(
        container["properties"]["immutabilityPolicy"]["properties"]["immutabilityPeriodSinceCreationInDays"],
        6
    );
}

#[tokio::test]
async fn a_legal_hold_keeps_every_blob_and_its_container_until_its_tags_are_cleared() {
    let s = Server::with_container("box").await;
    append_blob(&s, "/box/log").await;
    let r = s
        .manage(
            "POST",
            "box/setLegalHold",
            &[],
            r#"{"tags":["Case1","audit2026"]}"#,
        )
        .await;
    assert_eq!(r.status(), 200);
    let held = json(r).await;
    assert_eq!(held["hasLegalHold"], true);
    assert_eq!(held["tags"], serde_json::json!(["case1", "audit2026"]));
    let r = s.head("/box?restype=container", &[]).await;
    assert_eq!(header(&r, "x-ms-has-legal-hold").as_deref(), Some("true"));
    let hold = "BlobImmutableDueToLegalHold";
    assert_eq!(
        refusal(&s.put("/box/log?comp=appendblock", &[], "x").await),
        (409, hold.into())
    );
    assert_eq!(
        refusal(&s.delete("/box/log", &[]).await),
        (409, hold.into())
    );
    let r = s.delete("/box?restype=container", &[]).await;
    assert_eq!(refusal(&r), (409, "ContainerHasLegalHold".into()));
    assert_eq!(s.put("/box/new", &[], "created").await.status(), 201);

    // Ten tags at most; each 3 to 23 letters and digits.
    let eight: Vec<String> = (0..8).map(|i| format!("\"more{i}\"")).collect();
    let body = format!(r#"{{"tags":[{}]}}"#, eight.join(","));
    assert_eq!(
        s.manage("POST", "box/setLegalHold", &[], &body)
            .await
            .status(),
        200
    );
    let r = s
        .manage("POST", "box/setLegalHold", &[], r#"{"tags":["eleventh"]}"#)
        .await;
    assert_eq!(arm_refusal(r).await, (400, "InvalidParameter".into()));
    for bad in [
        r#"{"tags":["ab"]}"#,
        r#"{"tags":["a-b-c"]}"#,
        r#"{"tags":[]}"#,
        "{",
    ] {
        let r = s.manage("POST", "box/setLegalHold", &[], bad).await;
        assert_eq!(r.status(), 400, "{bad}");
    }

    let mut all: Vec<String> = eight
        .iter()
        .map(|t| t.trim_matches('"').to_owned())
        .collect();
    all.push("case1".into());
    let body = format!(r#"{{"tags":{}}}"#, serde_json::json!(all));
    let r = s.manage("POST", "box/clearLegalHold", &[], &body).await;
    assert_eq!(
        json(r).await["tags"],
        serde_json::json!(["audit2026"]),
        "one left"
    );
    assert_eq!(
        refusal(&s.delete("/box/log", &[]).await),
        (409, hold.into())
    );
    let r = s
        .manage(
            "POST",
            "box/clearLegalHold",
            &[],
            r#"{"tags":["AUDIT2026"]}"#,
        )
        .await;
    assert_eq!(json(r).await["hasLegalHold"], false);
    assert_eq!(s.delete("/box/log", &[]).await.status(), 202);
    assert_eq!(s.delete("/box?restype=container", &[]).await.status(), 202);
}

#[tokio::test]
async fn what_the_management_api_does_not_serve_is_refused_by_name() {
    let s = Server::with_container("box").await;
    for days in [0, 146_001] {
        let r = s
            .manage("PUT", POLICY, &[], &policy_body(days, false))
            .await;
        assert_eq!(
            arm_refusal(r).await,
            (400, "InvalidParameter".into()),
            "{days}"
        );
    }
    set_policy(&s, 146_000, false).await;
    let all = r#"{"properties":{"immutabilityPeriodSinceCreationInDays":1,"allowProtectedAppendWritesAll":true}}"#;
    let r = s.manage("PUT", POLICY, &[], all).await;
    assert_eq!(arm_refusal(r).await, (400, "InvalidParameter".into()));
    let r = s.manage("PUT", POLICY, &[], "not json").await;
    assert_eq!(arm_refusal(r).await, (400, "InvalidRequestContent".into()));
    let r = s.manage("PATCH", POLICY, &[], "").await;
    assert_eq!(arm_refusal(r).await, (405, "MethodNotAllowed".into()));
    let r = s
        .manage("GET", "box/immutabilityPolicies/other", &[], "")
        .await;
    assert_eq!(arm_refusal(r).await, (404, "InvalidResourceType".into()));
    let r = s.manage("GET", "nobox", &[], "").await;
    assert_eq!(arm_refusal(r).await, (404, "ContainerNotFound".into()));
    let r = s
        .manage("POST", "nobox/setLegalHold", &[], r#"{"tags":["abc"]}"#)
        .await;
    assert_eq!(arm_refusal(r).await, (404, "ContainerNotFound".into()));
    let uri = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/\
               nosuch/blobServices/default/containers/box?api-version=2023-05-01";
    let r = s.send_to("GET", uri, &[], "").await;
    assert_eq!(arm_refusal(r).await, (404, "ResourceNotFound".into()));
    assert_eq!(code(&s.put("/box/x", &[], "x").await), None, "a new blob");
}
