//! Entities as the Table service's OData JSON spells them: read from a request's body (typed
//! by `Name@odata.type` annotations, or by their JSON type), checked against Azure's limits,
//! and written at the metadata level a client asks for (`nometadata`, `minimalmetadata`,
//! `fullmetadata`).

use crate::error_code::ErrorCode;
use std::collections::BTreeMap;

use base64::Engine;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value as Json, json};

use crate::value::{DateTime, Entity, Value};

/// The most properties an entity has, `PartitionKey`, `RowKey` and `Timestamp` included.
pub const MAX_PROPERTIES: usize = 255;
/// The largest entity, as Azure weighs it ([`Entity::size`]).
pub const MAX_ENTITY: usize = 1 << 20;
/// The largest string or binary value, in bytes (UTF-16 for a string).
pub const MAX_VALUE: usize = 64 << 10;
/// The largest key, in bytes (UTF-16).
pub const MAX_KEY: usize = 1 << 10;
/// The longest property name, in characters.
pub const MAX_NAME: usize = 255;

/// How much OData metadata an answer carries: the `odata=` parameter of its `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metadata {
    /// `nometadata`: values alone.
    No,
    /// `minimalmetadata` (the default): the types JSON cannot tell, the ETag.
    Minimal,
    /// `fullmetadata`: every type, the entity's type, id and link.
    Full,
}

impl Metadata {
    /// The level an `Accept` header asks for; minimal when it names none.
    pub fn of(accept: Option<&str>) -> Self {
        let accept = accept.unwrap_or_default().to_ascii_lowercase();
        if accept.contains("odata=nometadata") {
            Self::No
        } else if accept.contains("odata=fullmetadata") {
            Self::Full
        } else {
            Self::Minimal
        }
    }
}

/// Why an entity's body is refused: the Table service's error code, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {detail}")]
pub struct OdataError {
    /// Azure's error code (`InvalidInput`, `PropertyValueTooLarge`, ...); every one is a 400.
    pub code: ErrorCode,
    /// What was wrong, for the answer's message.
    pub detail: String,
}

fn refuse(code: ErrorCode, detail: impl Into<String>) -> OdataError {
    let detail = detail.into();
    OdataError { code, detail }
}

/// An entity's body, read: its keys when it names them, and its properties.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decoded {
    /// `PartitionKey`, if the body has it.
    pub partition_key: Option<String>,
    /// `RowKey`, if the body has it.
    pub row_key: Option<String>,
    /// The other properties (`Timestamp` and the `odata.` fields are the server's: ignored).
    pub properties: BTreeMap<String, Value>,
}

/// Reads an entity from a request's JSON body.
pub fn decode(body: &[u8]) -> Result<Decoded, OdataError> {
    let invalid =
        |e: serde_json::Error| refuse(ErrorCode::InvalidInput, format!("not a JSON object: {e}"));
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let Pairs(pairs) = (&mut deserializer)
        .deserialize_map(PairsVisitor)
        .map_err(invalid)?;
    deserializer.end().map_err(invalid)?;
    let mut types = BTreeMap::new();
    let mut values = BTreeMap::new();
    for (name, json) in pairs {
        let (map, key) = match name.split_once('@') {
            Some((property, "odata.type")) => (&mut types, property.to_owned()),
            Some(_) => continue,
            None if name.starts_with("odata.") || name == "Timestamp" => continue,
            None => (&mut values, name),
        };
        if map.insert(key.clone(), json).is_some() {
            return Err(refuse(ErrorCode::DuplicatePropertiesSpecified, key));
        }
    }
    let mut decoded = Decoded::default();
    for (name, json) in values {
        let annotation = types.remove(&name);
        let typed = match &annotation {
            Some(Json::String(edm)) => Some(edm.as_str()),
            Some(_) => {
                return Err(refuse(
                    ErrorCode::InvalidInput,
                    format!("{name}: a type is a string"),
                ));
            }
            None => None,
        };
        if name == "PartitionKey" || name == "RowKey" {
            let key = key_of(&name, &json, typed)?;
            let slot = match name.as_str() {
                "PartitionKey" => &mut decoded.partition_key,
                _ => &mut decoded.row_key,
            };
            *slot = Some(key);
            continue;
        }
        check_name(&name)?;
        let Some(value) = value_of(&name, json, typed)? else {
            continue;
        };
        decoded.properties.insert(name, value);
    }
    if let Some(name) = types.keys().find(|name| name.as_str() != "Timestamp") {
        return Err(refuse(
            ErrorCode::InvalidInput,
            format!("{name}: a type with no value"),
        ));
    }
    if decoded.properties.len() + 3 > MAX_PROPERTIES {
        return Err(refuse(
            ErrorCode::TooManyProperties,
            "more than 255 properties",
        ));
    }
    Ok(decoded)
}

