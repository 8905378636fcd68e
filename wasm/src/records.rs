//! Blob and container records in a Durable Object per container, and one more object that
//! notes every container's name (List Containers).

use std::sync::Arc;

use ifmatch_blob::{Block, BlockToStage, Key, PutMode, Record, Records, Scan, StoreError};
use serde::{Deserialize, Serialize};
use worker::send::{SendFuture, SendWrapper};
use worker::{
    DurableObject, Env, ListOptions, Method, ObjectNamespace, Request, RequestInit, Response,
    State, durable_object, js_sys,
};

/// Records through the Durable Object of each container ([`ContainerRecords`]): every call is
/// one request to the object, every change one compare-and-swap there. The rules (leases,
/// conditions) stay in the front, as with every other backend: the object only compares the
/// generation and writes.
pub struct DurableRecords {
    namespace: SendWrapper<ObjectNamespace>,
}

impl DurableRecords {
    /// Records in the objects of `namespace`, one per container name.
    pub fn new(namespace: ObjectNamespace) -> Self {
        Self {
            namespace: SendWrapper::new(namespace),
        }
    }

    async fn call(&self, container: &str, call: &Call) -> Result<Reply, StoreError> {
        let stub = self
            .namespace
            .id_from_name(container)
            .and_then(|id| id.get_stub())
            .map_err(unavailable)?;
        let body = serde_json::to_string(call).map_err(|e| StoreError::generic(BACKEND, e))?;
        let mut init = RequestInit::new();
        init.with_method(Method::Post).with_body(Some(body.into()));
        let request = Request::new_with_init("https://records/", &init).map_err(unavailable)?;
        let mut response = stub
            .fetch_with_request(request)
            .await
            .map_err(unavailable)?;
        // Through serde_json, not JavaScript's JSON: generations are 64-bit.
        let text = response.text().await.map_err(unavailable)?;
        match serde_json::from_str(&text).map_err(|e| StoreError::generic(BACKEND, e))? {
            Reply::Refused(refusal) => Err(refusal.of(&call.key(container))),
            reply => Ok(reply),
        }
    }
}

fn unavailable(error: worker::Error) -> StoreError {
    StoreError::Unavailable(error.to_string().into())
}

/// The backend's name in errors.
const BACKEND: &str = "durable-object";

fn unexpected() -> StoreError {
    StoreError::generic(BACKEND, "unexpected reply from the records object")
}

fn blob_of(key: &Key) -> Option<String> {
    match key {
        Key::Container(_) => None,
        Key::Blob(_, name) => Some(name.clone()),
    }
}

/// A request to a container's records object.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Call {
    /// The record of the container (`blob: None`) or of one of its blobs.
    Get { blob: Option<String> },
    /// Writes a record: created (`expected: None`) or replacing this generation.
    Put {
        blob: Option<String>,
        record: Box<Record>,
        expected: Option<u64>,
    },
    /// Deletes a record of this generation; the container takes its blobs with it.
    Delete {
        blob: Option<String>,
        generation: u64,
    },
    /// The blobs whose names start with `prefix`, in name order.
    List {
        prefix: String,
        from: String,
        limit: usize,
    },
    /// Appends a block to the set staged for a blob under an epoch, unless it holds `max`.
    Stage {
        blob: String,
        epoch: u64,
        block: Box<Block>,
        max: usize,
    },
    /// The blocks staged for a blob under an epoch, in order.
    Staged { blob: String, epoch: u64 },
    /// Forgets the blocks staged for a blob under an epoch.
    Unstage { blob: String, epoch: u64 },
    /// In the index object: note that this container exists (or may soon).
    Index { container: String },
    /// In the index object: forget this container.
    Unindex { container: String },
    /// In the index object: every container noted.
    Containers,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    Found(Option<Box<Record>>),
    Done,
    Deleted(Vec<Record>),
    Listed(Vec<(String, Record)>),
    Names(Vec<String>),
    Staged(bool),
    Blocks(Vec<Block>),
    Refused(Refusal),
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum Refusal {
    AlreadyExists,
    Conflict,
    NotFound,
    ContainerNotFound,
}

impl Refusal {
    /// The error of this refusal of a call about `key`.
    fn of(self, key: &Key) -> StoreError {
        match self {
            Self::AlreadyExists => StoreError::already_exists(key),
            Self::Conflict => StoreError::conflict(key),
            Self::NotFound => StoreError::not_found(key),
            Self::ContainerNotFound => StoreError::ContainerNotFound,
        }
    }
}

