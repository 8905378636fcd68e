//! Queues: each an entity of the account's `queues` table (its metadata, its access policy and
//! the generation of its messages' table), its messages in a table of their own
//! ([`crate::messages`]). Create Queue creates the messages' table first, Delete Queue removes
//! the queue's entity first, so a queue is there exactly while its entity is; Clear Messages
//! moves the queue to a new, empty generation of its table in one compare-and-swap and drops
//! the old one, at a cost that does not grow with the messages cleared.

use std::collections::BTreeMap;

use ifmatch_table::{Change, DateTime, Entity, Expected, Scan, TableError, Tables, Value};

use crate::failure::{ErrorCode, Failure, Result};
use crate::operation::ListOptions;

/// The table of an account's queues.
pub(crate) const QUEUES: &str = "queues";
/// The partition of the queues' entities (the service's properties have another).
const QUEUE: &str = "q";
/// The partition, and row, of the service's properties.
const SERVICE: &str = "service";

/// A queue, as stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Queue {
    /// Its metadata, by name.
    pub(crate) metadata: BTreeMap<String, String>,
    /// Its stored access policies (the `SignedIdentifiers` XML it was given), if set.
    pub(crate) acl: Option<String>,
    /// Which table holds its messages.
    pub(crate) generation: i64,
    /// The version of its entity.
    pub(crate) timestamp: DateTime,
}

impl Queue {
    /// The table of its messages.
    pub(crate) fn messages_table(&self, name: &str) -> String {
        messages_table(name, self.generation)
    }

    fn of(entity: &Entity) -> Self {
        let text = |name: &str| match entity.properties.get(name) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        Self {
            metadata: text("metadata")
                .and_then(|json| serde_json::from_str(&json).ok())
                .unwrap_or_default(),
            acl: text("acl"),
            generation: match entity.properties.get("generation") {
                Some(Value::Int64(n)) => *n,
                _ => 0,
            },
            timestamp: entity.timestamp,
        }
    }

    fn entity(&self, name: &str, timestamp: DateTime) -> Entity {
        let metadata = serde_json::to_string(&self.metadata).unwrap_or_default();
        let mut properties = vec![
            ("metadata", Value::String(metadata)),
            ("generation", Value::Int64(self.generation)),
        ];
        if let Some(acl) = &self.acl {
            properties.push(("acl", Value::String(acl.clone())));
        }
        Entity::new(QUEUE, name, timestamp, properties)
    }
}

fn messages_table(name: &str, generation: i64) -> String {
    format!("messages~{name}~{generation}")
}

fn key(name: &str) -> (String, String) {
    (QUEUE.to_owned(), name.to_owned())
}

fn not_found() -> Failure {
    ErrorCode::QueueNotFound.into()
}

/// The queue `name`, or 404 `QueueNotFound`.
pub(crate) async fn get(tables: &impl Tables, name: &str) -> Result<Queue> {
    match tables.get(QUEUES, &key(name)).await {
        Ok(Some(entity)) => Ok(Queue::of(&entity)),
        Ok(None) | Err(TableError::TableNotFound(_)) => Err(not_found()),
        Err(error) => Err(error.into()),
    }
}

/// Create Queue: `Ok(true)` created (201), `Ok(false)` there already with the same metadata
/// (204); with other metadata, 409 `QueueAlreadyExists`.
pub(crate) async fn create(
    tables: &impl Tables,
    name: &str,
    metadata: BTreeMap<String, String>,
    at: DateTime,
) -> Result<bool> {
    tables.create_table(QUEUES).await?;
    if let Ok(existing) = get(tables, name).await {
        return match existing.metadata == metadata {
            true => Ok(false),
            false => Err(ErrorCode::QueueAlreadyExists.into()),
        };
    }
    let queue = Queue {
        metadata,
        acl: None,
        generation: at.ticks(),
        timestamp: at,
    };
    // The messages' table first: the queue is there once its entity is.
    tables.create_table(&queue.messages_table(name)).await?;
    let change = Change {
        key: key(name),
        expected: Expected::Absent,
        write: Some(queue.entity(name, at)),
    };
    match tables.commit(QUEUES, &[change]).await {
        Ok(()) => Ok(true),
        Err(TableError::Conflict { .. }) => {
            // Another creator was first: its queue stands; ours leaves nothing behind.
            let _ = tables.delete_table(&queue.messages_table(name)).await;
            match get(tables, name).await?.metadata == queue.metadata {
                true => Ok(false),
                false => Err(ErrorCode::QueueAlreadyExists.into()),
            }
        }
        Err(error) => Err(error.into()),
    }
}

