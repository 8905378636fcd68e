//! Optimistic concurrency: read, change, write back only if nobody wrote meanwhile, and start
//! over if somebody did, after a backoff with jitter.

use bytes::Bytes;

use ifmatch_core::backoff::Backoff;

use crate::client::{BlobClient, Conditions};
use crate::error::{Error, Result};

/// What [`update`] did.
#[derive(Debug, Clone)]
pub struct Updated {
    /// The blob's ETag after the write (or as read, when nothing was written).
    pub etag: String,
    /// The bytes written (or as read).
    pub bytes: Bytes,
    /// Attempts made: 1 when nobody got in the way.
    pub attempts: u32,
}

/// Read-modify-write of `blob`: reads it (absent: `None`), lets `change` make the new bytes
/// (`None`: leave it as it is), and writes them with `If-Match` of the tag read, or
/// `If-None-Match: *` when there was no blob. A write that lost the race (412, or 409 for a
/// create) starts over after `backoff`'s wait, as does a transient failure; `lease_id` is
/// sent with every write (a leased blob needs it). After `backoff.attempts`, the last error.
pub async fn update<F>(
    blob: &BlobClient,
    backoff: &Backoff,
    lease_id: Option<&str>,
    mut change: F,
) -> Result<Updated>
where
    F: FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
{
    let mut last = None;
    for attempt in 0..backoff.attempts.max(1) {
        if attempt > 0 {
            tokio::time::sleep(backoff.delay(attempt - 1)).await;
        }
        let read = match blob.get(&Conditions::default().with_lease(lease_id)).await {
            Ok(read) => read,
            Err(e) if e.is_not_found() => None,
            Err(e) if e.is_transient() => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let Some(new) = change(read.as_ref().map(|b| &b.bytes[..])) else {
            let (etag, bytes) = read.map(|b| (b.etag, b.bytes)).unwrap_or_default();
            return Ok(Updated {
                etag,
                bytes,
                attempts: attempt + 1,
            });
        };
        let conditions = match &read {
            Some(blob) => Conditions::if_match(blob.etag.clone()),
            None => Conditions::create_only(),
        }
        .with_lease(lease_id);
        let bytes = Bytes::from(new);
        match blob.put(bytes.clone(), &conditions).await {
            Ok(etag) => {
                return Ok(Updated {
                    etag,
                    bytes,
                    attempts: attempt + 1,
                });
            }
            Err(e) if lost_race(&e) || e.is_transient() => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or(Error::Invalid("no attempt made".into())))
}

/// Someone else wrote between the read and the write.
fn lost_race(e: &Error) -> bool {
    e.is_precondition_failed() || e.is_already_exists()
}