impl Call {
    /// The record a call to `container`'s object is about.
    fn key(&self, container: &str) -> Key {
        let blob = match self {
            Self::Get { blob } | Self::Put { blob, .. } | Self::Delete { blob, .. } => blob.clone(),
            Self::Stage { blob, .. } | Self::Staged { blob, .. } | Self::Unstage { blob, .. } => {
                Some(blob.clone())
            }
            Self::List { .. } | Self::Index { .. } | Self::Unindex { .. } | Self::Containers => {
                None
            }
        };
        match blob {
            Some(blob) => Key::Blob(container.to_owned(), blob),
            None => Key::Container(container.to_owned()),
        }
    }
}

impl Records for DurableRecords {
    fn get(
        &self,
        key: &Key,
    ) -> impl Future<Output = Result<Option<Arc<Record>>, StoreError>> + Send {
        let call = Call::Get { blob: blob_of(key) };
        SendFuture::new(async move {
            match self.call(key.container(), &call).await? {
                Reply::Found(record) => Ok(record.map(|r| Arc::new(*r))),
                _ => Err(unexpected()),
            }
        })
    }

    fn put(
        &self,
        key: &Key,
        record: &Record,
        mode: PutMode,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let call = Call::Put {
            blob: blob_of(key),
            record: Box::new(record.clone()),
            expected: match mode {
                PutMode::Create => None,
                PutMode::Update(generation) => Some(generation),
            },
        };
        let index = matches!((key, mode), (Key::Container(_), PutMode::Create));
        SendFuture::new(async move {
            if index {
                // Noted before it exists: a name noted for a container that never came is
                // skipped when listed (its record is missing); a container is never unlisted.
                let container = key.container().to_owned();
                self.call(INDEX, &Call::Index { container }).await?;
            }
            match self.call(key.container(), &call).await? {
                Reply::Done => Ok(()),
                _ => Err(unexpected()),
            }
        })
    }

    fn delete(
        &self,
        key: &Key,
        generation: u64,
    ) -> impl Future<Output = Result<Vec<Record>, StoreError>> + Send {
        let call = Call::Delete {
            blob: blob_of(key),
            generation,
        };
        let unindex = matches!(key, Key::Container(_));
        SendFuture::new(async move {
            let deleted = match self.call(key.container(), &call).await? {
                Reply::Deleted(records) => records,
                _ => return Err(unexpected()),
            };
            if unindex {
                let container = key.container().to_owned();
                // Failing here leaves a name whose record is gone: skipped when listed.
                let _ = self.call(INDEX, &Call::Unindex { container }).await;
            }
            Ok(deleted)
        })
    }

    fn containers(&self) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send {
        SendFuture::new(async move {
            match self.call(INDEX, &Call::Containers).await? {
                Reply::Names(names) => Ok(names),
                _ => Err(unexpected()),
            }
        })
    }

    fn stage_block(
        &self,
        stage: BlockToStage<'_>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let (key, epoch, block, max) = (stage.key, stage.epoch, stage.block, stage.max);
        let call = blob_of(key).map(|blob| Call::Stage {
            blob,
            epoch,
            block: Box::new(block.clone()),
            max,
        });
        SendFuture::new(async move {
            match self
                .call(
                    key.container(),
                    &call.ok_or_else(|| StoreError::not_found(key))?,
                )
                .await?
            {
                Reply::Staged(staged) => Ok(staged),
                _ => Err(unexpected()),
            }
        })
    }

    fn staged_blocks(
        &self,
        key: &Key,
        epoch: u64,
    ) -> impl Future<Output = Result<Vec<Block>, StoreError>> + Send {
        let call = blob_of(key).map(|blob| Call::Staged { blob, epoch });
        SendFuture::new(async move {
            let Some(call) = call else {
                return Ok(Vec::new());
            };
            match self.call(key.container(), &call).await? {
                Reply::Blocks(blocks) => Ok(blocks),
                _ => Err(unexpected()),
            }
        })
    }

    fn drop_staged(
        &self,
        key: &Key,
        epoch: u64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let call = blob_of(key).map(|blob| Call::Unstage { blob, epoch });
        SendFuture::new(async move {
            let Some(call) = call else { return Ok(()) };
            match self.call(key.container(), &call).await? {
                Reply::Done => Ok(()),
                _ => Err(unexpected()),
            }
        })
    }