/// A key's value: a string of at most 1 KiB without `/ \ # ?` or control characters.
fn key_of(name: &str, json: &Json, typed: Option<&str>) -> Result<String, OdataError> {
    let (Json::String(key), None | Some("Edm.String")) = (json, typed) else {
        return Err(refuse(
            ErrorCode::InvalidInput,
            format!("{name} is a string"),
        ));
    };
    check_key(name, key)?;
    Ok(key.clone())
}

/// Whether `key` may be a `PartitionKey` or `RowKey` (`name`).
pub fn check_key(name: &str, key: &str) -> Result<(), OdataError> {
    if key.encode_utf16().count() * 2 > MAX_KEY {
        return Err(refuse(
            ErrorCode::KeyValueTooLarge,
            format!("{name} is over 1 KiB"),
        ));
    }
    let forbidden = |c: char| matches!(c, '/' | '\\' | '#' | '?') || c.is_control();
    if key.chars().any(forbidden) {
        let detail = format!("{name} holds / \\ # ? or a control character");
        return Err(refuse(ErrorCode::OutOfRangeInput, detail));
    }
    Ok(())
}

/// Whether `name` may name a property: an identifier of at most 255 characters.
fn check_name(name: &str) -> Result<(), OdataError> {
    if name.chars().count() > MAX_NAME {
        return Err(refuse(
            ErrorCode::PropertyNameTooLong,
            name.chars().take(64).collect::<String>(),
        ));
    }
    let mut chars = name.chars();
    let first = chars.next().is_some_and(|c| c.is_alphabetic() || c == '_');
    if !first || !chars.all(|c| c.is_alphanumeric() || c == '_') {
        return Err(refuse(ErrorCode::PropertyNameInvalid, name));
    }
    Ok(())
}

/// The value of the property `name`, typed by its annotation or its JSON; `None` for a null,
/// which stores nothing.
fn value_of(name: &str, json: Json, typed: Option<&str>) -> Result<Option<Value>, OdataError> {
    let wrong = || {
        refuse(
            ErrorCode::InvalidValueType,
            format!("{name} is not a {}", typed.unwrap_or("value")),
        )
    };
    let value = match (typed, json) {
        (_, Json::Null) => return Ok(None),
        (None | Some("Edm.String"), Json::String(text)) => {
            if text.encode_utf16().count() * 2 > MAX_VALUE {
                return Err(refuse(ErrorCode::PropertyValueTooLarge, name));
            }
            Value::String(text)
        }
        (None | Some("Edm.Boolean"), Json::Bool(b)) => Value::Boolean(b),
        (None, Json::Number(n)) => match n.as_i64().map(i32::try_from) {
            Some(Ok(n)) => Value::Int32(n),
            _ => Value::Double(n.as_f64().ok_or_else(wrong)?),
        },
        (Some("Edm.Int32"), Json::Number(n)) => Value::Int32(
            n.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(wrong)?,
        ),
        (Some("Edm.Int64"), Json::String(text)) => Value::Int64(text.parse().map_err(|_| wrong())?),
        (Some("Edm.Double"), Json::Number(n)) => Value::Double(n.as_f64().ok_or_else(wrong)?),
        (Some("Edm.Double"), Json::String(text)) => Value::Double(match text.as_str() {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            _ => return Err(wrong()),
        }),
        (Some("Edm.DateTime"), Json::String(text)) => {
            Value::DateTime(DateTime::parse(&text).ok_or_else(wrong)?)
        }
        (Some("Edm.Guid"), Json::String(text)) => {
            Value::Guid(crate::filter::guid(&text).ok_or_else(wrong)?)
        }
        (Some("Edm.Binary"), Json::String(text)) => {
            let engine = base64::engine::general_purpose::STANDARD;
            let bytes = engine.decode(text).map_err(|_| wrong())?;
            if bytes.len() > MAX_VALUE {
                return Err(refuse(ErrorCode::PropertyValueTooLarge, name));
            }
            Value::Binary(bytes)
        }
        _ => return Err(wrong()),
    };
    Ok(Some(value))
}

