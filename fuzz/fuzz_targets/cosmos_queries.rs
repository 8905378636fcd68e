//! Cosmos SQL and a patch's body: parsing never panics, however deep or long the text, and a
//! query that parses evaluates against a document without panicking either, within its
//! meter's bound (run with `-rss_limit_mb`: what a query builds may not take the memory).
#![no_main]

use ifmatch_cosmos::sql::{Collector, DOCUMENT_WORK, Meter, Query};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parameters = vec![serde_json::json!({"name": "@p", "value": [1, "a", null]})];
    if let Ok(query) = Query::parse(text, parameters) {
        let document = serde_json::json!({"id": "a", "n": 1.5, "s": "text", "a": [1, {"b": 2}], "o": {"x": null}});
        let meter = Meter::per_document();
        let _ = query.results(&document, &meter);
        let mut collector = Collector::new(&query);
        collector.add(Some(&document), &meter);
        let _ = collector.finish(&meter);
        assert!(meter.spent() <= DOCUMENT_WORK);
    }
    if let Ok((operations, _)) = ifmatch_cosmos::patch::parse(data) {
        let document = serde_json::json!({"id": "a", "pk": "p", "n": 1, "a": [1, 2]});
        let fixed = ["/pk".to_owned()];
        let _ = ifmatch_cosmos::patch::apply(document.as_object().unwrap(), &operations, &fixed);
    }
});
