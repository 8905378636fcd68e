//! A container's conflicts (`/dbs/{db}/colls/{coll}/conflicts`): the writes that two regions
//! of a multi-region account made to one item at once, which its conflict resolution policy
//! did not settle. This server is one region, so there are none: the feed (read or queried)
//! is empty, as a single-region account's is, and a conflict is 404.

use ifmatch_table::Tables;

use super::answers::{Answered, Done};
use super::{Front, rid};
use crate::failure::not_found;

impl<T: Tables> Front<'_, T> {
    /// Read Conflicts, and Query Conflicts (a `POST` of a query): none.
    pub(super) async fn conflicts(&self, db: &str, coll: &str) -> Answered {
        self.container(db, coll).await?;
        Ok(Done::feed(&rid(&[db, coll]), "Conflicts", Vec::new(), None))
    }

    /// Read Conflict, and Delete Conflict: there is none to read or delete.
    pub(super) async fn conflict(&self, db: &str, coll: &str) -> Answered {
        self.container(db, coll).await?;
        Err(not_found())
    }
}
