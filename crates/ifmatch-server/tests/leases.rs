//! Leases over real sockets: the scenarios of leases.md and every cell of its transition table.

use crate::common;

use std::time::Duration;

use common::{Server, code, header, refusal};

const A: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
const B: &str = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
const C: &str = "1b4e28ba-2fa1-41d2-883f-0016d3cca427";

async fn state(s: &Server, path: &str) -> (String, String, Option<String>) {
    let r = s.head(path, &[]).await;
    (
        header(&r, "x-ms-lease-state").unwrap(),
        header(&r, "x-ms-lease-status").unwrap(),
        header(&r, "x-ms-lease-duration"),
    )
}

fn s3(a: &str, b: &str, c: Option<&str>) -> (String, String, Option<String>) {
    (a.to_owned(), b.to_owned(), c.map(str::to_owned))
}

#[tokio::test]
async fn spec_scenarios() {
    let s = Server::with_container("box").await;

    // 1. acquire 30 s proposing G: 201, x-ms-lease-id G; leased/locked/fixed.
    let tag = s.put_blob("/box/one", b"1").await;
    let r = s
        .lease(
            "/box/one",
            &[
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "30"),
                ("x-ms-proposed-lease-id", A),
            ],
        )
        .await;
    assert_eq!(
        (r.status().as_u16(), header(&r, "x-ms-lease-id").as_deref()),
        (201, Some(A))
    );
    assert_eq!(
        header(&r, "etag"),
        Some(tag.clone()),
        "a lease does not change the ETag"
    );
    assert_eq!(
        state(&s, "/box/one").await,
        s3("leased", "locked", Some("fixed"))
    );

    // 2. acquire -1 without a proposal: a generated UUID; infinite.
    s.put_blob("/box/two", b"2").await;
    let r = s.acquire("/box/two", "-1").await;
    assert_eq!(r.status(), 201);
    let generated: uuid::Uuid = header(&r, "x-ms-lease-id").unwrap().parse().unwrap();
    assert_eq!(
        generated.get_version_num(),
        4,
        "server-generated ids are random UUIDv4"
    );
    assert_eq!(
        state(&s, "/box/two").await,
        s3("leased", "locked", Some("infinite"))
    );

    // 3. duration 10 or 61: 400 InvalidHeaderValue.
    for d in ["10", "61"] {
        let r = s
            .lease(
                "/box/two",
                &[("x-ms-lease-action", "acquire"), ("x-ms-lease-duration", d)],
            )
            .await;
        assert_eq!(
            (r.status().as_u16(), code(&r).as_deref()),
            (400, Some("InvalidHeaderValue")),
            "{d}"
        );
    }

    // 4. leased(A), past 15 s: expired/unlocked; renew A: 200, leased again.
    s.put_blob("/box/four", b"4").await;
    s.lease(
        "/box/four",
        &[
            ("x-ms-lease-action", "acquire"),
            ("x-ms-lease-duration", "15"),
            ("x-ms-proposed-lease-id", A),
        ],
    )
    .await;
    s.advance(Duration::from_secs(16));
    assert_eq!(
        state(&s, "/box/four").await,
        s3("expired", "unlocked", None)
    );
    let r = s
        .lease(
            "/box/four",
            &[("x-ms-lease-action", "renew"), ("x-ms-lease-id", A)],
        )
        .await;
    assert_eq!(
        (r.status().as_u16(), header(&r, "x-ms-lease-id").as_deref()),
        (200, Some(A))
    );
    assert_eq!(state(&s, "/box/four").await.0, "leased");

    // 5. leased(A) 15 s, expired, Put Blob without id (201), renew A: 409 mismatch.
    s.put_blob("/box/five", b"5").await;
    s.lease(
        "/box/five",
        &[
            ("x-ms-lease-action", "acquire"),
            ("x-ms-lease-duration", "15"),
            ("x-ms-proposed-lease-id", A),
        ],
    )
    .await;
    s.advance(Duration::from_secs(16));
    assert_eq!(s.put("/box/five", &[], b"new".to_vec()).await.status(), 201);
    let r = s
        .lease(
            "/box/five",
            &[("x-ms-lease-action", "renew"), ("x-ms-lease-id", A)],
        )
        .await;
    assert_eq!(
        refusal(&r),
        (409, "LeaseIdMismatchWithLeaseOperation".into())
    );

    // 6. leased(A), break period 3: 202, lease time <= 3, breaking/locked; 3 s later broken;
    //    release A: 200, available.
    s.put_blob("/box/six", b"6").await;
    s.lease(
        "/box/six",
        &[
            ("x-ms-lease-action", "acquire"),
            ("x-ms-lease-duration", "60"),
            ("x-ms-proposed-lease-id", A),
        ],
    )
    .await;
    let r = s
        .lease(
            "/box/six",
            &[
                ("x-ms-lease-action", "break"),
                ("x-ms-lease-break-period", "3"),
            ],
        )
        .await;
    assert_eq!(r.status(), 202);
    assert!(
        header(&r, "x-ms-lease-time")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            <= 3
    );
    assert_eq!(state(&s, "/box/six").await, s3("breaking", "locked", None));
    s.advance(Duration::from_secs(3));
    assert_eq!(state(&s, "/box/six").await, s3("broken", "unlocked", None));
    let r = s
        .lease(
            "/box/six",
            &[("x-ms-lease-action", "release"), ("x-ms-lease-id", A)],
        )
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        state(&s, "/box/six").await,
        s3("available", "unlocked", None)
    );

    // 7. leased(A): Put Blob without id, with B, with A.
    s.put_blob("/box/seven", b"7").await;
    s.lease(
        "/box/seven",
        &[
            ("x-ms-lease-action", "acquire"),
            ("x-ms-lease-duration", "-1"),
            ("x-ms-proposed-lease-id", A),
        ],
    )
    .await;
    let r = s.put("/box/seven", &[], b"x".to_vec()).await;
    assert_eq!(refusal(&r), (412, "LeaseIdMissing".into()));
    let r = s
        .put("/box/seven", &[("x-ms-lease-id", B)], b"x".to_vec())
        .await;
    assert_eq!(
        refusal(&r),
        (412, "LeaseIdMismatchWithBlobOperation".into())
    );
    assert_eq!(
        s.put("/box/seven", &[("x-ms-lease-id", A)], b"x".to_vec())
            .await
            .status(),
        201
    );
    // The lease survives the write, and deleting needs the id too.
    assert_eq!(state(&s, "/box/seven").await.0, "leased");
    assert_eq!(
        code(&s.delete("/box/seven", &[]).await).as_deref(),
        Some("LeaseIdMissing")
    );

    // 8. available blob, Put Blob with an id: 412.
    s.put_blob("/box/eight", b"8").await;
    let r = s
        .put("/box/eight", &[("x-ms-lease-id", A)], b"x".to_vec())
        .await;
    assert_eq!(
        refusal(&r),
        (412, "LeaseNotPresentWithBlobOperation".into())
    );

    // 9. leased container: Delete Container without id / with B / with A.
    s.create_container("leased").await;
    let r = s
        .lease(
            "/leased?restype=container",
            &[
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "-1"),
                ("x-ms-proposed-lease-id", A),
            ],
        )
        .await;
    assert_eq!(r.status(), 201);
    let r = s.head("/leased?restype=container", &[]).await;
    assert_eq!(header(&r, "x-ms-lease-state").as_deref(), Some("leased"));
    let r = s.delete("/leased?restype=container", &[]).await;
    assert_eq!(refusal(&r), (412, "LeaseIdMissing".into()));
    let r = s
        .delete("/leased?restype=container", &[("x-ms-lease-id", B)])
        .await;
    assert_eq!(
        refusal(&r),
        (412, "LeaseIdMismatchWithContainerOperation".into())
    );
    assert_eq!(
        s.delete("/leased?restype=container", &[("x-ms-lease-id", A)])
            .await
            .status(),
        202
    );

    // 10. Get Blob without an id on a leased blob: 200.
    // (`two` holds an infinite lease; `one`'s 30 s have run out on the shifted clock.)
    assert_eq!(state(&s, "/box/two").await.0, "leased");
    let r = s.get("/box/two", &[]).await;
    assert_eq!(r.status(), 200);
    // ... and with a wrong id: checked as a write.
    let r = s.get("/box/two", &[("x-ms-lease-id", B)]).await;
    assert_eq!(
        refusal(&r),
        (412, "LeaseIdMismatchWithBlobOperation".into())
    );
}

