//! The operations on databases, containers and documents, over one account's tables: each
//! resource one entity, kept as its JSON with the instant it was written (its version), and
//! every write a compare-and-swap against the version it was decided on, decided again when
//! another write came first.
//!
//! Where things are kept: databases in the table `#dbs` (partition `""`, row the id),
//! containers in `#colls` (partition the database, row the id), and a container's documents
//! in the table `{db}/{container}` (partition the partition key's JSON, row the id); users and
//! permissions in `#users` and `#perms` (`users.rs`). `#`
//! and `/` are in no id, so no name is two things. The change feed is a partition of that table
//! (see `feeds.rs`), moved by the same commit that writes a document.
//!
//! This file routes a request and holds what every operation shares (the container read with
//! its policies, a document's partition); one file per kind of resource holds its operations:
//! `databases.rs`, `containers.rs`, `ranges.rs` (partition key ranges, split and merged),
//! `conflicts.rs` (none: one region), `documents.rs`, `batch.rs` (transactional batches),
//! `bulk.rs`, `queries.rs`, `feeds.rs` (the change feed), `users.rs` (users and their
//! permissions), `offers.rs`, `scripts.rs` (stored procedures, triggers, user-defined
//! functions), `triggers.rs` (a write with its triggers), `transaction/` (a script's operations
//! on its partition); `commit/` every commit (a document's goes with the feed's counter, in a
//! group with those that wait for the container's turn, `turns.rs`), `sweep.rs` what expires (items past
//! their time to live, old versions), `place.rs` where a document is kept and how it is named,
//! and `answers.rs` what they answer (a failure is `crate::failure`'s, which every rule of the
//! dialect answers with).

pub(crate) mod answers;
mod batch;
mod bulk;
pub(crate) mod commit;
mod conflicts;
mod containers;
mod databases;
pub(crate) mod documents;
pub(crate) mod feeds;
pub(crate) mod offers;
mod outcome;
mod place;
pub(crate) mod queries;
mod ranges;
mod scripts;
mod sweep;
pub(crate) mod transaction;
mod triggers;
pub(crate) mod turns;
mod users;

use std::sync::Arc;
use std::time::SystemTime;

use http::{HeaderMap, Method};
use ifmatch_core::precondition::IfMatch;
use ifmatch_table::{DateTime, Entity, Scan, TableError, Tables, Value};
use serde_json::{Map, Value as Json};

use self::answers::Answered;
pub(crate) use self::place::{
    Scope, digest, document_in, documents_table, id_of, key, placed, rid, stored_key_of,
};
use self::turns::Commits;
use crate::address::{Address, Scripts};
use crate::document::{self, MAX_DOCUMENT};
pub(crate) use crate::document::{JSON, json_of};
use crate::failure::{Code, Failure, backend, bad_request, not_found, too_large};
pub(crate) use crate::policies::{Policies, Rules};

/// The account's consistency level, as its read says (a request may relax it, not strengthen it).
pub(crate) const CONSISTENCY: &str = "Session";
use crate::ttl;
use ifmatch_table::Clock;

const DATABASES: &str = "#dbs";

pub(crate) const CONTAINERS: &str = "#colls";

/// The most resources a feed page holds.
const MAX_PAGE: usize = 1000;

/// What a front needs of a request.
#[derive(Debug)]
pub struct Asked<'a> {
    /// Its method.
    pub method: &'a Method,
    /// Its headers.
    pub headers: &'a HeaderMap,
    /// What its path names.
    pub address: &'a Address,
    /// Its body, whole.
    pub body: &'a [u8],
}

impl Asked<'_> {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The page size a feed or query asks for (`x-ms-max-item-count`; -1 or none: 100).
    pub(crate) fn page_size(&self) -> Result<usize, Failure> {
        match self.header("x-ms-max-item-count").map(str::parse::<i64>) {
            None | Some(Ok(-1)) => Ok(100),
            Some(Ok(n)) if n > 0 => Ok((n as usize).min(MAX_PAGE)),
            _ => Err(bad_request(
                "x-ms-max-item-count is a positive number, or -1.",
            )),
        }
    }

    pub(crate) fn is_true(&self, name: &str) -> bool {
        self.header(name)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
}

/// One account's resources over `T`, for one request.
pub struct Front<'a, T> {
    /// The account's tables.
    pub tables: &'a T,
    /// The instants writes are made at.
    pub clock: &'a Arc<Clock>,
    /// The request's time.
    pub now: SystemTime,
    /// The account's endpoint, as the client reached it (`http://host:port/`).
    pub endpoint: &'a str,
    /// This instance's commits to containers (their turns and groups).
    pub(crate) commits: &'a Commits,
    /// The account, whose key signs its permissions' resource tokens.
    pub account: &'a ifmatch_azure::Account,
    /// What the request is charged, as it is served.
    pub meter: crate::charge::Meter,
    /// A random value of the request's: the ids a script leaves to the server are made of it.
    pub seed: uuid::Uuid,
}

