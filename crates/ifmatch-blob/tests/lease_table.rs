//! The lease contract of `shared/spec/leases.md`: every cell of the transition table, the
//! timing edges, the table of blob and container operations under a lease, header parsing,
//! and the spec's scenarios at the level of the engine.

use crate::common;

use common::headers;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, StatusCode};
use ifmatch_blob::ErrorCode::{self, *};
use ifmatch_blob::lease::{
    Access, Lease, LeaseAction, LeaseDuration, LeaseId, LeaseState, Scope, Transition, headers,
};

fn id(n: u8) -> LeaseId {
    format!("00000000-0000-4000-8000-0000000000{n:02x}")
        .parse()
        .unwrap()
}

fn a() -> LeaseId {
    id(0xa)
}
fn b() -> LeaseId {
    id(0xb)
}
fn c() -> LeaseId {
    id(0xc)
}

fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

fn run(lease: &Lease, action: LeaseAction, now: SystemTime) -> Lease {
    lease
        .apply(&action, now)
        .unwrap_or_else(|e| panic!("{action:?}: {e}"))
        .lease
}

fn acquire(id: LeaseId, duration: LeaseDuration) -> LeaseAction {
    LeaseAction::Acquire { id, duration }
}

const FIXED15: LeaseDuration = LeaseDuration::Fixed(15);
const FIXED30: LeaseDuration = LeaseDuration::Fixed(30);
const FIXED60: LeaseDuration = LeaseDuration::Fixed(60);

/// The five states of the table's columns, each held by A (but available), and the instant at
/// which each is observed. Each is reached through the state machine itself.
fn columns() -> Vec<(&'static str, Lease, SystemTime, LeaseState)> {
    let leased = run(&Lease::Available, acquire(a(), FIXED30), t0());
    let long = run(&Lease::Available, acquire(a(), FIXED60), t0());
    let breaking = run(&long, LeaseAction::Break { period: Some(20) }, t0());
    let broken = run(&leased, LeaseAction::Break { period: Some(0) }, t0());
    let expired = run(&Lease::Available, acquire(a(), FIXED15), t0());
    let at = t0() + secs(5);
    vec![
        ("available", Lease::Available, at, LeaseState::Available),
        ("leased", leased, at, LeaseState::Leased),
        ("breaking", breaking, at, LeaseState::Breaking),
        ("broken", broken, at, LeaseState::Broken),
        ("expired", expired, t0() + secs(20), LeaseState::Expired),
    ]
}

/// The expected result of one cell.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    /// Status, state afterwards (at the same instant), id afterwards, `x-ms-lease-time`.
    Ok(u16, LeaseState, Option<LeaseId>, Option<u64>),
    Err(ErrorCode),
}

fn ok(status: u16, state: LeaseState, id: Option<LeaseId>) -> Want {
    Want::Ok(status, state, id, None)
}

fn brk(state: LeaseState, time: u64) -> Want {
    Want::Ok(202, state, Some(a()), Some(time))
}

