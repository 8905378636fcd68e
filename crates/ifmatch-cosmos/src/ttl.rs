//! Time to live, as Azure defines it: a container's `defaultTtl` (absent: items never expire;
//! `-1`: they do not, unless their own `ttl` says so; `n`: `n` seconds after their last write)
//! and an item's `ttl` (`-1`: never; `n`: `n` seconds after its last write), which counts only
//! when the container has a `defaultTtl`. An item past its time is gone at once for every read
//! (point reads, queries, the feeds, batches: a create of its id succeeds), whatever the
//! container's `defaultTtl` was when it was written; its storage is removed in the background
//! (`sweep.rs`).

use std::time::{SystemTime, UNIX_EPOCH};

use ifmatch_table::{DateTime, Entity};
use serde_json::{Map, Value as Json};

use crate::document::json_fields;
use crate::failure::{Failure, bad_request};

/// Ticks of 100 ns in a second.
const TICKS_PER_SECOND: i64 = 10_000_000;

/// A container's `defaultTtl`: `None` when items never expire.
pub(crate) type Default = Option<i64>;

/// The longest time to live Azure takes, a container's default or an item's: 2^31 - 1
/// seconds (about 68 years).
pub(crate) const MAX_TTL: i64 = i32::MAX as i64;

/// A time to live as Azure takes it: `-1` or a whole number of seconds from 1 to [`MAX_TTL`].
fn valid(value: &Json) -> Option<i64> {
    value
        .as_i64()
        .filter(|n| *n == -1 || (1..=MAX_TTL).contains(n))
}

/// The property of a container that declares its items' time to live.
pub(crate) const PROPERTY: &str = "defaultTtl";

/// The `defaultTtl` a container's properties declare, or 400.
pub(crate) fn declared(resource: &Map<String, Json>) -> Result<Default, Failure> {
    match resource.get(PROPERTY) {
        None | Some(Json::Null) => Ok(None),
        Some(value) => valid(value).map(Some).ok_or_else(|| {
            bad_request(format!(
                "A container's defaultTtl is -1 or a whole number of seconds from 1 to {MAX_TTL}."
            ))
        }),
    }
}

/// The `defaultTtl` of a container as stored.
pub(crate) fn of(container: &Entity) -> Default {
    declared(&json_fields(container, &[PROPERTY])).unwrap_or_default()
}

/// An item's `ttl`, checked as it is written: absent, null, `-1` or a positive number.
pub(crate) fn check_item(resource: &Map<String, Json>) -> Result<(), Failure> {
    match resource.get("ttl") {
        None | Some(Json::Null) => Ok(()),
        Some(value) => valid(value).map(|_| ()).ok_or_else(|| {
            bad_request(format!(
                "An item's ttl is -1 or a whole number of seconds from 1 to {MAX_TTL}."
            ))
        }),
    }
}

/// The instant `now`, in ticks since 0001-01-01 (as `DateTime` counts them).
pub(crate) fn ticks(now: SystemTime) -> i64 {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    DateTime::from_unix(since.as_secs() as i64, since.subsec_nanos()).ticks()
}

/// Whether the stored document `entity` is past its time at `now` (ticks).
pub(crate) fn expired(default: Default, entity: &Entity, now: i64) -> bool {
    default.is_some()
        && past(
            default,
            entity.timestamp,
            json_fields(entity, &["ttl"]).get("ttl"),
            now,
        )
}

/// Whether a document written at `written`, whose own `ttl` is `own`, is past its time at
/// `now`: for a reader that holds the document's JSON already (no second parse of it).
pub(crate) fn past(default: Default, written: DateTime, own: Option<&Json>, now: i64) -> bool {
    let Some(default) = default else {
        return false;
    };
    match own.and_then(valid).unwrap_or(default) {
        -1 => false,
        seconds => {
            let seconds = seconds.saturating_mul(TICKS_PER_SECOND);
            written.ticks().saturating_add(seconds) <= now
        }
    }
}

