//! Property tests of the blob dialect's pure rules: no request's fields panic the precondition
//! evaluator or the lease parser, and no history of lease actions lets a write through a lease.

use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue};
use ifmatch_blob::lease::{Access, Lease, LeaseAction, LeaseDuration, LeaseId, Scope};
use ifmatch_blob::precondition::{Operation, evaluate};
use ifmatch_core::precondition::Validators;
use ifmatch_core::{EntityTag, date::to_http_date};
use proptest::prelude::*;

proptest! {
    #[test]
    fn the_evaluator_never_panics(
        fields in prop::collection::vec(("[ -~]{0,40}", 0usize..6), 0..8),
        secs in 0u64..4_000_000_000, exists in any::<bool>(),
    ) {
        let names = ["if-match", "if-none-match", "if-range", "if-modified-since", "if-unmodified-since", "range"];
        let mut headers = HeaderMap::new();
        for (value, name) in fields {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.append(names[name], value);
            }
        }
        let tag = EntityTag::strong("v1").unwrap();
        let current = Validators::new(Some(tag), Some(to_http_date(UNIX_EPOCH + Duration::from_secs(secs))));
        let current = exists.then_some(&current);
        for op in [Operation::Read, Operation::Put, Operation::Write, Operation::Container] {
            let _ = evaluate(op, &headers, current);
        }
    }

    #[test]
    fn lease_requests_never_panic(
        action in prop_oneof![Just("acquire".to_owned()), Just("break".to_owned()), "[ -~]{0,12}"],
        duration in "[ -~]{0,24}", period in "[ -~]{0,24}", id in "[ -~]{0,40}",
    ) {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("x-ms-lease-action", action), ("x-ms-lease-duration", duration),
            ("x-ms-lease-break-period", period), ("x-ms-lease-id", id.clone()),
            ("x-ms-proposed-lease-id", id),
        ] {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
        let fresh = LeaseId::from_uuid(uuid::Uuid::from_u128(7));
        if let Ok(action) = LeaseAction::from_headers(&headers, || fresh) {
            let _ = Lease::Available.apply(&action, UNIX_EPOCH);
        }
    }

    /// Whatever sequence of actions and writes runs, at any times, a locked lease never lets a
    /// write through without its id, and the record always survives serde.
    #[test]
    fn lease_invariants_hold_over_random_histories(
        steps in prop::collection::vec((0u8..7, 0u8..3, 0u64..70_000, 0u32..62), 1..40),
    ) {
        let ids = [1u128, 2, 3].map(|n| LeaseId::from_uuid(uuid::Uuid::from_u128(n)));
        let mut lease = Lease::Available;
        let mut now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        for (kind, who, advance_ms, secs) in steps {
            now += Duration::from_millis(advance_ms);
            let id = ids[usize::from(who)];
            let action = match kind {
                0 => Some(LeaseAction::Acquire { id, duration: if secs < 15 { LeaseDuration::Infinite } else { LeaseDuration::Fixed(secs.min(60)) } }),
                1 => Some(LeaseAction::Renew { id }),
                2 => Some(LeaseAction::Change { id, proposed: ids[usize::from((who + 1) % 3)] }),
                3 => Some(LeaseAction::Release { id }),
                4 => Some(LeaseAction::Break { period: (secs <= 60).then_some(secs) }),
                _ => None,
            };
            match action {
                Some(action) => {
                    if let Ok(t) = lease.apply(&action, now) {
                        lease = t.lease;
                    }
                }
                None => {
                    let given = (kind == 6).then_some(id);
                    let locked = lease.state(now).is_locked();
                    match lease.authorize(Scope::Blob, Access::Write, given, now) {
                        Ok(after) => {
                            prop_assert!(!locked || given == lease.id(), "write let through");
                            lease = after;
                        }
                        Err(_) => prop_assert!(locked || given.is_some()),
                    }
                }
            }
            let json = serde_json::to_string(&lease).unwrap();
            prop_assert_eq!(serde_json::from_str::<Lease>(&json).unwrap(), lease);
        }
    }
}
