//! A script's transaction: the collection operations of a stored procedure or a trigger, on
//! the one logical partition its request names, each decided against the documents as they
//! were read and as the script's earlier operations left them; nothing is written until the
//! script ends, and then everything at once, as one compare-and-swap (`Front::commit_checked`)
//! over every document it wrote and every document it read, and over the partition's fence
//! (an entry of the container's own, `~scripts`, row the partition), which every script's
//! commit moves: two scripts on one partition, on any instance, never interleave (the second
//! to commit finds the fence moved and runs again), and a script whose documents another
//! write changed meanwhile runs again too. A throw or a bound reached writes nothing. A
//! script's queries: `query.rs`.

mod query;

use std::collections::BTreeMap;

use ifmatch_table::{Change, Entity, Expected, Tables};
use serde_json::{Map, Value as Json, json};

use super::commit::Committed;
use super::documents::document_json;
use super::{Front, Rules, document_in, documents_table, id_of, key};
use crate::document;
use crate::failure::Failure;
use crate::script::{Call, Called, Job, OPERATIONS, Operation, Outcome, Session, failure};

/// The partition of a container's table that holds each logical partition's fence.
const FENCES: &str = "~scripts";

/// The documents of one partition as a script sees and leaves them.
pub(crate) struct Transaction<'f, 'a, T> {
    front: &'f Front<'a, T>,
    db: &'f str,
    coll: &'f str,
    table: String,
    pub(crate) partition: String,
    /// The container's partition key and policies, as the request read them.
    rules: &'f Rules,
    /// The fence as read when the transaction began.
    fence: Option<Entity>,
    /// Each document read, as stored; and as the transaction leaves it.
    read: BTreeMap<String, Option<Entity>>,
    now: BTreeMap<String, Option<Entity>>,
    /// Ids made for documents the script gave none.
    made: u128,
    /// Whether the last create or upsert made a document that was not there.
    pub(crate) created: bool,
}

impl<'f, 'a, T: Tables> Transaction<'f, 'a, T> {
    /// A transaction on `partition` of the container `coll` of `db`.
    pub(crate) async fn begin(
        front: &'f Front<'a, T>,
        (db, coll): (&'f str, &'f str),
        rules: &'f Rules,
        partition: String,
    ) -> Result<Self, Failure> {
        let table = documents_table(db, coll);
        let fence = front.get(&table, FENCES, &partition).await?;
        Ok(Self {
            front,
            db,
            coll,
            table,
            partition,
            rules,
            fence,
            read: BTreeMap::new(),
            now: BTreeMap::new(),
            made: 0,
            created: false,
        })
    }

    /// Runs `job` in `session` to its end, each operation it asks for performed here: its
    /// outcome (nothing committed yet).
    pub(crate) async fn run(
        &mut self,
        session: &mut Session,
        job: Job,
    ) -> Result<Outcome, Failure> {
        let mut queue = std::collections::VecDeque::new();
        let mut performed = 0;
        let mut call = Call::Start(job);
        loop {
            match session.call(call).await.map_err(failure)? {
                Called::Operations(asked) => queue.extend(asked),
                Called::Finished(outcome) => return Ok(outcome),
            }
            call = match queue.pop_front() {
                Some(operation) => {
                    performed += 1;
                    let reply = match performed > OPERATIONS {
                        // Only a script that went around `isAccepted` gets here.
                        true => {
                            refusal(429, "The script asked for more operations than a run may.")
                        }
                        false => self.perform(&operation).await?,
                    };
                    Call::Deliver(operation.id, reply)
                }
                None => Call::Finish,
            };
        }
    }

    /// The document `id` as the transaction has left it.
    pub(crate) async fn current(&mut self, id: &str) -> Result<Option<Entity>, Failure> {
        if let Some(now) = self.now.get(id) {
            return Ok(now.clone());
        }
        let stored = self.front.get(&self.table, &self.partition, id).await?;
        self.front.meter.add(crate::charge::read(
            stored.as_ref().map_or(0, document::stored_len),
        ));
        let live = self.front.live(&self.rules.policies, stored.clone());
        self.read.insert(id.to_owned(), stored);
        self.now.insert(id.to_owned(), live.clone());
        Ok(live)
    }

