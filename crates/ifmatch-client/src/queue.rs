//! A work queue in a container: each item a blob, hidden from other workers by a lease while
//! one processes it (the visibility timeout is the lease's duration, renewed while the worker
//! lives), completed by a delete under that lease, abandoned by releasing it.

use std::time::Duration;

use bytes::Bytes;

use crate::client::{BlobClient, Client, Conditions};
use crate::error::{Error, Result};
use crate::lease::LeaseGuard;

/// A queue: the blobs under `prefix` in a container.
#[derive(Debug, Clone)]
pub struct WorkQueue {
    client: Client,
    container: String,
    prefix: String,
    visibility: Duration,
}

/// An item taken from the queue: its bytes, and the lease that hides it.
#[derive(Debug)]
pub struct Item {
    /// The item's blob name.
    pub name: String,
    /// Its bytes.
    pub bytes: Bytes,
    blob: BlobClient,
    guard: LeaseGuard,
}

impl WorkQueue {
    /// The queue of blobs under `prefix` in `container` (made if missing); an item taken is
    /// hidden for `visibility` (15 to 60 s) past the last sign of life of its worker.
    pub async fn open(
        client: &Client,
        container: &str,
        prefix: &str,
        visibility: Duration,
    ) -> Result<Self> {
        client.create_container(container).await?;
        Ok(Self {
            client: client.clone(),
            container: container.to_owned(),
            prefix: prefix.to_owned(),
            visibility,
        })
    }

    /// Adds an item (a create-only write under a new name); answers its name.
    pub async fn enqueue(&self, bytes: impl Into<Bytes>) -> Result<String> {
        let name = format!("{}{}", self.prefix, uuid::Uuid::new_v4().simple());
        let blob = self.client.blob(&self.container, &name);
        blob.put(bytes, &Conditions::create_only()).await?;
        Ok(name)
    }

    /// Takes an item no other worker holds, or `None` when every item is taken or done.
    pub async fn dequeue(&self) -> Result<Option<Item>> {
        let mut names = self.client.list(&self.container, &self.prefix).await?;
        // Workers start at different places, so they do not all contend for the first item.
        let offset = if names.is_empty() {
            0
        } else {
            rand::random::<u64>() as usize % names.len()
        };
        names.rotate_left(offset);
        for name in names {
            let blob = self.client.blob(&self.container, &name);
            let guard = match LeaseGuard::acquire(&blob, self.visibility).await {
                Ok(guard) => guard,
                // Taken by another worker, or done meanwhile.
                Err(e) if e.is_lease_taken() || e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            match blob.get(&guard.conditions()).await {
                Ok(Some(read)) => {
                    return Ok(Some(Item {
                        name,
                        bytes: read.bytes,
                        blob,
                        guard,
                    }));
                }
                Ok(None) => unreachable!("an unconditional read"),
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}

impl Item {
    /// The lease that hides the item: writes made while processing it can carry it.
    pub fn guard(&self) -> &LeaseGuard {
        &self.guard
    }

    /// Done: deletes the item under its lease. If the lease was lost (the worker stalled past
    /// the visibility timeout and another took the item), [`Error::LeaseLost`]: the delete
    /// is refused, so the other worker's claim stands.
    pub async fn complete(self) -> Result<()> {
        self.guard.check()?;
        match self.blob.delete(&self.guard.conditions()).await {
            Ok(()) => {
                // The lease went with the blob.
                let _ = self.guard.release().await;
                Ok(())
            }
            Err(e) if e.is_lease_refused() => Err(Error::LeaseLost(self.name)),
            Err(e) => Err(e),
        }
    }

    /// Not done: releases the item for another worker.
    pub async fn abandon(self) -> Result<()> {
        self.guard.release().await
    }
}
