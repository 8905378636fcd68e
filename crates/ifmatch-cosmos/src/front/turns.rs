//! A container's commits on this instance. They take turns: each numbers its changes from the
//! change feed's counter, which the one before it moved (`commit/mod.rs`). Those that wait
//! for the turn are committed together by whichever of them takes it, in one commit of the
//! backend (one transaction, one fsync on the local disk): a group commit. A commit joins a
//! group only with commits whose keys it shares none of, so that each check in the group is
//! its member's own and a check that fails names one member, which leaves the group.
//!
//! A waiting commit is owned here, so that another request may carry it. When the request
//! carrying a group is dropped before the group's commit was sent, its members wait again;
//! when it is dropped with the commit in flight, they learn that their outcome is unknown (the
//! server runs every change to its end, so that this is for a Worker's cancelled request).

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

use futures_channel::oneshot;
use ifmatch_azure::Turns;
use ifmatch_table::{Change, Entity};

use crate::failure::Failure;
use crate::policies::Policies;

/// The most commits a group carries, and the most changes (a transactional batch is 100
/// documents).
const MOST_MEMBERS: usize = 64;
const MOST_CHANGES: usize = 1000;

/// This instance's commits to containers: their turns, each holding the change feed's counter
/// as the last commit under it wrote it, and those waiting for them.
#[derive(Debug, Default)]
pub(crate) struct Commits {
    turns: Turns<Kept>,
    /// One entry a request at most, so bounded as the requests in flight are.
    waiting: Mutex<Vec<Waiting>>,
}

/// What a turn keeps: the change feed's counter of the container whose commit last took it
/// (its table, and the counter as that commit wrote it), so that the next commit numbers its
/// changes without reading it first. A counter another instance (or a deletion of the
/// container) moved since fails that commit's check of it, and the commit reads it again.
/// One container a stripe of turns, so bounded.
pub(crate) type Kept = Option<(String, Entity)>;

/// A container's turn, held: what it keeps is its holder's to read and change.
pub(crate) type Turn<'a> = futures_util::lock::MutexGuard<'a, Kept>;

/// A commit waiting for its container's turn.
pub(crate) struct Waiting {
    pub(crate) table: String,
    pub(crate) policies: Policies,
    /// The changes, each with what it replaces.
    pub(crate) changes: Vec<(Change, Option<Entity>)>,
    /// Changes written as they are, with no feed entry (`Front::commit_checked`).
    pub(crate) checks: Vec<Change>,
    /// The unique keys' entries the changes take and leave.
    pub(crate) moves: Vec<Change>,
    answer: oneshot::Sender<Grouped>,
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiting")
            .field("table", &self.table)
            .field("changes", &self.changes.len())
            .finish_non_exhaustive()
    }
}

/// How a group ended for one of its commits.
pub(crate) enum Grouped {
    /// Committed.
    Done,
    /// A document was not as expected.
    Conflict,
    /// The backend failed.
    Failed(Failure),
    /// Left the group (a unique value taken, the group out of tries): to commit alone.
    Alone,
}

impl Waiting {
    /// A commit to wait with (a copy of `member`'s), and where its outcome will come.
    pub(crate) fn new(table: &str, member: &Member<'_>) -> (Self, oneshot::Receiver<Grouped>) {
        let (answer, outcome) = oneshot::channel();
        let changes = (member.changes.iter())
            .map(|(change, before)| ((*change).clone(), before.cloned()))
            .collect();
        let waiting = Self {
            table: table.to_owned(),
            policies: member.policies.clone(),
            changes,
            checks: member.checks.to_vec(),
            moves: member.moves.to_vec(),
            answer,
        };
        (waiting, outcome)
    }

    /// Tells the commit's request how it ended (if it still waits).
    pub(crate) fn answer(self, outcome: Grouped) {
        let _ = self.answer.send(outcome);
    }

    fn keys(&self) -> impl Iterator<Item = &(String, String)> {
        let changes = self.changes.iter().map(|(change, _)| &change.key);
        let checks = self.checks.iter().map(|change| &change.key);
        changes
            .chain(checks)
            .chain(self.moves.iter().map(|change| &change.key))
    }
}

impl Commits {
    /// Waits for this instance's turn at `table`.
    pub(crate) async fn turn(&self, table: &str) -> Turn<'_> {
        self.turns.take(table).await
    }

    /// The turn at `table` when no one has it and no commit waits for it.
    pub(crate) fn free_turn(&self, table: &str) -> Option<Turn<'_>> {
        let turn = self.turns.try_take(table)?;
        let waiting = self.waiting();
        (!waiting.iter().any(|w| w.table == table)).then_some(turn)
    }

    /// Puts `commit` in line for its container's turn.
    pub(crate) fn wait(&self, commit: Waiting) {
        self.waiting().push(commit);
    }

    /// The commits of `table` that wait, oldest first, as many as a group carries, none sharing
    /// a key with another (the rest wait for the next group). Taken under the turn.
    pub(crate) fn group(&self, table: &str) -> Group<'_> {
        let mut waiting = self.waiting();
        let (mut members, mut keys, mut changes) = (Vec::new(), HashSet::new(), 0);
        let mut index = 0;
        while index < waiting.len() && members.len() < MOST_MEMBERS {
            let commit = &waiting[index];
            let size = commit.changes.len() + commit.checks.len() + commit.moves.len();
            let fits = members.is_empty() || changes + size <= MOST_CHANGES;
            if commit.table != table || !fits || commit.keys().any(|key| keys.contains(key)) {
                index += 1;
                continue;
            }
            keys.extend(commit.keys().cloned());
            changes += size;
            members.push(waiting.remove(index));
        }
        Group {
            commits: self,
            members,
            sent: false,
        }
    }

    fn waiting(&self) -> MutexGuard<'_, Vec<Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Commits taken to be committed together: put back in line if dropped before their commit
/// was sent; if dropped with it in flight, each is told nothing (their outcome is unknown).
#[derive(Debug)]
pub(crate) struct Group<'a> {
    commits: &'a Commits,
    pub(crate) members: Vec<Waiting>,
    /// Whether the backend has the group's commit.
    pub(crate) sent: bool,
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        if !self.sent && !self.members.is_empty() {
            self.commits.waiting().append(&mut self.members);
        }
    }
}

/// One commit of those committed together.
pub(crate) struct Member<'a> {
    pub(crate) policies: &'a Policies,
    /// The changes, each with what it replaces.
    pub(crate) changes: Vec<(&'a Change, Option<&'a Entity>)>,
    /// Changes written as they are, with no feed entry (`Front::commit_checked`).
    pub(crate) checks: &'a [Change],
    /// The unique keys' entries the changes take and leave.
    pub(crate) moves: &'a [Change],
}

impl<'a> Member<'a> {
    pub(crate) fn of(waiting: &'a Waiting) -> Self {
        Self {
            policies: &waiting.policies,
            changes: (waiting.changes.iter())
                .map(|(c, b)| (c, b.as_ref()))
                .collect(),
            checks: &waiting.checks,
            moves: &waiting.moves,
        }
    }
}