    /// Leaves the document `id` as `after` (`None`: deleted).
    pub(crate) fn write(&mut self, id: &str, after: Option<Entity>) {
        self.now.insert(id.to_owned(), after);
    }

    /// A body a script writes, checked as a document of this partition.
    pub(crate) fn checked(&self, body: &Json) -> Result<Map<String, Json>, (u16, String)> {
        // Written out once: weighed, then read as the document it is.
        let text = body.to_string();
        if text.len() > document::MAX_DOCUMENT {
            return Err((413, "The document is larger than 2 MB.".into()));
        }
        let elsewhere = "Requests originating from scripts cannot reference partition keys other than the one for which client request was submitted.";
        document_in(&text, (&self.rules.paths, &self.partition), elsewhere)
            .map_err(|f| (400, f.message))
    }

    /// A document as the collection API gives it (with its system properties).
    pub(crate) fn shown(&self, entity: &Entity) -> Json {
        document_json(self.db, self.coll, entity)
    }

    /// Leaves `resource` as the document `id` (a new version over what was read): the
    /// document as the collection API gives it.
    fn put(&mut self, id: &str, resource: &Map<String, Json>) -> Json {
        let before = self
            .read
            .get(id)
            .and_then(Option::as_ref)
            .map(|e| e.timestamp);
        let entity = (self.front).entity(&self.partition, id, before, resource);
        let shown = self.shown(&entity);
        self.write(id, Some(entity));
        shown
    }

    /// The operation `kind` with `args` (a trigger's write), performed: its reply.
    pub(crate) async fn operate(&mut self, kind: &str, args: Json) -> Result<Json, Failure> {
        let operation = Operation {
            id: 0,
            kind: kind.to_owned(),
            args,
        };
        self.perform(&operation).await
    }

    /// One operation, performed: the reply its callback gets.
    async fn perform(&mut self, operation: &Operation) -> Result<Json, Failure> {
        let args = &operation.args;
        let options = &args["options"];
        let body = &args["body"];
        let link_id = || {
            let link = args["link"]
                .as_str()
                .unwrap_or_default()
                .trim_end_matches('/');
            link.rsplit_once("/docs/").map(|(_, id)| {
                percent_encoding::percent_decode_str(id)
                    .decode_utf8_lossy()
                    .into_owned()
            })
        };
        let outcome = match operation.kind.as_str() {
            "create" | "upsert" => {
                let mut body = body.clone();
                if let Json::Object(fields) = &mut body
                    && !fields.contains_key("id")
                {
                    if options["disableAutomaticIdGeneration"] == Json::Bool(true) {
                        return Ok(refusal(
                            400,
                            "The document has no id, and automatic id generation is disabled.",
                        ));
                    }
                    self.made += 1;
                    let id =
                        uuid::Uuid::from_u128(self.front.seed.as_u128() ^ self.made).to_string();
                    fields.insert("id".into(), id.into());
                }
                let upsert = operation.kind == "upsert";
                match self.checked(&body) {
                    Err((status, message)) => Err((status, message)),
                    Ok(resource) => {
                        let id = id_of(&resource);
                        let current = self.current(&id).await?;
                        match (&current, upsert) {
                            (Some(_), false) => Err((
                                409,
                                "Resource with specified id or name already exists.".into(),
                            )),
                            (Some(found), true) if !etag_holds(options, found) => {
                                Err(precondition())
                            }
                            _ => {
                                self.created = current.is_none();
                                Ok(self.put(&id, &resource))
                            }
                        }
                    }
                }
            }
            "replace" => match (link_id(), self.checked(body)) {
                (None, _) => Err(bad_link()),
                (_, Err(refused)) => Err(refused),
                (Some(id), Ok(resource)) if id_of(&resource) != id => Err((
                    400,
                    "The document's id is not the one its link names.".into(),
                )),
                (Some(id), Ok(resource)) => match self.current(&id).await? {
                    None => Err(not_found()),
                    Some(found) if !etag_holds(options, &found) => Err(precondition()),
                    Some(_) => Ok(self.put(&id, &resource)),
                },
            },
            "read" => match link_id() {
                None => Err(bad_link()),
                Some(id) => match self.current(&id).await? {
                    None => Err(not_found()),
                    Some(found) => Ok(self.shown(&found)),
                },
            },
            "delete" => match link_id() {
                None => Err(bad_link()),
                Some(id) => match self.current(&id).await? {
                    None => Err(not_found()),
                    Some(found) if !etag_holds(options, &found) => Err(precondition()),
                    Some(_) => {
                        self.write(&id, None);
                        Ok(Json::Null)
                    }
                },
            },
            "query" => return self.query(args).await,
            other => Err((400, format!("{other} is not a collection operation."))),
        };
        Ok(match outcome {
            Ok(result) => json!({ "kind": operation.kind, "result": result }),
            Err((status, message)) => refusal(status, &message),
        })
    }