/// Delete Queue: its entity, then its messages.
pub(crate) async fn delete(tables: &impl Tables, name: &str) -> Result<()> {
    let queue = get(tables, name).await?;
    let change = Change {
        key: key(name),
        expected: Expected::Version(queue.timestamp),
        write: None,
    };
    match tables.commit(QUEUES, &[change]).await {
        Ok(()) => {}
        Err(TableError::Conflict { .. }) => return Err(not_found()),
        Err(error) => return Err(error.into()),
    }
    // What is left of an instance's failure here is an unreachable table, never a queue.
    tables.delete_table(&queue.messages_table(name)).await?;
    Ok(())
}

/// Changes the queue `name` with `change` (its metadata, its policies, its generation), in a
/// compare-and-swap retried while others change it: the queue as written.
pub(crate) async fn update(
    tables: &impl Tables,
    name: &str,
    at: DateTime,
    change: impl Fn(&mut Queue),
) -> Result<Queue> {
    for _ in 0..16 {
        let mut queue = get(tables, name).await?;
        let before = queue.timestamp;
        change(&mut queue);
        let stamp = DateTime::from_ticks(at.ticks().max(before.ticks() + 1));
        queue.timestamp = stamp;
        let write = Change {
            key: key(name),
            expected: Expected::Version(before),
            write: Some(queue.entity(name, stamp)),
        };
        match tables.commit(QUEUES, &[write]).await {
            Ok(()) => return Ok(queue),
            Err(TableError::Conflict { .. }) => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Err(Failure::shared(
        ifmatch_azure::CommonCode::ServerBusy,
        "The queue changed under this request more times than it retries: retry it.",
    ))
}

/// Clear Messages: the queue on a new, empty table of messages; the old one dropped.
pub(crate) async fn clear(tables: &impl Tables, name: &str, at: DateTime) -> Result<()> {
    let before = get(tables, name).await?;
    let generation = at.ticks().max(before.generation + 1);
    tables
        .create_table(&messages_table(name, generation))
        .await?;
    let after = update(tables, name, at, |queue| queue.generation = generation).await;
    let dropped = match &after {
        Ok(after) if after.generation == generation => before.generation,
        // Another clear or a delete came between: the table made here is the one to drop.
        _ => generation,
    };
    tables.delete_table(&messages_table(name, dropped)).await?;
    after.map(|_| ())
}

/// One page of List Queues: the names (and queues) after `options.marker` that start with
/// its prefix, and the marker of the next page.
pub(crate) async fn list(
    tables: &impl Tables,
    options: &ListOptions,
) -> Result<(Vec<(String, Queue)>, Option<String>)> {
    let from = options.marker.as_str().max(options.prefix.as_str());
    let scan = Scan {
        from: Some((QUEUE, from)),
        partition: Some(QUEUE),
        limit: options.max_results + 1,
    };
    let mut entities = match tables.scan(QUEUES, scan).await {
        Ok(entities) => entities,
        Err(TableError::TableNotFound(_)) => Vec::new(),
        Err(error) => return Err(error.into()),
    };
    entities.retain(|e| e.row_key.starts_with(&options.prefix));
    let next = (entities.len() > options.max_results)
        .then(|| entities[options.max_results].row_key.clone());
    entities.truncate(options.max_results);
    let queues = (entities.iter())
        .map(|e| (e.row_key.clone(), Queue::of(e)))
        .collect();
    Ok((queues, next))
}

/// The service's properties as last set (the XML it was given), if ever.
pub(crate) async fn service_properties(tables: &impl Tables) -> Result<Option<String>> {
    match tables
        .get(QUEUES, &(SERVICE.to_owned(), SERVICE.to_owned()))
        .await
    {
        Ok(Some(entity)) => Ok(match entity.properties.get("xml") {
            Some(Value::String(xml)) => Some(xml.clone()),
            _ => None,
        }),
        Ok(None) | Err(TableError::TableNotFound(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// Keeps `xml` as the service's properties.
pub(crate) async fn set_service_properties(
    tables: &impl Tables,
    xml: String,
    at: DateTime,
) -> Result<()> {
    tables.create_table(QUEUES).await?;
    let entity = Entity::new(SERVICE, SERVICE, at, [("xml", Value::String(xml))]);
    let change = Change {
        key: (SERVICE.to_owned(), SERVICE.to_owned()),
        expected: Expected::Anything,
        write: Some(entity),
    };
    tables.commit(QUEUES, &[change]).await?;
    Ok(())
}
