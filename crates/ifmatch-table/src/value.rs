//! An entity and its values, typed as the Table service types them (the EDM types of OData).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use ifmatch_azure::iso8601::{self, TICKS_PER_SECOND};
use time::macros::format_description;

/// A property's value, of one of the EDM types the Table service keeps. Serialized for the
/// backends' storage as it is (a double by its bits, so NaN and infinities survive; a binary
/// in hex), not as the wire's OData JSON.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Value {
    /// `Edm.String`.
    String(String),
    /// `Edm.Int32`.
    Int32(i32),
    /// `Edm.Int64` (a JSON string on the wire).
    Int64(i64),
    /// `Edm.Double`.
    Double(#[serde(with = "bits")] f64),
    /// `Edm.Boolean`.
    Boolean(bool),
    /// `Edm.DateTime`.
    DateTime(DateTime),
    /// `Edm.Guid`, lowercase.
    Guid(String),
    /// `Edm.Binary`.
    Binary(#[serde(with = "hex")] Vec<u8>),
}

impl Value {
    /// How `self` compares with `other`, when they can be compared at all: values of one type,
    /// or two numbers (an `Int32` property against an `L` literal, say). Strings and binaries
    /// compare by their bytes (Azure's ordinal order); `None` for values of unrelated types,
    /// which no comparison matches.
    pub fn compare(&self, other: &Value) -> Option<Ordering> {
        use Value::*;
        match (self, other) {
            (String(a), String(b)) | (Guid(a), Guid(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
            (Boolean(a), Boolean(b)) => Some(a.cmp(b)),
            (DateTime(a), DateTime(b)) => Some(a.cmp(b)),
            (Binary(a), Binary(b)) => Some(a.cmp(b)),
            (Double(_), _) | (_, Double(_)) => self.number()?.partial_cmp(&other.number()?),
            (a, b) => Some(a.integer()?.cmp(&b.integer()?)),
        }
    }

    /// The value as a number, if it is one.
    fn number(&self) -> Option<f64> {
        match self {
            Value::Double(x) => Some(*x),
            other => other.integer().map(|n| n as f64),
        }
    }

    /// The value as a whole number, if it is an `Int32` or an `Int64`.
    fn integer(&self) -> Option<i64> {
        match self {
            Value::Int32(n) => Some(i64::from(*n)),
            Value::Int64(n) => Some(*n),
            _ => None,
        }
    }
}

/// An instant, to the 100 ns tick the Table service keeps (`Edm.DateTime`), UTC.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct DateTime {
    /// Ticks of 100 ns since 0001-01-01T00:00:00Z.
    ticks: i64,
}

/// ISO 8601 in UTC with the seven digits of a tick, as the Table service writes a
/// `Timestamp`: `2026-11-24T10:00:00.0000000Z`.
impl std::fmt::Display for DateTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&iso8601::write(self.ticks + iso8601::FIRST))
    }
}

/// A double by its bits.
mod bits {
    pub(super) fn serialize<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(x.to_bits())
    }

    pub(super) fn deserialize<'d, D: serde::Deserializer<'d>>(d: D) -> Result<f64, D::Error> {
        Ok(f64::from_bits(serde::Deserialize::deserialize(d)?))
    }
}

impl DateTime {
    /// The instant `seconds` and `nanos` after the Unix epoch.
    pub fn from_unix(seconds: i64, nanos: u32) -> Self {
        let ticks = seconds * TICKS_PER_SECOND + i64::from(nanos / 100) - iso8601::FIRST;
        Self { ticks }
    }

    /// The instant `ticks` of 100 ns after 0001-01-01T00:00:00Z.
    pub const fn from_ticks(ticks: i64) -> Self {
        Self { ticks }
    }

    /// Ticks of 100 ns since 0001-01-01T00:00:00Z.
    pub fn ticks(self) -> i64 {
        self.ticks
    }

