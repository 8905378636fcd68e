//! Cosmos DB's rules for what a resource is: its id, its partition key value, the system
//! properties it is read with, and the `_etag` a write gives it (from the instant it was
//! written, later than every one before it, so a tag never names two versions).

use ifmatch_table::DateTime;
use serde_json::{Map, Value};

use crate::failure::{Failure, bad_request};

/// The largest document, in bytes of its JSON.
pub const MAX_DOCUMENT: usize = 2 << 20;

/// The longest id, in bytes of UTF-8 (Azure's documented limit).
pub const MAX_ID: usize = 1023;

/// The properties the service writes; a client's own values for them are dropped.
const SYSTEM: [&str; 5] = ["_rid", "_self", "_etag", "_ts", "_attachments"];

/// A request's body as a resource: a JSON object with a valid `id`, without the system
/// properties it may carry from an earlier read.
pub fn resource(body: &[u8]) -> Result<Map<String, Value>, Failure> {
    let Ok(Value::Object(mut object)) = serde_json::from_slice::<Value>(body) else {
        return Err(bad_request(
            "The request payload is invalid: it is not a JSON object.",
        ));
    };
    for name in SYSTEM {
        object.shift_remove(name);
    }
    match object.get("id") {
        Some(Value::String(id)) => check_id(id)?,
        Some(_) => {
            return Err(bad_request(
                "The input content is invalid because the required property, id, is not a string.",
            ));
        }
        None => {
            return Err(bad_request(
                "The input content is invalid because the required properties - 'id; ' - are missing",
            ));
        }
    }
    Ok(object)
}

/// Whether `id` may name a resource: 1 to 1,023 bytes, none of `/ \ ? #` (which Azure refuses
/// too: a link could not name it), not ending in a space.
pub fn check_id(id: &str) -> Result<(), Failure> {
    if id.is_empty() || id.len() > MAX_ID {
        return Err(bad_request(format!(
            "The id must be 1 to {MAX_ID} bytes of UTF-8 long; this one is {} bytes.",
            id.len()
        )));
    }
    if id.contains(['/', '\\', '?', '#']) {
        return Err(bad_request(
            "The id contains one of the characters '/', '\\\\', '?', '#', which ids may not hold.",
        ));
    }
    if id.ends_with(' ') {
        return Err(bad_request("The id ends with a space, which ids may not."));
    }
    Ok(())
}

/// The longest database or container id, in characters.
pub const MAX_NAME: usize = 255;

/// Whether `id` may name a database or a container: an id of at most 255 characters.
pub fn check_name(id: &str) -> Result<(), Failure> {
    match id.chars().count() {
        ..=MAX_NAME => Ok(()),
        _ => Err(bad_request(format!(
            "A database's or container's id is 1 to {MAX_NAME} characters long."
        ))),
    }
}

/// The `_etag` of a version written at `at`: a quoted GUID-shaped string of its ticks.
pub fn etag(at: DateTime) -> String {
    let ticks = at.ticks() as u64;
    format!(
        "\"{:08x}-{:04x}-{:04x}-0000-000000000000\"",
        ticks >> 32,
        (ticks >> 16) & 0xffff,
        ticks & 0xffff
    )
}

/// The version an `If-Match` or `If-None-Match` tag names, when it is one this service wrote.
pub fn version(tag: &str) -> Option<DateTime> {
    let inner = tag.trim().strip_prefix('"')?.strip_suffix('"')?;
    let parts: Vec<&str> = inner.split('-').collect();
    let [high, middle, low, "0000", "000000000000"] = parts.as_slice() else {
        return None;
    };
    let (high, middle, low) = (
        u64::from_str_radix(high, 16).ok()?,
        u64::from_str_radix(middle, 16).ok()?,
        u64::from_str_radix(low, 16).ok()?,
    );
    let ticks = (high << 32) | (middle << 16) | low;
    Some(DateTime::from_ticks(i64::try_from(ticks).ok()?))
}

/// `_ts`: the whole seconds since the Unix epoch of `at`.
pub fn seconds(at: DateTime) -> i64 {
    const UNIX_EPOCH_TICKS: i64 = 621_355_968_000_000_000;
    (at.ticks() - UNIX_EPOCH_TICKS).div_euclid(10_000_000)
}

