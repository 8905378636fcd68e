//! A container's scripts: stored procedures, triggers and user-defined functions, each kept in
//! the container's own table (partitions `~sprocs`, `~triggers`, `~udfs`: no document's), so
//! that they go with it; created, read, listed, replaced and deleted as Azure's REST reference
//! describes them, and a procedure run (`execute`; the triggers a document write names:
//! `triggers.rs`), as one transaction on the partition the request names (`transaction/`),
//! decided again from the start when another write came first.

use http::StatusCode;
use ifmatch_azure::swap::Attempts;
use ifmatch_table::{Change, Entity, Expected, Scan, Tables};
use serde_json::Value as Json;

use super::answers::{Answered, Done};
use super::commit::Committed;
use super::transaction::Transaction;
use super::{Asked, Front, Rules, documents_table, id_of, key, rid};
use crate::address::Scripts;
use crate::document::{self, json_of};
use crate::failure::{Code, Failure, backend, bad_request, conflict, not_found, raced};
use crate::script::{BOUNDS, Job, Outcome, Session};

/// The partition of a container's table that holds its scripts of `kind`.
pub(crate) fn partition_of(kind: Scripts) -> String {
    format!("~{}", kind.segment())
}

/// The most stored procedures (and triggers) a container holds: Azure's limit.
pub(crate) const MAX_PROCEDURES: usize = 100;

/// The most user-defined functions a container holds: Azure's limit.
pub(crate) const MAX_FUNCTIONS: usize = 50;

/// The most bytes of a script's body: this server's bound (Azure states none but a request's).
pub(crate) const MAX_SCRIPT: usize = 256 << 10;

impl<T: Tables> Front<'_, T> {
    pub(super) async fn scripts(&self, db: &str, coll: &str, kind: Scripts) -> Answered {
        self.container(db, coll).await?;
        let found = (self
            .scan_all(&documents_table(db, coll), Some(&partition_of(kind)))
            .await)?;
        let listed: Vec<Json> = found
            .iter()
            .map(|e| script_json(db, coll, kind, e))
            .collect();
        let name = match kind {
            Scripts::Procedures => "StoredProcedures",
            Scripts::Triggers => "Triggers",
            Scripts::Functions => "UserDefinedFunctions",
        };
        Ok(Done::feed(&rid(&[db, coll]), name, listed, None))
    }

    pub(super) async fn script(&self, db: &str, coll: &str, kind: Scripts, id: &str) -> Answered {
        let entity = self.stored_script(db, coll, kind, id).await?;
        let body = script_json(db, coll, kind, &entity);
        Ok(Done::ok(body, entity.timestamp))
    }

    /// Create (`id` none: the body's) or Replace: the body checked for its kind.
    pub(super) async fn write_script(
        &self,
        (db, coll, kind): (&str, &str, Scripts),
        id: Option<&str>,
        asked: &Asked<'_>,
    ) -> Answered {
        self.container(db, coll).await?;
        let resource = document::resource(asked.body)?;
        let named = id_of(&resource);
        document::check_name(&named)?;
        if id.is_some_and(|id| id != named) {
            return Err(bad_request(
                "Renaming a script is not supported: create one with the new id.",
            ));
        }
        check_script(kind, &resource)?;
        crate::script::check(
            resource
                .get("body")
                .and_then(Json::as_str)
                .unwrap_or_default(),
        )
        .await?;
        let (table, partition) = (documents_table(db, coll), partition_of(kind));
        let before = match id {
            Some(id) => Some(self.stored_script(db, coll, kind, id).await?),
            None => None,
        };
        if before.is_none() {
            self.check_quota(&table, kind).await?;
        }
        let entity = self.entity(
            &partition,
            &named,
            before.as_ref().map(|e| e.timestamp),
            &resource,
        );
        let change = Change {
            key: key(&partition, &named),
            expected: before
                .as_ref()
                .map_or(Expected::Absent, |e| Expected::Version(e.timestamp)),
            write: Some(entity.clone()),
        };
        self.commit_resource(&table, &[change], conflict).await?;
        let status = if before.is_some() {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        let body = script_json(db, coll, kind, &entity);
        Ok(Done::of(status, body, Some(entity.timestamp)))
    }

    pub(super) async fn delete_script(
        &self,
        db: &str,
        coll: &str,
        kind: Scripts,
        id: &str,
    ) -> Answered {
        self.container(db, coll).await?;
        let change = Change {
            key: key(&partition_of(kind), id),
            expected: Expected::Present,
            write: None,
        };
        self.commit_resource(&documents_table(db, coll), &[change], not_found)
            .await?;
        Ok(Done::empty(StatusCode::NO_CONTENT, None))
    }

    /// 403 when the container holds as many scripts of `kind` as Azure allows (100 stored
    /// procedures, 50 user-defined functions; triggers, of which Azure states no number, 100).
    async fn check_quota(&self, table: &str, kind: Scripts) -> Result<(), Failure> {
        let most = match kind {
            Scripts::Procedures | Scripts::Triggers => MAX_PROCEDURES,
            Scripts::Functions => MAX_FUNCTIONS,
        };
        let partition = partition_of(kind);
        let scan = Scan {
            from: None,
            partition: Some(&partition),
            limit: most,
        };
        let held = self.tables.scan(table, scan).await.map_err(backend)?;
        if held.len() >= most {
            return Err(Failure::new(
                Code::Forbidden,
                format!(
                    "The container holds {most} {}, as many as it may: delete one first.",
                    kind.segment()
                ),
            ));
        }
        Ok(())
    }

    /// The script `id` of `kind`, or 404.
    pub(crate) async fn stored_script(
        &self,
        db: &str,
        coll: &str,
        kind: Scripts,
        id: &str,
    ) -> Result<Entity, Failure> {
        let found = self
            .get(&documents_table(db, coll), &partition_of(kind), id)
            .await?;
        found.ok_or_else(not_found)
    }

    /// Execute Stored Procedure: the body is the arguments (a JSON array), the partition the
    /// header's; the procedure's response is the answer's body.
    pub(super) async fn execute(
        &self,
        db: &str,
        coll: &str,
        id: &str,
        asked: &Asked<'_>,
    ) -> Answered {
        let rules = Rules::of(&self.container(db, coll).await?);
        let procedure = self
            .stored_script(db, coll, Scripts::Procedures, id)
            .await?;
        let arguments = match asked.body.iter().all(u8::is_ascii_whitespace) {
            true => Vec::new(),
            false => match serde_json::from_slice(asked.body) {
                Ok(Json::Array(arguments)) => arguments,
                _ => {
                    return Err(bad_request(
                        "A stored procedure's arguments are a JSON array.",
                    ));
                }
            },
        };
        let partition = self.partition(&rules.paths, asked)?;
        let job = Job {
            source: source_of(&procedure),
            arguments,
            link: format!("dbs/{db}/colls/{coll}"),
            request: None,
            response: None,
            operation: String::new(),
        };
        let mut attempts = Attempts::default();
        while attempts.another() {
            let mut transaction =
                Transaction::begin(self, (db, coll), &rules, partition.clone()).await?;
            let mut session = Session::open(BOUNDS)?;
            let outcome = transaction.run(&mut session, job.clone()).await?;
            match transaction.commit().await {
                Ok(()) => return Ok(executed(outcome, asked)),
                Err(Committed::Conflict) => continue,
                Err(Committed::Failed(failure)) => return Err(failure),
            }
        }
        Err(raced())
    }
}