#[test]
fn every_cell_of_the_transition_table() {
    use LeaseState::*;
    let e = Want::Err;
    // Columns: available, leased(A), breaking(A), broken(A), expired(A).
    // leased: 30 s lease seen 5 s in (25 s left). breaking: ends 20 s after t0, seen 5 s in
    // (15 s left). expired: a 15 s lease seen 20 s in.
    let rows: Vec<(&str, LeaseAction, [Want; 5])> = vec![
        (
            "acquire B",
            acquire(b(), FIXED15),
            [
                ok(201, Leased, Some(b())),
                e(LeaseAlreadyPresent),
                // A breaking lease refuses every acquire with the code naming it, as Azure answers.
                e(LeaseIsBreakingAndCannotBeAcquired),
                ok(201, Leased, Some(b())),
                ok(201, Leased, Some(b())),
            ],
        ),
        (
            "acquire proposing A",
            acquire(a(), FIXED15),
            [
                ok(201, Leased, Some(a())),
                ok(201, Leased, Some(a())),
                e(LeaseIsBreakingAndCannotBeAcquired),
                ok(201, Leased, Some(a())),
                ok(201, Leased, Some(a())),
            ],
        ),
        (
            "renew A",
            LeaseAction::Renew { id: a() },
            [
                e(LeaseIdMismatchWithLeaseOperation),
                ok(200, Leased, Some(a())),
                e(LeaseIsBrokenAndCannotBeRenewed),
                e(LeaseIsBrokenAndCannotBeRenewed),
                ok(200, Leased, Some(a())),
            ],
        ),
        (
            "renew B",
            LeaseAction::Renew { id: b() },
            [e(LeaseIdMismatchWithLeaseOperation); 5],
        ),
        (
            "change A to B",
            LeaseAction::Change {
                id: a(),
                proposed: b(),
            },
            [
                e(LeaseNotPresentWithLeaseOperation),
                ok(200, Leased, Some(b())),
                e(LeaseIsBreakingAndCannotBeChanged),
                e(LeaseNotPresentWithLeaseOperation),
                e(LeaseNotPresentWithLeaseOperation),
            ],
        ),
        (
            "change B to A (repeat)",
            LeaseAction::Change {
                id: b(),
                proposed: a(),
            },
            [
                e(LeaseNotPresentWithLeaseOperation),
                ok(200, Leased, Some(a())),
                e(LeaseIdMismatchWithLeaseOperation),
                e(LeaseNotPresentWithLeaseOperation),
                e(LeaseNotPresentWithLeaseOperation),
            ],
        ),
        (
            "change B to C",
            LeaseAction::Change {
                id: b(),
                proposed: c(),
            },
            [
                e(LeaseNotPresentWithLeaseOperation),
                e(LeaseIdMismatchWithLeaseOperation),
                e(LeaseIdMismatchWithLeaseOperation),
                e(LeaseNotPresentWithLeaseOperation),
                e(LeaseNotPresentWithLeaseOperation),
            ],
        ),
        (
            "release A",
            LeaseAction::Release { id: a() },
            [
                e(LeaseIdMismatchWithLeaseOperation),
                ok(200, Available, None),
                ok(200, Available, None),
                ok(200, Available, None),
                ok(200, Available, None),
            ],
        ),
        (
            "release B",
            LeaseAction::Release { id: b() },
            [e(LeaseIdMismatchWithLeaseOperation); 5],
        ),
        (
            "break, period 0",
            LeaseAction::Break { period: Some(0) },
            [
                e(LeaseNotPresentWithLeaseOperation),
                brk(Broken, 0),
                brk(Broken, 0),
                brk(Broken, 0),
                brk(Broken, 0),
            ],
        ),
        (
            "break, period 10",
            LeaseAction::Break { period: Some(10) },
            [
                e(LeaseNotPresentWithLeaseOperation),
                brk(Breaking, 10),
                brk(Breaking, 10),
                brk(Broken, 0),
                brk(Broken, 0),
            ],
        ),
        (
            "break, period 40 (longer than what is left)",
            LeaseAction::Break { period: Some(40) },
            [
                e(LeaseNotPresentWithLeaseOperation),
                brk(Breaking, 25),
                brk(Breaking, 15),
                brk(Broken, 0),
                brk(Broken, 0),
            ],
        ),
        (
            "break, no period",
            LeaseAction::Break { period: None },
            [
                e(LeaseNotPresentWithLeaseOperation),
                brk(Breaking, 25),
                brk(Breaking, 15),
                brk(Broken, 0),
                brk(Broken, 0),
            ],
        ),
    ];

    let columns = columns();
    let mut failures = Vec::new();
    for (name, lease, now, state) in &columns {
        assert_eq!(lease.state(*now), *state, "column {name} is set up wrong");
    }
    for (row, action, wants) in &rows {
        for ((column, lease, now, _), want) in columns.iter().zip(wants) {
            let got = match lease.apply(action, *now) {
                Ok(t) => {
                    let header_id = t.lease_id;
                    let want_header = match action {
                        LeaseAction::Acquire { .. }
                        | LeaseAction::Renew { .. }
                        | LeaseAction::Change { .. } => t.lease.id(),
                        _ => None,
                    };
                    if header_id != want_header {
                        failures.push(format!("{row} on {column}: x-ms-lease-id {header_id:?}"));
                    }
                    Want::Ok(
                        t.status.as_u16(),
                        t.lease.state(*now),
                        t.lease.id(),
                        t.lease_time,
                    )
                }
                Err(code) => Want::Err(code),
            };
            if got != *want {
                failures.push(format!("{row} on {column}: got {got:?}, want {want:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn expiry_is_exact_to_the_millisecond() {
    let lease = run(&Lease::Available, acquire(a(), FIXED15), t0());
    assert_eq!(lease.state(t0() + secs(15) - ms(1)), LeaseState::Leased);
    assert_eq!(lease.state(t0() + secs(15)), LeaseState::Expired);
    // At the very instant of expiry, another id may take it, and A may renew it.
    let at = t0() + secs(15);
    assert_eq!(
        lease.apply(&acquire(b(), FIXED15), at).unwrap().status,
        StatusCode::CREATED
    );
    assert_eq!(
        lease
            .apply(&LeaseAction::Renew { id: a() }, at)
            .unwrap()
            .status,
        StatusCode::OK
    );
    // One millisecond before, it is still A's.
    assert_eq!(
        lease.apply(&acquire(b(), FIXED15), at - ms(1)),
        Err(LeaseAlreadyPresent)
    );
}

#[test]
fn break_period_ends_exactly() {
    let lease = held_for_ever();
    let t = broken(&lease, Some(3), t0());
    assert_eq!(t.lease_time, Some(3));
    assert_eq!(t.lease.state(t0() + secs(3) - ms(1)), LeaseState::Breaking);
    assert_eq!(t.lease.state(t0() + secs(3)), LeaseState::Broken);
}

#[test]
fn break_longer_than_the_remaining_lease_ends_at_expiry() {
    let lease = run(&Lease::Available, acquire(a(), FIXED15), t0());
    let t = lease
        .apply(&LeaseAction::Break { period: Some(60) }, t0() + secs(10))
        .unwrap();
    assert_eq!(t.lease_time, Some(5));
    assert_eq!(t.lease.state(t0() + secs(15) - ms(1)), LeaseState::Breaking);
    assert_eq!(t.lease.state(t0() + secs(15)), LeaseState::Broken);
}

#[test]
fn a_second_break_cannot_extend_the_first() {
    let lease = held_for_ever();
    let breaking = run(&lease, LeaseAction::Break { period: Some(10) }, t0());
    let t = breaking
        .apply(&LeaseAction::Break { period: Some(60) }, t0() + secs(1))
        .unwrap();
    assert_eq!(t.lease_time, Some(9));
    assert_eq!(t.lease.state(t0() + secs(10)), LeaseState::Broken);
    // A shorter one shortens it.
    let t = breaking
        .apply(&LeaseAction::Break { period: Some(2) }, t0() + secs(1))
        .unwrap();
    assert_eq!(t.lease_time, Some(2));
    assert_eq!(t.lease.state(t0() + secs(3)), LeaseState::Broken);
}

#[test]
fn infinite_lease_without_period_breaks_at_once() {
    let lease = held_for_ever();
    let t = broken(&lease, None, t0());
    assert_eq!(
        (t.lease_time, t.lease.state(t0())),
        (Some(0), LeaseState::Broken)
    );
}

#[test]
fn lease_time_rounds_up_to_whole_seconds() {
    let lease = run(&Lease::Available, acquire(a(), FIXED15), t0());
    let t = lease
        .apply(&LeaseAction::Break { period: None }, t0() + ms(500))
        .unwrap();
    assert_eq!(
        t.lease_time,
        Some(15),
        "14.5 s left: the client must not come back early"
    );
    assert_eq!(t.headers().get(headers::LEASE_TIME).unwrap(), "15");
}

#[test]
fn renew_restarts_the_clock_and_change_keeps_it() {
    let lease = run(&Lease::Available, acquire(a(), FIXED15), t0());
    let renewed = run(&lease, LeaseAction::Renew { id: a() }, t0() + secs(10));
    assert_eq!(renewed.state(t0() + secs(25) - ms(1)), LeaseState::Leased);
    assert_eq!(renewed.state(t0() + secs(25)), LeaseState::Expired);
    let changed = run(
        &lease,
        LeaseAction::Change {
            id: a(),
            proposed: b(),
        },
        t0() + secs(10),
    );
    assert_eq!(changed.id(), Some(b()));
    assert_eq!(changed.state(t0() + secs(15)), LeaseState::Expired);
    // Renewing an expired lease restarts it with its own duration.
    let revived = run(&lease, LeaseAction::Renew { id: a() }, t0() + secs(100));
    assert_eq!(revived.state(t0() + secs(115) - ms(1)), LeaseState::Leased);
    assert_eq!(revived.state(t0() + secs(115)), LeaseState::Expired);
}

#[test]
fn acquire_by_the_holder_takes_the_new_duration() {
    let lease = run(&Lease::Available, acquire(a(), FIXED15), t0());
    let forever = run(
        &lease,
        acquire(a(), LeaseDuration::Infinite),
        t0() + secs(1),
    );
    assert_eq!(forever.state(t0() + secs(3600)), LeaseState::Leased);
}

#[test]
fn operations_under_a_lease() {
    // Proceeds; no lease, yet an id; a lease, no id; another lease's id.
    const OK: Result<(), ErrorCode> = Ok(());
    const NONE: Result<(), ErrorCode> = Err(LeaseNotPresentWithBlobOperation);
    const MISSING: Result<(), ErrorCode> = Err(LeaseIdMissing);
    const OTHER: Result<(), ErrorCode> = Err(LeaseIdMismatchWithBlobOperation);
    let columns = columns();
    // Per column: (no id, A, B) for a write, then for a read. OK means it proceeds.
    let blob: [[[Result<(), ErrorCode>; 3]; 2]; 5] = [
        // available
        [[OK, NONE, NONE], [OK, NONE, NONE]],
        // leased
        [[MISSING, OK, OTHER], [OK, OK, OTHER]],
        // breaking
        [[MISSING, OK, OTHER], [OK, OK, OTHER]],
        // broken
        [[OK, NONE, NONE], [OK, NONE, NONE]],
        // expired
        [[OK, NONE, NONE], [OK, NONE, NONE]],
    ];
    for ((name, lease, now, state), wants) in columns.iter().zip(blob) {
        for (access, wants) in [Access::Write, Access::Read].into_iter().zip(wants) {
            for (given, want) in [None, Some(a()), Some(b())].into_iter().zip(wants) {
                for scope in [Scope::Blob, Scope::Container] {
                    let want = want.map_err(|code| match (scope, code) {
                        (Scope::Container, LeaseIdMismatchWithBlobOperation) => {
                            LeaseIdMismatchWithContainerOperation
                        }
                        (Scope::Container, LeaseNotPresentWithBlobOperation) => {
                            LeaseNotPresentWithContainerOperation
                        }
                        (_, code) => code,
                    });
                    let got = lease.authorize(scope, access, given, *now);
                    assert_eq!(
                        got.map(|_| ()),
                        want,
                        "{name} {scope:?} {access:?} with {given:?}"
                    );
                    // A write without an id to an unlocked lease frees it; nothing else changes it.
                    if let Ok(after) = got {
                        let freed = access == Access::Write && !state.is_locked();
                        let expected = if freed { Lease::Available } else { *lease };
                        assert_eq!(
                            after, expected,
                            "{name} {scope:?} {access:?} with {given:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn parsing_lease_requests() {
    let g = "5a9b3a4e-1d2c-4b7a-9f00-0123456789ab";
    let gid: LeaseId = g.parse().unwrap();
    let fresh = c;
    type R = Result<LeaseAction, ErrorCode>;
    let missing = |_: &str| -> R { Err(MissingRequiredHeader) };
    let invalid = |_: &str| -> R { Err(InvalidHeaderValue) };
    let cases: Vec<(Vec<(&str, &str)>, R)> = vec![
        (vec![], missing("action")),
        (vec![("x-ms-lease-action", "steal")], invalid("action")),
        (vec![("x-ms-lease-action", "acquire")], missing("duration")),
        (
            vec![
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "30"),
            ],
            Ok(acquire(c(), FIXED30)),
        ),
        (
            vec![
                ("x-ms-lease-action", "ACQUIRE"),
                ("x-ms-lease-duration", "-1"),
                ("x-ms-proposed-lease-id", g),
            ],
            Ok(acquire(gid, LeaseDuration::Infinite)),
        ),
        (
            vec![
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "15"),
            ],
            Ok(acquire(c(), FIXED15)),
        ),
        (
            vec![
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "60"),
            ],
            Ok(acquire(c(), FIXED60)),
        ),
        (
            vec![
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "10"),
            ],
            invalid("duration"),
        ),
        (
            vec![
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "61"),
            ],
            invalid("duration"),
        ),
        (
            vec![
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "-2"),
            ],
            invalid("duration"),
        ),
        (
            vec![
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "+30"),
            ],
            invalid("duration"),
        ),
        (
            vec![
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "thirty"),
            ],
            invalid("duration"),
        ),
        (
            vec![
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "99999999999999999999"),
            ],
            invalid("duration"),
        ),
        (
            vec![
                ("x-ms-lease-action", "acquire"),
                ("x-ms-lease-duration", "30"),
                ("x-ms-proposed-lease-id", "nope"),
            ],
            invalid("proposed"),
        ),
        (vec![("x-ms-lease-action", "renew")], missing("id")),
        (
            vec![("x-ms-lease-action", "renew"), ("x-ms-lease-id", g)],
            Ok(LeaseAction::Renew { id: gid }),
        ),
        (
            vec![
                ("x-ms-lease-action", "renew"),
                ("x-ms-lease-id", "{5A9B3A4E-1D2C-4B7A-9F00-0123456789AB}"),
            ],
            Ok(LeaseAction::Renew { id: gid }),
        ),
        (
            vec![("x-ms-lease-action", "renew"), ("x-ms-lease-id", "12345")],
            invalid("id"),
        ),
        (
            vec![("x-ms-lease-action", "release"), ("x-ms-lease-id", g)],
            Ok(LeaseAction::Release { id: gid }),
        ),
        (
            vec![("x-ms-lease-action", "change"), ("x-ms-lease-id", g)],
            missing("proposed"),
        ),
        (
            vec![
                ("x-ms-lease-action", "change"),
                ("x-ms-proposed-lease-id", g),
            ],
            missing("id"),
        ),
        (
            vec![
                ("x-ms-lease-action", "change"),
                ("x-ms-lease-id", g),
                ("x-ms-proposed-lease-id", g),
            ],
            Ok(LeaseAction::Change {
                id: gid,
                proposed: gid,
            }),
        ),
        (
            vec![("x-ms-lease-action", "break")],
            Ok(LeaseAction::Break { period: None }),
        ),
        (
            vec![
                ("x-ms-lease-action", "break"),
                ("x-ms-lease-break-period", "0"),
            ],
            Ok(LeaseAction::Break { period: Some(0) }),
        ),
        (
            vec![
                ("x-ms-lease-action", "break"),
                ("x-ms-lease-break-period", "60"),
            ],
            Ok(LeaseAction::Break { period: Some(60) }),
        ),
        (
            vec![
                ("x-ms-lease-action", "break"),
                ("x-ms-lease-break-period", "61"),
            ],
            invalid("period"),
        ),
        (
            vec![
                ("x-ms-lease-action", "break"),
                ("x-ms-lease-break-period", "-1"),
            ],
            invalid("period"),
        ),
        (
            vec![
                ("x-ms-lease-action", "renew"),
                ("x-ms-lease-id", g),
                ("x-ms-lease-id", g),
            ],
            invalid("twice"),
        ),
    ];
    for (lines, want) in cases {
        let got = LeaseAction::from_headers(&headers(&lines), fresh).map_err(|e| e.code);
        assert_eq!(got, want, "{lines:?}");
    }
    let err = LeaseAction::from_headers(&headers(&[("x-ms-lease-action", "acquire")]), fresh)
        .unwrap_err();
    assert_eq!(err.header, headers::LEASE_DURATION);
}

#[test]
fn properties_headers() {
    let props = |lease: &Lease, now| {
        let mut map = HeaderMap::new();
        lease.insert_headers(now, &mut map);
        let get = |name| {
            map.get(name)
                .map(|v: &HeaderValue| v.to_str().unwrap().to_owned())
        };
        (
            get(headers::LEASE_STATE),
            get(headers::LEASE_STATUS),
            get(headers::LEASE_DURATION),
        )
    };
    let s = |v: &str| Some(v.to_owned());
    let fixed = run(&Lease::Available, acquire(a(), FIXED15), t0());
    let infinite = held_for_ever();
    let breaking = run(&infinite, LeaseAction::Break { period: Some(5) }, t0());
    assert_eq!(
        props(&Lease::Available, t0()),
        (s("available"), s("unlocked"), None)
    );
    assert_eq!(props(&fixed, t0()), (s("leased"), s("locked"), s("fixed")));
    assert_eq!(
        props(&infinite, t0()),
        (s("leased"), s("locked"), s("infinite"))
    );
    assert_eq!(
        props(&fixed, t0() + secs(15)),
        (s("expired"), s("unlocked"), None)
    );
    assert_eq!(props(&breaking, t0()), (s("breaking"), s("locked"), None));
    assert_eq!(
        props(&breaking, t0() + secs(5)),
        (s("broken"), s("unlocked"), None)
    );
}

#[test]
fn records_round_trip_through_serde() {
    let leased = run(&Lease::Available, acquire(a(), FIXED15), t0());
    let records = [
        Lease::Available,
        leased,
        run(
            &Lease::Available,
            acquire(a(), LeaseDuration::Infinite),
            t0(),
        ),
        run(&leased, LeaseAction::Break { period: Some(5) }, t0()),
        run(&leased, LeaseAction::Break { period: Some(0) }, t0()),
    ];
    for record in records {
        let json = serde_json::to_string(&record).unwrap();
        assert_eq!(
            serde_json::from_str::<Lease>(&json).unwrap(),
            record,
            "{json}"
        );
    }
    assert_eq!(
        serde_json::to_string(&Lease::Available).unwrap(),
        r#"{"state":"available"}"#
    );
}

/// The scenarios of leases.md that the engine alone decides (the servers' end-to-end tests run
/// them over sockets).
#[test]
fn spec_scenarios() {
    let g: LeaseId = "5a9b3a4e-1d2c-4b7a-9f00-0123456789ab".parse().unwrap();
    let acquire_req = |duration: &str, proposed: Option<&str>| {
        let mut lines = vec![
            ("x-ms-lease-action", "acquire"),
            ("x-ms-lease-duration", duration),
        ];
        lines.extend(proposed.map(|p| ("x-ms-proposed-lease-id", p)));
        LeaseAction::from_headers(&headers(&lines), c)
    };

    // 1. acquire 30 s proposing G: 201, x-ms-lease-id G, leased/locked/fixed.
    let t = Lease::Available
        .apply(&acquire_req("30", Some(&g.to_string())).unwrap(), t0())
        .unwrap();
    assert_eq!(t.status, StatusCode::CREATED);
    assert_eq!(
        t.headers().get(headers::LEASE_ID).unwrap(),
        g.to_string().as_str()
    );
    let mut map = HeaderMap::new();
    t.lease.insert_headers(t0(), &mut map);
    assert_eq!(map.get(headers::LEASE_DURATION).unwrap(), "fixed");

    // 2. acquire -1 without a proposal: the generated id.
    let t = Lease::Available
        .apply(&acquire_req("-1", None).unwrap(), t0())
        .unwrap();
    assert_eq!(t.lease_id, Some(c()));

    // 3. duration 10 or 61: 400 InvalidHeaderValue.
    for d in ["10", "61"] {
        assert_eq!(acquire_req(d, None).unwrap_err().code, InvalidHeaderValue);
        assert_eq!(InvalidHeaderValue.status(), StatusCode::BAD_REQUEST);
    }

    // 4. leased(A) past 15 s: expired/unlocked; renew A: leased again.
    let leased = run(&Lease::Available, acquire(a(), FIXED15), t0());
    let later = t0() + secs(16);
    assert_eq!(leased.state(later), LeaseState::Expired);
    assert_eq!(
        leased
            .apply(&LeaseAction::Renew { id: a() }, later)
            .unwrap()
            .lease
            .state(later),
        LeaseState::Leased
    );

    // 5. expired, then Put Blob without an id, then renew A: 409 mismatch.
    let after_put = leased
        .authorize(Scope::Blob, Access::Write, None, later)
        .unwrap();
    assert_eq!(
        after_put.apply(&LeaseAction::Renew { id: a() }, later),
        Err(LeaseIdMismatchWithLeaseOperation)
    );
    assert_eq!(
        LeaseIdMismatchWithLeaseOperation.status(),
        StatusCode::CONFLICT
    );

    // 6. break with period 3: 202, lease time <= 3, breaking/locked; 3 s later broken; release A.
    let long = run(&Lease::Available, acquire(a(), FIXED60), t0());
    let t = broken(&long, Some(3), t0());
    assert_eq!(t.status, StatusCode::ACCEPTED);
    assert!(t.lease_time.unwrap() <= 3);
    assert!(t.lease.state(t0()).is_locked());
    assert_eq!(t.lease.state(t0() + secs(3)), LeaseState::Broken);
    let released = t
        .lease
        .apply(&LeaseAction::Release { id: a() }, t0() + secs(3))
        .unwrap();
    assert_eq!(
        (released.status, released.lease),
        (StatusCode::OK, Lease::Available)
    );

    // 7. leased(A): Put Blob without id / with B / with A.
    assert_eq!(
        long.authorize(Scope::Blob, Access::Write, None, t0()),
        Err(LeaseIdMissing)
    );
    assert_eq!(
        long.authorize(Scope::Blob, Access::Write, Some(b()), t0()),
        Err(LeaseIdMismatchWithBlobOperation)
    );
    assert_eq!(
        long.authorize(Scope::Blob, Access::Write, Some(a()), t0()),
        Ok(long)
    );

    // 8. available blob, Put Blob with an id: 412.
    let got = Lease::Available.authorize(Scope::Blob, Access::Write, Some(a()), t0());
    assert_eq!(got, Err(LeaseNotPresentWithBlobOperation));
    assert_eq!(
        LeaseNotPresentWithBlobOperation.status(),
        StatusCode::PRECONDITION_FAILED
    );

    // 9. leased container: Delete Container without id / with B / with A.
    let w = |id| {
        long.authorize(Scope::Container, Access::Write, id, t0())
            .map(|_| ())
    };
    assert_eq!(
        [w(None), w(Some(b())), w(Some(a()))],
        [
            Err(LeaseIdMissing),
            Err(LeaseIdMismatchWithContainerOperation),
            Ok(()),
        ]
    );

    // 10. Get Blob without an id on a leased blob.
    assert_eq!(
        long.authorize(Scope::Blob, Access::Read, None, t0()),
        Ok(long)
    );
}

/// A lease `a()` acquired for ever at `t0()`.
fn held_for_ever() -> Lease {
    run(
        &Lease::Available,
        acquire(a(), LeaseDuration::Infinite),
        t0(),
    )
}

/// `lease` broken at `at` with `period`.
fn broken(lease: &Lease, period: Option<u32>, at: SystemTime) -> Transition {
    lease.apply(&LeaseAction::Break { period }, at).unwrap()
}
