//! The Table service's tables in a Durable Object per table, [`TableEntities`], and one more
//! object that notes every table's name (Query Tables). The rules stay in `ifmatch-table`'s
//! front: an object only compares what each change expects and writes, all of a commit or
//! none.

use ifmatch_table::{Change, Entity, EntityKey, Scan, TableError, Tables, satisfies};
use serde::{Deserialize, Serialize};
use worker::send::{SendFuture, SendWrapper};
use worker::{
    DurableObject, Env, ListOptions, Method, ObjectNamespace, Request, RequestInit, Response,
    State, durable_object, js_sys,
};

/// The backend's name in errors.
const BACKEND: &str = "durable-object";

/// Tables through the Durable Object of each table ([`TableEntities`]).
#[derive(Clone)]
pub struct DurableTables {
    namespace: std::sync::Arc<SendWrapper<ObjectNamespace>>,
}

impl std::fmt::Debug for DurableTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableTables").finish_non_exhaustive()
    }
}

impl DurableTables {
    /// Tables in the objects of `namespace`, one per table name.
    pub fn new(namespace: ObjectNamespace) -> Self {
        Self {
            namespace: std::sync::Arc::new(SendWrapper::new(namespace)),
        }
    }

    async fn call(&self, object: &str, call: &Call) -> Result<Reply, TableError> {
        let stub = (self.namespace.id_from_name(object))
            .and_then(|id| id.get_stub())
            .map_err(failed)?;
        let body = serde_json::to_string(call).map_err(failed)?;
        let mut init = RequestInit::new();
        init.with_method(Method::Post).with_body(Some(body.into()));
        let request = Request::new_with_init("https://tables/", &init).map_err(failed)?;
        let mut response = stub.fetch_with_request(request).await.map_err(failed)?;
        let text = response.text().await.map_err(failed)?;
        match serde_json::from_str(&text).map_err(failed)? {
            Reply::NoTable => Err(TableError::TableNotFound(object.to_owned())),
            Reply::Conflict { index, present } => Err(TableError::Conflict { index, present }),
            reply => Ok(reply),
        }
    }
}

fn failed(error: impl std::fmt::Display) -> TableError {
    TableError::Generic {
        backend: BACKEND,
        message: error.to_string(),
    }
}

fn unexpected() -> TableError {
    failed("unexpected reply from the tables object")
}

/// A request to a table's object (or to the index).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Call {
    Create,
    Drop,
    Get {
        pk: String,
        rk: String,
    },
    Scan {
        from: (String, String),
        partition: Option<String>,
        limit: usize,
    },
    Commit {
        changes: Vec<Change>,
    },
    /// In the index object: note a table's name, or forget it.
    Index {
        name: String,
        present: bool,
    },
    /// In the index object: up to `limit` names after `after`.
    Names {
        after: String,
        limit: usize,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    Done(bool),
    Found(Option<Entity>),
    Entities(Vec<Entity>),
    Names(Vec<String>),
    NoTable,
    Conflict { index: usize, present: bool },
}

/// The object that notes every table's name (no table's name starts with `~`).
const INDEX: &str = "~tables";

impl DurableTables {
    /// Sends `call` to `object`'s Durable Object and reads its reply with `read`.
    fn ask<T>(
        &self,
        object: &str,
        call: Call,
        read: fn(Reply) -> Option<T>,
    ) -> impl Future<Output = Result<T, TableError>> + Send {
        let object = object.to_owned();
        SendFuture::new(
            async move { read(self.call(&object, &call).await?).ok_or_else(unexpected) },
        )
    }
}

fn done(reply: Reply) -> Option<bool> {
    match reply {
        Reply::Done(done) => Some(done),
        _ => None,
    }
}

impl Tables for DurableTables {
    fn create_table(&self, name: &str) -> impl Future<Output = Result<bool, TableError>> + Send {
        // Noted before it exists, so a table is never missing from Query Tables; if its
        // creation then fails, the name stays listed until a Delete Table forgets it.
        let index = Call::Index {
            name: name.to_owned(),
            present: true,
        };
        let (noted, created) = (
            self.ask(INDEX, index, done),
            self.ask(name, Call::Create, done),
        );
        SendFuture::new(async move {
            noted.await?;
            created.await
        })
    }

    fn delete_table(&self, name: &str) -> impl Future<Output = Result<bool, TableError>> + Send {
        let index = Call::Index {
            name: name.to_owned(),
            present: false,
        };
        let (dropped, forgotten) = (
            self.ask(name, Call::Drop, done),
            self.ask(INDEX, index, done),
        );
        SendFuture::new(async move {
            let deleted = dropped.await?;
            forgotten.await?;
            Ok(deleted)
        })
    }

