//! Transactional batch: up to 100 operations on one partition key, decided in order against
//! the documents as they were read and as the batch's earlier operations left them, then
//! committed as one compare-and-swap over every document they touch, so all apply or none
//! (on every backend; a lost race decides the whole batch again). When an operation fails,
//! it keeps its status, every other answers 424 Failed Dependency, and nothing is written:
//! the answer is then 207 Multi-Status, as the SDKs read it. Bulk, each operation a batch of
//! its own: `bulk.rs`; an operation's outcome and its result in the answer: `outcome.rs`.

use std::collections::BTreeMap;

use http::StatusCode;
use ifmatch_azure::swap::Attempts;
use ifmatch_table::{Change, Entity, Expected, Tables};
use serde_json::{Map, Value as Json, json};

use super::answers::{Answered, Done};
use super::commit::Committed;
use super::outcome::{OperationResult, Outcome, result};
use super::{Asked, Condition, Front, Rules, documents_table, holds, id_of, json_of, key, placed};
use crate::document::{self, MAX_NESTING};
use crate::failure::{Failure, bad_request, raced};

/// The most operations one batch holds.
const MAX_OPERATIONS: usize = 100;

impl<T: Tables> Front<'_, T> {
    /// A batch on the container `coll` of `db`: transactional (one partition key, all or
    /// none), or, with `x-ms-cosmos-batch-atomic: false`, the SDKs' bulk.
    pub(crate) async fn batch(&self, db: &str, coll: &str, asked: &Asked<'_>) -> Answered {
        let rules = Rules::of(&self.container(db, coll).await?);
        // An operation's document is two levels down: the batch's array, the operation.
        let Ok(Json::Array(operations)) = document::json_within(asked.body, MAX_NESTING + 2) else {
            return Err(bad_request("A batch's body is a JSON array of operations."));
        };
        if operations.is_empty() || operations.len() > MAX_OPERATIONS {
            return Err(bad_request(format!(
                "A batch holds 1 to {MAX_OPERATIONS} operations; this one holds {}.",
                operations.len()
            )));
        }
        let table = documents_table(db, coll);
        if asked
            .header("x-ms-cosmos-batch-atomic")
            .is_some_and(|atomic| atomic.eq_ignore_ascii_case("false"))
        {
            return self.bulk(db, coll, &rules, &operations, asked).await;
        }
        let partition = self.partition(&rules.paths, asked)?;
        let count = operations.len();
        let answer = |outcomes, failed| results(db, coll, outcomes, failed, count);
        self.transact(&table, &rules, &partition, &operations, answer)
            .await
    }

    /// `operations` on the documents of `partition`, decided in order and committed as one
    /// compare-and-swap: `answer` of their outcomes and of the first that failed (then nothing
    /// is written). The answer is made while the commit is made durable (by the backend's
    /// threads), and made again if the commit loses a race and the batch is decided again.
    pub(super) async fn transact<A>(
        &self,
        table: &str,
        rules: &Rules,
        partition: &str,
        operations: &[Json],
        answer: impl Fn(Vec<Outcome>, Option<usize>) -> A,
    ) -> Result<A, Failure> {
        let Rules { paths, policies } = rules;
        // An operation without a valid id fails the batch when its turn comes.
        let ids: Vec<Result<String, Failure>> = operations.iter().map(operation_id).collect();
        let mut named: Vec<&str> = ids.iter().flatten().map(String::as_str).collect();
        named.sort_unstable();
        named.dedup();
        let mut attempts = Attempts::default();
        while attempts.another() {
            // The documents as stored (read at once), the versions of those live (not past
            // their time to live), and the documents as the batch leaves them so far.
            let found = self.get_many(table, partition, &named).await?;
            let read: BTreeMap<&str, Option<Entity>> = named.iter().copied().zip(found).collect();
            let (mut now, mut live) = (BTreeMap::new(), BTreeMap::new());
            for (&id, found) in &read {
                let current = self.live(policies, found.clone());
                live.insert(id, version(&current));
                now.insert(id, current);
            }
            let mut outcomes = Vec::new();
            for (index, operation) in operations.iter().enumerate() {
                let id = ids[index].as_deref().map_err(Failure::clone)?;
                let current = now.get(id).and_then(Option::as_ref);
                let outcome = self.decide(operation, id, current, partition, paths)?;
                if outcome.status >= 400 {
                    outcomes.push(outcome);
                    return Ok(answer(outcomes, Some(index)));
                }
                if matches!(
                    operation_kind(operation).as_str(),
                    "create" | "upsert" | "replace" | "patch" | "delete"
                ) {
                    let after = match outcome.status {
                        204 => None,
                        _ => outcome.entity.clone(),
                    };
                    now.insert(id, after);
                }
                outcomes.push(outcome);
            }
            let changes: Vec<(Change, Option<&Entity>)> = now
                .into_iter()
                .filter(|(id, after)| live.get(id) != Some(&version(after)))
                .map(|(id, after)| {
                    let before = read.get(id).and_then(Option::as_ref);
                    let change = Change {
                        key: key(partition, id),
                        expected: before
                            .map_or(Expected::Absent, |e| Expected::Version(e.timestamp)),
                        write: after,
                    };
                    (change, before)
                })
                .collect();
            if changes.is_empty() {
                return Ok(answer(outcomes, None));
            }
            // Polled first, the commit hands its work to the backend, and the answer is made
            // meanwhile on this task.
            let (committed, answered) = futures_util::future::join(
                self.commit_documents(table, policies, &changes),
                async { answer(outcomes, None) },
            )
            .await;
            match committed {
                Ok(()) => return Ok(answered),
                Err(Committed::Conflict) => continue,
                Err(Committed::Failed(failure)) => return Err(failure),
            }
        }
        Err(raced())
    }

    /// One operation against `current` (the document as the batch has left it).
    fn decide(
        &self,
        operation: &Json,
        id: &str,
        current: Option<&Entity>,
        partition: &str,
        paths: &[String],
    ) -> Result<Outcome, Failure> {
        let kind = operation_kind(operation);
        let condition = match (
            operation.get("ifMatch").and_then(Json::as_str),
            operation.get("ifNoneMatch").and_then(Json::as_str),
        ) {
            (Some("*"), _) => Condition::Any,
            (Some(tag), _) => Condition::Version(document::version(tag)),
            _ => Condition::Absent,
        };
        let unchanged = operation
            .get("ifNoneMatch")
            .and_then(Json::as_str)
            .is_some_and(|tag| {
                current.is_some_and(|e| {
                    tag.trim() == "*" || document::version(tag) == Some(e.timestamp)
                })
            });
        let fail = |status: u16| Ok(Outcome::bare(status));
        let before = current.map(|e| e.timestamp);
        let body = || {
            let body = operation.get("resourceBody").unwrap_or(&Json::Null);
            let elsewhere = "An operation's document has another partition key than the batch's.";
            // Parsed with the batch, within its nesting bound.
            placed(
                document::resource_of(body.clone())?,
                (paths, partition),
                elsewhere,
            )
        };
        match kind.as_str() {
            "read" => match current {
                None => fail(404),
                Some(_) if !holds(condition, current) => fail(412),
                Some(e) if unchanged => Ok(Outcome::read(304, e)),
                Some(e) => Ok(Outcome::read(200, e)),
            },
            "create" => {
                // A body that is no document of this partition refuses the whole batch.
                let resource = body()?;
                match current {
                    Some(_) => fail(409),
                    None => Ok(self.written(201, (partition, id), before, resource)),
                }
            }
            "upsert" | "replace" => {
                // A body that is no document of this partition refuses the whole batch.
                let resource = body()?;
                match (kind.as_str(), current) {
                    ("replace", None) => fail(404),
                    (_, _) if condition_fails(condition, current) => fail(412),
                    (_, found) => {
                        let status = if found.is_some() { 200 } else { 201 };
                        Ok(self.written(status, (partition, id), before, resource))
                    }
                }
            }
            "delete" => match current {
                None => fail(404),
                Some(_) if !holds(condition, current) => fail(412),
                Some(_) => Ok(Outcome::bare(204)),
            },
            "patch" => {
                let Some(found) = current else {
                    return fail(404);
                };
                if !holds(condition, current) {
                    return fail(412);
                }
                self.patched(operation, found, (partition, id), paths)
            }
            other => Err(bad_request(format!(
                "{other:?} is not a batch operation: Create, Upsert, Read, Replace, Delete or Patch."
            ))),
        }
    }

    /// A patch operation of `found` (its condition held): the document patched, or 400 or
    /// 412 for this operation alone; a condition that is no predicate refuses the batch.
    fn patched(
        &self,
        operation: &Json,
        found: &Entity,
        (partition, id): (&str, &str),
        paths: &[String],
    ) -> Result<Outcome, Failure> {
        let failed = Outcome::bare;
        let body = operation
            .get("resourceBody")
            .map(Json::to_string)
            .unwrap_or_default();
        let Ok((operations, condition)) = crate::patch::parse(body.as_bytes()) else {
            return Ok(failed(400));
        };
        if let Some(text) = condition {
            let predicate = crate::sql::predicate(&text)
                .map_err(|e| bad_request(format!("Condition: {}", e.message)))?;
            // The condition sees the document as the batch has left it.
            let seen = json!(json_of(found));
            let held = crate::sql::holds(predicate.as_ref(), &seen)
                .map_err(|e| bad_request(format!("Condition: {}", e.message)))?;
            if !held {
                return Ok(failed(412));
            }
        }
        let patched = crate::patch::apply(&json_of(found), &operations, paths)
            .and_then(|patched| crate::ttl::check_item(&patched).map(|()| patched));
        match patched {
            Ok(patched) => Ok(self.written(200, (partition, id), Some(found.timestamp), patched)),
            Err(_) => Ok(failed(400)),
        }
    }

    /// The outcome of writing `document` as `id` of `partition` (`before` the version it
    /// replaces).
    fn written(
        &self,
        status: u16,
        (partition, id): (&str, &str),
        before: Option<ifmatch_table::DateTime>,
        document: Map<String, Json>,
    ) -> Outcome {
        Outcome {
            status,
            entity: Some(self.entity(partition, id, before, &document)),
            document: Some(document),
        }
    }
}

