//! Containers: each one entity of `#colls` (partition the database), its properties (partition
//! key, unique keys, time to live, change feed policy) checked when created and replaced; its
//! documents a table of their own, dropped with it.

use http::StatusCode;
use ifmatch_table::{Change, Entity, Expected, Tables};
use serde_json::{Map, Value as Json, json};

use super::answers::{Answered, Done};
use super::commit::Committed;
use super::offers::{self, Throughput};
use super::{Asked, CONTAINERS, DATABASES, Front, documents_table, holds, id_of, key, rid};
use crate::computed::Computed;
use crate::document::{self, json_of};
use crate::failure::{Failure, backend, bad_request, conflict, not_found, precondition_failed};
use crate::{ttl, unique};

impl<T: Tables> Front<'_, T> {
    pub(super) async fn containers(&self, db: &str) -> Answered {
        self.get(DATABASES, "", db).await?.ok_or_else(not_found)?;
        let found = self.scan_all(CONTAINERS, Some(db)).await?;
        let containers: Vec<Json> = found.iter().map(|e| container_json(db, e)).collect();
        Ok(Done::feed(
            &rid(&[db]),
            "DocumentCollections",
            containers,
            None,
        ))
    }

    pub(super) async fn container_read(&self, db: &str, coll: &str) -> Answered {
        let entity = self.container(db, coll).await?;
        Ok(Done::ok(container_json(db, &entity), entity.timestamp))
    }

    pub(super) async fn create_container(&self, db: &str, asked: &Asked<'_>) -> Answered {
        self.get(DATABASES, "", db).await?.ok_or_else(not_found)?;
        let throughput = offers::asked_throughput(asked)?;
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
        Computed::declared(&resource).map_err(bad_request)?;
        let embeddings = crate::sql::embeddings(&resource).map_err(bad_request)?;
        crate::sql::check_vector_indexes(&resource, &embeddings).map_err(bad_request)?;
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
        self.commit_resource(CONTAINERS, &[change], conflict)
            .await?;
        // Its own throughput; or Azure's least, unless its database's is shared.
        let link = format!("dbs/{db}/colls/{id}");
        let shared = self.throughput_of(&format!("dbs/{db}")).await?.is_some();
        let own = throughput.or((!shared).then_some(Throughput::Manual(offers::MIN_MANUAL)));
        if let Some(throughput) = own {
            self.provision(&link, &rid(&[db, &id]), throughput).await?;
        }
        Ok(Done::of(
            StatusCode::CREATED,
            container_json(db, &entity),
            Some(entity.timestamp),
        ))
    }

    /// A container's properties replaced (the SDKs' `container.replace`): its indexing, time
    /// to live and other policies, under `If-Match`. Its id, partition key and unique keys stay
    /// as they were created (400 for a body that changes them, as Azure answers).
    pub(super) async fn replace_container(
        &self,
        db: &str,
        coll: &str,
        asked: &Asked<'_>,
    ) -> Answered {
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
        Computed::declared(&resource).map_err(bad_request)?;
        ttl::declared(&resource)?;
        // The vector indexes are checked against the vector paths the container will have:
        // the body's, or the stored ones when it sends none.
        let declaring = match resource.contains_key("vectorEmbeddingPolicy") {
            true => &resource,
            false => &stored,
        };
        let embeddings = crate::sql::embeddings(declaring).map_err(bad_request)?;
        crate::sql::check_vector_indexes(&resource, &embeddings).map_err(bad_request)?;
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
        self.commit_resource(CONTAINERS, &[change], precondition_failed)
            .await?;
        Ok(Done::ok(container_json(db, &entity), entity.timestamp))
    }

    pub(super) async fn delete_container(&self, db: &str, coll: &str) -> Answered {
        self.container(db, coll).await?;
        let change = Change {
            key: key(db, coll),
            expected: Expected::Present,
            write: None,
        };
        self.commit_resource(CONTAINERS, &[change], not_found)
            .await?;
        self.tables
            .delete_table(&documents_table(db, coll))
            .await
            .map_err(backend)?;
        self.unprovision(&format!("dbs/{db}/colls/{coll}")).await?;
        Ok(Done::empty(StatusCode::NO_CONTENT, None))
    }

    pub(super) async fn drop_container(&self, db: &str, coll: &str) -> Result<(), Failure> {
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
        self.unprovision(&format!("dbs/{db}/colls/{coll}")).await
    }
}

/// The policies a container has when its properties do not name them, as Azure fills them.
pub(super) fn with_container_defaults(resource: &mut Map<String, Json>) {
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

pub(super) fn container_json(db: &str, entity: &Entity) -> Json {
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
