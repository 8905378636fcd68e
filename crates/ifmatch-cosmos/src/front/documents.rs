//! Documents: listed, created, read, replaced, patched and deleted, each write a compare-and-swap
//! decided again when another write came first (see `mod.rs`'s `commit`).

use http::StatusCode;
use ifmatch_table::{Change, Entity, Expected, Scan, Tables};
use serde_json::{Map, Value as Json};

use super::answers::{Answered, Done, continuation_key, continuation_token};
use ifmatch_azure::swap::Attempts;

use super::commit::Committed;
use super::{Asked, Condition, Front, Rules, Scope, documents_table, holds, id_of, key, rid};
use crate::charge;
use crate::document::{self, MAX_DOCUMENT, json_of};
use crate::failure::{
    Failure, backend, bad_request, conflict, not_found, precondition_failed, raced, too_large,
};
use crate::{feed_entries, ttl};

/// A document as its path names it: the database, the container, the id.
pub(super) type Doc<'a> = (&'a str, &'a str, &'a str);

impl<T: Tables> Front<'_, T> {
    pub(super) async fn documents(&self, db: &str, coll: &str, asked: &Asked<'_>) -> Answered {
        if asked.header("a-im").is_some_and(|v| {
            v.eq_ignore_ascii_case("incremental feed")
                || v.eq_ignore_ascii_case("full-fidelity feed")
        }) {
            return self.changes(db, coll, asked).await;
        }
        let rules = Rules::of(&self.container(db, coll).await?);
        let partition = match asked.header("x-ms-documentdb-partitionkey") {
            Some(header) => match Scope::of_header(&rules.paths, header)? {
                Scope::Key(stored) => Some(stored),
                Scope::Prefix(_) => {
                    return Err(bad_request(
                        "A list of documents names the whole partition key, or none: query a prefix.",
                    ));
                }
            },
            None => None,
        };
        let limit = asked.page_size()?;
        let from = match asked.header("x-ms-continuation") {
            Some(token) => Some(continuation_key(token)?),
            None => None,
        };
        let table = documents_table(db, coll);
        let scan = Scan {
            from: from.as_ref().map(|(p, r)| (p.as_str(), r.as_str())),
            partition: partition.as_deref(),
            limit: limit + 1,
        };
        let mut found = self.tables.scan(&table, scan).await.map_err(backend)?;
        self.meter.examined(found.len());
        let ended = feed_entries::documents_only(&mut found);
        let next = (!ended && found.len() > limit).then(|| found.remove(limit));
        let (default, now) = (rules.policies.ttl, ttl::ticks(self.now));
        let documents: Vec<Json> = (found.iter())
            .map(|e| (e, document_json(db, coll, e)))
            .filter(|(e, doc)| !ttl::past(default, e.timestamp, doc.get("ttl"), now))
            .map(|(_, doc)| doc)
            .collect();
        let mut done = Done::feed(&rid(&[db, coll]), "Documents", documents, None);
        done.continuation = next.map(|e| continuation_token(&e.partition_key, &e.row_key));
        Ok(done)
    }

    pub(super) async fn create_document(
        &self,
        db: &str,
        coll: &str,
        asked: &Asked<'_>,
    ) -> Answered {
        if document::is_query(asked.headers) {
            return self.query(db, coll, asked).await;
        }
        if asked.is_true("x-ms-cosmos-is-batch-request") {
            return self.batch(db, coll, asked).await;
        }
        let upsert = asked.is_true("x-ms-documentdb-is-upsert");
        if Self::names_triggers(asked) {
            let operation = if upsert { "upsert" } else { "create" };
            return self.triggered((db, coll), operation, None, asked).await;
        }
        let Rules { paths, policies } = Rules::of(&self.container(db, coll).await?);
        let (resource, partition) = self.incoming(&paths, asked)?;
        let id = id_of(&resource);
        let condition = self.condition(asked)?;
        let table = documents_table(db, coll);
        // With a time to live, an id may be held by an item past its time: read first, so a
        // create over it replaces what is stored.
        let read_first = upsert || policies.ttl.is_some();
        let mut attempts = Attempts::default();
        while attempts.another() {
            let stored = match read_first {
                true => self.get(&table, &partition, &id).await?,
                false => None,
            };
            let current = self.live(&policies, stored.clone());
            if !upsert && current.is_some() {
                return Err(conflict());
            }
            if upsert && !holds(condition, current.as_ref()) {
                return Err(precondition_failed());
            }
            let before = stored.as_ref().map(|e| e.timestamp);
            let entity = self.entity(&partition, &id, before, &resource);
            let expected = before.map_or(Expected::Absent, Expected::Version);
            let change = Change {
                key: key(&partition, &id),
                expected,
                write: Some(entity.clone()),
            };
            match self
                .commit_documents(&table, &policies, &[(change, stored.as_ref())])
                .await
            {
                Ok(()) => {
                    let status = match current {
                        Some(_) => StatusCode::OK,
                        None => StatusCode::CREATED,
                    };
                    return Ok(Done::of(
                        status,
                        document_json(db, coll, &entity),
                        Some(entity.timestamp),
                    ));
                }
                Err(Committed::Conflict) if !read_first => return Err(conflict()),
                Err(Committed::Conflict) => continue,
                Err(Committed::Failed(failure)) => return Err(failure),
            }
        }
        Err(raced())
    }

    pub(super) async fn patch(&self, (db, coll, id): Doc<'_>, asked: &Asked<'_>) -> Answered {
        let rules = Rules::of(&self.container(db, coll).await?);
        let partition = self.partition(&rules.paths, asked)?;
        let (operations, condition) = crate::patch::parse(asked.body)?;
        let predicate = match condition {
            Some(text) => crate::sql::predicate(&text)
                .map_err(|error| bad_request(format!("Condition: {}", error.message)))?,
            None => None,
        };
        let if_match = self.condition(asked)?;
        let fixed = &rules.paths;
        let written = self
            .change_existing((db, coll), &rules, &partition, id, if_match, |current| {
                let seen = document_json(db, coll, current);
                let held = crate::sql::holds(predicate.as_ref(), &seen)
                    .map_err(|error| bad_request(format!("Condition: {}", error.message)))?;
                if !held {
                    return Err(precondition_failed());
                }
                let patched = crate::patch::apply(&json_of(current), &operations, fixed)?;
                ttl::check_item(&patched)?;
                if serde_json::to_vec(&patched)
                    .expect("a JSON map serializes")
                    .len()
                    > MAX_DOCUMENT
                {
                    return Err(too_large());
                }
                Ok(Some(patched))
            })
            .await?;
        Ok(written_answer(db, coll, written))
    }

    pub(super) async fn read(&self, (db, coll, id): Doc<'_>, asked: &Asked<'_>) -> Answered {
        let rules = Rules::of(&self.container(db, coll).await?);
        let partition = self.partition(&rules.paths, asked)?;
        let table = documents_table(db, coll);
        let stored = self.get(&table, &partition, id).await?;
        let entity = (self.live(&rules.policies, stored)).ok_or_else(not_found)?;
        let unchanged = asked.header("if-none-match").is_some_and(|tags| {
            tags.split(',')
                .any(|tag| tag.trim() == "*" || document::version(tag) == Some(entity.timestamp))
        });
        self.meter.add(charge::read(document::stored_len(&entity)));
        if unchanged {
            return Ok(Done::empty(
                StatusCode::NOT_MODIFIED,
                Some(entity.timestamp),
            ));
        }
        Ok(Done::ok(document_json(db, coll, &entity), entity.timestamp))
    }

    pub(super) async fn replace(&self, (db, coll, id): Doc<'_>, asked: &Asked<'_>) -> Answered {
        if Self::names_triggers(asked) {
            return self.triggered((db, coll), "replace", Some(id), asked).await;
        }
        let rules = Rules::of(&self.container(db, coll).await?);
        let (resource, partition) = self.incoming(&rules.paths, asked)?;
        if id_of(&resource) != id {
            return Err(bad_request(
                "The id in the body is not the id the path names: a replace keeps its id.",
            ));
        }
        let condition = self.condition(asked)?;
        let written = self
            .change_existing((db, coll), &rules, &partition, id, condition, |_| {
                Ok(Some(resource.clone()))
            })
            .await?;
        Ok(written_answer(db, coll, written))
    }

    pub(super) async fn delete(&self, (db, coll, id): Doc<'_>, asked: &Asked<'_>) -> Answered {
        if Self::names_triggers(asked) {
            return self.triggered((db, coll), "delete", Some(id), asked).await;
        }
        let rules = Rules::of(&self.container(db, coll).await?);
        let partition = self.partition(&rules.paths, asked)?;
        let condition = self.condition(asked)?;
        (self.change_existing((db, coll), &rules, &partition, id, condition, |_| Ok(None))).await?;
        Ok(Done::empty(StatusCode::NO_CONTENT, None))
    }

    /// Changes the document `id` of the container `coll` of `db` (whose `rules` hold), which
    /// must be there and meet `condition`: `decide` makes what it becomes of it as it is now
    /// (`None`: deleted), or refuses. Committed as a compare-and-swap against the version
    /// read, and decided again when another write came first. Answers what was written.
    pub(super) async fn change_existing(
        &self,
        (db, coll): (&str, &str),
        rules: &Rules,
        partition: &str,
        id: &str,
        condition: Condition,
        decide: impl Fn(&Entity) -> Result<Option<Map<String, Json>>, Failure>,
    ) -> Result<Option<Entity>, Failure> {
        let table = documents_table(db, coll);
        let policies = &rules.policies;
        let mut attempts = Attempts::default();
        while attempts.another() {
            let stored = self.get(&table, partition, id).await?;
            let current = self.live(policies, stored).ok_or_else(not_found)?;
            if !holds(condition, Some(&current)) {
                return Err(precondition_failed());
            }
            let before = Some(current.timestamp);
            let written = decide(&current)?.map(|json| self.entity(partition, id, before, &json));
            let change = Change {
                key: key(partition, id),
                expected: Expected::Version(current.timestamp),
                write: written.clone(),
            };
            match (self.commit_documents(&table, policies, &[(change, Some(&current))])).await {
                Ok(()) => return Ok(written),
                Err(Committed::Conflict) => continue,
                Err(Committed::Failed(failure)) => return Err(failure),
            }
        }
        Err(raced())
    }
}

/// The answer to a replace or a patch: the document as written.
pub(super) fn written_answer(db: &str, coll: &str, written: Option<Entity>) -> Done {
    match written {
        Some(entity) => Done::ok(document_json(db, coll, &entity), entity.timestamp),
        None => Done::empty(StatusCode::NO_CONTENT, None),
    }
}

pub(crate) fn document_json(db: &str, coll: &str, entity: &Entity) -> Json {
    document_json_of(db, coll, entity, json_of(entity))
}

/// [`document_json`] of `entity` whose stored JSON, `json`, is already read.
pub(crate) fn document_json_of(
    db: &str,
    coll: &str,
    entity: &Entity,
    json: Map<String, Json>,
) -> Json {
    let id = &entity.row_key;
    let link = format!("dbs/{db}/colls/{coll}/docs/{id}");
    let rid = rid(&[db, coll, &entity.partition_key, id]);
    let mut json = document::with_system(json, &link, &rid, entity.timestamp);
    json.insert("_attachments".into(), "attachments/".into());
    Json::Object(json)
}