    /// Commits what the transaction wrote, with a check of every document it read and the
    /// fence moved; `Conflict` when another write came first (the run is then tried again).
    pub(crate) async fn commit(&self) -> Result<(), Committed> {
        let mut changes: Vec<(Change, Option<&Entity>)> = Vec::new();
        let mut checks = Vec::new();
        for (id, after) in &self.now {
            let before = self.read.get(id).and_then(Option::as_ref);
            let live_before = self.front.live(&self.rules.policies, before.cloned());
            let expected = before.map_or(Expected::Absent, |e| Expected::Version(e.timestamp));
            let unchanged =
                live_before.as_ref().map(|e| e.timestamp) == after.as_ref().map(|e| e.timestamp);
            match unchanged {
                // Read only: it must be as read when the writes land.
                true => checks.push(Change {
                    key: key(&self.partition, id),
                    expected,
                    write: before.cloned(),
                }),
                false => changes.push((
                    Change {
                        key: key(&self.partition, id),
                        expected,
                        write: after.clone(),
                    },
                    before,
                )),
            }
        }
        if changes.is_empty() {
            return Ok(());
        }
        let at = self
            .front
            .clock
            .stamp(self.front.now, self.fence.as_ref().map(|f| f.timestamp));
        checks.push(Change {
            key: key(FENCES, &self.partition),
            expected: self
                .fence
                .as_ref()
                .map_or(Expected::Absent, |f| Expected::Version(f.timestamp)),
            write: Some(Entity::new(FENCES, &self.partition, at, [])),
        });
        self.front
            .commit_checked(&self.table, &self.rules.policies, &changes, &checks)
            .await
    }
}

/// Whether the options' `etag` (or `accessCondition` of type `IfMatch`) holds for `found`.
fn etag_holds(options: &Json, found: &Entity) -> bool {
    let tag = options["etag"].as_str().or_else(|| {
        let condition = &options["accessCondition"];
        (condition["type"]
            .as_str()
            .is_none_or(|t| t.eq_ignore_ascii_case("IfMatch")))
        .then(|| condition["condition"].as_str())
        .flatten()
    });
    tag.is_none_or(|tag| tag.trim() == "*" || document::version(tag) == Some(found.timestamp))
}

fn refusal(number: u16, message: &str) -> Json {
    json!({ "error": { "number": number, "message": message } })
}

fn not_found() -> (u16, String) {
    (404, "Resource Not Found".into())
}

fn precondition() -> (u16, String) {
    (412, "One of the specified pre-condition is not met".into())
}

fn bad_link() -> (u16, String) {
    (
        400,
        "A document's link is dbs/{db}/colls/{coll}/docs/{id}.".into(),
    )
}
