//! A container's partition key ranges: the spans of effective partition keys (the SDKs' hash
//! of a partition key, as hex) that the SDKs route feeds and queries by. A container starts
//! with one, `0`, over every key; an administrative call splits one in two at its middle, or
//! merges two neighbours into one, each new range naming its parents, as Azure's do when a
//! physical partition splits or merges. A range that split or merged is gone: a request that
//! names it is answered 410 with substatus 1002, and the SDKs read the ranges again and go on
//! with the ranges that took its place (from the same change feed position: the feed's numbers
//! are the container's, so a child range's feed from a parent's position misses and repeats
//! nothing). Kept in the container's own table (partition `~ranges`), so they go with it.

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::failure::{Code, Failure, bad_request};

/// Where a container's ranges are kept in its table: this partition, row `""`.
pub(crate) const RANGES: &str = "~ranges";

/// The most ranges a container may be split into.
pub const MAX_RANGES: usize = 64;

/// One partition key range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Range {
    pub(crate) id: String,
    /// Its first effective key, and the first past it (hex, upper case; `""` and `"FF"` the
    /// ends of the whole span).
    pub(crate) min: String,
    pub(crate) max: String,
    pub(crate) parents: Vec<String>,
}

/// A container's ranges, in key order, with the ids of those gone and the next id to give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Ranges {
    pub(crate) list: Vec<Range>,
    pub(crate) gone: Vec<String>,
    pub(crate) next: u64,
}

impl Default for Ranges {
    /// One range over every key, as a container starts.
    fn default() -> Self {
        Self {
            list: vec![Range {
                id: "0".into(),
                min: String::new(),
                max: "FF".into(),
                parents: Vec::new(),
            }],
            gone: Vec::new(),
            next: 1,
        }
    }
}

/// What a request's `x-ms-documentdb-partitionkeyrangeid` names of `ranges`.
pub(crate) enum Named<'r> {
    /// A range there now.
    Current(&'r Range),
    /// A range that split or merged: 410, substatus 1002.
    Gone,
}

impl Ranges {
    /// The range a header names (`id`, or `collectionRid,id` as some SDKs send it).
    pub(crate) fn named(&self, header: &str) -> Result<Named<'_>, Failure> {
        let id = header.rsplit(',').next().unwrap_or_default().trim();
        if let Some(range) = self.list.iter().find(|r| r.id == id) {
            return Ok(Named::Current(range));
        }
        if self.gone.iter().any(|g| g == id) {
            return Ok(Named::Gone);
        }
        Err(Failure::new(
            Code::NotFound,
            format!("The partition key range {id} is not one of the container's."),
        ))
    }

    /// Splits the range `id` at the middle of its keys, into two new ranges.
    pub(crate) fn split(&mut self, id: &str) -> Result<(), Failure> {
        if self.list.len() >= MAX_RANGES {
            return Err(bad_request(format!(
                "A container has at most {MAX_RANGES} partition key ranges here."
            )));
        }
        let at = self.position(id)?;
        let range = self.list.remove(at);
        let middle = middle(&range.min, &range.max).ok_or_else(|| {
            bad_request(format!(
                "The partition key range {id} is too narrow to split."
            ))
        })?;
        let (left, right) = (self.take_id(), self.take_id());
        let parents = vec![range.id.clone()];
        self.list.insert(
            at,
            Range {
                id: right,
                min: middle.clone(),
                max: range.max,
                parents: parents.clone(),
            },
        );
        self.list.insert(
            at,
            Range {
                id: left,
                min: range.min,
                max: middle,
                parents,
            },
        );
        self.gone.push(range.id);
        Ok(())
    }

    /// Merges the neighbouring ranges `a` and `b` into one new range.
    pub(crate) fn merge(&mut self, a: &str, b: &str) -> Result<(), Failure> {
        let (i, j) = (self.position(a)?, self.position(b)?);
        let (first, second) = (i.min(j), i.max(j));
        if second != first + 1 {
            return Err(bad_request(format!(
                "The partition key ranges {a} and {b} are not neighbours: only neighbours merge."
            )));
        }
        let right = self.list.remove(second);
        let left = self.list.remove(first);
        let id = self.take_id();
        self.list.insert(
            first,
            Range {
                id,
                min: left.min,
                max: right.max,
                parents: vec![left.id.clone(), right.id.clone()],
            },
        );
        self.gone.extend([left.id, right.id]);
        Ok(())
    }

    fn position(&self, id: &str) -> Result<usize, Failure> {
        self.list.iter().position(|r| r.id == id).ok_or_else(|| {
            Failure::new(
                Code::NotFound,
                format!("The partition key range {id} is not one of the container's."),
            )
        })
    }

    fn take_id(&mut self) -> String {
        self.next += 1;
        (self.next - 1).to_string()
    }
}

