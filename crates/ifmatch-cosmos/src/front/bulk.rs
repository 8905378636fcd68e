//! Bulk, as the SDKs send it (`x-ms-cosmos-batch-atomic: false`): each operation a batch of
//! its own (`batch.rs`) on its own partition key, in order; one that fails undoes nothing else.

use http::StatusCode;
use ifmatch_table::Tables;
use serde_json::Value as Json;

use super::answers::{Answered, Done};
use super::outcome::{OperationResult, Outcome, result};
use super::{Asked, Front, Rules, Scope, documents_table};
use crate::failure::{Failure, bad_request};

impl<T: Tables> Front<'_, T> {
    /// Bulk, as the JS SDK's `items.bulk` sends it: each operation on its own, on its own
    /// partition key (its `partitionKey`, or the request's), in order; one that fails undoes
    /// nothing else. With `x-ms-cosmos-batch-continue-on-error: false`, the operations after
    /// the first that fails are not tried (424). 207 when any failed, as the SDKs read it.
    pub(super) async fn bulk(
        &self,
        db: &str,
        coll: &str,
        rules: &Rules,
        operations: &[Json],
        asked: &Asked<'_>,
    ) -> Answered {
        let table = documents_table(db, coll);
        let stop = asked
            .header("x-ms-cosmos-batch-continue-on-error")
            .is_some_and(|go_on| go_on.eq_ignore_ascii_case("false"));
        let mut answers = Vec::new();
        let mut failed = false;
        for operation in operations {
            let answer = if stop && failed {
                OperationResult::status(424)
            } else {
                match self.alone(&table, rules, operation, asked).await {
                    Ok(outcome) => {
                        let written = outcome.status < 400;
                        result(db, coll, outcome, written)
                    }
                    Err(refused) => OperationResult::refused(&refused),
                }
            };
            failed |= answer.status_code >= 400;
            answers.push(answer);
        }
        let status = match failed {
            true => StatusCode::MULTI_STATUS,
            false => StatusCode::OK,
        };
        Ok(Done::of(status, answers, None))
    }

    /// One operation of a bulk, as a batch of its own on its partition key.
    async fn alone(
        &self,
        table: &str,
        rules: &Rules,
        operation: &Json,
        asked: &Asked<'_>,
    ) -> Result<Outcome, Failure> {
        let partition = match operation.get("partitionKey") {
            Some(Json::String(key)) => match Scope::of_header(&rules.paths, key)? {
                Scope::Key(stored) => stored,
                Scope::Prefix(_) => {
                    return Err(bad_request("An operation's partitionKey is the whole key."));
                }
            },
            Some(_) => return Err(bad_request("An operation's partitionKey is a JSON string.")),
            None => self.partition(&rules.paths, asked)?,
        };
        let one = std::slice::from_ref(operation);
        let mut outcomes =
            (self.transact(table, rules, &partition, one, |outcomes, _| outcomes)).await?;
        outcomes
            .pop()
            .ok_or_else(|| bad_request("An operation was not decided."))
    }
}