/// `stored` when it is there and not past its time.
pub(crate) fn live(default: Default, stored: Option<Entity>, now: i64) -> Option<Entity> {
    stored.filter(|entity| !expired(default, entity, now))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use ifmatch_azure::ManualEnv;
    use ifmatch_table::MemoryTables;
    use serde_json::json;

    use crate::endpoint::Endpoint;

    /// A clock the test moves, shared with the endpoint.
    #[derive(Clone, Default)]
    pub(super) struct Moved(pub(super) Arc<ManualEnv>);

    impl ifmatch_azure::Env for Moved {
        fn now(&self) -> SystemTime {
            self.0.now()
        }

        fn random_uuid(&self) -> uuid::Uuid {
            self.0.random_uuid()
        }
    }

    /// An anonymous endpoint on a clock of its own, holding database `d` and in it the
    /// container `properties` describe.
    pub(super) async fn container(
        properties: serde_json::Value,
    ) -> (Moved, Endpoint<Arc<MemoryTables>, Moved>) {
        let clock = Moved::default();
        let endpoint = Endpoint::new(Arc::new(MemoryTables::new()), clock.clone())
            .with_serving(ifmatch_azure::Serving::anonymous());
        assert_eq!(
            send(&endpoint, "POST", "/dbs", json!({"id": "d"})).await,
            201
        );
        assert_eq!(
            send(&endpoint, "POST", "/dbs/d/colls", properties).await,
            201
        );
        (clock, endpoint)
    }

    pub(super) async fn send(
        endpoint: &Endpoint<Arc<MemoryTables>, Moved>,
        method: &str,
        path: &str,
        body: serde_json::Value,
    ) -> u16 {
        let (parts, ()) = http::Request::builder()
            .method(method)
            .uri(path)
            .header("x-ms-documentdb-partitionkey", "[\"p\"]")
            .body(())
            .unwrap()
            .into_parts();
        endpoint
            .handle(&parts, body.to_string().as_bytes())
            .await
            .status()
            .as_u16()
    }

    #[tokio::test]
    async fn an_item_past_its_time_frees_its_values_at_once_and_the_sweep_removes_it() {
        let (clock, endpoint) = container(json!({
            "id": "c", "partitionKey": {"paths": ["/pk"]}, "defaultTtl": 10,
            "uniqueKeyPolicy": {"uniqueKeys": [{"paths": ["/email"]}]},
        }))
        .await;
        let docs = "/dbs/d/colls/c/docs";
        let item = |id: &str, email: &str| json!({"id": id, "pk": "p", "email": email});
        assert_eq!(send(&endpoint, "POST", docs, item("a", "x")).await, 201);
        assert_eq!(send(&endpoint, "POST", docs, item("b", "x")).await, 409);
        clock.0.advance(Duration::from_secs(11));
        assert_eq!(
            send(&endpoint, "GET", "/dbs/d/colls/c/docs/a", json!(null)).await,
            404
        );
        // No sweep has run: the value is freed by the create that wants it.
        assert_eq!(send(&endpoint, "POST", docs, item("b", "x")).await, 201);
        assert_eq!(send(&endpoint, "POST", docs, item("c", "z")).await, 201);
        clock.0.advance(Duration::from_secs(11));
        assert_eq!(send(&endpoint, "POST", docs, item("a", "y")).await, 201);
        // `b` and `c` are past their time: the sweep removes both, then nothing more.
        assert_eq!(endpoint.sweep(100).await, 2);
        assert_eq!(endpoint.sweep(100).await, 0);
        assert_eq!(
            send(&endpoint, "GET", "/dbs/d/colls/c/docs/a", json!(null)).await,
            200
        );
    }
}

#[cfg(test)]
mod versions_tests {
    use std::sync::Arc;
    use std::time::Duration;

    use ifmatch_table::MemoryTables;
    use serde_json::json;

    use super::tests::Moved;
    use crate::endpoint::Endpoint;

    /// The all-versions feed of `endpoint`'s container `d/c` from its beginning: each entry's
    /// operation, id, and whether a time to live deleted it.
    async fn versions(
        endpoint: &Endpoint<Arc<MemoryTables>, Moved>,
    ) -> Vec<(String, String, bool)> {
        let (parts, ()) = http::Request::builder()
            .method("GET")
            .uri("/dbs/d/colls/c/docs")
            .header("a-im", "Full-Fidelity Feed")
            .body(())
            .unwrap()
            .into_parts();
        let answer = endpoint.handle(&parts, b"").await;
        if answer.status() == 304 {
            return Vec::new();
        }
        let body: serde_json::Value = serde_json::from_slice(answer.body()).unwrap();
        (body["Documents"].as_array().unwrap().iter())
            .map(|item| {
                let metadata = &item["metadata"];
                (
                    metadata["operationType"].as_str().unwrap().to_owned(),
                    metadata["id"].as_str().unwrap().to_owned(),
                    metadata["timeToLiveExpired"].as_bool().unwrap(),
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn a_delete_by_time_to_live_is_marked_and_versions_leave_after_their_retention() {
        let (clock, endpoint) = super::tests::container(json!({
            "id": "c", "partitionKey": {"paths": ["/pk"]}, "defaultTtl": 10,
            "changeFeedPolicy": {"retentionDuration": 5},
        }))
        .await;
        let item = json!({"id": "a", "pk": "p"});
        assert_eq!(
            super::tests::send(&endpoint, "POST", "/dbs/d/colls/c/docs", item).await,
            201
        );
        clock.0.advance(Duration::from_secs(11));
        assert_eq!(endpoint.sweep(100).await, 1);
        assert_eq!(
            versions(&endpoint).await,
            [
                ("create".into(), "a".into(), false),
                ("delete".into(), "a".into(), true)
            ]
        );
        // Five minutes on, both versions are past the retention: the sweep removes them.
        clock.0.advance(Duration::from_secs(301));
        assert_eq!(endpoint.sweep(100).await, 2);
        assert_eq!(versions(&endpoint).await, []);
    }
}
