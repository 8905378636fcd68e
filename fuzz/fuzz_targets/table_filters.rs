//! A Table `$filter` of any text: parsing never panics, nor does evaluating what it accepts;
//! and a filter that says it names one partition never selects an entity of another, the
//! promise a query that reads that partition alone relies on.
#![no_main]

use std::collections::BTreeMap;

use ifmatch_table::{DateTime, Entity, Filter, Value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(filter) = Filter::parse(text) else {
        return;
    };
    let properties = BTreeMap::from([
        ("A".to_owned(), Value::Int32(1)),
        ("B".to_owned(), Value::String("b".to_owned())),
        ("C".to_owned(), Value::Boolean(true)),
        ("D".to_owned(), Value::Double(0.5)),
    ]);
    let mut entity = Entity {
        partition_key: String::new(),
        row_key: "r".to_owned(),
        timestamp: DateTime::from_unix(0, 0),
        properties,
    };
    filter.matches(&entity);
    if let Some(partition) = filter.partition() {
        entity.partition_key = format!("{partition}-other");
        assert!(
            !filter.matches(&entity),
            "{text:?} selects another partition"
        );
    }
});