    fn tables(
        &self,
        after: &str,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<String>, TableError>> + Send {
        let after = after.to_owned();
        self.ask(INDEX, Call::Names { after, limit }, |reply| match reply {
            Reply::Names(names) => Some(names),
            _ => None,
        })
    }

    fn get(
        &self,
        table: &str,
        key: &EntityKey,
    ) -> impl Future<Output = Result<Option<Entity>, TableError>> + Send {
        let (pk, rk) = key.clone();
        self.ask(table, Call::Get { pk, rk }, |reply| match reply {
            Reply::Found(entity) => Some(entity),
            _ => None,
        })
    }

    fn scan(
        &self,
        table: &str,
        scan: Scan<'_>,
    ) -> impl Future<Output = Result<Vec<Entity>, TableError>> + Send {
        let call = Call::Scan {
            from: scan.start(),
            partition: scan.partition.map(str::to_owned),
            limit: scan.limit,
        };
        self.ask(table, call, |reply| match reply {
            Reply::Entities(entities) => Some(entities),
            _ => None,
        })
    }

    fn commit(
        &self,
        table: &str,
        changes: &[Change],
    ) -> impl Future<Output = Result<(), TableError>> + Send {
        let changes = changes.to_vec();
        let committed = self.ask(table, Call::Commit { changes }, done);
        SendFuture::new(async move { committed.await.map(drop) })
    }
}

/// One table's entities, each under `e/{PartitionKey}\u{1}{RowKey}` as JSON: no key holds a
/// control character, so the keys sort as (PartitionKey, RowKey) pairs and a partition is one
/// prefix. `table` marks that the table exists.
///
/// A call reads, compares and writes with storage operations only; the object's input gate
/// delivers no other request meanwhile, and a commit's writes are issued together, so they
/// are one atomic write, durable before the reply leaves (the output gate).
#[durable_object]
pub struct TableEntities {
    state: State,
}

const MARKER: &str = "table";
const ENTITIES: &str = "e/";
const NAMES: &str = "name/";

fn entity_key(pk: &str, rk: &str) -> String {
    format!("{ENTITIES}{pk}\u{1}{rk}")
}

fn rust_error(error: impl std::fmt::Display) -> worker::Error {
    worker::Error::RustError(error.to_string())
}

impl TableEntities {
    async fn exists(&self) -> worker::Result<bool> {
        let marker: Option<bool> = self.state.storage().get(MARKER).await?;
        Ok(marker.is_some())
    }

    async fn read(&self, pk: &str, rk: &str) -> worker::Result<Option<Entity>> {
        let json: Option<String> = self.state.storage().get(&entity_key(pk, rk)).await?;
        json.as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(rust_error)
    }

    async fn serve_call(&self, call: Call) -> worker::Result<Reply> {
        let storage = self.state.storage();
        let needs_table = matches!(
            call,
            Call::Get { .. } | Call::Scan { .. } | Call::Commit { .. }
        );
        if needs_table && !self.exists().await? {
            return Ok(Reply::NoTable);
        }
        Ok(match call {
            Call::Create => {
                let existed = self.exists().await?;
                storage.put(MARKER, true).await?;
                Reply::Done(!existed)
            }
            Call::Drop => {
                let existed = self.exists().await?;
                storage.delete_all().await?;
                Reply::Done(existed)
            }
            Call::Get { pk, rk } => Reply::Found(self.read(&pk, &rk).await?),
            Call::Scan {
                from,
                partition,
                limit,
            } => {
                let prefix = match &partition {
                    Some(pk) => format!("{ENTITIES}{pk}\u{1}"),
                    None => ENTITIES.to_owned(),
                };
                let start = entity_key(&from.0, &from.1).max(prefix.clone());
                let options = ListOptions::new()
                    .prefix(&prefix)
                    .start(&start)
                    .limit(limit);
                let found = storage.list_with_options(options).await?;
                let mut entities = Vec::with_capacity(found.size() as usize);
                for value in found.values() {
                    let json = value?.as_string().unwrap_or_default();
                    entities.push(serde_json::from_str(&json).map_err(rust_error)?);
                }
                Reply::Entities(entities)
            }
            Call::Commit { changes } => {
                for (index, change) in changes.iter().enumerate() {
                    let found = self.read(&change.key.0, &change.key.1).await?;
                    if !satisfies(change.expected, found.as_ref()) {
                        let present = found.is_some();
                        return Ok(Reply::Conflict { index, present });
                    }
                }
                let (writes, deletes) = (js_sys::Object::new(), js_sys::Array::new());
                for change in &changes {
                    let key = entity_key(&change.key.0, &change.key.1);
                    match &change.write {
                        Some(entity) => {
                            let json = serde_json::to_string(entity).map_err(rust_error)?;
                            js_sys::Reflect::set(&writes, &key.into(), &json.into())?;
                        }
                        None => {
                            deletes.push(&key.into());
                        }
                    }
                }
                // Issued together, with no await between them: one atomic write.
                let keys: Vec<String> = deletes.iter().filter_map(|k| k.as_string()).collect();
                let write = storage.put_multiple_raw(writes);
                let delete = storage.delete_multiple(keys);
                let (written, deleted) = futures_util::join!(write, delete);
                written?;
                deleted?;
                Reply::Done(true)
            }
            Call::Index { name, present } => {
                let key = format!("{NAMES}{name}");
                if present {
                    storage.put(&key, true).await?;
                } else {
                    storage.delete(&key).await?;
                }
                Reply::Done(true)
            }
            Call::Names { after, limit } => {
                let start = if after.is_empty() {
                    NAMES.to_owned()
                } else {
                    format!("{NAMES}{after}\u{0}")
                };
                let options = ListOptions::new().prefix(NAMES).start(&start).limit(limit);
                let found = storage.list_with_options(options).await?;
                let mut names = Vec::with_capacity(found.size() as usize);
                for key in found.keys() {
                    let key = key?.as_string().unwrap_or_default();
                    names.push(key.strip_prefix(NAMES).unwrap_or(&key).to_owned());
                }
                Reply::Names(names)
            }
        })
    }
}

impl DurableObject for TableEntities {
    fn new(state: State, _env: Env) -> Self {
        Self { state }
    }

    async fn fetch(&self, mut request: Request) -> worker::Result<Response> {
        let call: Call = serde_json::from_str(&request.text().await?).map_err(rust_error)?;
        let reply = self.serve_call(call).await?;
        Response::ok(serde_json::to_string(&reply).map_err(rust_error)?)
    }
}