/// The state a cell starts from, reached through the API itself.
#[derive(Debug, Clone, Copy)]
enum Column {
    Available,
    Leased,
    Breaking,
    Broken,
    Expired,
}

async fn reach(s: &Server, path: &str, column: Column) {
    s.put_blob(path, b"cell").await;
    let acquire = |d: &'static str| {
        [
            ("x-ms-lease-action", "acquire"),
            ("x-ms-lease-duration", d),
            ("x-ms-proposed-lease-id", A),
        ]
    };
    // A lease for `duration` seconds, then a break with `period`: whether both were taken.
    let take_then_break = async |duration, period| {
        let taken = s.lease(path, &acquire(duration)).await.status() == 201;
        let breaking = [
            ("x-ms-lease-action", "break"),
            ("x-ms-lease-break-period", period),
        ];
        taken && s.lease(path, &breaking).await.status() == 202
    };
    let (want, ok) = match column {
        Column::Available => ("available", true),
        Column::Leased => (
            "leased",
            s.lease(path, &acquire("30")).await.status() == 201,
        ),
        Column::Breaking => ("breaking", take_then_break("60", "20").await),
        Column::Broken => ("broken", take_then_break("30", "0").await),
        Column::Expired => {
            let a = s.lease(path, &acquire("15")).await.status() == 201;
            s.advance(Duration::from_secs(16));
            ("expired", a)
        }
    };
    assert!(ok, "setting up {column:?}");
    assert_eq!(state(s, path).await.0, want, "setting up {column:?}");
}