/// An entity as JSON at the `metadata` level; `table_url` is the table's URL
/// (`http://host/account/table`), which the metadata links start from.
pub fn encode(entity: &Entity, metadata: Metadata, table_url: &str) -> Map<String, Json> {
    let mut out = Map::new();
    if metadata != Metadata::No {
        let (base, table) = table_url.rsplit_once('/').unwrap_or(("", table_url));
        out.insert(
            "odata.metadata".into(),
            json!(format!("{base}/$metadata#{table}/@Element")),
        );
        if metadata == Metadata::Full {
            let account = base.rsplit('/').next().unwrap_or_default();
            let id = format!(
                "{table_url}(PartitionKey='{}',RowKey='{}')",
                quote(&entity.partition_key),
                quote(&entity.row_key)
            );
            out.insert("odata.type".into(), json!(format!("{account}.{table}")));
            out.insert("odata.id".into(), json!(id));
            let link = id.rsplit_once('/').map_or(id.as_str(), |(_, link)| link);
            out.insert("odata.editLink".into(), json!(link));
        }
        out.insert("odata.etag".into(), json!(entity.timestamp.etag()));
    }
    out.insert("PartitionKey".into(), json!(entity.partition_key));
    out.insert("RowKey".into(), json!(entity.row_key));
    let timestamp = Value::DateTime(entity.timestamp);
    put(&mut out, "Timestamp", &timestamp, metadata);
    for (name, value) in &entity.properties {
        put(&mut out, name, value, metadata);
    }
    out
}

/// Writes `value` as `name`, with its type when the metadata level asks for it.
fn put(out: &mut Map<String, Json>, name: &str, value: &Value, metadata: Metadata) {
    let engine = base64::engine::general_purpose::STANDARD;
    let (json, edm, needed) = match value {
        Value::String(s) => (json!(s), "Edm.String", false),
        Value::Boolean(b) => (json!(b), "Edm.Boolean", false),
        Value::Int32(n) => (json!(n), "Edm.Int32", false),
        Value::Int64(n) => (json!(n.to_string()), "Edm.Int64", true),
        Value::Double(x) if x.is_nan() => (json!("NaN"), "Edm.Double", true),
        Value::Double(x) if x.is_infinite() => {
            let text = if *x > 0.0 { "Infinity" } else { "-Infinity" };
            (json!(text), "Edm.Double", true)
        }
        // A whole double reads back as a whole number: typed, so it stays a double.
        Value::Double(x) => (json!(x), "Edm.Double", x.fract() == 0.0),
        Value::DateTime(t) => (json!(t.to_string()), "Edm.DateTime", true),
        Value::Guid(g) => (json!(g), "Edm.Guid", true),
        Value::Binary(b) => (json!(engine.encode(b)), "Edm.Binary", true),
    };
    let typed = match metadata {
        Metadata::No => false,
        Metadata::Minimal => needed,
        Metadata::Full => !matches!(value, Value::String(_) | Value::Boolean(_)),
    };
    if typed {
        out.insert(format!("{name}@odata.type"), json!(edm));
    }
    out.insert(name.to_owned(), json);
}