    /// The ETag of an entity written at this instant, as the Table service spells it:
    /// `W/"datetime'2026-11-24T10%3A00%3A00.0000000Z'"` (the colons percent-encoded).
    pub fn etag(self) -> String {
        format!("W/\"datetime'{}'\"", self.to_string().replace(':', "%3A"))
    }

    /// Parses ISO 8601 as the Table service writes and reads it: `YYYY-MM-DDTHH:MM:SS`, an
    /// optional fraction of up to 7 digits, and `Z`, an offset (`+01:00`), or nothing (UTC).
    /// Years 1 to 9999.
    pub fn parse(text: &str) -> Option<Self> {
        let form = format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second][optional [.[subsecond digits:1+]]][optional [[first [Z][[offset_hour sign:mandatory]:[offset_minute]]]]]"
        );
        let unix = iso8601::read(text, form, 7)?;
        Some(Self {
            ticks: unix - iso8601::FIRST,
        })
    }
}

/// An entity: its keys, its timestamp, and its properties.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Entity {
    /// `PartitionKey`.
    pub partition_key: String,
    /// `RowKey`.
    pub row_key: String,
    /// `Timestamp`: when it was last written.
    pub timestamp: DateTime,
    /// The other properties, by name.
    pub properties: BTreeMap<String, Value>,
}

impl Entity {
    /// The entity under `partition_key` and `row_key`, written at `timestamp`, with
    /// `properties`.
    pub fn new<'a>(
        partition_key: &str,
        row_key: &str,
        timestamp: DateTime,
        properties: impl IntoIterator<Item = (&'a str, Value)>,
    ) -> Self {
        Self {
            partition_key: partition_key.to_owned(),
            row_key: row_key.to_owned(),
            timestamp,
            properties: (properties.into_iter())
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
        }
    }

    /// Its size as Azure weighs it against the 1 MiB limit: 4 bytes, the keys in UTF-16 and 4
    /// more, and for each property 8 bytes, its name in UTF-16 and its value's size.
    pub fn size(&self) -> usize {
        let utf16 = |s: &str| s.encode_utf16().count() * 2;
        let keys = 4 + utf16(&self.partition_key) + utf16(&self.row_key) + 4;
        let value = |v: &Value| match v {
            Value::String(s) => utf16(s) + 4,
            Value::Binary(b) => b.len() + 4,
            Value::Boolean(_) => 1,
            Value::Int32(_) => 4,
            Value::Int64(_) | Value::Double(_) | Value::DateTime(_) => 8,
            Value::Guid(_) => 16,
        };
        let properties = self.properties.iter();
        keys + properties
            .map(|(n, v)| 8 + utf16(n) + value(v))
            .sum::<usize>()
    }