    fn list(
        &self,
        scan: Scan<'_>,
    ) -> impl Future<Output = Result<Vec<(String, Record)>, StoreError>> + Send {
        let container = scan.container;
        let call = Call::List {
            prefix: scan.prefix.to_owned(),
            from: scan.from.to_owned(),
            limit: scan.limit,
        };
        SendFuture::new(async move {
            match self.call(container, &call).await? {
                Reply::Listed(blobs) => Ok(blobs),
                _ => Err(unexpected()),
            }
        })
    }
}

/// The records of one container: its own under `container`, each blob's under `blob/NAME`,
/// as JSON.
///
/// A call reads, compares and writes with storage operations only; the object's input gate
/// delivers no other request while they are awaited, so each call is one atomic step, and its
/// output gate holds the reply until the writes are durable.
#[durable_object]
pub struct ContainerRecords {
    state: State,
}

const CONTAINER: &str = "container";
const BLOBS: &str = "blob/";
/// The object that notes every container's name, for List Containers (a name no container's
/// object has: stored names never start with `~`).
const INDEX: &str = "~containers";
const NAMES: &str = "name/";

/// A blob's staged blocks under an epoch: how many (`STAGED_COUNT{epoch}/{blob}`), and each
/// (`STAGED{epoch}/{blob}/{n}`, n in hex of a fixed width: in order). Not under `BLOBS`: no
/// listing sees them.
const STAGED_COUNT: &str = "staged#";
const STAGED: &str = "staged/";

fn staged_prefix(epoch: u64, blob: &str) -> String {
    format!("{STAGED}{epoch:016x}/{blob}/")
}

/// A record's JSON longer than this is kept in parts: a Durable Object value holds at most
/// 2 MB, and a blob's record holds its block list (Azure takes 50,000 blocks, about 10 MB of
/// JSON). Half a MiB of characters stays under the limit even when stored two bytes each.
const PART: usize = 512 << 10;
/// A parted record's value under its key: this, then how many parts, each under
/// `PARTS{key}/{n}` (n in hex of a fixed width), written in the same call as the value.
const PARTED: &str = "parts:";
const PARTS: &str = "part/";

fn part_key(key: &str, n: usize) -> String {
    format!("{PARTS}{key}/{n:08x}")
}

/// How many parts a stored value names (`None`: the value is the record itself).
fn parts_of(value: &str) -> Option<usize> {
    value.strip_prefix(PARTED)?.parse().ok()
}

fn storage_key(blob: Option<&str>) -> String {
    blob.map_or_else(|| CONTAINER.to_owned(), |name| format!("{BLOBS}{name}"))
}

fn decode(json: &str) -> worker::Result<Record> {
    serde_json::from_str(json).map_err(|e| worker::Error::RustError(e.to_string()))
}

impl ContainerRecords {
    async fn read(&self, key: &str) -> worker::Result<Option<Record>> {
        let value: Option<String> = self.state.storage().get(key).await?;
        match value {
            Some(value) => Ok(Some(decode(&self.whole(key, value).await?)?)),
            None => Ok(None),
        }
    }

    /// The record's JSON that `value`, stored under `key`, is or names the parts of.
    async fn whole(&self, key: &str, value: String) -> worker::Result<String> {
        let Some(count) = parts_of(&value) else {
            return Ok(value);
        };
        let prefix = format!("{PARTS}{key}/");
        let options = ListOptions::new().prefix(&prefix).limit(count);
        let found = self.state.storage().list_with_options(options).await?;
        let mut json = String::new();
        for part in found.values() {
            json.push_str(&part?.as_string().unwrap_or_default());
        }
        Ok(json)
    }

    /// Writes `json` under `key`, in parts when it is long, in one atomic call; `before` is
    /// how many parts the value it replaces had (any beyond the new count are deleted after:
    /// until then no value names them).
    async fn write(&self, key: &str, json: String, before: usize) -> worker::Result<()> {
        let storage = self.state.storage();
        let mut parts = Vec::new();
        let mut rest = json.as_str();
        if rest.len() > PART {
            while !rest.is_empty() {
                let mut end = PART.min(rest.len());
                while !rest.is_char_boundary(end) {
                    end -= 1;
                }
                parts.push(&rest[..end]);
                rest = &rest[end..];
            }
        }
        if parts.is_empty() {
            storage.put(key, &json).await?;
        } else {
            let writes = js_sys::Object::new();
            let head = format!("{PARTED}{}", parts.len());
            js_sys::Reflect::set(&writes, &key.into(), &head.into())?;
            for (n, part) in parts.iter().enumerate() {
                js_sys::Reflect::set(&writes, &part_key(key, n).into(), &(*part).into())?;
            }
            // At most 128 keys a call: a record of 127 parts is 63 MiB of JSON, more than a
            // request to this object carries.
            storage.put_multiple_raw(writes).await?;
        }
        let stale: Vec<String> = (parts.len()..before).map(|n| part_key(key, n)).collect();
        for chunk in stale.chunks(128) {
            storage.delete_multiple(chunk.to_vec()).await?;
        }
        Ok(())
    }

