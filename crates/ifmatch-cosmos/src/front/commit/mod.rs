//! Every commit of the front: a resource's as it is (`Front::commit`: databases, containers,
//! users and the rest), and a container's documents' with the change feed's entries
//! (`Front::commit_documents`: the feed's counter moved in the same commit, `feeds.rs`), which
//! take their container's turn on this instance and go together when they wait for it, one
//! commit of the backend for them all (`group.rs`; the turns and the line they wait in, `../turns.rs`).

mod group;

use ifmatch_table::{Change, Entity, EntityKey, Expected, TableError, Tables, Value};

use super::turns::{Member, Turn};
use super::{Front, Policies};
use crate::charge;
use crate::document;
use crate::failure::{Failure, backend, not_found};
use crate::feed_entries::{FEED, NUMBER, counter_key, entry_key, number_of};
use crate::unique;
use crate::versions;

impl<T: Tables> Front<'_, T> {
    pub(crate) async fn commit(&self, table: &str, changes: &[Change]) -> Result<(), Committed> {
        let mut result = self.tables.commit(table, changes).await;
        if matches!(result, Err(TableError::TableNotFound(_))) && table.starts_with('#') {
            // The metadata tables are made on first use.
            self.tables
                .create_table(table)
                .await
                .map_err(|e| Committed::Failed(backend(e)))?;
            result = self.tables.commit(table, changes).await;
        }
        match result {
            Ok(()) => Ok(()),
            Err(TableError::Conflict { .. }) => Err(Committed::Conflict),
            Err(TableError::TableNotFound(_)) => Err(Committed::Failed(not_found())),
            Err(error) => Err(Committed::Failed(backend(error))),
        }
    }

    /// [`Front::commit`] of changes made once, not decided again: a lost race is `lost`'s
    /// answer (the database or container is there already, or gone, or changed).
    pub(crate) async fn commit_resource(
        &self,
        table: &str,
        changes: &[Change],
        lost: fn() -> Failure,
    ) -> Result<(), Failure> {
        match self.commit(table, changes).await {
            Ok(()) => Ok(()),
            Err(Committed::Conflict) => Err(lost()),
            Err(Committed::Failed(failure)) => Err(failure),
        }
    }

    /// Commits changes to documents, each with what it replaces (`None`: nothing), with the
    /// change feed's entries: each document written gets the next number of the counter and an
    /// entry under it, each document replaced or deleted loses its entry, and the counter moves,
    /// all in the one commit, with the unique keys' entries the documents take and leave.
    /// Another instance's commit that took the counter's numbers first makes this one start
    /// over (the documents' own checks still decide); on this instance the commits of a
    /// container take turns, so they never race for the counter (each numbers from the counter
    /// the one before it wrote, which the turn keeps), and those that wait for the turn are
    /// committed together (`group.rs`). A unique value held by an item past its
    /// time to live is freed (that item removed) and the commit tried again.
    /// Each document written is charged a write of its size (of the one deleted, a delete).
    pub(crate) async fn commit_documents(
        &self,
        table: &str,
        policies: &Policies,
        changes: &[(Change, Option<&Entity>)],
    ) -> Result<(), Committed> {
        self.commit_checked(table, policies, changes, &[]).await
    }

    /// [`Self::commit_documents`] with `checks`: changes written as they are, with no entry
    /// in the feed (a script's documents it read, each rewritten as read; its partition's
    /// fence), whose failure is a `Conflict` of the commit.
    pub(crate) async fn commit_checked(
        &self,
        table: &str,
        policies: &Policies,
        changes: &[(Change, Option<&Entity>)],
        checks: &[Change],
    ) -> Result<(), Committed> {
        let moves = unique::moves(&policies.unique, changes).map_err(Committed::Failed)?;
        let member = Member {
            policies,
            changes: changes.iter().map(|(c, b)| (c, *b)).collect(),
            checks,
            moves: &moves,
        };
        self.commit_in_turn(table, &member).await?;
        for (change, before) in changes {
            let written = change.write.as_ref().or(*before);
            self.meter
                .add(charge::write(written.map_or(0, document::stored_len)));
        }
        Ok(())
    }

    /// One try of the commits of `members` together (their turn taken).
    async fn commit_once(
        &self,
        table: &str,
        members: &[Member<'_>],
        turn: &mut Turn<'_>,
    ) -> Result<Attempt, Failure> {
        // As the last commit under this turn wrote it, if that was this container's; else as
        // stored.
        let counter = match turn.take() {
            Some((kept, counter)) if kept == table => Some(counter),
            _ => self.get(table, FEED, "").await?,
        };
        let last = counter.as_ref().and_then(number_of).unwrap_or(0);
        let at = (self.clock).stamp(self.now, counter.as_ref().map(|c| c.timestamp));
        let mut number = last;
        // The changes, and whose each is (the counter's: none).
        let (mut all, mut whose) = (Vec::new(), Vec::new());
        let mut entries = Vec::new();
        for (index, member) in members.iter().enumerate() {
            let policies = member.policies;
            for &(change, before) in &member.changes {
                let mut change = change.clone();
                if policies.versions.is_some() && change.write.is_none() {
                    number += 1;
                    let expired = policies.expiring;
                    let entry = versions::entry(number, &change.key, None, before, expired, at);
                    entries.push((index, entry));
                }
                if let Some(old) = before.and_then(number_of) {
                    let removal = Change {
                        key: (FEED.to_owned(), entry_key(old)),
                        expected: Expected::Anything,
                        write: None,
                    };
                    entries.push((index, removal));
                }
                if let Some(entity) = &mut change.write {
                    number += 1;
                    entity
                        .properties
                        .insert(NUMBER.to_owned(), Value::Int64(number));
                    let names = [
                        ("pk", Value::String(entity.partition_key.clone())),
                        ("id", Value::String(entity.row_key.clone())),
                    ];
                    let key = entry_key(number);
                    let entry = Change {
                        key: (FEED.to_owned(), key.clone()),
                        expected: Expected::Absent,
                        write: Some(Entity::new(FEED, &key, entity.timestamp, names)),
                    };
                    entries.push((index, entry));
                }
                if policies.versions.is_some()
                    && let Some(written) = &change.write
                {
                    let entry =
                        versions::entry(number, &change.key, Some(written), before, false, at);
                    entries.push((index, entry));
                }
                all.push(change);
                whose.push(Some(index));
            }
            all.extend(member.checks.iter().cloned());
            whose.extend(member.checks.iter().map(|_| Some(index)));
        }
        // The counter comes after the documents, so that a conflict of both is the
        // documents' (`Conflict` names the first change that failed); the unique keys'
        // entries come last.
        let moved = Entity::new(FEED, "", at, [(NUMBER, Value::Int64(number))]);
        all.push(Change {
            key: counter_key(),
            expected: counter
                .as_ref()
                .map_or(Expected::Absent, |c| Expected::Version(c.timestamp)),
            write: Some(moved.clone()),
        });
        whose.push(None);
        for (index, entry) in entries {
            all.push(entry);
            whose.push(Some(index));
        }
        let unique_from = all.len();
        for (index, member) in members.iter().enumerate() {
            all.extend(member.moves.iter().cloned());
            whose.extend(member.moves.iter().map(|_| Some(index)));
        }
        let committed = self.tables.commit(table, &all).await;
        // Kept only when written: a commit that failed may have met another's counter.
        **turn = committed.is_ok().then(|| (table.to_owned(), moved));
        match committed {
            Ok(()) => Ok(Attempt::Done),
            Err(TableError::Conflict { index, .. }) => Ok(match whose[index] {
                None => Attempt::Counter,
                Some(member) if index >= unique_from => {
                    Attempt::Taken(member, all[index].key.clone())
                }
                Some(member) => Attempt::Conflict(member),
            }),
            Err(TableError::TableNotFound(_)) => Err(not_found()),
            Err(error) => Err(backend(error)),
        }
    }

    /// Frees the unique keys' entry `entry` when the item holding it is past its time to live,
    /// by removing that item (as the background sweep would): whether the entry may be free
    /// now (then the commit that wanted it tries again). Under `turn`, its caller's.
    async fn free(
        &self,
        table: &str,
        policies: &Policies,
        entry: &EntityKey,
        turn: &mut Turn<'_>,
    ) -> Result<bool, Committed> {
        let read = |partition: String, id: String| async move {
            self.get(table, &partition, &id)
                .await
                .map_err(Committed::Failed)
        };
        let Some(held) = read(entry.0.clone(), entry.1.clone()).await? else {
            return Ok(true);
        };
        let Some((partition, id)) = unique::holder(&held) else {
            return Ok(false);
        };
        let Some(holder) = read(partition, id).await? else {
            return Ok(false);
        };
        if !crate::ttl::expired(policies.ttl, &holder, crate::ttl::ticks(self.now)) {
            return Ok(false);
        }
        let removal = [(
            Change {
                key: (holder.partition_key.clone(), holder.row_key.clone()),
                expected: Expected::Version(holder.timestamp),
                write: None,
            },
            Some(&holder),
        )];
        let moves = unique::moves(&policies.unique, &removal).map_err(Committed::Failed)?;
        let member = Member {
            policies,
            changes: vec![(&removal[0].0, removal[0].1)],
            checks: &[],
            moves: &moves,
        };
        (self.commit_once(table, &[member], turn).await).map_err(Committed::Failed)?;
        Ok(true)
    }
}

/// How a commit ended, when it did not apply.
pub(crate) enum Committed {
    /// Another write came first.
    Conflict,
    Failed(Failure),
}

/// How one try of a commit ended.
enum Attempt {
    Done,
    /// Another instance moved the feed's counter first.
    Counter,
    /// A document of this member was not as expected.
    Conflict(usize),
    /// A unique keys' entry another document holds, which this member takes.
    Taken(usize, EntityKey),
}