/// (name, request headers, expected per column)
type Row<'a> = (&'a str, Vec<(&'a str, &'a str)>, [Want; 5]);

#[derive(Debug, Clone, PartialEq)]
enum Want {
    /// Status, the lease state afterwards, x-ms-lease-id of the answer.
    Ok(u16, String, Option<String>),
    /// A 409 with this code.
    Err(String),
}

#[allow(non_snake_case)]
fn K(status: u16, state: &str, id: Option<&str>) -> Want {
    Want::Ok(status, state.to_owned(), id.map(str::to_owned))
}

#[allow(non_snake_case)]
fn E(code: &str) -> Want {
    Want::Err(code.to_owned())
}

#[tokio::test]
async fn every_cell_of_the_transition_table() {
    let s = Server::with_container("cells").await;
    let columns = [
        Column::Available,
        Column::Leased,
        Column::Breaking,
        Column::Broken,
        Column::Expired,
    ];
    let acquire_b = vec![
        ("x-ms-lease-action", "acquire"),
        ("x-ms-lease-duration", "15"),
        ("x-ms-proposed-lease-id", B),
    ];
    let acquire_a = vec![
        ("x-ms-lease-action", "acquire"),
        ("x-ms-lease-duration", "15"),
        ("x-ms-proposed-lease-id", A),
    ];
    let mismatch = E("LeaseIdMismatchWithLeaseOperation");
    let absent = E("LeaseNotPresentWithLeaseOperation");
    let rows: Vec<Row<'_>> = vec![
        (
            "acquire B",
            acquire_b,
            [
                K(201, "leased", Some(B)),
                E("LeaseAlreadyPresent"),
                E("LeaseIsBreakingAndCannotBeAcquired"),
                K(201, "leased", Some(B)),
                K(201, "leased", Some(B)),
            ],
        ),
        (
            "acquire proposing A",
            acquire_a,
            [
                K(201, "leased", Some(A)),
                K(201, "leased", Some(A)),
                E("LeaseIsBreakingAndCannotBeAcquired"),
                K(201, "leased", Some(A)),
                K(201, "leased", Some(A)),
            ],
        ),
        (
            "renew A",
            vec![("x-ms-lease-action", "renew"), ("x-ms-lease-id", A)],
            [
                mismatch.clone(),
                K(200, "leased", Some(A)),
                E("LeaseIsBrokenAndCannotBeRenewed"),
                E("LeaseIsBrokenAndCannotBeRenewed"),
                K(200, "leased", Some(A)),
            ],
        ),
        (
            "renew B",
            vec![("x-ms-lease-action", "renew"), ("x-ms-lease-id", B)],
            [(); 5].map(|()| mismatch.clone()),
        ),
        (
            "change A to B",
            vec![
                ("x-ms-lease-action", "change"),
                ("x-ms-lease-id", A),
                ("x-ms-proposed-lease-id", B),
            ],
            [
                absent.clone(),
                K(200, "leased", Some(B)),
                E("LeaseIsBreakingAndCannotBeChanged"),
                absent.clone(),
                absent.clone(),
            ],
        ),
        (
            "change B to A",
            vec![
                ("x-ms-lease-action", "change"),
                ("x-ms-lease-id", B),
                ("x-ms-proposed-lease-id", A),
            ],
            [
                absent.clone(),
                K(200, "leased", Some(A)),
                mismatch.clone(),
                absent.clone(),
                absent.clone(),
            ],
        ),
        (
            "change B to C",
            vec![
                ("x-ms-lease-action", "change"),
                ("x-ms-lease-id", B),
                ("x-ms-proposed-lease-id", C),
            ],
            [
                absent.clone(),
                mismatch.clone(),
                mismatch.clone(),
                absent.clone(),
                absent.clone(),
            ],
        ),
        (
            "release A",
            vec![("x-ms-lease-action", "release"), ("x-ms-lease-id", A)],
            [
                mismatch.clone(),
                K(200, "available", None),
                K(200, "available", None),
                K(200, "available", None),
                K(200, "available", None),
            ],
        ),
        (
            "release B",
            vec![("x-ms-lease-action", "release"), ("x-ms-lease-id", B)],
            [(); 5].map(|()| mismatch.clone()),
        ),
        (
            "break 0",
            vec![
                ("x-ms-lease-action", "break"),
                ("x-ms-lease-break-period", "0"),
            ],
            [
                absent.clone(),
                K(202, "broken", None),
                K(202, "broken", None),
                K(202, "broken", None),
                K(202, "broken", None),
            ],
        ),
        (
            "break 10",
            vec![
                ("x-ms-lease-action", "break"),
                ("x-ms-lease-break-period", "10"),
            ],
            [
                absent.clone(),
                K(202, "breaking", None),
                K(202, "breaking", None),
                K(202, "broken", None),
                K(202, "broken", None),
            ],
        ),
        (
            "break",
            vec![("x-ms-lease-action", "break")],
            [
                absent.clone(),
                K(202, "breaking", None),
                K(202, "breaking", None),
                K(202, "broken", None),
                K(202, "broken", None),
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (r, (name, headers, wants)) in rows.iter().enumerate() {
        for (c, (column, want)) in columns.iter().zip(wants).enumerate() {
            let path = format!("/cells/r{r}c{c}");
            reach(&s, &path, *column).await;
            let response = s.lease(&path, headers).await;
            let got = match code(&response) {
                Some(error) => {
                    assert_eq!(response.status(), 409, "{name} on {column:?}: {error}");
                    Want::Err(error)
                }
                None => {
                    let id = header(&response, "x-ms-lease-id");
                    let status = response.status().as_u16();
                    if status == 202 {
                        assert!(
                            header(&response, "x-ms-lease-time").is_some(),
                            "{name}: x-ms-lease-time"
                        );
                    }
                    Want::Ok(status, state(&s, &path).await.0, id)
                }
            };
            if got != *want {
                failures.push(format!("{name} on {column:?}: got {got:?}, want {want:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn lease_conditions_and_containers() {
    let s = Server::with_container("box").await;
    let tag = s.put_blob("/box/x", b"x").await;
    // Lease Blob honours the conditional headers.
    let acquire = [
        ("x-ms-lease-action", "acquire"),
        ("x-ms-lease-duration", "-1"),
    ];
    let r = s
        .lease(
            "/box/x",
            &[acquire[0], acquire[1], ("if-match", "\"stale\"")],
        )
        .await;
    assert_eq!(refusal(&r), (412, "ConditionNotMet".into()));
    let r = s
        .lease("/box/x", &[acquire[0], acquire[1], ("if-match", &tag)])
        .await;
    assert_eq!(r.status(), 201);
    // A lease on a blob that does not exist.
    let r = s.lease("/box/missing", &acquire).await;
    assert_eq!(refusal(&r), (404, "BlobNotFound".into()));
    // Lease Container honours dates only.
    let r = s
        .lease(
            "/box?restype=container",
            &[acquire[0], acquire[1], ("if-match", "*")],
        )
        .await;
    assert_eq!(refusal(&r), (400, "UnsupportedHeader".into()));
    let r = s
        .lease(
            "/box?restype=container",
            &[
                acquire[0],
                acquire[1],
                ("if-modified-since", "Sun, 01 Jan 2090 00:00:00 GMT"),
            ],
        )
        .await;
    assert_eq!(refusal(&r), (412, "ConditionNotMet".into()));
    // A container lease does not guard its blobs, nor a container whose blobs are leased.
    let r = s.lease("/box?restype=container", &acquire).await;
    let id = header(&r, "x-ms-lease-id").unwrap();
    assert_eq!(s.put("/box/y", &[], b"y".to_vec()).await.status(), 201);
    let r = s
        .get("/box?restype=container", &[("x-ms-lease-id", B)])
        .await;
    assert_eq!(
        code(&r).as_deref(),
        Some("LeaseIdMismatchWithContainerOperation")
    );
    assert_eq!(
        s.delete("/box?restype=container", &[("x-ms-lease-id", &id)])
            .await
            .status(),
        202
    );
}