/// `resource` as read: with its system properties, `_self` its link, `_rid` its short id.
pub fn with_system(
    mut resource: Map<String, Value>,
    link: &str,
    rid: &str,
    at: DateTime,
) -> Map<String, Value> {
    resource.insert("_rid".into(), rid.into());
    resource.insert("_self".into(), format!("{link}/").into());
    resource.insert("_etag".into(), etag(at).into());
    resource.insert("_ts".into(), seconds(at).into());
    resource
}

/// The partition key value of a document at `path` (`/a/b`): the value there, or `{}`
/// (Cosmos's "undefined") when there is none.
pub fn key_at(document: &Map<String, Value>, path: &str) -> Value {
    let mut names = path.trim_start_matches('/').split('/');
    let first = names.next().unwrap_or_default();
    let mut found = document.get(first);
    for name in names {
        found = found.and_then(|value| value.get(name));
    }
    found.cloned().unwrap_or_else(|| Value::Object(Map::new()))
}

/// The `x-ms-documentdb-partitionkey` header's value: a JSON array of one value.
pub fn key_of_header(header: &str) -> Result<Value, Failure> {
    match serde_json::from_str::<Value>(header) {
        Ok(Value::Array(mut values)) if values.len() == 1 => Ok(values.remove(0)),
        Ok(Value::Array(values)) if values.len() > 1 => Err(bad_request(
            "Hierarchical partition keys are not served by this server yet: send one value.",
        )),
        _ => Err(bad_request(
            "The partition key supplied in x-ms-partitionkey header has an incorrect format.",
        )),
    }
}

/// The stored form of a partition key value: one JSON text per value, so `1` and `1.0` are
/// one key, as in Cosmos.
pub fn stored_key(value: &Value) -> Result<String, Failure> {
    let canonical = match value {
        Value::Number(n) => serde_json::Number::from_f64(n.as_f64().unwrap_or(f64::NAN))
            .map(Value::Number)
            .ok_or_else(|| bad_request("The partition key is not a finite number."))?,
        Value::String(_) | Value::Bool(_) | Value::Null => value.clone(),
        Value::Object(object) if object.is_empty() => value.clone(),
        _ => {
            return Err(bad_request(
                "A partition key value is a string, a number, a boolean or null.",
            ));
        }
    };
    Ok(canonical.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_names_its_version_and_nothing_else_names_one() {
        let at = DateTime::from_ticks(639_000_000_123_456_789);
        let tag = etag(at);
        assert_eq!(version(&tag), Some(at));
        assert_eq!(version(&format!(" {tag} ")), Some(at));
        assert_eq!(version("\"00000000-0000-0000-8ac5-1ad2a10d01db\""), None);
        assert_eq!(version("*"), None);
        assert_ne!(etag(DateTime::from_ticks(at.ticks() + 1)), tag);
    }

    #[test]
    fn ids_and_keys_are_checked_as_cosmos_does() {
        assert!(check_id("a b").is_ok());
        for bad in ["", "a/b", "a\\b", "a?b", "a#b", "ends "] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_id(&"x".repeat(1023)).is_ok());
        assert!(check_id(&"€".repeat(341)).is_ok(), "1,023 bytes");
        assert!(check_id(&"x".repeat(1024)).is_err());
        assert!(check_id(&"€".repeat(342)).is_err(), "1,026 bytes");
        assert!(check_name(&"x".repeat(255)).is_ok());
        assert!(check_name(&"x".repeat(256)).is_err());
        assert_eq!(
            stored_key(&serde_json::json!(1)).unwrap(),
            stored_key(&serde_json::json!(1.0)).unwrap()
        );
        assert_ne!(
            stored_key(&serde_json::json!("1")).unwrap(),
            stored_key(&serde_json::json!(1)).unwrap()
        );
        assert!(stored_key(&serde_json::json!([1])).is_err());
        let doc = resource(br#"{"id":"a","pk":{"city":"Oslo"},"_etag":"x"}"#).unwrap();
        assert!(!doc.contains_key("_etag"));
        assert_eq!(key_at(&doc, "/pk/city"), serde_json::json!("Oslo"));
        assert_eq!(key_at(&doc, "/missing"), serde_json::json!({}));
        assert!(resource(b"[1]").is_err());
        assert!(resource(br#"{"id":7}"#).is_err());
        assert_eq!(
            key_of_header(r#"["Oslo"]"#).unwrap(),
            serde_json::json!("Oslo")
        );
        assert!(key_of_header("Oslo").is_err());
    }
}
