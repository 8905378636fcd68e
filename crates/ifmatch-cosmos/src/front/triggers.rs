//! A document write with the triggers it names (`x-ms-documentdb-pre-trigger-include`,
//! `x-ms-documentdb-post-trigger-include`): the pre-triggers (each may change the document),
//! the write, the post-triggers (each sees what was written), as one transaction on the
//! write's partition (`transaction.rs`): a trigger that throws writes nothing.

use http::StatusCode;
use ifmatch_azure::swap::Attempts;
use ifmatch_table::Tables;
use serde_json::{Value as Json, json};

use super::answers::{Answered, Done};
use super::commit::Committed;
use super::scripts::source_of;
use super::transaction::Transaction;
use super::{Asked, Front, Rules};
use crate::address::Scripts;
use crate::document::{self, json_of};
use crate::failure::{Failure, bad_request, raced};
use crate::script::{BOUNDS, Job, Session, code_of};

/// The request headers that name a write's triggers.
const PRE: &str = "x-ms-documentdb-pre-trigger-include";
const POST: &str = "x-ms-documentdb-post-trigger-include";

impl<T: Tables> Front<'_, T> {
    /// Whether a document write names triggers (`x-ms-documentdb-pre-trigger-include`,
    /// `x-ms-documentdb-post-trigger-include`).
    pub(crate) fn names_triggers(asked: &Asked<'_>) -> bool {
        [PRE, POST]
            .iter()
            .any(|name| asked.header(name).is_some_and(|v| !v.trim().is_empty()))
    }

    /// A document write with the triggers it names: the pre-triggers (each may change the
    /// document), the write, the post-triggers (each sees what was written), as one
    /// transaction: a trigger that throws writes nothing. `operation` is the write's kind
    /// (`create`, `upsert`, `replace`, `delete`), `id` the document's for a replace or delete.
    pub(crate) async fn triggered(
        &self,
        (db, coll): (&str, &str),
        operation: &str,
        id: Option<&str>,
        asked: &Asked<'_>,
    ) -> Answered {
        let rules = Rules::of(&self.container(db, coll).await?);
        let (pre, post) = (
            self.triggers(db, coll, asked.header(PRE), "pre", operation)
                .await?,
            self.triggers(db, coll, asked.header(POST), "post", operation)
                .await?,
        );
        let partition = self.partition(&rules.paths, asked)?;
        let body = match operation {
            "delete" => Json::Null,
            _ => serde_json::from_slice(asked.body).map_err(|_| {
                bad_request("The request payload is invalid: it is not a JSON object.")
            })?,
        };
        let link = format!("dbs/{db}/colls/{coll}");
        let kind = match operation {
            "create" => "Create",
            "upsert" => "Upsert",
            "replace" => "Replace",
            _ => "Delete",
        };
        let job = |source: &str, request: &Json, response: &Json| Job {
            source: source.to_owned(),
            arguments: Vec::new(),
            link: link.clone(),
            request: Some(request.clone()),
            response: Some(response.clone()),
            operation: kind.to_owned(),
        };
        let mut attempts = Attempts::default();
        while attempts.another() {
            let mut transaction =
                Transaction::begin(self, (db, coll), &rules, partition.clone()).await?;
            let mut session = Session::open(BOUNDS)?;
            let mut request = body.clone();
            for trigger in &pre {
                let outcome = transaction
                    .run(&mut session, job(trigger, &request, &Json::Null))
                    .await?;
                request = outcome.request;
            }
            let document_link = id.map(|id| format!("{link}/docs/{id}"));
            let options = match asked.header("if-match") {
                Some(tag) => json!({ "etag": tag }),
                None => json!({}),
            };
            let args = json!({
                "link": document_link.unwrap_or_else(|| link.clone()), "body": request, "options": options,
            });
            let reply = transaction.operate(operation, args).await?;
            if let Some(error) = reply.get("error") {
                let status = error["number"].as_u64().unwrap_or(400) as u16;
                let message = error["message"].as_str().unwrap_or_default();
                return Err(Failure::new(code_of(status), message));
            }
            let written = reply["result"].clone();
            for trigger in &post {
                transaction
                    .run(&mut session, job(trigger, &request, &written))
                    .await?;
            }
            match transaction.commit().await {
                Ok(()) => {
                    let at = written
                        .get("_etag")
                        .and_then(Json::as_str)
                        .and_then(document::version);
                    let status = match (operation, transaction.created) {
                        ("delete", _) => return Ok(Done::empty(StatusCode::NO_CONTENT, None)),
                        (_, true) => StatusCode::CREATED,
                        (_, false) => StatusCode::OK,
                    };
                    return Ok(Done::of(status, written, at));
                }
                Err(Committed::Conflict) => continue,
                Err(Committed::Failed(failure)) => return Err(failure),
            }
        }
        Err(raced())
    }

    /// The sources of the triggers `names` (comma-separated) names, each checked to be of
    /// `kind` (`pre`, `post`) and for `operation`.
    async fn triggers(
        &self,
        db: &str,
        coll: &str,
        names: Option<&str>,
        kind: &str,
        operation: &str,
    ) -> Result<Vec<String>, Failure> {
        let mut sources = Vec::new();
        let names: Vec<&str> = (names.unwrap_or_default().split(','))
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        // Azure's service quotas: one pre-trigger and one post-trigger a write.
        if names.len() > 1 {
            return Err(bad_request(format!(
                "A write names at most one {kind}-trigger; this one names {}.",
                names.len()
            )));
        }
        for name in names {
            let trigger = self
                .stored_script(db, coll, Scripts::Triggers, name)
                .await?;
            let json = json_of(&trigger);
            let of = |field: &str| {
                json.get(field)
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_ascii_lowercase()
            };
            if of("triggerType") != kind {
                return Err(bad_request(format!(
                    "The trigger {name} is a {} trigger, named as a {kind}-trigger.",
                    of("triggerType")
                )));
            }
            let applies = match of("triggerOperation").as_str() {
                "all" => true,
                "update" => matches!(operation, "replace" | "upsert"),
                named => named == operation,
            };
            if !applies {
                return Err(bad_request(format!(
                    "The trigger {name} is for {} operations, not {operation}.",
                    of("triggerOperation")
                )));
            }
            sources.push(source_of(&trigger));
        }
        Ok(sources)
    }
}