/// A script's resource as Azure's REST reference shows it.
fn script_json(db: &str, coll: &str, kind: Scripts, entity: &Entity) -> Json {
    let id = &entity.row_key;
    let link = format!("dbs/{db}/colls/{coll}/{}/{id}", kind.segment());
    let rid = rid(&[db, coll, kind.segment(), id]);
    Json::Object(document::with_system(
        json_of(entity),
        &link,
        &rid,
        entity.timestamp,
    ))
}

pub(super) fn source_of(script: &Entity) -> String {
    let json = json_of(script);
    json.get("body")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A script's resource checked for its kind: a `body` of JavaScript (at most
/// [`MAX_SCRIPT`] bytes); a trigger's type and operation among Azure's.
fn check_script(kind: Scripts, resource: &serde_json::Map<String, Json>) -> Result<(), Failure> {
    match resource.get("body") {
        Some(Json::String(body)) if body.len() > MAX_SCRIPT => {
            return Err(Failure::new(
                Code::RequestEntityTooLarge,
                format!(
                    "A script's body is at most {MAX_SCRIPT} bytes; this one is {}.",
                    body.len()
                ),
            ));
        }
        Some(Json::String(body)) if !body.trim().is_empty() => {}
        _ => return Err(bad_request("A script's body is its JavaScript, a string.")),
    }
    if kind == Scripts::Triggers {
        let of = |field: &str| {
            resource
                .get(field)
                .and_then(Json::as_str)
                .map(str::to_ascii_lowercase)
        };
        if !matches!(of("triggerType").as_deref(), Some("pre" | "post")) {
            return Err(bad_request("A trigger's triggerType is Pre or Post."));
        }
        let operations = ["all", "create", "update", "delete", "replace", "upsert"];
        if !of("triggerOperation").is_some_and(|o| operations.contains(&o.as_str())) {
            return Err(bad_request(
                "A trigger's triggerOperation is All, Create, Update, Delete, Replace or Upsert.",
            ));
        }
    }
    Ok(())
}

/// A procedure's answer: its response's JSON, and its log when the request asked for it.
fn executed(outcome: Outcome, asked: &Asked<'_>) -> Done {
    let mut done = Done::of(StatusCode::OK, outcome.response, None);
    if asked.is_true("x-ms-documentdb-script-enable-logging") {
        done.log = Some(outcome.log);
    }
    done
}
