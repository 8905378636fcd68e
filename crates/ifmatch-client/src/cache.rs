//! The conditional-download cache of Azure's docs: keep a blob's bytes with its ETag, and ask
//! again with `If-None-Match`; a 304 costs no body.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::client::{Blob, BlobClient, Conditions};
use crate::error::Result;

/// Blobs as last read, by path.
#[derive(Debug, Default)]
pub struct ReadCache {
    blobs: Mutex<HashMap<String, Blob>>,
}

impl ReadCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The blob's current bytes: from the cache when the server answers 304 to its tag,
    /// otherwise read and remembered. Answers whether the server sent the bytes.
    pub async fn get(&self, blob: &BlobClient) -> Result<(Blob, bool)> {
        let path = blob.path();
        let known = self.lock().get(&path).cloned();
        let conditions = Conditions {
            if_none_match: known.as_ref().map(|b| b.etag.clone()),
            ..Conditions::default()
        };
        match (blob.get(&conditions).await?, known) {
            (None, Some(known)) => Ok((known, false)),
            (Some(fresh), _) => {
                self.lock().insert(path, fresh.clone());
                Ok((fresh, true))
            }
            (None, None) => unreachable!("a 304 answers only a tag this cache sent"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Blob>> {
        self.blobs.lock().unwrap_or_else(|p| p.into_inner())
    }
}
