//! A script's queries (`queryDocuments`, `readDocuments`): pages over its partition as the
//! transaction has left it, the documents read merged with what it wrote.

use std::collections::BTreeMap;

use ifmatch_table::{Entity, Scan, Tables};
use serde_json::{Value as Json, json};

use super::{Transaction, refusal};
use crate::failure::{Failure, backend};
use crate::feed_entries::documents_only;
use crate::sql::{Collector, Meter, Query};

/// Documents read from the backend at a time by a script's query.
const CHUNK: usize = 200;

/// The most documents one page of a script's query reads; the most results it holds.
const QUERY_READ: usize = 10_000;
const QUERY_PAGE: usize = 1000;

impl<T: Tables> Transaction<'_, '_, T> {
    /// A page of a query over the partition as the transaction has left it, from the
    /// continuation the options name (the next document's id), at most `pageSize` results.
    pub(super) async fn query(&mut self, args: &Json) -> Result<Json, Failure> {
        let (text, parameters) = match &args["query"] {
            Json::String(text) => (text.clone(), Vec::new()),
            spec => (
                spec["query"].as_str().unwrap_or_default().to_owned(),
                spec["parameters"].as_array().cloned().unwrap_or_default(),
            ),
        };
        let query = match Query::parse(&text, parameters) {
            Ok(query) => query,
            Err(error) => return Ok(refusal(400, &format!("Query: {}", error.message))),
        };
        let options = &args["options"];
        let size = match options["pageSize"].as_i64() {
            Some(n) if n > 0 => (n as usize).min(QUERY_PAGE),
            _ => 100,
        };
        let mut from = options["continuation"].as_str().map(str::to_owned);
        let meter = Meter::new(crate::query::PAGE_WORK);
        let mut collector = Collector::new(&query);
        let mut results = Vec::new();
        let mut read = 0;
        let gather = query.needs_all();
        let continuation = loop {
            let chunk = self.chunk(from.as_deref()).await?;
            if chunk.is_empty() {
                break None;
            }
            for (id, document) in chunk {
                if !gather && results.len() >= size || read >= QUERY_READ {
                    break;
                }
                from = Some(format!("{id}\u{0}"));
                read += 1;
                let seen = self.shown(&document);
                match gather {
                    true => collector.add(Some(&seen), &meter),
                    false => results.extend(query.results(&seen, &meter)),
                }
            }
            if meter.exceeded() {
                return Ok(refusal(400, "The query took more work than a page may."));
            }
            if (!gather && results.len() >= size) || read >= QUERY_READ {
                break from;
            }
        };
        if gather {
            results = collector.finish(&meter);
        }
        self.front.meter.examined(read);
        Ok(json!({
            "kind": "query",
            "result": results,
            "options": { "continuation": continuation },
        }))
    }

    /// The next documents of the partition after `from` (a key from the last chunk, or
    /// none), merged with what the transaction wrote, live ones only, in id order.
    async fn chunk(&mut self, from: Option<&str>) -> Result<Vec<(String, Entity)>, Failure> {
        let start = from.unwrap_or_default();
        let scan = Scan {
            from: Some((&self.partition, start)),
            partition: Some(&self.partition),
            limit: CHUNK,
        };
        let mut stored = self
            .front
            .tables
            .scan(&self.table, scan)
            .await
            .map_err(backend)?;
        documents_only(&mut stored);
        let full = stored.len() == CHUNK;
        let last = stored.last().map(|e| e.row_key.clone());
        let mut merged: BTreeMap<String, Option<Entity>> = BTreeMap::new();
        // Seen, not read: a query's documents are not checked at the commit (the fence keeps
        // other scripts out; a document the script reads or writes is checked).
        for entity in stored {
            let live = self.front.live(&self.rules.policies, Some(entity.clone()));
            merged.insert(entity.row_key.clone(), live);
        }
        // What the transaction wrote in this stretch of ids overrides what is stored.
        let written = self.now.range(start.to_owned()..).filter(|(id, _)| {
            !full
                || last
                    .as_ref()
                    .is_none_or(|last| id.as_str() <= last.as_str())
        });
        for (id, now) in written {
            merged.insert(id.clone(), now.clone());
        }
        Ok(merged
            .into_iter()
            .filter_map(|(id, entity)| entity.map(|e| (id, e)))
            .collect())
    }
}
