//! The rules of an entity write, decided against the entity as it is: what `If-Match` asks,
//! what Insert, Update, Merge and Delete (and their `Insert Or` forms) do, and which
//! `Timestamp` (so which ETag) the written entity gets. Pure: the front reads the entity,
//! calls [`decide`], and commits the [`Change`] it makes as a compare-and-swap against the
//! entity it read, deciding again if another write came first.

use ifmatch_core::precondition::IfMatch;

use crate::clock::after;
use crate::error_code::ErrorCode;
use crate::odata::Decoded;
use crate::store::{Change, EntityKey, Expected};
use crate::value::{DateTime, Entity};

/// What a request does to an entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Insert Entity (`POST /table`): only where there is none.
    Insert,
    /// Update Entity (`PUT`), or Insert Or Replace without `If-Match`: the body replaces it.
    Replace,
    /// Merge Entity (`MERGE`, `PATCH`), or Insert Or Merge without `If-Match`: the body's
    /// properties replace theirs, the others stay.
    Merge,
    /// Delete Entity.
    Delete,
}

/// What an `If-Match` asks of the entity: the core's model, a version being the instant an
/// entity was written at (the one whose ETag the client holds).
pub type Condition = IfMatch<DateTime>;

/// Why a write is refused: the Table service's code (which gives the status).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}")]
pub struct Refused {
    /// Azure's error code.
    pub code: ErrorCode,
}

const fn refused(code: ErrorCode) -> Refused {
    Refused { code }
}

/// Reads an `If-Match` field, if any: `*`, or an entity's ETag as the service writes it
/// (`W/"datetime'2026-11-24T10%3A00%3A00.0000000Z'"`, the colons encoded or not). Anything
/// else is 400 `InvalidInput`, never a tag that matches nothing.
pub fn condition(value: Option<&str>) -> Result<Condition, Refused> {
    let Some(value) = value.map(str::trim) else {
        return Ok(IfMatch::Absent);
    };
    if value == "*" {
        return Ok(IfMatch::Any);
    }
    let inner = (value.strip_prefix("W/\"datetime'"))
        .and_then(|rest| rest.strip_suffix("'\""))
        .ok_or(refused(ErrorCode::InvalidInput))?;
    let decoded = inner.replace("%3A", ":").replace("%3a", ":");
    let when = DateTime::parse(&decoded).ok_or(refused(ErrorCode::InvalidInput))?;
    Ok(IfMatch::Version(Some(when)))
}