    /// How many parts the value under `key` has now.
    async fn parts_now(&self, key: &str) -> worker::Result<usize> {
        let value: Option<String> = self.state.storage().get(key).await?;
        Ok(value.as_deref().and_then(parts_of).unwrap_or(0))
    }

    /// The blob records whose keys start with `prefix`, from `start` on, in key order, at
    /// most `limit` (storage lists keys in order).
    async fn scan(
        &self,
        prefix: &str,
        start: &str,
        limit: Option<usize>,
    ) -> worker::Result<Vec<(String, Record)>> {
        let options = ListOptions::new().prefix(prefix).start(start);
        let options = match limit {
            Some(limit) => options.limit(limit),
            None => options,
        };
        let found = self.state.storage().list_with_options(options).await?;
        let mut out = Vec::with_capacity(found.size() as usize);
        for entry in found.entries() {
            let pair = js_sys::Array::from(&entry?);
            let key = pair.get(0).as_string().unwrap_or_default();
            let json = pair.get(1).as_string().unwrap_or_default();
            let json = self.whole(&key, json).await?;
            let name = key.strip_prefix(BLOBS).unwrap_or(&key).to_owned();
            out.push((name, decode(&json)?));
        }
        Ok(out)
    }

    /// Appends `block` to the blocks staged for `blob` under `epoch`, unless `max` are there.
    async fn stage(
        &self,
        blob: &str,
        epoch: u64,
        block: &Block,
        max: usize,
    ) -> worker::Result<Result<Reply, Refusal>> {
        let storage = self.state.storage();
        if self.read(CONTAINER).await?.is_none() {
            return Ok(Err(Refusal::ContainerNotFound));
        }
        let count_key = format!("{STAGED_COUNT}{epoch:016x}/{blob}");
        let count: usize = match storage.get::<String>(&count_key).await? {
            Some(n) => n.parse().unwrap_or(0),
            None => 0,
        };
        if count >= max {
            return Ok(Ok(Reply::Staged(false)));
        }
        let json =
            serde_json::to_string(block).map_err(|e| worker::Error::RustError(e.to_string()))?;
        // Both keys in one write: the count never names an entry that is not there.
        let entry = format!("{}{count:08x}", staged_prefix(epoch, blob));
        let writes = js_sys::Object::new();
        for (key, value) in [(count_key, (count + 1).to_string()), (entry, json)] {
            js_sys::Reflect::set(&writes, &key.into(), &value.into())?;
        }
        storage.put_multiple_raw(writes).await?;
        Ok(Ok(Reply::Staged(true)))
    }

    /// The blocks staged for `blob` under `epoch`, in order.
    async fn staged(&self, blob: &str, epoch: u64) -> worker::Result<Vec<Block>> {
        let storage = self.state.storage();
        let prefix = staged_prefix(epoch, blob);
        let found = storage
            .list_with_options(ListOptions::new().prefix(&prefix))
            .await?;
        let mut blocks = Vec::with_capacity(found.size() as usize);
        for value in found.values() {
            let json = value?.as_string().unwrap_or_default();
            blocks.push(
                serde_json::from_str(&json).map_err(|e| worker::Error::RustError(e.to_string()))?,
            );
        }
        Ok(blocks)
    }

    /// Drops the blocks staged for `blob` under `epoch`, and their count.
    async fn unstage(&self, blob: &str, epoch: u64) -> worker::Result<()> {
        let storage = self.state.storage();
        let prefix = staged_prefix(epoch, blob);
        let found = storage
            .list_with_options(ListOptions::new().prefix(&prefix))
            .await?;
        let mut keys = Vec::with_capacity(found.size() as usize + 1);
        for key in found.keys() {
            keys.push(key?.as_string().unwrap_or_default());
        }
        keys.push(format!("{STAGED_COUNT}{epoch:016x}/{blob}"));
        // The storage deletes at most 128 keys a call.
        for chunk in keys.chunks(128) {
            storage.delete_multiple(chunk.to_vec()).await?;
        }
        Ok(())
    }

