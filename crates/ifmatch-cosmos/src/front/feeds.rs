//! The change feed: read in the order commits landed, and moved by every commit that writes
//! documents (where it lives: `feed_entries.rs`).
//!
//! The counter is an entity of the same partition (row key `""`, before every entry), and every
//! commit that writes documents also moves it from the number it read to the numbers it gives,
//! as one more compare-and-swap of the same atomic commit. So numbers are given in the order
//! commits land, on every backend and across every instance that writes the container: a
//! reader that has seen entry `n` has seen every entry below it, and one that resumes after `n`
//! misses no change. A document holds the number of its entry (`~feed`), so the commit that
//! replaces or deletes it removes that entry: the feed keeps one entry per document.

use std::time::UNIX_EPOCH;

use http::StatusCode;
use ifmatch_table::{DateTime, Scan, Tables, Value};

use super::answers::{Answered, Done};
use super::documents::document_json;
use super::{Asked, Front, Rules, Scope, documents_table, rid};

use crate::document;
use crate::failure::{Failure, bad_request};
use crate::feed_entries::{FEED, entry_key, number_of};
use crate::query::SCAN_BUDGET;
use crate::versions::{self, VERSIONS};

impl<T: Tables> Front<'_, T> {
    /// The change feed: the documents written since the position `If-None-Match` names
    /// (none: from the beginning; `*`: from now; else the `etag` of an earlier page), each
    /// in its latest version, in the order their commits landed; 304 when none is.
    pub(crate) async fn changes(&self, db: &str, coll: &str, asked: &Asked<'_>) -> Answered {
        let rules = Rules::of(&self.container(db, coll).await?);
        let (default, now) = (rules.policies.ttl, crate::ttl::ticks(self.now));
        let all_versions = asked
            .header("a-im")
            .is_some_and(|v| v.eq_ignore_ascii_case("full-fidelity feed"));
        if all_versions && rules.policies.versions.is_none() {
            return Err(bad_request(
                "The all-versions-and-deletes change feed is the container's when its changeFeedPolicy has a retentionDuration (minutes).",
            ));
        }
        let log = if all_versions { VERSIONS } else { FEED };
        let range = self.epk_range(db, coll, asked).await?;
        let in_range = |stored: &str| {
            let Some((start, end)) = &range else {
                return true;
            };
            let key = document::stored_effective(stored);
            key >= *start && (key < *end || (start == end && key == *end))
        };
        let table = documents_table(db, coll);
        // Documents written before `since` are not news (a start from a point in time).
        let (after, since) = self.start(&table, asked).await?;
        let partition = match asked.header("x-ms-documentdb-partitionkey") {
            Some(header) => Some(Scope::of_header(&rules.paths, header)?),
            None => None,
        };
        let in_partition = |pk: &str| match &partition {
            None => true,
            Some(Scope::Key(stored)) => pk == stored,
            Some(Scope::Prefix(start)) => pk.starts_with(start.as_str()),
        };
        let size = asked.page_size()?;
        let mut position = after;
        // Entries of other partitions count too: a page reads at most the budget, and its etag
        // says how far it got, so the next goes on from there. (Not so for a start from a point
        // in time: the SDKs resume from the etag alone, without `If-Modified-Since`, so its
        // first page reads on until it finds news or the end.)
        let mut scanned = 0;
        let mut documents = Vec::new();
        'pages: loop {
            let from = entry_key(position + 1);
            let scan = Scan {
                from: Some((log, &from)),
                partition: Some(log),
                limit: size,
            };
            let entries = self.scan(&table, scan).await?;
            let full = entries.len() == size;
            scanned += entries.len();
            self.meter.examined(entries.len());
            for entry in &entries {
                let Ok(number) = entry.row_key.parse::<i64>() else {
                    continue;
                };
                position = number;
                let text = |name: &str| match entry.properties.get(name) {
                    Some(Value::String(s)) => s.clone(),
                    _ => String::new(),
                };
                let pk = text("pk");
                if !in_partition(&pk)
                    || !in_range(&pk)
                    || since.is_some_and(|since| entry.timestamp < since)
                {
                    continue;
                }
                if all_versions {
                    documents.extend(versions::item(entry, |e| document_json(db, coll, e)));
                    if documents.len() == size {
                        break 'pages;
                    }
                    continue;
                }
                // The entry is the document's latest (a later write would have moved it), but
                // the document is read again: it may have been written since the scan.
                if let Some(stored) = self.get(&table, &pk, &text("id")).await?
                    && number_of(&stored) == Some(number)
                {
                    let doc = document_json(db, coll, &stored);
                    if crate::ttl::past(default, stored.timestamp, doc.get("ttl"), now) {
                        continue;
                    }
                    documents.push(doc);
                    if documents.len() == size {
                        break 'pages;
                    }
                }
            }
            if !full || (since.is_none() && scanned >= SCAN_BUDGET) {
                break;
            }
        }
        Ok(page(db, coll, documents, position))
    }

    /// The range of effective partition keys a feed is scoped to, if any: the SDKs scope a
    /// feed to a partition key by its hash's range, both ends the key's, and to a range by
    /// its id.
    async fn epk_range(
        &self,
        db: &str,
        coll: &str,
        asked: &Asked<'_>,
    ) -> Result<Option<(String, String)>, Failure> {
        Ok(
            match (asked.header("x-ms-start-epk"), asked.header("x-ms-end-epk")) {
                (Some(start), Some(end)) => {
                    Some((start.to_ascii_uppercase(), end.to_ascii_uppercase()))
                }
                // A range named by its id (the SDKs' feed of a whole range): its keys.
                (None, None) => {
                    (self.range_named(db, coll, asked).await?).map(|range| (range.min, range.max))
                }
                _ => {
                    return Err(bad_request(
                        "x-ms-start-epk and x-ms-end-epk come together.",
                    ));
                }
            },
        )
    }

    /// Where a feed starts: after the entry `If-None-Match` names (none: the beginning; `*`:
    /// now), and, for a start from a point in time (`If-Modified-Since`), the instant before
    /// which documents are not news.
    async fn start(
        &self,
        table: &str,
        asked: &Asked<'_>,
    ) -> Result<(i64, Option<DateTime>), Failure> {
        let mut since = None;
        let after = match asked.header("if-none-match").map(str::trim) {
            None => {
                if let Some(date) = asked.header("if-modified-since") {
                    let date = httpdate::parse_http_date(date)
                        .map_err(|_| bad_request("If-Modified-Since is not an HTTP date."))?;
                    let date = date.duration_since(UNIX_EPOCH).unwrap_or_default();
                    since = Some(DateTime::from_unix(date.as_secs() as i64, 0));
                }
                0
            }
            Some("*") => self.last_number(table).await?,
            // A position is one the feed can go on from: the next, one past it, is a number.
            Some(tag) => (tag.trim_matches('"').parse::<i64>().ok())
                .filter(|n| (0..i64::MAX).contains(n))
                .ok_or_else(|| {
                    bad_request(format!(
                        "The change feed's If-None-Match is *, or an etag of the feed: a number from 0 to {}.",
                        i64::MAX - 1
                    ))
                })?,
        };
        Ok((after, since))
    }

    /// The last number the counter of `table` gave (0: none yet).
    async fn last_number(&self, table: &str) -> Result<i64, Failure> {
        let counter = self.get(table, FEED, "").await?;
        Ok(counter.as_ref().and_then(number_of).unwrap_or(0))
    }
}

/// A page of the feed: its documents, and the position it got to as its `etag` (304 when it
/// holds none).
fn page(db: &str, coll: &str, documents: Vec<serde_json::Value>, position: i64) -> Done {
    let etag = Some(format!("\"{position}\""));
    if documents.is_empty() {
        let mut done = Done::empty(StatusCode::NOT_MODIFIED, None);
        done.etag = etag;
        return done;
    }
    let mut done = Done::feed(&rid(&[db, coll]), "Documents", documents, None);
    done.etag = etag;
    done
}