/// The change a write of `kind` under `condition` (its `If-Match`, if any) makes to the
/// entity under `key`, which is `current` now; `body` is the request's entity (empty for a
/// delete), `now` the time it is written at.
pub fn decide(
    kind: Kind,
    condition: Condition,
    key: &EntityKey,
    current: Option<&Entity>,
    body: Decoded,
    now: DateTime,
) -> Result<Change, Refused> {
    match (kind, condition.is_present(), current) {
        (Kind::Insert, _, Some(_)) => return Err(refused(ErrorCode::EntityAlreadyExists)),
        (Kind::Delete, false, _) => return Err(refused(ErrorCode::MissingRequiredHeader)),
        (_, true, None) => return Err(refused(ErrorCode::ResourceNotFound)),
        (_, true, Some(entity)) if !condition.holds(Some(&entity.timestamp)) => {
            return Err(refused(ErrorCode::UpdateConditionNotSatisfied));
        }
        _ => {}
    }
    // Checked again by the commit: what this decided from is still what is there.
    let expected = current.map_or(Expected::Absent, |e| Expected::Version(e.timestamp));
    let write = match kind {
        Kind::Delete => None,
        Kind::Insert | Kind::Replace => Some(body.properties),
        Kind::Merge => {
            let mut properties = current.map(|e| e.properties.clone()).unwrap_or_default();
            properties.extend(body.properties);
            Some(properties)
        }
    };
    let write = write.map(|properties| Entity {
        partition_key: key.0.clone(),
        row_key: key.1.clone(),
        timestamp: after(now, current.map(|e| e.timestamp)),
        properties,
    });
    Ok(Change {
        key: key.clone(),
        expected,
        write,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn at(second: i64) -> DateTime {
        DateTime::from_unix(second, 0)
    }

    fn key() -> EntityKey {
        ("p".to_owned(), "r".to_owned())
    }

    fn stored(n: i32) -> Entity {
        Entity::new(
            "p",
            "r",
            at(10),
            [("N", Value::Int32(n)), ("Kept", Value::Boolean(true))],
        )
    }

    fn body(n: i32) -> Decoded {
        let properties = [("N".to_owned(), Value::Int32(n))].into();
        Decoded {
            properties,
            ..Decoded::default()
        }
    }

    #[test]
    fn if_match_reads_stars_and_the_services_tags_only() {
        let tag = at(10).etag();
        assert_eq!(condition(None), Ok(IfMatch::Absent));
        assert_eq!(condition(Some("*")), Ok(IfMatch::Any));
        assert_eq!(condition(Some(&tag)), Ok(IfMatch::Version(Some(at(10)))));
        let plain = tag.replace("%3A", ":");
        assert_eq!(condition(Some(&plain)), Ok(IfMatch::Version(Some(at(10)))));
        for bad in ["\"v1\"", "W/\"datetime'yesterday'\"", "", "W/\"datetime'\""] {
            assert_eq!(
                condition(Some(bad)),
                Err(refused(ErrorCode::InvalidInput)),
                "{bad}"
            );
        }
    }

    #[test]
    fn each_write_against_each_state() {
        let now = at(20);
        let current = stored(1);
        let tag = IfMatch::Version(Some(at(10)));
        let stale = IfMatch::Version(Some(at(9)));
        let any = IfMatch::Any;
        let none = IfMatch::Absent;
        type Case = (
            Kind,
            Condition,
            bool,
            Result<Option<i32>, (u16, &'static str)>,
        );
        const LOST: Result<Option<i32>, (u16, &str)> = Err((412, "UpdateConditionNotSatisfied"));
        let cases: &[Case] = &[
            (Kind::Insert, none, false, Ok(Some(2))),
            (Kind::Insert, none, true, Err((409, "EntityAlreadyExists"))),
            (Kind::Replace, tag, true, Ok(Some(2))),
            (Kind::Replace, stale, true, LOST),
            (Kind::Replace, any, true, Ok(Some(2))),
            (Kind::Replace, any, false, Err((404, "ResourceNotFound"))),
            (Kind::Replace, none, false, Ok(Some(2))),
            (Kind::Replace, none, true, Ok(Some(2))),
            (Kind::Merge, tag, true, Ok(Some(2))),
            (Kind::Merge, stale, true, LOST),
            (Kind::Merge, none, false, Ok(Some(2))),
            (Kind::Delete, tag, true, Ok(None)),
            (Kind::Delete, any, true, Ok(None)),
            (Kind::Delete, stale, true, LOST),
            (Kind::Delete, any, false, Err((404, "ResourceNotFound"))),
            (
                Kind::Delete,
                none,
                true,
                Err((400, "MissingRequiredHeader")),
            ),
        ];
        for (kind, condition, present, want) in cases {
            let current = present.then_some(&current);
            let decided = decide(*kind, *condition, &key(), current, body(2), now);
            let what = format!("{kind:?} {condition:?} over {current:?}");
            match (decided, want) {
                (Ok(change), Ok(n)) => {
                    let n_of = |e: &Entity| e.properties.get("N").cloned();
                    assert_eq!(
                        change.write.as_ref().map(n_of),
                        n.map(|n| Some(Value::Int32(n))),
                        "{what}"
                    );
                    let expected =
                        current.map_or(Expected::Absent, |e| Expected::Version(e.timestamp));
                    assert_eq!(change.expected, expected, "{what}");
                }
                (Err(refusal), Err((status, code))) => {
                    let refused = (refusal.code.status().as_u16(), refusal.code.as_str());
                    assert_eq!(refused, (*status, *code), "{what}");
                }
                (decided, want) => panic!("{what}: {decided:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_merge_keeps_what_the_body_does_not_name_and_a_replace_does_not() {
        let current = stored(1);
        let merged = decide(
            Kind::Merge,
            IfMatch::Absent,
            &key(),
            Some(&current),
            body(2),
            at(20),
        )
        .unwrap();
        let merged = merged.write.unwrap().properties;
        assert_eq!(merged["Kept"], Value::Boolean(true));
        assert_eq!(merged["N"], Value::Int32(2));
        let replaced = decide(
            Kind::Replace,
            IfMatch::Absent,
            &key(),
            Some(&current),
            body(2),
            at(20),
        );
        let replaced = replaced.unwrap().write.unwrap().properties;
        assert!(!replaced.contains_key("Kept"));
    }

    #[test]
    fn a_write_never_gives_an_entity_a_tag_it_had() {
        let current = stored(1);
        // The clock behind the stored timestamp, or on it: a tick after it.
        for now in [at(5), at(10)] {
            let change = decide(
                Kind::Replace,
                IfMatch::Absent,
                &key(),
                Some(&current),
                body(1),
                now,
            )
            .unwrap();
            let written = change.write.unwrap().timestamp;
            assert_eq!(written.ticks(), at(10).ticks() + 1);
            assert_ne!(written.etag(), current.timestamp.etag());
        }
        assert_eq!(after(at(20), Some(at(10))), at(20));
        assert_eq!(after(at(20), None), at(20));
    }
}
