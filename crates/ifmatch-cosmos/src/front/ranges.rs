//! A container's partition key ranges (`crate::ranges`): read as the SDKs read them (a feed
//! whose etag changes when they do: a request with the current one is 304), split and merged
//! by an administrative call, and the range a request names (`x-ms-documentdb-partitionkeyrangeid`)
//! found, or answered 410 / 1002 when it split or merged.
//!
//! The administrative call: `POST /dbs/{db}/colls/{coll}/pkranges` with the account key, its
//! body `{"split": "ID"}` (the range in two, at the middle of its keys) or
//! `{"merge": ["ID", "ID"]}` (two neighbours in one); the answer is the ranges after it.

use http::StatusCode;
use ifmatch_table::{Change, DateTime, Entity, Expected, Tables};
use serde_json::Value as Json;

use super::answers::{Answered, Done};
use super::{Asked, Front, documents_table, key, rid};
use crate::document::{self, json_of};
use crate::failure::{Code, Failure, bad_request, raced};
use crate::ranges::{Named, RANGES, Range, Ranges};

/// The version of a container's ranges before any split: one range, `0`.
const FIRST: DateTime = DateTime::from_ticks(1);

/// The header that names a partition key range.
const RANGE_ID: &str = "x-ms-documentdb-partitionkeyrangeid";

impl<T: Tables> Front<'_, T> {
    pub(super) async fn ranges(&self, db: &str, coll: &str, asked: &Asked<'_>) -> Answered {
        self.container(db, coll).await?;
        let (ranges, stored) = self.stored_ranges(db, coll).await?;
        let at = stored.as_ref().map_or(FIRST, |e| e.timestamp);
        if asked.header("if-none-match").and_then(document::version) == Some(at) {
            return Ok(Done::empty(StatusCode::NOT_MODIFIED, Some(at)));
        }
        Ok(listed(db, coll, &ranges, at))
    }

    /// Splits or merges ranges as the body asks; answers the ranges after it.
    pub(super) async fn change_ranges(&self, db: &str, coll: &str, asked: &Asked<'_>) -> Answered {
        self.container(db, coll).await?;
        let body: Json = serde_json::from_slice(asked.body).unwrap_or_default();
        let mut attempts = ifmatch_azure::swap::Attempts::default();
        while attempts.another() {
            let (mut ranges, stored) = self.stored_ranges(db, coll).await?;
            match (&body["split"], &body["merge"]) {
                (Json::String(id), Json::Null) => ranges.split(id)?,
                (Json::Null, Json::Array(pair)) if pair.len() == 2 => {
                    let id = |at: usize| pair[at].as_str().unwrap_or_default().to_owned();
                    ranges.merge(&id(0), &id(1))?;
                }
                _ => {
                    return Err(bad_request(
                        "The body is {\"split\": \"ID\"} or {\"merge\": [\"ID\", \"ID\"]}.",
                    ));
                }
            }
            let before = stored.as_ref().map(|e| e.timestamp);
            let resource = serde_json::to_value(&ranges).unwrap_or_default();
            let Json::Object(resource) = resource else {
                return Err(bad_request("The ranges could not be written."));
            };
            let entity = self.entity(RANGES, "", before, &resource);
            let change = Change {
                key: key(RANGES, ""),
                expected: before.map_or(Expected::Absent, Expected::Version),
                write: Some(entity.clone()),
            };
            match self.commit(&documents_table(db, coll), &[change]).await {
                Ok(()) => return Ok(listed(db, coll, &ranges, entity.timestamp)),
                Err(super::commit::Committed::Conflict) => continue,
                Err(super::commit::Committed::Failed(failure)) => return Err(failure),
            }
        }
        Err(raced())
    }

    /// The container's ranges, and the entity they are kept in (none before a split).
    async fn stored_ranges(
        &self,
        db: &str,
        coll: &str,
    ) -> Result<(Ranges, Option<Entity>), Failure> {
        let stored = self.get(&documents_table(db, coll), RANGES, "").await?;
        let ranges = match &stored {
            Some(entity) => serde_json::from_value(Json::Object(json_of(entity))).map_err(|e| {
                Failure::new(
                    Code::ServiceUnavailable,
                    format!("The container's ranges are unreadable: {e}"),
                )
            })?,
            None => Ranges::default(),
        };
        Ok((ranges, stored))
    }

    /// The range the request names, if it names one: 410 / 1002 when it split or merged.
    pub(crate) async fn range_named(
        &self,
        db: &str,
        coll: &str,
        asked: &Asked<'_>,
    ) -> Result<Option<Range>, Failure> {
        let Some(header) = asked.header(RANGE_ID) else {
            return Ok(None);
        };
        let (ranges, _) = self.stored_ranges(db, coll).await?;
        match ranges.named(header)? {
            Named::Current(range) => Ok(Some(range.clone())),
            Named::Gone => Err(Failure::of(Code::Gone).with_substatus(1002)),
        }
    }
}

fn listed(db: &str, coll: &str, ranges: &Ranges, at: DateTime) -> Done {
    let link = format!("dbs/{db}/colls/{coll}");
    let listed: Vec<Json> = (ranges.list.iter())
        .map(|r| r.json(&link, rid(&[db, coll, &r.id]), document::etag(at)))
        .collect();
    Done::feed(&rid(&[db, coll]), "PartitionKeyRanges", listed, Some(at))
}
