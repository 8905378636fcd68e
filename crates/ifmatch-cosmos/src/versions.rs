//! The all-versions-and-deletes change feed (the SDKs' `AllVersionsAndDeletes` mode, `A-IM:
//! Full-Fidelity Feed`): every create, replace, upsert, patch and delete of a container's
//! documents, each with its operation and its number (`lsn`), in commit order, for the
//! containers whose `changeFeedPolicy.retentionDuration` (minutes) asks for it, kept that long.
//!
//! Each commit that writes or deletes documents puts one entry per document in the partition
//! `~versions` of the container's table, under the number the container's counter gives it
//! (the latest-version feed's, so both feeds are one order across a fleet): its operation, its
//! document's partition and id, the document as written (none for a delete), the number of the
//! version it replaced, and whether the delete was a time to live's. The sweep (`sweep.rs`)
//! removes the entries older than the retention.

use ifmatch_table::{Change, Entity, Expected, Value};
use serde_json::{Map, Value as Json, json};

use crate::document::{JSON, json_fields};
use crate::feed_entries::{entry_key, number_of};

/// The partition of a documents' table that holds every version.
pub(crate) const VERSIONS: &str = "~versions";

/// How long a container keeps its versions, in minutes: its `changeFeedPolicy`'s
/// `retentionDuration`; `None` when it keeps none.
pub(crate) type Retention = Option<i64>;

/// The property of a container that declares its change feed's retention.
pub(crate) const PROPERTY: &str = "changeFeedPolicy";

/// The retention a container's properties ask for.
pub(crate) fn declared(properties: &Map<String, Json>) -> Retention {
    (properties.get(PROPERTY)?.get("retentionDuration")?.as_i64()).filter(|m| *m > 0)
}

/// The retention of a container as stored.
pub(crate) fn of(container: &Entity) -> Retention {
    declared(&json_fields(container, &[PROPERTY]))
}

/// The entry numbered `number` for one document's change (its write, `None` for a delete),
/// replacing `before` (what was there, if anything); `expired` when a time to live deleted it.
pub(crate) fn entry(
    number: i64,
    key: &(String, String),
    write: Option<&Entity>,
    before: Option<&Entity>,
    expired: bool,
    at: ifmatch_table::DateTime,
) -> Change {
    let operation = match (write, before) {
        (Some(_), None) => "create",
        (Some(_), Some(_)) => "replace",
        (None, _) => "delete",
    };
    let mut properties = vec![
        ("op", Value::String(operation.to_owned())),
        ("pk", Value::String(key.0.clone())),
        ("id", Value::String(key.1.clone())),
        ("expired", Value::Boolean(expired)),
    ];
    if let Some(previous) = before.and_then(number_of) {
        properties.push(("previous", Value::Int64(previous)));
    }
    if let Some(Value::String(json)) = write.and_then(|w| w.properties.get(JSON)) {
        properties.push((JSON, Value::String(json.clone())));
    }
    let row = entry_key(number);
    Change {
        key: (VERSIONS.to_owned(), row.clone()),
        expected: Expected::Absent,
        write: Some(Entity::new(
            VERSIONS,
            &row,
            write.map_or(at, |w| w.timestamp),
            properties,
        )),
    }
}

/// An entry as the SDKs read it: `current` (the document as written, with `render`'s system
/// properties), `previous` for a delete (its id), and `metadata`.
pub(crate) fn item(entry: &Entity, render: impl Fn(&Entity) -> Json) -> Option<Json> {
    let text = |name: &str| match entry.properties.get(name) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    let number: i64 = entry.row_key.parse().ok()?;
    let (operation, pk, id) = (text("op")?, text("pk")?, text("id")?);
    let previous = match entry.properties.get("previous") {
        Some(Value::Int64(n)) => Json::from(*n),
        _ => Json::Null,
    };
    let expired = matches!(entry.properties.get("expired"), Some(Value::Boolean(true)));
    let key = crate::document::stored_value(&pk);
    let mut item = json!({
        "metadata": {
            "operationType": operation, "lsn": number,
            "crts": crate::document::seconds(entry.timestamp),
            "previousImageLSN": previous, "timeToLiveExpired": expired,
            "id": id, "partitionKey": [key],
        },
    });
    match text(JSON) {
        Some(_) => {
            let written = Entity::new(
                &pk,
                &id,
                entry.timestamp,
                [(JSON, Value::String(text(JSON)?))],
            );
            let mut current = render(&written);
            if let Json::Object(current) = &mut current {
                current.insert("_lsn".into(), Json::from(number));
            }
            item["current"] = current;
        }
        None => item["previous"] = json!({ "id": id }),
    }
    Some(item)
}
