//! The background removal of what a container keeps no longer: its items past their time to
//! live (`ttl.rs`) and its versions past their retention (`versions.rs`). A sweep reads a
//! bounded number of stored items an account, going on where the last stopped (the place is
//! kept in the account's tables, so any instance, or a Worker that keeps nothing between
//! events, goes on from it); each removal is a commit that compares and swaps the version it
//! read, so what was written meanwhile stays.

use ifmatch_table::{Change, Entity, Expected, Scan, TableError, Tables};
use serde_json::{Map, Value as Json};

use super::commit::Committed;
use super::{CONTAINERS, Front, Policies, Rules, documents_table, key};
use crate::document::json_of;
use crate::failure::{Failure, backend};
use crate::feed_entries::documents_only;
use crate::ttl::{expired, of, ticks};
use crate::versions::{self, VERSIONS};

/// How many versions one commit of the pruning removes at most.
const PRUNE_CHUNK: usize = 100;

/// The account's table that holds where the background removal of items past their time
/// stands: the container it is in (database, id) and the key it goes on from.
const SWEEP: &str = "#sweep";

/// Where a sweep stands, as kept in [`SWEEP`].
#[derive(Debug, Default, Clone, PartialEq)]
struct Sweep {
    container: Option<(String, String)>,
    from: Option<(String, String)>,
}

impl Sweep {
    fn read(entity: Option<&Entity>) -> Self {
        let json = entity.map(json_of).unwrap_or_default();
        let pair = |name: &str| {
            let pair = json.get(name)?.as_array()?;
            Some((
                pair.first()?.as_str()?.to_owned(),
                pair.get(1)?.as_str()?.to_owned(),
            ))
        };
        Self {
            container: pair("container"),
            from: pair("from"),
        }
    }

    fn json(&self) -> Map<String, Json> {
        let pair = |pair: &Option<(String, String)>| {
            pair.as_ref()
                .map_or(Json::Null, |(a, b)| Json::from(vec![a.clone(), b.clone()]))
        };
        let mut json = Map::new();
        json.insert("container".into(), pair(&self.container));
        json.insert("from".into(), pair(&self.from));
        json
    }
}

impl<T: Tables> Front<'_, T> {
    /// Removes the items past their time of the account's containers that have a time to
    /// live, reading at most about `budget` stored items from where the last sweep stopped
    /// (kept in the account's tables, so a sweep goes on where the last one stopped on any
    /// instance, and in a Worker that keeps nothing between events), then past the last
    /// container back to the first. Each removal is a delete that compares and swaps the
    /// version read (a write that came meanwhile stays) and moves the item's unique keys and
    /// change feed entry as a delete does. Answers how many it removed.
    pub(crate) async fn sweep(&self, budget: usize) -> Result<usize, Failure> {
        let kept = self.get(SWEEP, "", "").await?;
        let mut at = Sweep::read(kept.as_ref());
        let was = at.clone();
        let removed = self.sweep_from(&mut at, budget).await? + self.prune_versions(budget).await?;
        if at != was {
            let change = Change {
                key: key("", ""),
                expected: kept.map_or(Expected::Absent, |k| Expected::Version(k.timestamp)),
                write: Some(self.entity("", "", None, &at.json())),
            };
            // Another sweep that moved it first has it go on from there.
            match self.commit(SWEEP, &[change]).await {
                Ok(()) | Err(Committed::Conflict) => {}
                Err(Committed::Failed(failure)) => return Err(failure),
            }
        }
        Ok(removed)
    }

    async fn sweep_from(&self, at: &mut Sweep, budget: usize) -> Result<usize, Failure> {
        let mut containers = self.scan_all(CONTAINERS, None).await?;
        containers.retain(|container| of(container).is_some());
        let place = |c: &Entity| (c.partition_key.clone(), c.row_key.clone());
        let mut index = (containers.iter())
            .position(|c| at.container.as_ref().is_none_or(|was| place(c) >= *was))
            .unwrap_or(containers.len());
        if containers.get(index).map(place) != at.container {
            at.from = None;
        }
        let now = ticks(self.now);
        let (mut read, mut removed) = (0, 0);
        while read < budget && index < containers.len() {
            let container = &containers[index];
            let policies = Policies {
                expiring: true,
                ..Rules::of(container).policies
            };
            let table = documents_table(&container.partition_key, &container.row_key);
            let limit = (budget - read).min(1_000);
            let scan = Scan {
                from: at.from.as_ref().map(|(p, r)| (p.as_str(), r.as_str())),
                partition: None,
                limit: limit + 1,
            };
            let mut chunk = self.scan(&table, scan).await?;
            let ended = documents_only(&mut chunk);
            let next = (!ended && chunk.len() > limit).then(|| chunk.remove(limit));
            read += chunk.len().max(1);
            for item in chunk.iter().filter(|item| expired(policies.ttl, item, now)) {
                let change = Change {
                    key: key(&item.partition_key, &item.row_key),
                    expected: Expected::Version(item.timestamp),
                    write: None,
                };
                match (self.commit_documents(&table, &policies, &[(change, Some(item))])).await {
                    Ok(()) => removed += 1,
                    // Written again meanwhile: it lives on.
                    Err(Committed::Conflict) => {}
                    Err(Committed::Failed(failure)) => return Err(failure),
                }
            }
            match next {
                Some(item) => at.from = Some((item.partition_key, item.row_key)),
                None => {
                    index += 1;
                    at.from = None;
                }
            }
            at.container = containers.get(index).map(place);
        }
        Ok(removed)
    }
}

impl<T: Tables> Front<'_, T> {
    /// Removes the versions older than their container's retention, at most about `budget`
    /// in each container that keeps them (the oldest come first): what the sweep does for the
    /// all-versions-and-deletes feed. Answers how many it removed.
    pub(crate) async fn prune_versions(&self, budget: usize) -> Result<usize, Failure> {
        let now = ticks(self.now);
        let mut removed = 0;
        for container in self.scan_all(CONTAINERS, None).await? {
            let Some(minutes) = versions::of(&container) else {
                continue;
            };
            let cutoff = now.saturating_sub(minutes.saturating_mul(60 * 10_000_000));
            let table = documents_table(&container.partition_key, &container.row_key);
            // The oldest come first: a chunk at a time, each one commit, until one that is
            // not all old (most sweeps read one entry and stop there).
            let mut pruned = 0;
            while pruned < budget {
                let scan = Scan {
                    from: Some((VERSIONS, "")),
                    partition: Some(VERSIONS),
                    limit: PRUNE_CHUNK,
                };
                let entries = self.scan(&table, scan).await?;
                let whole = entries.len() == PRUNE_CHUNK;
                let old: Vec<Change> = (entries.into_iter())
                    .take_while(|entry| entry.timestamp.ticks() < cutoff)
                    .map(|entry| Change {
                        key: (VERSIONS.to_owned(), entry.row_key),
                        expected: Expected::Version(entry.timestamp),
                        write: None,
                    })
                    .collect();
                let all_old = whole && old.len() == PRUNE_CHUNK;
                if old.is_empty() {
                    break;
                }
                match self.tables.commit(&table, &old).await {
                    Ok(()) => pruned += old.len(),
                    // Another sweep pruned them first.
                    Err(TableError::Conflict { .. }) => break,
                    Err(error) => return Err(backend(error)),
                }
                if !all_old {
                    break;
                }
            }
            removed += pruned;
        }
        Ok(removed)
    }
}
