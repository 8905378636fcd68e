//! The commits of a container's documents that wait for its turn on this instance, committed
//! together by whichever of them takes it: a group commit (the line: `../turns.rs`).

use std::pin::pin;

use futures_channel::oneshot;
use futures_util::future::{Either, select};
use ifmatch_azure::swap::Attempts;
use ifmatch_table::{Expected, Tables, satisfies};

use super::{Attempt, Committed};
use crate::failure::{Failure, raced, unknown_outcome};
use crate::front::Front;
use crate::front::turns::{Group, Grouped, Member, Turn, Waiting};
use crate::unique;

impl<T: Tables> Front<'_, T> {
    pub(super) async fn commit_in_turn(
        &self,
        table: &str,
        member: &Member<'_>,
    ) -> Result<(), Committed> {
        // No one else at it: at once, nothing copied.
        if let Some(turn) = self.commits.free_turn(table) {
            return self.commit_alone(table, member, turn).await;
        }
        let (waiting, outcome) = Waiting::new(table, member);
        self.commits.wait(waiting);
        match self.commit_waiting(table, outcome).await {
            Grouped::Done => Ok(()),
            Grouped::Conflict => Err(Committed::Conflict),
            Grouped::Failed(failure) => Err(Committed::Failed(failure)),
            Grouped::Alone => {
                let turn = self.commits.turn(table).await;
                self.commit_alone(table, member, turn).await
            }
        }
    }

    /// How a commit put in line ended: committed in the group of another request, or, when
    /// its request takes the turn first, in the group this one commits (each group under the
    /// turn, oldest first, until this commit's is done).
    async fn commit_waiting(
        &self,
        table: &str,
        mut outcome: oneshot::Receiver<Grouped>,
    ) -> Grouped {
        let unknown = |_| Grouped::Failed(unknown_outcome());
        let mut turn = {
            let turn = pin!(self.commits.turn(table));
            match select(turn, &mut outcome).await {
                Either::Left((turn, _)) => turn,
                Either::Right((ended, _)) => return ended.unwrap_or_else(unknown),
            }
        };
        loop {
            match outcome.try_recv() {
                Ok(Some(ended)) => return ended,
                Ok(None) => {
                    let group = self.commits.group(table);
                    // Not reached: this commit waits in line until a group takes it.
                    if group.members.is_empty() {
                        return Grouped::Alone;
                    }
                    self.commit_group(table, group, &mut turn).await;
                }
                Err(canceled) => return unknown(canceled),
            }
        }
    }

    /// Commits `group` (its turn taken), telling each member how it ended: a member whose
    /// check fails leaves it (a document not as expected: `Conflict`; a unique value taken:
    /// to commit alone), and the others are committed again.
    async fn commit_group(&self, table: &str, mut group: Group<'_>, turn: &mut Turn<'_>) {
        // A member whose document another commit wrote while it waited is refused by what is
        // stored now, not by a transaction of the backend's (and its sync) of its own: on one
        // document, every loser of a race would take the turn for one in turn.
        match self.outdated(table, &group.members).await {
            Ok(outdated) => (outdated.into_iter().rev())
                .for_each(|member| group.members.remove(member).answer(Grouped::Conflict)),
            Err(failure) => {
                let failed = |m: Waiting| m.answer(Grouped::Failed(failure.clone()));
                group.members.drain(..).for_each(failed);
            }
        }
        let mut attempts = Attempts::default();
        while !group.members.is_empty() && attempts.another() {
            let members: Vec<_> = group.members.iter().map(Member::of).collect();
            group.sent = true;
            let attempt = self.commit_once(table, &members, turn).await;
            group.sent = false;
            match attempt {
                Ok(Attempt::Done) => {
                    group
                        .members
                        .drain(..)
                        .for_each(|m| m.answer(Grouped::Done));
                }
                Ok(Attempt::Counter) => {}
                Ok(Attempt::Conflict(member)) => {
                    group.members.remove(member).answer(Grouped::Conflict);
                }
                Ok(Attempt::Taken(member, _)) => {
                    group.members.remove(member).answer(Grouped::Alone);
                }
                Err(failure) => {
                    let failed = |m: Waiting| m.answer(Grouped::Failed(failure.clone()));
                    group.members.drain(..).for_each(failed);
                }
            }
        }
        group
            .members
            .drain(..)
            .for_each(|m| m.answer(Grouped::Alone));
    }

    /// The members (their places, in order) of which a change expects another document than
    /// the one stored now: point reads, which the backend's commit would only repeat.
    async fn outdated(&self, table: &str, members: &[Waiting]) -> Result<Vec<usize>, Failure> {
        let mut outdated = Vec::new();
        for (index, member) in members.iter().enumerate() {
            let changes = (member.changes.iter().map(|(change, _)| change)).chain(&member.checks);
            for change in changes.filter(|c| c.expected != Expected::Anything) {
                let found = self.get(table, &change.key.0, &change.key.1).await?;
                if !satisfies(change.expected, found.as_ref()) {
                    outdated.push(index);
                    break;
                }
            }
        }
        Ok(outdated)
    }

    /// [`Self::commit_documents`] of `member` with no one else, `turn` taken.
    async fn commit_alone(
        &self,
        table: &str,
        member: &Member<'_>,
        mut turn: Turn<'_>,
    ) -> Result<(), Committed> {
        let mut attempts = Attempts::default();
        while attempts.another() {
            let attempt = self.commit_once(table, std::slice::from_ref(member), &mut turn);
            match attempt.await.map_err(Committed::Failed)? {
                Attempt::Done => return Ok(()),
                Attempt::Counter => continue,
                Attempt::Conflict(_) => return Err(Committed::Conflict),
                Attempt::Taken(_, entry) => {
                    if !self.free(table, member.policies, &entry, &mut turn).await? {
                        return Err(Committed::Failed(unique::violation()));
                    }
                }
            }
        }
        Err(Committed::Failed(raced()))
    }
}
