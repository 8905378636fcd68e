//! A walk of a container's blob records a page at a time (all of them, or those whose names
//! start with a prefix: a blob's snapshots, its deleted selves), so that walking any number of
//! them holds one page.

use crate::record::Record;
use crate::store::{Records, Scan, StoreError};

/// How many records a page holds.
const PAGE: usize = 1000;

/// The blob records of a container whose names start with a prefix, a page at a time.
pub(super) struct BlobPages<'a> {
    container: &'a str,
    prefix: &'a str,
    /// Where the next page starts; `None` once the last was read.
    from: Option<String>,
}

impl<'a> BlobPages<'a> {
    /// Every blob record of the stored container `container`.
    pub(super) fn new(container: &'a str) -> Self {
        Self::under(container, "")
    }

    /// The blob records of the stored container `container` whose names start with `prefix`.
    pub(super) fn under(container: &'a str, prefix: &'a str) -> Self {
        Self {
            container,
            prefix,
            from: Some(String::new()),
        }
    }

    /// The next page, in name order; `None` after the last.
    pub(super) async fn next<R: Records>(
        &mut self,
        records: &R,
    ) -> Result<Option<Vec<(String, Record)>>, StoreError> {
        let Some(from) = self.from.take() else {
            return Ok(None);
        };
        let scan = Scan {
            container: self.container,
            prefix: self.prefix,
            from: &from,
            limit: PAGE,
        };
        let page = records.list(scan).await?;
        if page.len() == PAGE {
            self.from = page.last().map(|(name, _)| format!("{name}\0"));
        }
        Ok((!page.is_empty()).then_some(page))
    }

    /// The next page as [`BlobPages::next`] reads it, but `None` too once the container is
    /// gone: a sweep's walk ends there.
    pub(super) async fn next_while_there<R: Records>(
        &mut self,
        records: &R,
    ) -> Result<Option<Vec<(String, Record)>>, StoreError> {
        match self.next(records).await {
            Err(StoreError::ContainerNotFound) => Ok(None),
            other => other,
        }
    }
}