impl<T: Tables> Front<'_, T> {
    /// The answer to `asked`.
    pub async fn handle(&self, asked: &Asked<'_>) -> Answered {
        use Address as A;
        match (asked.method, asked.address) {
            (&Method::GET, A::Account) => Ok(self.account()),
            (&Method::GET, A::Databases) => self.databases().await,
            (&Method::POST, A::Databases) => self.create_database(asked).await,
            (&Method::GET, A::Database(db)) => self.database(db).await,
            (&Method::DELETE, A::Database(db)) => self.delete_database(db).await,
            (&Method::GET, A::Containers(db)) => self.containers(db).await,
            (&Method::POST, A::Containers(db)) => self.create_container(db, asked).await,
            (&Method::GET, A::Container(db, coll)) => self.container_read(db, coll).await,
            (&Method::PUT, A::Container(db, coll)) => self.replace_container(db, coll, asked).await,
            (&Method::DELETE, A::Container(db, coll)) => self.delete_container(db, coll).await,
            (&Method::GET, A::Ranges(db, coll)) => self.ranges(db, coll, asked).await,
            (&Method::POST, A::Ranges(db, coll)) => self.change_ranges(db, coll, asked).await,
            (&Method::GET, A::Conflicts(db, coll)) => self.conflicts(db, coll).await,
            (&Method::POST, A::Conflicts(db, coll)) if crate::document::is_query(asked.headers) => {
                self.conflicts(db, coll).await
            }
            (&Method::GET | &Method::DELETE, A::Conflict(db, coll, _)) => {
                self.conflict(db, coll).await
            }
            (&Method::GET, A::Documents(db, coll)) => self.documents(db, coll, asked).await,
            (&Method::POST, A::Documents(db, coll)) => self.create_document(db, coll, asked).await,
            (&Method::GET, A::Document(db, coll, id)) => self.read((db, coll, id), asked).await,
            (&Method::PUT, A::Document(db, coll, id)) => self.replace((db, coll, id), asked).await,
            (&Method::PATCH, A::Document(db, coll, id)) => self.patch((db, coll, id), asked).await,
            (&Method::DELETE, A::Document(db, coll, id)) => {
                self.delete((db, coll, id), asked).await
            }
            (&Method::GET, A::Scripts(db, coll, kind)) => self.scripts(db, coll, *kind).await,
            (&Method::POST, A::Scripts(db, coll, kind)) => {
                self.write_script((db, coll, *kind), None, asked).await
            }
            (&Method::GET, A::Script(db, coll, kind, id)) => self.script(db, coll, *kind, id).await,
            (&Method::PUT, A::Script(db, coll, kind, id)) => {
                self.write_script((db, coll, *kind), Some(id), asked).await
            }
            (&Method::DELETE, A::Script(db, coll, kind, id)) => {
                self.delete_script(db, coll, *kind, id).await
            }
            (&Method::POST, A::Script(db, coll, Scripts::Procedures, id)) => {
                self.execute(db, coll, id, asked).await
            }
            (&Method::GET | &Method::POST, A::Offers) => self.offers(asked).await,
            (&Method::GET, A::Offer(id)) => self.offer(id).await,
            (&Method::PUT, A::Offer(id)) => self.replace_offer(id, asked).await,
            (&Method::GET, A::Users(db)) => self.users(db).await,
            (&Method::POST, A::Users(db)) => self.create_user(db, asked).await,
            (&Method::GET, A::User(db, user)) => self.user(db, user).await,
            (&Method::PUT, A::User(db, user)) => self.replace_user(db, user, asked).await,
            (&Method::DELETE, A::User(db, user)) => self.delete_user(db, user).await,
            (&Method::GET, A::Permissions(db, user)) => self.permissions(db, user, asked).await,
            (&Method::POST, A::Permissions(db, user)) => {
                self.write_permission((db, user, None), asked).await
            }
            (&Method::GET, A::Permission(db, user, id)) => {
                self.permission((db, user, id), asked).await
            }
            (&Method::PUT, A::Permission(db, user, id)) => {
                self.write_permission((db, user, Some(id)), asked).await
            }
            (&Method::DELETE, A::Permission(db, user, id)) => {
                self.delete_permission((db, user, id)).await
            }
            _ => Err(Failure::new(
                Code::MethodNotAllowed,
                format!("{} is not served on this resource.", asked.method),
            )),
        }
    }

    /// `stored` when it is there and not past its time to live (`policies`, read once a
    /// request).
    pub(crate) fn live(&self, policies: &Policies, stored: Option<Entity>) -> Option<Entity> {
        ttl::live(policies.ttl, stored, ttl::ticks(self.now))
    }

    /// The container's entry, or 404.
    pub(crate) async fn container(&self, db: &str, coll: &str) -> Result<Entity, Failure> {
        self.get(CONTAINERS, db, coll).await?.ok_or_else(not_found)
    }

    /// A document's body and its partition (stored form), checked against the container's
    /// partition key `paths` and the request's partition key header.
    fn incoming(
        &self,
        paths: &[String],
        asked: &Asked<'_>,
    ) -> Result<(Map<String, Json>, String), Failure> {
        if asked.body.len() > MAX_DOCUMENT {
            return Err(too_large());
        }
        let resource = document::resource(asked.body)?;
        ttl::check_item(&resource)?;
        let in_body = stored_key_of(&resource, paths)?;
        if asked.header("x-ms-documentdb-partitionkey").is_some() {
            let named = self.partition(paths, asked)?;
            if named != in_body {
                // Substatus 1001, the SDKs' PartitionKeyMismatch.
                return Err(bad_request(
                    "PartitionKey extracted from document doesn't match the one specified in the header.",
                )
                .with_substatus(1001));
            }
        }
        Ok((resource, in_body))
    }

    /// The partition a point operation names in its header, in a container whose partition
    /// key has `paths`.
    pub(crate) fn partition(&self, paths: &[String], asked: &Asked<'_>) -> Result<String, Failure> {
        let header = asked.header("x-ms-documentdb-partitionkey").ok_or_else(|| {
            bad_request("PartitionKey value must be supplied for this operation (x-ms-documentdb-partitionkey).")
        })?;
        match Scope::of_header(paths, header)? {
            Scope::Key(stored) => Ok(stored),
            Scope::Prefix(_) => Err(bad_request(
                "The partition key supplied in x-ms-partitionkey header has fewer values than the container's partition key has paths: a point operation names the whole key.",
            )),
        }
    }

    /// The partitions a query or a feed reads: none named (the container), a whole key, or a
    /// hierarchical key's prefix (by its values, or by the SDKs' effective-key range).
    pub(crate) fn scope(
        &self,
        paths: &[String],
        asked: &Asked<'_>,
    ) -> Result<Option<Scope>, Failure> {
        if let Some(header) = asked.header("x-ms-documentdb-partitionkey") {
            return Scope::of_header(paths, header).map(Some);
        }
        let range = (asked.header("x-ms-start-epk"), asked.header("x-ms-end-epk"));
        if let (Some(start), Some(end)) = range
            && paths.len() > 1
            && !start.is_empty()
            && end.eq_ignore_ascii_case(&format!("{start}FF"))
        {
            return Ok(Some(Scope::Prefix(start.to_ascii_uppercase())));
        }
        Ok(None)
    }

    /// The request's `If-Match`: absent, `*`, or a version (one this service never wrote
    /// matches nothing).
    fn condition(&self, asked: &Asked<'_>) -> Result<Condition, Failure> {
        Ok(match asked.header("if-match").map(str::trim) {
            None => Condition::Absent,
            Some("*") => Condition::Any,
            Some(tag) => Condition::Version(document::version(tag)),
        })
    }

    pub(crate) fn entity(
        &self,
        partition: &str,
        id: &str,
        before: Option<DateTime>,
        resource: &Map<String, Json>,
    ) -> Entity {
        let at = self.clock.stamp(self.now, before);
        let json = serde_json::to_string(resource).expect("a JSON map serializes");
        Entity::new(partition, id, at, [(JSON, Value::String(json))])
    }

    pub(crate) async fn get(
        &self,
        table: &str,
        partition: &str,
        id: &str,
    ) -> Result<Option<Entity>, Failure> {
        match self.tables.get(table, &key(partition, id)).await {
            Ok(found) => Ok(found),
            Err(TableError::TableNotFound(_)) => Ok(None),
            Err(error) => Err(backend(error)),
        }
    }

    /// The documents `ids` of `partition` in `table`, in their order, read at once.
    pub(crate) async fn get_many(
        &self,
        table: &str,
        partition: &str,
        ids: &[&str],
    ) -> Result<Vec<Option<Entity>>, Failure> {
        let keys: Vec<_> = ids.iter().map(|id| key(partition, id)).collect();
        match self.tables.get_many(table, &keys).await {
            Ok(found) => Ok(found),
            Err(TableError::TableNotFound(_)) => Ok(vec![None; ids.len()]),
            Err(error) => Err(backend(error)),
        }
    }

    /// Every entity of `table` (in `partition`), for the metadata tables, which hold few.
    pub(crate) async fn scan_all(
        &self,
        table: &str,
        partition: Option<&str>,
    ) -> Result<Vec<Entity>, Failure> {
        let scan = Scan {
            from: None,
            partition,
            limit: 10_000,
        };
        self.scan(table, scan).await
    }

    /// The entries `scan` reaches: none of a table not made yet.
    pub(crate) async fn scan(&self, table: &str, scan: Scan<'_>) -> Result<Vec<Entity>, Failure> {
        match self.tables.scan(table, scan).await {
            Ok(found) => Ok(found),
            Err(TableError::TableNotFound(_)) => Ok(Vec::new()),
            Err(error) => Err(backend(error)),
        }
    }
}

/// An `If-Match`: the core's model, a version being the instant a document was written at
/// (`Version(None)` for a tag this service never wrote).
pub(crate) type Condition = IfMatch<DateTime>;

/// Whether `condition` holds while `current` is stored.
pub(crate) fn holds(condition: Condition, current: Option<&Entity>) -> bool {
    condition.holds(current.map(|entity| &entity.timestamp))
}
