//! In-memory backends: the reference for every other backend's behaviour, and what the
//! conformance tests run against. Nothing survives the process.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full, combinators::MapErr};

use crate::body::Incoming;
use crate::hashing::HashingBody;
use crate::record::Block;
use crate::record::Record;
use crate::store::check_len;
use crate::store::{BlockToStage, Key, Objects, PutMode, Records, Scan, Span, Staged, StoreError};

#[derive(Debug, Default)]
struct Container {
    record: Option<Record>,
    blobs: BTreeMap<String, Record>,
    /// Staged blocks by blob name and epoch.
    staged: HashMap<(String, u64), Vec<Block>>,
}

/// Records in a map under one mutex.
#[derive(Debug, Default)]
pub struct MemoryRecords {
    containers: Mutex<BTreeMap<String, Container>>,
}

impl MemoryRecords {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Container>> {
        self.containers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Records for MemoryRecords {
    async fn get(&self, key: &Key) -> Result<Option<Arc<Record>>, StoreError> {
        let map = self.lock();
        let container = map.get(key.container());
        let record = match key {
            Key::Container(_) => container.and_then(|c| c.record.as_ref()),
            Key::Blob(_, name) => container.and_then(|c| c.blobs.get(name)),
        };
        Ok(record.cloned().map(Arc::new))
    }

    async fn put(&self, key: &Key, record: &Record, mode: PutMode) -> Result<(), StoreError> {
        let mut map = self.lock();
        match key {
            Key::Container(name) => {
                let entry = map.entry(name.clone()).or_default();
                mode.check(key, entry.record.as_ref())?;
                entry.record = Some(record.clone());
            }
            Key::Blob(container, name) => {
                let entry = map
                    .get_mut(container)
                    .filter(|c| c.record.is_some())
                    .ok_or(StoreError::ContainerNotFound)?;
                mode.check(key, entry.blobs.get(name))?;
                entry.blobs.insert(name.clone(), record.clone());
            }
        }
        Ok(())
    }

    async fn delete(&self, key: &Key, generation: u64) -> Result<Vec<Record>, StoreError> {
        let mut map = self.lock();
        let container = (map.get_mut(key.container())).ok_or_else(|| StoreError::not_found(key))?;
        let current = match key {
            Key::Container(_) => container.record.as_ref(),
            Key::Blob(_, name) => container.blobs.get(name),
        };
        let current = current.ok_or_else(|| StoreError::not_found(key))?;
        PutMode::Update(generation).check(key, Some(current))?;
        Ok(match key {
            Key::Container(name) => {
                let removed = map.remove(name).unwrap_or_default();
                removed.blobs.into_values().collect()
            }
            Key::Blob(_, name) => {
                container.blobs.remove(name);
                vec![]
            }
        })
    }

    async fn list(&self, scan: Scan<'_>) -> Result<Vec<(String, Record)>, StoreError> {
        let map = self.lock();
        let blobs = map.get(scan.container).map(|c| &c.blobs);
        let start = scan.from.max(scan.prefix).to_owned();
        Ok(blobs
            .into_iter()
            .flat_map(|b| b.range(start.clone()..))
            .take_while(|(name, _)| name.starts_with(scan.prefix))
            .take(scan.limit)
            .map(|(name, record)| (name.clone(), record.clone()))
            .collect())
    }

    async fn stage_block(&self, stage: BlockToStage<'_>) -> Result<bool, StoreError> {
        let (key, epoch, block, max) = (stage.key, stage.epoch, stage.block, stage.max);
        let Key::Blob(container, name) = key else {
            return Err(StoreError::not_found(key));
        };
        let mut map = self.lock();
        let container = map
            .get_mut(container)
            .ok_or(StoreError::ContainerNotFound)?;
        let set = container.staged.entry((name.clone(), epoch)).or_default();
        if set.len() >= max {
            return Ok(false);
        }
        set.push(block.clone());
        Ok(true)
    }

    async fn staged_blocks(&self, key: &Key, epoch: u64) -> Result<Vec<Block>, StoreError> {
        let Key::Blob(container, name) = key else {
            return Ok(Vec::new());
        };
        let map = self.lock();
        let set = map
            .get(container)
            .and_then(|c| c.staged.get(&(name.clone(), epoch)));
        Ok(set.cloned().unwrap_or_default())
    }

    async fn drop_staged(&self, key: &Key, epoch: u64) -> Result<(), StoreError> {
        if let Key::Blob(container, name) = key
            && let Some(container) = self.lock().get_mut(container)
        {
            container.staged.remove(&(name.clone(), epoch));
        }
        Ok(())
    }

    async fn containers(&self) -> Result<Vec<String>, StoreError> {
        let map = self.lock();
        Ok(map
            .iter()
            .filter(|(_, c)| c.record.is_some())
            .map(|(name, _)| name.clone())
            .collect())
    }
}

/// Objects in a map.
#[derive(Debug, Default)]
pub struct MemoryObjects {
    objects: Mutex<HashMap<String, Bytes>>,
    next: AtomicU64,
}

impl MemoryObjects {
    /// How many objects are held: staged, named by a record, or orphaned.
    pub fn len(&self) -> usize {
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no object is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The body of a read from [`MemoryObjects`].
pub type MemoryReader = MapErr<Full<Bytes>, fn(Infallible) -> StoreError>;

impl Objects for MemoryObjects {
    type Reader = MemoryReader;

    async fn stage(&self, body: impl Incoming, limit: u64) -> Result<Staged, StoreError> {
        let mut body = std::pin::pin!(HashingBody::new(body, limit));
        let mut data = BytesMut::new();
        while let Some(frame) = body.frame().await {
            if let Ok(chunk) = frame?.into_data() {
                data.extend_from_slice(&chunk);
            }
        }
        let (etag, len) = body.as_mut().finish();
        let object = format!("mem-{}", self.next.fetch_add(1, Ordering::Relaxed));
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(object.clone(), data.freeze());
        Ok(Staged { object, etag, len })
    }

    async fn read(&self, object: &str, len: u64, range: Span) -> Result<Self::Reader, StoreError> {
        let objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        let data = (objects.get(object))
            .ok_or_else(|| StoreError::not_found(format_args!("object {object}")))?;
        crate::store::check_len(object, data.len() as u64, len)?;
        let data = match range {
            Some(r) => data.slice(r.start as usize..r.end as usize),
            None => data.clone(),
        };
        let never: fn(Infallible) -> StoreError = |never| match never {};
        Ok(Full::new(data).map_err(never))
    }

    async fn share(&self, object: &str, len: u64) -> Result<String, StoreError> {
        let mut objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = (objects.get(object).cloned())
            .ok_or_else(|| StoreError::not_found(format_args!("object {object}")))?;
        check_len(object, bytes.len() as u64, len)?;
        let name = format!("mem-{}", self.next.fetch_add(1, Ordering::Relaxed));
        objects.insert(name.clone(), bytes);
        Ok(name)
    }

    async fn discard(&self, object: &str) -> Result<(), StoreError> {
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(object);
        Ok(())
    }
}

#[cfg(all(test, feature = "conformance"))]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memory_records_conform() {
        crate::conformance::every(|_| MemoryRecords::default()).await;
    }

    #[tokio::test]
    async fn memory_objects_conform() {
        crate::conformance::objects(&MemoryObjects::default()).await;
    }
}
