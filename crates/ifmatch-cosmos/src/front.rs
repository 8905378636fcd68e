//! The operations on databases, containers and documents, over one account's tables: each
//! resource one entity, kept as its JSON with the instant it was written (its version), and
//! every write a compare-and-swap against the version it was decided on, decided again when
//! another write came first.
//!
//! Where things are kept: databases in the table `#dbs` (partition `""`, row the id),
//! containers in `#colls` (partition the database, row the id), and a container's documents
//! in the table `{db}/{container}` (partition the partition key's JSON, row the id). `#`
//! and `/` are in no id, so no name is two things. The change feed is a partition of that table
//! (see `feed.rs`), moved by the same commit that writes a document.

use std::sync::Arc;
use std::time::SystemTime;

use http::{HeaderMap, Method, StatusCode};
use ifmatch_table::{
    Change, DateTime, Entity, EntityKey, Expected, Scan, TableError, Tables, Value,
};
use serde_json::{Map, Value as Json, json};

use crate::address::Address;
use crate::clock::Clock;
use crate::document::{self, MAX_DOCUMENT};
pub(crate) use crate::document::{JSON, json_of};
use crate::failure::{
    Answer, Failure, bad_request, conflict, failure, not_found, precondition_failed, unavailable,
};
use crate::feed_entries;
use crate::ttl;
use crate::unique;
use ifmatch_azure::Turns;

const DATABASES: &str = "#dbs";
pub(crate) const CONTAINERS: &str = "#colls";
/// The property an entity keeps a resource's JSON in.
/// How many times a write is decided again after losing a race, before it answers 503.
pub(crate) const RETRIES: usize = 64;
/// The most resources a feed page holds.
const MAX_PAGE: usize = 1000;
/// The partition key ranges' own version: there is one range, and it never splits.
const RANGES_AT: DateTime = DateTime::from_ticks(1);

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
    /// This instance's turns to commit to a container.
    pub turns: &'a Turns,
}

/// What a successful operation answers: its status, its body, and the version it wrote or
/// read (for the `etag` and session headers).
pub struct Done {
    pub(crate) status: StatusCode,
    pub(crate) body: Option<Json>,
    pub(crate) at: Option<DateTime>,
    /// An `etag` of another kind than a version's (the change feed's position).
    pub(crate) etag: Option<String>,
    pub(crate) count: Option<usize>,
    pub(crate) continuation: Option<String>,
}

impl Done {
    pub(crate) fn of(status: StatusCode, body: Json, at: Option<DateTime>) -> Self {
        Self {
            status,
            body: Some(body),
            at,
            etag: None,
            count: None,
            continuation: None,
        }
    }

    pub(crate) fn empty(status: StatusCode, at: Option<DateTime>) -> Self {
        Self {
            status,
            body: None,
            at,
            etag: None,
            count: None,
            continuation: None,
        }
    }
}