    async fn serve_call(&self, call: Call) -> worker::Result<Result<Reply, Refusal>> {
        let storage = self.state.storage();
        Ok(match call {
            Call::Get { blob } => Ok(Reply::Found(
                self.read(&storage_key(blob.as_deref()))
                    .await?
                    .map(Box::new),
            )),
            Call::Put {
                blob,
                record,
                expected,
            } => {
                if blob.is_some() && self.read(CONTAINER).await?.is_none() {
                    return Ok(Err(Refusal::ContainerNotFound));
                }
                let key = storage_key(blob.as_deref());
                let mode = expected.map_or(PutMode::Create, PutMode::Update);
                match mode.check(&key, self.read(&key).await?.as_ref()) {
                    Ok(()) => {
                        let json = serde_json::to_string(&record)
                            .map_err(|e| worker::Error::RustError(e.to_string()))?;
                        let before = self.parts_now(&key).await?;
                        self.write(&key, json, before).await?;
                        Ok(Reply::Done)
                    }
                    Err(StoreError::AlreadyExists { .. }) => Err(Refusal::AlreadyExists),
                    Err(_) => Err(Refusal::Conflict),
                }
            }
            Call::Delete { blob, generation } => {
                let key = storage_key(blob.as_deref());
                match self.read(&key).await? {
                    None => Err(Refusal::NotFound),
                    Some(current) if current.generation != generation => Err(Refusal::Conflict),
                    Some(_) if blob.is_some() => {
                        let parts = self.parts_now(&key).await?;
                        storage.delete(&key).await?;
                        let stale: Vec<String> = (0..parts).map(|n| part_key(&key, n)).collect();
                        for chunk in stale.chunks(128) {
                            storage.delete_multiple(chunk.to_vec()).await?;
                        }
                        Ok(Reply::Deleted(Vec::new()))
                    }
                    Some(_) => {
                        let blobs = self.scan(BLOBS, BLOBS, None).await?;
                        storage.delete_all().await?;
                        Ok(Reply::Deleted(blobs.into_iter().map(|(_, r)| r).collect()))
                    }
                }
            }
            Call::List {
                prefix,
                from,
                limit,
            } => Ok(Reply::Listed(
                self.scan(
                    &format!("{BLOBS}{prefix}"),
                    &format!("{BLOBS}{}", from.max(prefix.clone())),
                    Some(limit),
                )
                .await?,
            )),
            Call::Stage {
                blob,
                epoch,
                block,
                max,
            } => self.stage(&blob, epoch, &block, max).await?,
            Call::Staged { blob, epoch } => Ok(Reply::Blocks(self.staged(&blob, epoch).await?)),
            Call::Unstage { blob, epoch } => {
                self.unstage(&blob, epoch).await?;
                Ok(Reply::Done)
            }
            Call::Index { container } => {
                storage.put(&format!("{NAMES}{container}"), true).await?;
                Ok(Reply::Done)
            }
            Call::Unindex { container } => {
                storage.delete(&format!("{NAMES}{container}")).await?;
                Ok(Reply::Done)
            }
            Call::Containers => {
                let found = storage
                    .list_with_options(ListOptions::new().prefix(NAMES))
                    .await?;
                let mut names = Vec::with_capacity(found.size() as usize);
                for key in found.keys() {
                    let key = key?.as_string().unwrap_or_default();
                    names.push(key.strip_prefix(NAMES).unwrap_or(&key).to_owned());
                }
                Ok(Reply::Names(names))
            }
        })
    }
}

impl DurableObject for ContainerRecords {
    fn new(state: State, _env: Env) -> Self {
        Self { state }
    }

    async fn fetch(&self, mut request: Request) -> worker::Result<Response> {
        // Through serde_json, not JavaScript's JSON: generations are 64-bit.
        let call: Call = serde_json::from_str(&request.text().await?)
            .map_err(|e| worker::Error::RustError(e.to_string()))?;
        let reply = self.serve_call(call).await?.unwrap_or_else(Reply::Refused);
        let json =
            serde_json::to_string(&reply).map_err(|e| worker::Error::RustError(e.to_string()))?;
        Response::ok(json)
    }
}