/// A key inside a quoted OData literal (`'` doubled), percent-encoded for a URL path.
fn quote(key: &str) -> String {
    let doubled = key.replace('\'', "''");
    let mut out = String::with_capacity(doubled.len());
    for b in doubled.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'\'' => {
                out.push(b as char);
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A JSON object's members in their order, duplicates kept (serde_json's map keeps the last).
struct Pairs(Vec<(String, Json)>);

struct PairsVisitor;

impl<'de> Visitor<'de> for PairsVisitor {
    type Value = Pairs;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs, A::Error> {
        let mut pairs = Vec::new();
        while let Some(pair) = map.next_entry()? {
            pairs.push(pair);
        }
        Ok(Pairs(pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_read_with_their_types() {
        let body = br#"{
            "PartitionKey": "p", "RowKey": "r", "Timestamp": "ignored",
            "odata.etag": "ignored", "Name": "Ann", "Age": 42, "Score": 2.5,
            "Whole@odata.type": "Edm.Double", "Whole": 3,
            "Big@odata.type": "Edm.Int64", "Big": "5000000000",
            "Born@odata.type": "Edm.DateTime", "Born": "1984-03-05T10:00:00Z",
            "Id@odata.type": "Edm.Guid", "Id": "C9DA6455-213D-42C9-9A79-3E9149A57833",
            "Bits@odata.type": "Edm.Binary", "Bits": "D6A=",
            "Odd@odata.type": "Edm.Double", "Odd": "NaN",
            "Active": true, "Nothing": null, "Large": 3000000000
        }"#;
        let decoded = decode(body).unwrap();
        assert_eq!(decoded.partition_key.as_deref(), Some("p"));
        assert_eq!(decoded.row_key.as_deref(), Some("r"));
        let p = &decoded.properties;
        assert_eq!(p["Name"], Value::String("Ann".into()));
        assert_eq!(p["Age"], Value::Int32(42));
        assert_eq!(p["Score"], Value::Double(2.5));
        assert_eq!(p["Whole"], Value::Double(3.0));
        assert_eq!(p["Big"], Value::Int64(5_000_000_000));
        assert_eq!(
            p["Born"],
            Value::DateTime(DateTime::from_unix(447_328_800, 0))
        );
        assert_eq!(
            p["Id"],
            Value::Guid("c9da6455-213d-42c9-9a79-3e9149a57833".into())
        );
        assert_eq!(p["Bits"], Value::Binary(vec![0x0f, 0xa0]));
        assert!(matches!(p["Odd"], Value::Double(x) if x.is_nan()));
        assert_eq!(p["Active"], Value::Boolean(true));
        assert_eq!(
            p["Large"],
            Value::Double(3e9),
            "past 32 bits, untyped: a double"
        );
        assert!(!p.contains_key("Nothing") && !p.contains_key("Timestamp"));
    }

    #[test]
    fn bad_bodies_get_azures_codes() {
        let long_name = format!(r#"{{"{}": 1}}"#, "N".repeat(256));
        let long_value = format!(r#"{{"V": "{}"}}"#, "x".repeat(32 * 1024 + 1));
        let long_key = format!(r#"{{"PartitionKey": "{}"}}"#, "k".repeat(513));
        let many: Vec<String> = (0..253).map(|i| format!(r#""P{i}": {i}"#)).collect();
        let many = format!("{{{}}}", many.join(","));
        let cases: &[(&str, &str)] = &[
            ("[1, 2]", "InvalidInput"),
            ("{\"A\": 1", "InvalidInput"),
            ("{\"A\": 1} 2", "InvalidInput"),
            (r#"{"A": 1, "A": 2}"#, "DuplicatePropertiesSpecified"),
            (
                r#"{"A@odata.type": "Edm.Int64", "A": 5}"#,
                "InvalidValueType",
            ),
            (
                r#"{"A@odata.type": "Edm.Int64", "A": "5x"}"#,
                "InvalidValueType",
            ),
            (
                r#"{"A@odata.type": "Edm.Int32", "A": 3000000000}"#,
                "InvalidValueType",
            ),
            (
                r#"{"A@odata.type": "Edm.DateTime", "A": "yesterday"}"#,
                "InvalidValueType",
            ),
            (
                r#"{"A@odata.type": "Edm.Guid", "A": "not-a-guid"}"#,
                "InvalidValueType",
            ),
            (
                r#"{"A@odata.type": "Edm.Binary", "A": "%%%"}"#,
                "InvalidValueType",
            ),
            (
                r#"{"A@odata.type": "Edm.Double", "A": "many"}"#,
                "InvalidValueType",
            ),
            (
                r#"{"A@odata.type": "Edm.Decimal", "A": 1}"#,
                "InvalidValueType",
            ),
            (r#"{"A@odata.type": 5, "A": 1}"#, "InvalidInput"),
            (r#"{"A@odata.type": "Edm.String"}"#, "InvalidInput"),
            (r#"{"A": [1]}"#, "InvalidValueType"),
            (r#"{"A": {"b": 1}}"#, "InvalidValueType"),
            (r#"{"PartitionKey": 5}"#, "InvalidInput"),
            (r#"{"RowKey": "a/b"}"#, "OutOfRangeInput"),
            (r#"{"RowKey": "a\u0001b"}"#, "OutOfRangeInput"),
            (r#"{"1st": 1}"#, "PropertyNameInvalid"),
            (r#"{"a-b": 1}"#, "PropertyNameInvalid"),
            (&long_name, "PropertyNameTooLong"),
            (&long_value, "PropertyValueTooLarge"),
            (&long_key, "KeyValueTooLarge"),
            (&many, "TooManyProperties"),
        ];
        for (body, code) in cases {
            let error = decode(body.as_bytes()).expect_err(body);
            assert_eq!(
                error.code.as_str(),
                *code,
                "{}: {error}",
                &body[..body.len().min(60)]
            );
        }
    }

    fn entity() -> Entity {
        let at = DateTime::parse("2026-11-24T10:00:00.5Z").unwrap();
        let properties = [
            ("Age", Value::Int32(42)),
            ("Big", Value::Int64(5_000_000_000)),
            ("Half", Value::Double(0.5)),
            ("Whole", Value::Double(3.0)),
            ("Name", Value::String("Ann".into())),
            ("Bits", Value::Binary(vec![0x0f, 0xa0])),
        ];
        Entity::new("p 1", "O'Brien", at, properties)
    }

    #[test]
    fn entities_write_at_each_metadata_level_and_read_back() {
        let url = "http://127.0.0.1:10002/devstoreaccount1/people";
        let none = Json::Object(encode(&entity(), Metadata::No, url));
        assert_eq!(
            none,
            json!({
                "PartitionKey": "p 1", "RowKey": "O'Brien",
                "Timestamp": "2026-11-24T10:00:00.5000000Z",
                "Age": 42, "Big": "5000000000", "Half": 0.5, "Whole": 3.0,
                "Name": "Ann", "Bits": "D6A="
            })
        );
        let minimal = Json::Object(encode(&entity(), Metadata::Minimal, url));
        let want = json!({
            "odata.metadata": "http://127.0.0.1:10002/devstoreaccount1/$metadata#people/@Element",
            "odata.etag": "W/\"datetime'2026-11-24T10%3A00%3A00.5000000Z'\"",
            "PartitionKey": "p 1", "RowKey": "O'Brien",
            "Timestamp@odata.type": "Edm.DateTime",
            "Timestamp": "2026-11-24T10:00:00.5000000Z",
            "Age": 42, "Big@odata.type": "Edm.Int64", "Big": "5000000000", "Half": 0.5,
            "Whole@odata.type": "Edm.Double", "Whole": 3.0, "Name": "Ann",
            "Bits@odata.type": "Edm.Binary", "Bits": "D6A="
        });
        assert_eq!(minimal, want);
        let full = encode(&entity(), Metadata::Full, url);
        assert_eq!(full["odata.type"], "devstoreaccount1.people");
        assert_eq!(
            full["odata.id"],
            "http://127.0.0.1:10002/devstoreaccount1/people(PartitionKey='p%201',RowKey='O''Brien')"
        );
        assert_eq!(
            full["odata.editLink"],
            "people(PartitionKey='p%201',RowKey='O''Brien')"
        );
        assert_eq!(full["Age@odata.type"], "Edm.Int32");
        // What was written reads back as it was, at every level that types it.
        for metadata in [Metadata::Minimal, Metadata::Full] {
            let body = serde_json::to_vec(&encode(&entity(), metadata, url)).unwrap();
            assert_eq!(decode(&body).unwrap().properties, entity().properties);
        }
    }

    #[test]
    fn the_accept_header_names_the_level() {
        assert_eq!(Metadata::of(None), Metadata::Minimal);
        let no = "application/json;odata=nometadata";
        assert_eq!(Metadata::of(Some(no)), Metadata::No);
        let full = "application/json; odata=FullMetadata";
        assert_eq!(Metadata::of(Some(full)), Metadata::Full);
    }
}