impl<T: Tables> Front<'_, T> {
    /// The answer to `asked`.
    pub async fn handle(&self, asked: &Asked<'_>) -> Result<Done, Failure> {
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
            (&Method::GET, A::Documents(db, coll)) => self.documents(db, coll, asked).await,
            (&Method::POST, A::Documents(db, coll)) => self.create_document(db, coll, asked).await,
            (&Method::GET, A::Document(db, coll, id)) => self.read(db, coll, id, asked).await,
            (&Method::PUT, A::Document(db, coll, id)) => self.replace(db, coll, id, asked).await,
            (&Method::PATCH, A::Document(db, coll, id)) => self.patch(db, coll, id, asked).await,
            (&Method::DELETE, A::Document(db, coll, id)) => self.delete(db, coll, id, asked).await,
            _ => Err(failure(
                405,
                "MethodNotAllowed",
                format!("{} is not served on this resource.", asked.method),
            )),
        }
    }

    fn account(&self) -> Done {
        let location = json!([{ "name": "local", "databaseAccountEndpoint": self.endpoint }]);
        let body = json!({
            "_self": "",
            "id": "localhost",
            "_rid": "localhost",
            "media": "//media/",
            "addresses": "//addresses/",
            "_dbs": "//dbs/",
            "writableLocations": location,
            "readableLocations": location,
            "enableMultipleWriteLocations": false,
            "userReplicationPolicy": { "asyncReplication": false, "minReplicaSetSize": 1, "maxReplicasetSize": 1 },
            "userConsistencyPolicy": { "defaultConsistencyLevel": "Session" },
            "systemReplicationPolicy": { "minReplicaSetSize": 1, "maxReplicasetSize": 1 },
            "readPolicy": { "primaryReadCoefficient": 1, "secondaryReadCoefficient": 1 },
            "queryEngineConfiguration": "{\"maxSqlQueryInputLength\":262144,\"maxJoinsPerSqlQuery\":5,\"maxLogicalAndPerSqlQuery\":500,\"maxLogicalOrPerSqlQuery\":500,\"maxUdfRefPerSqlQuery\":10,\"maxInExpressionItemsCount\":16000,\"queryMaxInMemorySortDocumentCount\":500,\"maxQueryRequestTimeoutFraction\":0.9,\"sqlAllowNonFiniteNumbers\":false,\"sqlAllowAggregateFunctions\":true,\"sqlAllowSubQuery\":true,\"sqlAllowScalarSubQuery\":true,\"allowNewKeywords\":true,\"sqlAllowLike\":true,\"sqlAllowGroupByClause\":true,\"maxSpatialQueryCells\":12,\"spatialMaxGeometryPointCount\":256,\"sqlDisableOptimizationFlags\":0,\"sqlAllowTop\":true,\"enableSpatialIndexing\":true}"
        });
        Done::of(StatusCode::OK, body, None)
    }

    // Databases.

    async fn databases(&self) -> Result<Done, Failure> {
        let found = self.scan_all(DATABASES, Some("")).await?;
        let databases: Vec<Json> = found.iter().map(database_json).collect();
        let count = databases.len();
        let mut done = Done::of(
            StatusCode::OK,
            json!({ "_rid": "", "Databases": databases, "_count": count }),
            None,
        );
        done.count = Some(count);
        Ok(done)
    }

    async fn database(&self, db: &str) -> Result<Done, Failure> {
        let entity = self.get(DATABASES, "", db).await?.ok_or_else(not_found)?;
        Ok(Done::of(
            StatusCode::OK,
            database_json(&entity),
            Some(entity.timestamp),
        ))
    }

    async fn create_database(&self, asked: &Asked<'_>) -> Result<Done, Failure> {
        let resource = document::resource(asked.body)?;
        let id = id_of(&resource);
        document::check_name(&id)?;
        let entity = self.entity("", &id, None, &resource);
        let change = Change {
            key: key("", &id),
            expected: Expected::Absent,
            write: Some(entity.clone()),
        };
        match self.commit(DATABASES, &[change]).await {
            Err(Committed::Conflict) => Err(conflict()),
            Err(Committed::Failed(failure)) => Err(failure),
            Ok(()) => Ok(Done::of(
                StatusCode::CREATED,
                database_json(&entity),
                Some(entity.timestamp),
            )),
        }
    }

    async fn delete_database(&self, db: &str) -> Result<Done, Failure> {
        let change = Change {
            key: key("", db),
            expected: Expected::Present,
            write: None,
        };
        match self.commit(DATABASES, &[change]).await {
            Err(Committed::Conflict) => return Err(not_found()),
            Err(Committed::Failed(failure)) => return Err(failure),
            Ok(()) => {}
        }
        // Gone for every client from here; its containers go after.
        for container in self.scan_all(CONTAINERS, Some(db)).await? {
            self.drop_container(db, &container.row_key).await?;
        }
        Ok(Done::empty(StatusCode::NO_CONTENT, None))
    }

    // Containers.

    async fn containers(&self, db: &str) -> Result<Done, Failure> {
        self.get(DATABASES, "", db).await?.ok_or_else(not_found)?;
        let found = self.scan_all(CONTAINERS, Some(db)).await?;
        let containers: Vec<Json> = found.iter().map(|e| container_json(db, e)).collect();
        let count = containers.len();
        let mut done = Done::of(
            StatusCode::OK,
            json!({ "_rid": rid(&[db]), "DocumentCollections": containers, "_count": count }),
            None,
        );
        done.count = Some(count);
        Ok(done)
    }

    async fn container_read(&self, db: &str, coll: &str) -> Result<Done, Failure> {
        let entity = self.container(db, coll).await?;
        Ok(Done::of(
            StatusCode::OK,
            container_json(db, &entity),
            Some(entity.timestamp),
        ))
    }

    async fn create_container(&self, db: &str, asked: &Asked<'_>) -> Result<Done, Failure> {
        self.get(DATABASES, "", db).await?.ok_or_else(not_found)?;
        let mut resource = document::resource(asked.body)?;
        let id = id_of(&resource);
        document::check_name(&id)?;
        let paths = resource
            .get("partitionKey")
            .and_then(|k| k.get("paths"))
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default();
        let kind = resource
            .get("partitionKey")
            .and_then(|k| k.get("kind"))
            .and_then(Json::as_str);
        let is_path = |p: &Json| {
            p.as_str()
                .is_some_and(|p| p.starts_with('/') && p.len() > 1)
        };
        match (paths.as_slice(), kind) {
            // A hierarchical key: two or three paths, as Azure takes them.
            (paths, Some("MultiHash"))
                if (2..=3).contains(&paths.len()) && paths.iter().all(is_path) => {}
            (_, Some("MultiHash")) => {
                return Err(bad_request(
                    "A hierarchical partition key (kind MultiHash) has two or three paths that start with '/'.",
                ));
            }
            ([Json::String(path)], _) if path.starts_with('/') && path.len() > 1 => {}
            ([], _) => {
                return Err(bad_request(
                    "A container needs a partition key: partitionKey.paths with one path, such as [\"/id\"].",
                ));
            }
            _ => {
                return Err(bad_request(
                    "partitionKey.paths holds one path that starts with '/'.",
                ));
            }
        }
        unique::declared(&resource)?;
        ttl::declared(&resource)?;
        crate::sql::embeddings(&resource).map_err(bad_request)?;
        with_container_defaults(&mut resource);
        if let Some(Json::Object(key)) = resource.get_mut("partitionKey") {
            key.entry("kind").or_insert_with(|| "Hash".into());
            key.entry("version").or_insert_with(|| 2.into());
        }
        // The documents' table first: a container is there once its entry is.
        self.tables
            .create_table(&documents_table(db, &id))
            .await
            .map_err(backend)?;
        let entity = self.entity(db, &id, None, &resource);
        let change = Change {
            key: key(db, &id),
            expected: Expected::Absent,
            write: Some(entity.clone()),
        };
        match self.commit(CONTAINERS, &[change]).await {
            Err(Committed::Conflict) => Err(conflict()),
            Err(Committed::Failed(failure)) => Err(failure),
            Ok(()) => Ok(Done::of(
                StatusCode::CREATED,
                container_json(db, &entity),
                Some(entity.timestamp),
            )),
        }
    }

    /// A container's properties replaced (the SDKs' `container.replace`): its indexing, time
    /// to live and other policies, under `If-Match`. Its id, partition key and unique keys stay
    /// as they were created (400 for a body that changes them, as Azure answers).
    async fn replace_container(
        &self,
        db: &str,
        coll: &str,
        asked: &Asked<'_>,
    ) -> Result<Done, Failure> {
        let before = self.container(db, coll).await?;
        if !holds(self.condition(asked)?, Some(&before)) {
            return Err(precondition_failed());
        }
        let stored = json_of(&before);
        let mut resource = document::resource(asked.body)?;
        if id_of(&resource) != coll {
            return Err(bad_request(
                "A container's id is not changed by a replace: the body's id is the container's.",
            ));
        }
        // The partition key: the same paths, or none sent; kept with its kind and version.
        let paths = |r: &Map<String, Json>| r.get("partitionKey").map(|k| k.get("paths").cloned());
        let unique = |r: &Map<String, Json>| r.get("uniqueKeyPolicy").cloned();
        if resource.contains_key("partitionKey") && paths(&resource) != paths(&stored) {
            return Err(bad_request(
                "A container's partition key is not changed by a replace.",
            ));
        }
        if resource.contains_key("uniqueKeyPolicy") && unique(&resource) != unique(&stored) {
            return Err(bad_request(
                "A container's unique keys are not changed by a replace.",
            ));
        }
        ttl::declared(&resource)?;
        crate::sql::embeddings(&resource).map_err(bad_request)?;
        for kept in ["partitionKey", "uniqueKeyPolicy"] {
            if let Some(value) = stored.get(kept) {
                resource.insert(kept.into(), value.clone());
            }
        }
        with_container_defaults(&mut resource);
        let entity = self.entity(db, coll, Some(before.timestamp), &resource);
        let change = Change {
            key: key(db, coll),
            expected: Expected::Version(before.timestamp),
            write: Some(entity.clone()),
        };
        match self.commit(CONTAINERS, &[change]).await {
            Err(Committed::Conflict) => Err(precondition_failed()),
            Err(Committed::Failed(failure)) => Err(failure),
            Ok(()) => Ok(Done::of(
                StatusCode::OK,
                container_json(db, &entity),
                Some(entity.timestamp),
            )),
        }
    }

    async fn delete_container(&self, db: &str, coll: &str) -> Result<Done, Failure> {
        self.container(db, coll).await?;
        let change = Change {
            key: key(db, coll),
            expected: Expected::Present,
            write: None,
        };
        match self.commit(CONTAINERS, &[change]).await {
            Err(Committed::Conflict) => return Err(not_found()),
            Err(Committed::Failed(failure)) => return Err(failure),
            Ok(()) => {}
        }
        self.tables
            .delete_table(&documents_table(db, coll))
            .await
            .map_err(backend)?;
        Ok(Done::empty(StatusCode::NO_CONTENT, None))
    }

    async fn drop_container(&self, db: &str, coll: &str) -> Result<(), Failure> {
        let change = Change {
            key: key(db, coll),
            expected: Expected::Anything,
            write: None,
        };
        if let Err(Committed::Failed(failure)) = self.commit(CONTAINERS, &[change]).await {
            return Err(failure);
        }
        self.tables
            .delete_table(&documents_table(db, coll))
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn ranges(&self, db: &str, coll: &str, asked: &Asked<'_>) -> Result<Done, Failure> {
        self.container(db, coll).await?;
        if asked.header("if-none-match").and_then(document::version) == Some(RANGES_AT) {
            return Ok(Done::empty(StatusCode::NOT_MODIFIED, Some(RANGES_AT)));
        }
        let range = json!({
            "id": "0", "minInclusive": "", "maxExclusive": "FF", "ridPrefix": 0,
            "throughputFraction": 1.0, "status": "online", "parents": [],
            "_rid": rid(&[db, coll, "0"]), "_self": format!("dbs/{db}/colls/{coll}/pkranges/0/"),
            "_etag": document::etag(RANGES_AT), "_ts": 0,
        });
        let mut done = Done::of(
            StatusCode::OK,
            json!({ "_rid": rid(&[db, coll]), "PartitionKeyRanges": [range], "_count": 1 }),
            Some(RANGES_AT),
        );
        done.count = Some(1);
        Ok(done)
    }

    // Documents.

    async fn documents(&self, db: &str, coll: &str, asked: &Asked<'_>) -> Result<Done, Failure> {
        if asked.header("a-im").is_some_and(|v| {
            v.eq_ignore_ascii_case("incremental feed")
                || v.eq_ignore_ascii_case("full-fidelity feed")
        }) {
            return self.changes(db, coll, asked).await;
        }
        let container = self.container(db, coll).await?;
        let partition = match asked.header("x-ms-documentdb-partitionkey") {
            Some(header) => match Scope::of_header(&container, header)? {
                Scope::Key(stored) => Some(stored),
                Scope::Prefix(_) => {
                    return Err(bad_request(
                        "A list of documents names the whole partition key, or none: query a prefix.",
                    ));
                }
            },
            None => None,
        };
        let limit = page_size(asked)?;
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
        let ended = feed_entries::documents_only(&mut found);
        let next = (!ended && found.len() > limit).then(|| found.remove(limit));
        let (default, now) = (ttl::of(&container), ttl::ticks(self.now));
        let documents: Vec<Json> = (found.iter())
            .map(|e| (e, document_json(db, coll, e)))
            .filter(|(e, doc)| !ttl::past(default, e.timestamp, doc.get("ttl"), now))
            .map(|(_, doc)| doc)
            .collect();
        let count = documents.len();
        let mut done = Done::of(
            StatusCode::OK,
            json!({ "_rid": rid(&[db, coll]), "Documents": documents, "_count": count }),
            None,
        );
        done.count = Some(count);
        done.continuation = next.map(|e| continuation_token(&e.partition_key, &e.row_key));
        Ok(done)
    }

    async fn create_document(
        &self,
        db: &str,
        coll: &str,
        asked: &Asked<'_>,
    ) -> Result<Done, Failure> {
        if asked.is_true("x-ms-documentdb-isquery")
            || asked
                .header("content-type")
                .is_some_and(|t| t.starts_with("application/query+json"))
        {
            return self.query(db, coll, asked).await;
        }
        if asked.is_true("x-ms-cosmos-is-batch-request") {
            return self.batch(db, coll, asked).await;
        }
        let container = self.container(db, coll).await?;
        let (resource, partition) = self.incoming(&container, asked)?;
        let id = id_of(&resource);
        let upsert = asked.is_true("x-ms-documentdb-is-upsert");
        let condition = self.condition(asked)?;
        let table = documents_table(db, coll);
        let policies = Policies::of(&container);
        // With a time to live, an id may be held by an item past its time: read first, so a
        // create over it replaces what is stored.
        let read_first = upsert || policies.ttl.is_some();
        for _ in 0..RETRIES {
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

    async fn patch(
        &self,
        db: &str,
        coll: &str,
        id: &str,
        asked: &Asked<'_>,
    ) -> Result<Done, Failure> {
        let container = self.container(db, coll).await?;
        let partition = self.partition(&container, asked)?;
        let (operations, condition) = crate::patch::parse(asked.body)?;
        let predicate = match condition {
            Some(text) => crate::sql::predicate(&text)
                .map_err(|error| bad_request(format!("Condition: {}", error.message)))?,
            None => None,
        };
        let if_match = self.condition(asked)?;
        let fixed = partition_paths(&container);
        let written = self
            .change_existing(&container, &partition, id, if_match, |current| {
                let seen = document_json(db, coll, current);
                let held = crate::sql::holds(predicate.as_ref(), &seen)
                    .map_err(|error| bad_request(format!("Condition: {}", error.message)))?;
                if !held {
                    return Err(precondition_failed());
                }
                let patched = crate::patch::apply(&json_of(current), &operations, &fixed)?;
                ttl::check_item(&patched)?;
                if Json::Object(patched.clone()).to_string().len() > MAX_DOCUMENT {
                    return Err(too_large());
                }
                Ok(Some(patched))
            })
            .await?;
        Ok(written_answer(db, coll, written))
    }

    async fn query(&self, db: &str, coll: &str, asked: &Asked<'_>) -> Result<Done, Failure> {
        let container = self.container(db, coll).await?;
        let body: Json = serde_json::from_slice(asked.body).map_err(|_| {
            bad_request("A query's body is JSON: {\"query\": ..., \"parameters\": [...]}.")
        })?;
        let text = body.get("query").and_then(Json::as_str).ok_or_else(|| {
            bad_request("A query's body names its text: {\"query\": \"SELECT ...\"}.")
        })?;
        let parameters = match body.get("parameters") {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Array(list)) => list.clone(),
            Some(_) => {
                return Err(bad_request(
                    "A query's parameters are a list of {name, value}.",
                ));
            }
        };
        let mut query = crate::sql::Query::parse(text, &parameters)
            .map_err(|error| bad_request(format!("Query: {}", error.message)))?;
        let embeddings = crate::sql::embeddings(&json_of(&container)).unwrap_or_default();
        query.with_embeddings(&embeddings);
        if asked.is_true("x-ms-cosmos-is-query-plan-request") {
            return Ok(plan(text));
        }
        let scope = self.scope(&container, asked)?;
        let size = page_size(asked)?;
        let table = documents_table(db, coll);
        let (default, now) = (ttl::of(&container), ttl::ticks(self.now));
        let reading = crate::query::Reading {
            tables: self.tables,
            table: &table,
            partition: match &scope {
                Some(Scope::Key(stored)) => Some(stored),
                _ => None,
            },
            prefix: match &scope {
                Some(Scope::Prefix(start)) => Some(start),
                _ => None,
            },
        };
        let page = crate::query::page(
            reading,
            &query,
            size,
            asked.header("x-ms-continuation"),
            self.now,
            |entity| {
                let doc = document_json(db, coll, entity);
                (!ttl::past(default, entity.timestamp, doc.get("ttl"), now)).then_some(doc)
            },
        )
        .await?;
        let count = page.results.len();
        let mut done = Done::of(
            StatusCode::OK,
            json!({ "_rid": rid(&[db, coll]), "Documents": page.results, "_count": count }),
            None,
        );
        done.count = Some(count);
        done.continuation = page.continuation;
        Ok(done)
    }

    async fn read(
        &self,
        db: &str,
        coll: &str,
        id: &str,
        asked: &Asked<'_>,
    ) -> Result<Done, Failure> {
        let container = self.container(db, coll).await?;
        let partition = self.partition(&container, asked)?;
        let table = documents_table(db, coll);
        let stored = self.get(&table, &partition, id).await?;
        let entity = (self.live(&Policies::of(&container), stored)).ok_or_else(not_found)?;
        let unchanged = asked.header("if-none-match").is_some_and(|tags| {
            tags.split(',')
                .any(|tag| tag.trim() == "*" || document::version(tag) == Some(entity.timestamp))
        });
        if unchanged {
            return Ok(Done::empty(
                StatusCode::NOT_MODIFIED,
                Some(entity.timestamp),
            ));
        }
        Ok(Done::of(
            StatusCode::OK,
            document_json(db, coll, &entity),
            Some(entity.timestamp),
        ))
    }

    async fn replace(
        &self,
        db: &str,
        coll: &str,
        id: &str,
        asked: &Asked<'_>,
    ) -> Result<Done, Failure> {
        let container = self.container(db, coll).await?;
        let (resource, partition) = self.incoming(&container, asked)?;
        if id_of(&resource) != id {
            return Err(bad_request(
                "The id in the body is not the id the path names: a replace keeps its id.",
            ));
        }
        let condition = self.condition(asked)?;
        let written = self
            .change_existing(&container, &partition, id, condition, |_| {
                Ok(Some(resource.clone()))
            })
            .await?;
        Ok(written_answer(db, coll, written))
    }

    async fn delete(
        &self,
        db: &str,
        coll: &str,
        id: &str,
        asked: &Asked<'_>,
    ) -> Result<Done, Failure> {
        let container = self.container(db, coll).await?;
        let partition = self.partition(&container, asked)?;
        let condition = self.condition(asked)?;
        self.change_existing(&container, &partition, id, condition, |_| Ok(None))
            .await?;
        Ok(Done::empty(StatusCode::NO_CONTENT, None))
    }

    // Parts.

    /// Changes the document `id` of `container` (its entry, keyed by database and id), which
    /// must be there and meet `condition`: `decide` makes what it becomes of it as it is now
    /// (`None`: deleted), or refuses. Committed as a compare-and-swap against the version
    /// read, and decided again when another write came first. Answers what was written.
    async fn change_existing(
        &self,
        container: &Entity,
        partition: &str,
        id: &str,
        condition: Condition,
        decide: impl Fn(&Entity) -> Result<Option<Map<String, Json>>, Failure>,
    ) -> Result<Option<Entity>, Failure> {
        let table = documents_table(&container.partition_key, &container.row_key);
        let policies = Policies::of(container);
        for _ in 0..RETRIES {
            let stored = self.get(&table, partition, id).await?;
            let current = self.live(&policies, stored).ok_or_else(not_found)?;
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
            match (self.commit_documents(&table, &policies, &[(change, Some(&current))])).await {
                Ok(()) => return Ok(written),
                Err(Committed::Conflict) => continue,
                Err(Committed::Failed(failure)) => return Err(failure),
            }
        }
        Err(raced())
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
    /// partition key path and the request's partition key header.
    fn incoming(
        &self,
        container: &Entity,
        asked: &Asked<'_>,
    ) -> Result<(Map<String, Json>, String), Failure> {
        if asked.body.len() > MAX_DOCUMENT {
            return Err(too_large());
        }
        let resource = document::resource(asked.body)?;
        ttl::check_item(&resource)?;
        let in_body = stored_key_of(&resource, &partition_paths(container))?;
        if asked.header("x-ms-documentdb-partitionkey").is_some() {
            let named = self.partition(container, asked)?;
            if named != in_body {
                return Err(bad_request(
                    "PartitionKey extracted from document doesn't match the one specified in the header.",
                ));
            }
        }
        Ok((resource, in_body))
    }

    /// The partition a point operation names in its header.
    pub(crate) fn partition(
        &self,
        container: &Entity,
        asked: &Asked<'_>,
    ) -> Result<String, Failure> {
        let header = asked.header("x-ms-documentdb-partitionkey").ok_or_else(|| {
            bad_request("PartitionKey value must be supplied for this operation (x-ms-documentdb-partitionkey).")
        })?;
        match Scope::of_header(container, header)? {
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
        container: &Entity,
        asked: &Asked<'_>,
    ) -> Result<Option<Scope>, Failure> {
        if let Some(header) = asked.header("x-ms-documentdb-partitionkey") {
            return Scope::of_header(container, header).map(Some);
        }
        let range = (asked.header("x-ms-start-epk"), asked.header("x-ms-end-epk"));
        if let (Some(start), Some(end)) = range
            && partition_paths(container).len() > 1
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
            None => Condition::None,
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
        let json = Json::Object(resource.clone()).to_string();
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
        match self.tables.scan(table, scan).await {
            Ok(found) => Ok(found),
            Err(TableError::TableNotFound(_)) => Ok(Vec::new()),
            Err(error) => Err(backend(error)),
        }
    }

    pub(crate) async fn commit(&self, table: &str, changes: &[Change]) -> Result<(), Committed> {
        let mut result = self.tables.commit(table, changes).await;
        if matches!(result, Err(TableError::TableNotFound(_))) && table.starts_with('#') {
            // The metadata tables are made on first use.
            self.tables
                .create_table(table)
                .await
                .map_err(|e| Committed::Failed(backend(e)))?;
            result = self.tables.commit(table, changes).await;
        }
        match result {
            Ok(()) => Ok(()),
            Err(TableError::Conflict { .. }) => Err(Committed::Conflict),
            Err(TableError::TableNotFound(_)) => Err(Committed::Failed(not_found())),
            Err(error) => Err(Committed::Failed(backend(error))),
        }
    }
}

/// How a commit ended, when it did not apply.
pub(crate) enum Committed {
    /// Another write came first.
    Conflict,
    Failed(Failure),
}

/// What a container's properties ask of every write of its documents: its unique keys and
/// its time to live.
pub(crate) struct Policies {
    pub(crate) unique: unique::Keys,
    pub(crate) ttl: ttl::Default,
    /// How long every version is kept (the all-versions-and-deletes feed), if at all.
    pub(crate) versions: crate::versions::Retention,
    /// Whether the writes are deletes of items past their time to live (the sweep's).
    pub(crate) expiring: bool,
}

impl Policies {
    pub(crate) fn of(container: &Entity) -> Self {
        let properties = json_of(container);
        Self {
            unique: unique::declared(&properties).unwrap_or_default(),
            ttl: ttl::declared(&properties).unwrap_or_default(),
            versions: crate::versions::declared(&properties),
            expiring: false,
        }
    }
}

/// An `If-Match`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Condition {
    None,
    Any,
    /// The version the tag names; `None` for a tag this service never wrote.
    Version(Option<DateTime>),
}

pub(crate) fn holds(condition: Condition, current: Option<&Entity>) -> bool {
    match (condition, current) {
        (Condition::None, _) => true,
        (Condition::Any, found) => found.is_some(),
        (Condition::Version(wanted), Some(entity)) => wanted == Some(entity.timestamp),
        (Condition::Version(_), None) => false,
    }
}

/// The answer to a replace or a patch: the document as written.
fn written_answer(db: &str, coll: &str, written: Option<Entity>) -> Done {
    match written {
        Some(entity) => Done::of(
            StatusCode::OK,
            document_json(db, coll, &entity),
            Some(entity.timestamp),
        ),
        None => Done::empty(StatusCode::NO_CONTENT, None),
    }
}

/// The plan an SDK asks for before a query across partitions: this server runs every query
/// whole, over the one partition key range it has, so the plan is "send it as it is" (no
/// ordering, aggregation or paging for the SDK to do).
fn plan(text: &str) -> Done {
    let body = json!({
        "partitionedQueryExecutionInfoVersion": 2,
        "queryInfo": {
            "distinctType": "None", "top": null, "offset": null, "limit": null,
            "orderBy": [], "orderByExpressions": [], "groupByExpressions": [],
            "groupByAliases": [], "aggregates": [], "groupByAliasToAggregateType": {},
            "rewrittenQuery": text, "hasSelectValue": false, "dCountInfo": null,
            "hasNonStreamingOrderBy": false,
        },
        "queryRanges": [{ "min": "", "max": "FF", "isMinInclusive": true, "isMaxInclusive": false }],
    });
    Done::of(StatusCode::OK, body, None)
}

/// The page size a feed or query asks for (`x-ms-max-item-count`; -1 or none: 100).
pub(crate) fn page_size(asked: &Asked<'_>) -> Result<usize, Failure> {
    match asked.header("x-ms-max-item-count").map(str::parse::<i64>) {
        None | Some(Ok(-1)) => Ok(100),
        Some(Ok(n)) if n > 0 => Ok((n as usize).min(MAX_PAGE)),
        _ => Err(bad_request(
            "x-ms-max-item-count is a positive number, or -1.",
        )),
    }
}

pub(crate) fn key(partition: &str, id: &str) -> EntityKey {
    (partition.to_owned(), id.to_owned())
}

pub(crate) fn documents_table(db: &str, coll: &str) -> String {
    format!("{db}/{coll}")
}

pub(crate) fn id_of(resource: &Map<String, Json>) -> String {
    resource
        .get("id")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The policies a container has when its properties do not name them, as Azure fills them.
fn with_container_defaults(resource: &mut Map<String, Json>) {
    let defaults = json!({
        "indexingPolicy": { "indexingMode": "consistent", "automatic": true, "includedPaths": [{ "path": "/*" }], "excludedPaths": [{ "path": "/\"_etag\"/?" }] },
        "conflictResolutionPolicy": { "mode": "LastWriterWins", "conflictResolutionPath": "/_ts", "conflictResolutionProcedure": "" },
        "geospatialConfig": { "type": "Geography" },
    });
    for (name, value) in defaults.as_object().into_iter().flatten() {
        resource
            .entry(name.clone())
            .or_insert_with(|| value.clone());
    }
}

/// The paths of a container's partition key: one, or two or three for a hierarchical key.
pub(crate) fn partition_paths(container: &Entity) -> Vec<String> {
    let json = json_of(container);
    let paths = json
        .get("partitionKey")
        .and_then(|k| k.get("paths"))
        .and_then(Json::as_array);
    let paths: Vec<String> = (paths.into_iter().flatten())
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect();
    match paths.is_empty() {
        true => vec!["/id".to_owned()],
        false => paths,
    }
}

/// The stored partition key of `resource` in a container whose key has `paths`.
pub(crate) fn stored_key_of(
    resource: &Map<String, Json>,
    paths: &[String],
) -> Result<String, Failure> {
    let values: Vec<Json> = paths
        .iter()
        .map(|p| document::key_at(resource, p))
        .collect();
    match values.as_slice() {
        [value] => document::stored_key(value),
        values => document::stored_keys(values, true),
    }
}

/// Which partitions a request names.
pub(crate) enum Scope {
    /// One partition: its stored key.
    Key(String),
    /// The partitions of a hierarchical key's prefix: the start their stored keys share.
    Prefix(String),
}

impl Scope {
    /// The partitions an `x-ms-documentdb-partitionkey` header names in `container`.
    pub(crate) fn of_header(container: &Entity, header: &str) -> Result<Self, Failure> {
        let paths = partition_paths(container).len();
        let values = document::keys_of_header(header)?;
        match (paths, values.len()) {
            (1, 1) => Ok(Self::Key(document::stored_key(&values[0])?)),
            (n, m) if n > 1 && m == n => Ok(Self::Key(document::stored_keys(&values, true)?)),
            (n, m) if n > 1 && m < n => Ok(Self::Prefix(document::stored_keys(&values, false)?)),
            _ => Err(bad_request(
                "The partition key supplied in x-ms-partitionkey header has one value per path of the container's partition key.",
            )),
        }
    }
}

fn database_json(entity: &Entity) -> Json {
    let id = &entity.row_key;
    let mut json = document::with_system(
        json_of(entity),
        &format!("dbs/{id}"),
        &rid(&[id]),
        entity.timestamp,
    );
    json.insert("_colls".into(), "colls/".into());
    json.insert("_users".into(), "users/".into());
    Json::Object(json)
}

fn container_json(db: &str, entity: &Entity) -> Json {
    let id = &entity.row_key;
    let link = format!("dbs/{db}/colls/{id}");
    let mut json = document::with_system(json_of(entity), &link, &rid(&[db, id]), entity.timestamp);
    for (name, value) in [
        ("_docs", "docs/"),
        ("_sprocs", "sprocs/"),
        ("_triggers", "triggers/"),
        ("_udfs", "udfs/"),
        ("_conflicts", "conflicts/"),
    ] {
        json.insert(name.into(), value.into());
    }
    Json::Object(json)
}

pub(crate) fn document_json(db: &str, coll: &str, entity: &Entity) -> Json {
    let id = &entity.row_key;
    let link = format!("dbs/{db}/colls/{coll}/docs/{id}");
    let rid = rid(&[db, coll, &entity.partition_key, id]);
    let mut json = document::with_system(json_of(entity), &link, &rid, entity.timestamp);
    json.insert("_attachments".into(), "attachments/".into());
    Json::Object(json)
}

/// A short resource id of `names`, stable for them: base64 of an FNV-1a digest.
pub(crate) fn rid(names: &[&str]) -> String {
    use base64::Engine;
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in names.join("\0").bytes() {
        digest = (digest ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    base64::engine::general_purpose::STANDARD.encode(digest.to_be_bytes())
}

/// A continuation token: the key of the first resource not yet sent (base64 of its JSON, so
/// any id fits in a header).
fn continuation_token(partition: &str, id: &str) -> String {
    use base64::Engine;
    let json = json!([partition, id]).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// The key a continuation token says to go on from.
fn continuation_key(token: &str) -> Result<EntityKey, Failure> {
    use base64::Engine;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim())
        .unwrap_or_default();
    match serde_json::from_slice::<Json>(&json) {
        Ok(Json::Array(parts)) => match parts.as_slice() {
            [Json::String(p), Json::String(r)] => Ok((p.clone(), r.clone())),
            _ => Err(bad_request(
                "The continuation token is not one this server gave.",
            )),
        },
        _ => Err(bad_request(
            "The continuation token is not one this server gave.",
        )),
    }
}

pub(crate) fn backend(error: TableError) -> Failure {
    unavailable(error)
}

pub(crate) fn too_large() -> Failure {
    failure(
        413,
        "RequestEntityTooLarge",
        "Request size is too large: a document is at most 2 MB.",
    )
}

pub(crate) fn raced() -> Failure {
    failure(
        429,
        "TooManyRequests",
        "The document changed under this write more times than it retries: retry it.",
    )
}

/// The answer a front gives for `done`, without the service's own headers.
pub(crate) fn answer_of(done: &Done) -> Answer {
    let body = done
        .body
        .as_ref()
        .map(|b| b.to_string())
        .unwrap_or_default();
    let mut answer = http::Response::new(bytes::Bytes::from(body));
    *answer.status_mut() = done.status;
    let headers = answer.headers_mut();
    if done.body.is_some() {
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
    }
    let etag = done.etag.clone().or_else(|| done.at.map(document::etag));
    if let Some(etag) = etag
        && let Ok(value) = http::HeaderValue::from_str(&etag)
    {
        headers.insert(http::header::ETAG, value);
    }
    if let Some(count) = done.count {
        headers.insert("x-ms-item-count", count.into());
    }
    if let Some(next) = &done.continuation
        && let Ok(value) = http::HeaderValue::from_str(next)
    {
        headers.insert("x-ms-continuation", value);
    }
    answer
}