impl Range {
    /// The range as the SDKs read it.
    pub(crate) fn json(&self, link: &str, rid: String, etag: String) -> Json {
        json!({
            "id": self.id, "minInclusive": self.min, "maxExclusive": self.max,
            "ridPrefix": self.id.parse::<u64>().unwrap_or(0), "throughputFraction": 1.0,
            "status": "online", "parents": self.parents,
            "_rid": rid, "_self": format!("{link}/pkranges/{}/", self.id), "_etag": etag, "_ts": 0,
        })
    }
}

/// The effective key halfway between `min` and `max` (hex, compared as 128-bit numbers, each
/// padded to 32 digits), or `None` when no key lies strictly between them.
fn middle(min: &str, max: &str) -> Option<String> {
    let number = |hex: &str| {
        let digits: String = hex.chars().chain(std::iter::repeat('0')).take(32).collect();
        u128::from_str_radix(&digits, 16).ok()
    };
    let (low, high) = (number(min)?, number(max)?);
    let middle = low + (high - low) / 2;
    (middle > low).then(|| format!("{middle:032X}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_halve_and_merges_join_neighbours_each_new_range_naming_its_parents() {
        let mut ranges = Ranges::default();
        ranges.split("0").unwrap();
        let ids: Vec<_> = ranges
            .list
            .iter()
            .map(|r| (r.id.as_str(), r.min.as_str(), r.max.as_str()))
            .collect();
        assert_eq!(
            ids,
            [
                ("1", "", "7F800000000000000000000000000000"),
                ("2", "7F800000000000000000000000000000", "FF")
            ]
        );
        assert!(matches!(ranges.named("0"), Ok(Named::Gone)));
        assert!(matches!(ranges.named("rid,2"), Ok(Named::Current(r)) if r.parents == ["0"]));
        ranges.split("1").unwrap();
        assert!(ranges.merge("1", "2").is_err(), "1 is gone");
        assert!(
            ranges.merge("3", "2").is_err(),
            "3 and 2 are not neighbours"
        );
        ranges.merge("4", "2").unwrap();
        let ids: Vec<_> = ranges
            .list
            .iter()
            .map(|r| (r.id.as_str(), r.parents.clone()))
            .collect();
        assert_eq!(
            ids,
            [
                ("3", vec!["1".to_owned()]),
                ("5", vec!["4".to_owned(), "2".to_owned()])
            ]
        );
        assert_eq!(
            ranges.named("9").err().map(|f| f.code),
            Some(Code::NotFound)
        );
    }

    #[test]
    fn one_past_the_most_ranges_is_refused() {
        let mut ranges = Ranges::default();
        while ranges.list.len() < MAX_RANGES {
            let last = ranges.list.last().unwrap().id.clone();
            ranges.split(&last).unwrap();
        }
        let first = ranges.list[0].id.clone();
        assert_eq!(
            ranges.split(&first).map_err(|f| f.code),
            Err(Code::BadRequest)
        );
    }
}