    /// The property `name`, the system properties included.
    pub fn get(&self, name: &str) -> Option<Value> {
        match name {
            "PartitionKey" => Some(Value::String(self.partition_key.clone())),
            "RowKey" => Some(Value::String(self.row_key.clone())),
            "Timestamp" => Some(Value::DateTime(self.timestamp)),
            _ => self.properties.get(name).cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_to_the_tick_and_refuse_what_is_not_one() {
        let unix = |s: i64, n: u32| Some(DateTime::from_unix(s, n));
        let cases: &[(&str, Option<DateTime>)] = &[
            ("1970-01-01T00:00:00Z", unix(0, 0)),
            ("1970-01-01T00:00:00", unix(0, 0)),
            ("2008-07-10T00:00:00Z", unix(1_215_648_000, 0)),
            (
                "2000-02-29T12:30:15.1234567Z",
                unix(951_827_415, 123_456_700),
            ),
            ("2000-02-29T12:30:15.5Z", unix(951_827_415, 500_000_000)),
            ("2008-07-10T02:00:00+02:00", unix(1_215_648_000, 0)),
            ("2008-07-09T22:00:00-02:00", unix(1_215_648_000, 0)),
            ("0001-01-01T00:00:00Z", Some(DateTime { ticks: 0 })),
            ("1900-02-29T00:00:00Z", None),
            ("2001-02-29T00:00:00Z", None),
            ("2008-13-10T00:00:00Z", None),
            ("2008-07-10T24:00:00Z", None),
            ("2008-07-10T00:00:00.Z", None),
            ("2008-07-10T00:00:00.12345678Z", None),
            ("2008-07-10T00:00:00+2:00", None),
            ("2008-07-10 00:00:00Z", None),
            ("0000-01-01T00:00:00Z", None),
            ("2008-07-10T00:00:00ZZ", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(DateTime::parse(text), *want, "{text}");
        }
    }

    #[test]
    fn dates_print_as_the_service_writes_them_and_parse_back() {
        let when = DateTime::parse("2026-11-24T10:03:59.0123456+01:00").unwrap();
        assert_eq!(when.to_string(), "2026-11-24T09:03:59.0123456Z");
        assert_eq!(DateTime::parse(&when.to_string()), Some(when));
        assert_eq!(
            when.etag(),
            "W/\"datetime'2026-11-24T09%3A03%3A59.0123456Z'\""
        );
        let first = DateTime::parse("0001-01-01T00:00:00Z").unwrap();
        assert_eq!(first.to_string(), "0001-01-01T00:00:00.0000000Z");
    }

    #[test]
    fn values_survive_their_storage_encoding_nan_and_bytes_included() {
        let values = [
            Value::Double(f64::NAN),
            Value::Double(f64::NEG_INFINITY),
            Value::Double(-0.0),
            Value::Binary(vec![0, 255, 16]),
            Value::Int64(i64::MIN),
            Value::DateTime(DateTime::parse("9999-12-31T23:59:59.9999999Z").unwrap()),
        ];
        for value in values {
            let json = serde_json::to_string(&value).unwrap();
            let back: Value = serde_json::from_str(&json).unwrap();
            match (&value, &back) {
                (Value::Double(a), Value::Double(b)) => assert_eq!(a.to_bits(), b.to_bits()),
                _ => assert_eq!(back, value, "{json}"),
            }
        }
    }

    #[test]
    fn an_entity_weighs_what_azure_says() {
        let mut entity = Entity {
            partition_key: "p".into(),
            row_key: "r".into(),
            timestamp: DateTime::from_unix(0, 0),
            properties: BTreeMap::from([("N".to_owned(), Value::Int32(1))]),
        };
        assert_eq!(entity.size(), 4 + 2 + 2 + 4 + (8 + 2 + 4));
        entity
            .properties
            .insert("Sé".into(), Value::String("ab".into()));
        entity
            .properties
            .insert("B".into(), Value::Binary(vec![0; 10]));
        assert_eq!(entity.size(), 26 + (8 + 4 + 4 + 4) + (8 + 2 + 10 + 4));
    }

    #[test]
    fn values_compare_within_a_type_and_across_numbers_only() {
        use Value::*;
        let s = |x: &str| String(x.to_owned());
        assert_eq!(s("a").compare(&s("b")), Some(Ordering::Less));
        assert_eq!(
            s("B").compare(&s("a")),
            Some(Ordering::Less),
            "ordinal, not by case"
        );
        assert_eq!(Int32(5).compare(&Int64(5)), Some(Ordering::Equal));
        assert_eq!(Int64(6).compare(&Int32(5)), Some(Ordering::Greater));
        assert_eq!(Double(2.5).compare(&Int32(3)), Some(Ordering::Less));
        assert_eq!(Int32(3).compare(&Double(2.5)), Some(Ordering::Greater));
        assert_eq!(Double(f64::NAN).compare(&Double(1.0)), None);
        assert_eq!(s("5").compare(&Int32(5)), None);
        assert_eq!(Boolean(true).compare(&Int32(1)), None);
        assert_eq!(Guid("a".into()).compare(&s("a")), None);
    }
}