fn condition_fails(condition: Condition, current: Option<&Entity>) -> bool {
    condition.is_present() && !holds(condition, current)
}

fn operation_kind(operation: &Json) -> String {
    operation
        .get("operationType")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// The id an operation acts on: its `id`, or its body's.
fn operation_id(operation: &Json) -> Result<String, Failure> {
    let id = match operation.get("id").and_then(Json::as_str) {
        Some(id) => id.to_owned(),
        None => operation
            .get("resourceBody")
            .and_then(Json::as_object)
            .map(id_of)
            .unwrap_or_default(),
    };
    document::check_id(&id)?;
    Ok(id)
}

fn version(entity: &Option<Entity>) -> Option<ifmatch_table::DateTime> {
    entity.as_ref().map(|e| e.timestamp)
}

/// The batch's answer: each operation's result; when `failed` names one, it keeps its status
/// and every other operation (before it and after) is 424.
fn results(
    db: &str,
    coll: &str,
    outcomes: Vec<Outcome>,
    failed: Option<usize>,
    count: usize,
) -> Done {
    let mut outcomes = outcomes.into_iter();
    let results: Vec<OperationResult> = (0..count)
        .map(|i| match (outcomes.next(), failed) {
            (Some(outcome), Some(f)) if f == i => result(db, coll, outcome, false),
            (Some(outcome), None) => result(db, coll, outcome, true),
            _ => OperationResult::status(424),
        })
        .collect();
    let status = if failed.is_some() {
        StatusCode::MULTI_STATUS
    } else {
        StatusCode::OK
    };
    Done::of(status, results, None)
}
