//! Cosmos DB's rules for what a resource is: its id, its partition key value, the system
//! properties it is read with, and the `_etag` a write gives it (from the instant it was
//! written, later than every one before it, so a tag never names two versions).

use ifmatch_table::{DateTime, Entity};
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
    resource_of(json_within(body, MAX_NESTING)?)
}

/// [`resource`] of JSON already parsed (within [`MAX_NESTING`]).
pub fn resource_of(value: Value) -> Result<Map<String, Value>, Failure> {
    let Value::Object(mut object) = value else {
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

/// The most levels of objects and arrays an item nests, itself the first (Azure's per-item
/// limits: 128).
pub const MAX_NESTING: usize = 128;

/// `body` as JSON, refused (400) when it is not JSON or nests objects and arrays deeper than
/// `most` levels. Read without serde_json's own bound (127 levels), so that Azure's 128 fit:
/// the depth is counted first, in one pass over the bytes, so the reader's recursion is bounded.
pub(crate) fn json_within(body: &[u8], most: usize) -> Result<Value, Failure> {
    let deepest = nesting(body);
    if deepest > most {
        return Err(bad_request(format!(
            "The request payload nests objects and arrays {deepest} levels deep; an item nests at most {MAX_NESTING}."
        )));
    }
    let mut reader = serde_json::Deserializer::from_slice(body);
    reader.disable_recursion_limit();
    let value = serde::Deserialize::deserialize(&mut reader).and_then(|value| {
        reader.end()?;
        Ok(value)
    });
    value.map_err(|_| bad_request("The request payload is invalid: it is not a JSON object."))
}

/// 400 when `value` (a document a patch made) nests deeper than [`MAX_NESTING`] levels.
pub(crate) fn check_nesting(value: &Value) -> Result<(), Failure> {
    fn depth(value: &Value) -> usize {
        match value {
            Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
            Value::Object(fields) => 1 + fields.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }
    let deepest = depth(value);
    match deepest > MAX_NESTING {
        true => Err(bad_request(format!(
            "The document would nest objects and arrays {deepest} levels deep; an item nests at most {MAX_NESTING}."
        ))),
        false => Ok(()),
    }
}

/// The most levels of objects and arrays `json` opens at once (strings skipped).
pub(crate) fn nesting(json: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
    for &byte in json {
        match (in_string, byte) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') | (false, b'"') => in_string = !in_string,
            (false, b'[' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
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

/// Whether a `POST` to a container's documents is a query, as the SDKs mark one
/// (`x-ms-documentdb-isquery: true`, or a body of `application/query+json`), not a write.
pub fn is_query(headers: &http::HeaderMap) -> bool {
    let flag = (headers.get("x-ms-documentdb-isquery"))
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
    let body = (headers.get(http::header::CONTENT_TYPE))
        .is_some_and(|v| v.as_bytes().starts_with(b"application/query+json"));
    flag || body
}

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
    match keys_of_header(header)?.as_slice() {
        [value] => Ok(value.clone()),
        _ => Err(bad_request(
            "The partition key supplied in x-ms-partitionkey header has one value per path of the container's partition key.",
        )),
    }
}

/// The `x-ms-documentdb-partitionkey` header's values: a JSON array of one or more (a
/// hierarchical key's, or a prefix of it).
pub fn keys_of_header(header: &str) -> Result<Vec<Value>, Failure> {
    match serde_json::from_str::<Value>(header) {
        Ok(Value::Array(values)) if !values.is_empty() => Ok(values),
        _ => Err(bad_request(
            "The partition key supplied in x-ms-partitionkey header has an incorrect format.",
        )),
    }
}

/// The stored form of a hierarchical partition key (`MultiHash`), whole or a prefix of it:
/// its effective partition key (each value's, one after another, as the SDKs compute it)
/// then the JSON array of its values. Stored keys that share a prefix's values share its
/// effective key's start, so a prefix, by its values or by the SDKs' effective-key range, is
/// one run of keys. A prefix's form has its effective key alone.
pub fn stored_keys(values: &[Value], whole: bool) -> Result<String, Failure> {
    let canonical: Vec<Value> = (values.iter())
        .map(|value| Ok(serde_json::from_str(&stored_key(value)?).unwrap_or(Value::Null)))
        .collect::<Result<_, Failure>>()?;
    let effective: String = (canonical.iter())
        .map(crate::hashed_key::effective)
        .collect();
    Ok(match whole {
        true => format!("{effective}{}", Value::Array(canonical)),
        false => effective,
    })
}

/// The partition key value a stored key holds (for a hierarchical key, the array of its
/// values).
pub fn stored_value(stored: &str) -> Value {
    let json = match hierarchical(stored) {
        Some(at) => &stored[at..],
        None => stored,
    };
    serde_json::from_str(json).unwrap_or(Value::Null)
}

/// The effective partition key of a stored key, as the SDKs scope feeds and queries by it.
pub fn stored_effective(stored: &str) -> String {
    match hierarchical(stored) {
        Some(at) => stored[..at].to_owned(),
        None => crate::hashed_key::effective(&stored_value(stored)),
    }
}

/// Where a hierarchical stored key's JSON starts (after its effective key), if it is one: a
/// one-value key's JSON is never an array, and its own text starts with no hex digit and a `[`.
fn hierarchical(stored: &str) -> Option<usize> {
    let at = stored.find('[')?;
    (at > 0 && stored[..at].bytes().all(|b| b.is_ascii_hexdigit())).then_some(at)
}

/// The property of a stored resource that holds its JSON.
pub(crate) const JSON: &str = "json";

/// The size of the document `entity` keeps, as stored (what reading and writing it cost).
pub(crate) fn stored_len(entity: &Entity) -> usize {
    match entity.properties.get(JSON) {
        Some(ifmatch_table::Value::String(text)) => text.len(),
        _ => 0,
    }
}

/// The JSON a stored resource holds (empty when it holds none).
pub(crate) fn json_of(entity: &Entity) -> Map<String, Value> {
    stored_json(entity, |reader| serde::Deserialize::deserialize(reader))
}

/// The properties named `names` of the JSON a stored resource holds, the others skipped
/// unbuilt. A container's rules (its partition key, its time to live, its unique keys, its
/// change feed's retention) are read on every write to it, and its whole JSON (its indexing
/// policy among the rest) cost more to build each time than the document written.
pub(crate) fn json_fields(entity: &Entity, names: &[&str]) -> Map<String, Value> {
    stored_json(entity, |reader| {
        serde::de::DeserializeSeed::deserialize(Named(names), reader)
    })
}

/// `read` over the JSON a stored resource holds; empty when it holds none, or none `read`
/// takes.
fn stored_json(
    entity: &Entity,
    read: impl FnOnce(
        &mut serde_json::Deserializer<serde_json::de::StrRead<'_>>,
    ) -> serde_json::Result<Map<String, Value>>,
) -> Map<String, Value> {
    match entity.properties.get(JSON) {
        // Stored resources were checked when written: up to Azure's 128 levels, past
        // serde_json's own bound of 127.
        Some(ifmatch_table::Value::String(text)) => {
            let mut reader = serde_json::Deserializer::from_str(text);
            reader.disable_recursion_limit();
            read(&mut reader).unwrap_or_default()
        }
        _ => Map::new(),
    }
}

/// Reads a JSON object, keeping the properties it names.
struct Named<'a>(&'a [&'a str]);

impl<'de> serde::de::DeserializeSeed<'de> for Named<'_> {
    type Value = Map<String, Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Self::Value, D::Error> {
        reader.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Named<'_> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = Map::new();
        while let Some(name) = map.next_key::<String>()? {
            if self.0.contains(&name.as_str()) {
                kept.insert(name, map.next_value()?);
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(kept)
    }
}

/// The longest partition key value Azure takes, in bytes (each value of a hierarchical key).
pub const MAX_KEY_VALUE: usize = 2048;

/// The stored form of a partition key value: one JSON text per value, so `1` and `1.0` are
/// one key, as in Cosmos. A string past [`MAX_KEY_VALUE`] bytes is refused: stored, it could
/// never be named again (its header would be past what any server reads).
pub fn stored_key(value: &Value) -> Result<String, Failure> {
    let canonical = match value {
        Value::String(text) if text.len() > MAX_KEY_VALUE => {
            return Err(bad_request(format!(
                "The partition key value is {} bytes long; a partition key value is at most {MAX_KEY_VALUE} bytes.",
                text.len()
            )));
        }
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
    use serde_json::json;

    #[test]
    fn a_hierarchical_key_is_stored_after_its_effective_key_as_the_sdks_compute_it() {
        // The JS SDK's hashMultiHashPartitionKey (4.10.1) for these values.
        let whole = [json!("tenant1"), json!("user1"), json!("s1")];
        let stored = stored_keys(&whole, true).unwrap();
        let effective = "0DAE0B8467B011E957BC0B8B0DEB5ACA236A5BE3329A7AD57D4B998E8602BD7B2924A879AFFF52A411F93F1A83532751";
        assert_eq!(stored, format!(r#"{effective}["tenant1","user1","s1"]"#));
        assert_eq!(stored_effective(&stored), effective);
        assert_eq!(stored_value(&stored), json!(["tenant1", "user1", "s1"]));
        let prefix = stored_keys(&whole[..1], false).unwrap();
        assert_eq!(prefix, "0DAE0B8467B011E957BC0B8B0DEB5ACA");
        assert!(stored.starts_with(&prefix));
        assert_eq!(
            stored_effective(&stored_keys(&[json!(1), json!(true)], true).unwrap()),
            "20CD98B339BA78A5D0CF6953B87070B00E711127C5B5A8E4726AC6DD306A3E59"
        );
        // One-value keys are what they were: their JSON, whatever it holds.
        for one in [r#""a[b]""#, "123", "{}", "null"] {
            assert_eq!(
                stored_value(one),
                serde_json::from_str::<Value>(one).unwrap()
            );
        }
    }

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

#[cfg(test)]
mod nesting_tests {
    use super::*;

    #[test]
    fn an_item_nests_128_levels_and_not_129() {
        let nested = |levels: usize| {
            let inner = levels - 1;
            format!(
                "{{\"id\":\"x\",\"s\":\"[[{{\",\"a\":{}{}}}",
                "[".repeat(inner),
                "]".repeat(inner)
            )
        };
        assert!(
            resource(nested(128).as_bytes()).is_ok(),
            "128 levels, brackets in a string not counted"
        );
        let refused = resource(nested(129).as_bytes()).unwrap_err();
        assert!(
            refused.message.contains("129 levels"),
            "{}",
            refused.message
        );
        assert_eq!(
            nesting(br#"{"a":"\"[{","b":[1]}"#),
            2,
            "an escaped quote does not end the string"
        );
        // What a patch makes is held to the same bound.
        let mut deep = Value::from(1);
        for _ in 0..127 {
            deep = Value::Array(vec![deep]);
        }
        let item = |a: Value| serde_json::json!({ "id": "x", "a": a });
        assert!(check_nesting(&item(deep.clone())).is_ok(), "128 levels");
        assert!(
            check_nesting(&item(Value::Array(vec![deep]))).is_err(),
            "129 levels"
        );
    }
}
