//! The account and its databases: each database one entity of the table `#dbs`.

use http::StatusCode;
use ifmatch_table::{Change, Entity, Expected, Tables};
use serde_json::{Value as Json, json};

use super::answers::{Answered, Done};
use super::offers;
use super::{Asked, CONTAINERS, DATABASES, Front, id_of, key, rid};
use crate::document::{self, json_of};
use crate::failure::{conflict, not_found};

impl<T: Tables> Front<'_, T> {
    pub(super) fn account(&self) -> Done {
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
            "userConsistencyPolicy": { "defaultConsistencyLevel": super::CONSISTENCY },
            "systemReplicationPolicy": { "minReplicaSetSize": 1, "maxReplicasetSize": 1 },
            "readPolicy": { "primaryReadCoefficient": 1, "secondaryReadCoefficient": 1 },
            "queryEngineConfiguration": "{\"maxSqlQueryInputLength\":524288,\"maxJoinsPerSqlQuery\":10,\"maxLogicalAndPerSqlQuery\":500,\"maxLogicalOrPerSqlQuery\":500,\"maxUdfRefPerSqlQuery\":10,\"maxInExpressionItemsCount\":16000,\"queryMaxInMemorySortDocumentCount\":500,\"maxQueryRequestTimeoutFraction\":0.9,\"sqlAllowNonFiniteNumbers\":false,\"sqlAllowAggregateFunctions\":true,\"sqlAllowSubQuery\":true,\"sqlAllowScalarSubQuery\":true,\"allowNewKeywords\":true,\"sqlAllowLike\":true,\"sqlAllowGroupByClause\":true,\"maxSpatialQueryCells\":12,\"spatialMaxGeometryPointCount\":256,\"sqlDisableOptimizationFlags\":0,\"sqlAllowTop\":true,\"enableSpatialIndexing\":true}"
        });
        Done::of(StatusCode::OK, body, None)
    }

    pub(super) async fn databases(&self) -> Answered {
        let found = self.scan_all(DATABASES, Some("")).await?;
        let databases: Vec<Json> = found.iter().map(database_json).collect();
        Ok(Done::feed("", "Databases", databases, None))
    }

    pub(super) async fn database(&self, db: &str) -> Answered {
        let entity = self.get(DATABASES, "", db).await?.ok_or_else(not_found)?;
        Ok(Done::ok(database_json(&entity), entity.timestamp))
    }

    pub(super) async fn create_database(&self, asked: &Asked<'_>) -> Answered {
        let throughput = offers::asked_throughput(asked)?;
        let resource = document::resource(asked.body)?;
        let id = id_of(&resource);
        document::check_name(&id)?;
        let entity = self.entity("", &id, None, &resource);
        let change = Change {
            key: key("", &id),
            expected: Expected::Absent,
            write: Some(entity.clone()),
        };
        self.commit_resource(DATABASES, &[change], conflict).await?;
        // A database's throughput is shared by its containers that have none of their own.
        if let Some(throughput) = throughput {
            self.provision(&format!("dbs/{id}"), &rid(&[&id]), throughput)
                .await?;
        }
        Ok(Done::of(
            StatusCode::CREATED,
            database_json(&entity),
            Some(entity.timestamp),
        ))
    }

    pub(super) async fn delete_database(&self, db: &str) -> Answered {
        let change = Change {
            key: key("", db),
            expected: Expected::Present,
            write: None,
        };
        self.commit_resource(DATABASES, &[change], not_found)
            .await?;
        // Gone for every client from here; its containers go after.
        for container in self.scan_all(CONTAINERS, Some(db)).await? {
            self.drop_container(db, &container.row_key).await?;
        }
        self.drop_users(db).await?;
        self.unprovision(&format!("dbs/{db}")).await?;
        Ok(Done::empty(StatusCode::NO_CONTENT, None))
    }
}

pub(super) fn database_json(entity: &Entity) -> Json {
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
