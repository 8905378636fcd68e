//! The change feed: read in the order commits landed, and moved by every commit that writes
//! documents (where it lives: `feed_entries.rs`).
//!
//! The counter is an entity of the same partition (row key `""`, before every entry), and every
//! commit that writes documents also moves it from the number it read to the numbers it gives,
//! as one more compare-and-swap of the same atomic commit. So numbers are given in the order
//! commits land, on every backend and across every instance that writes the container: a
//! reader that has seen entry `n` has seen every entry below it, and one that resumes after `n`
//! misses no change. A document holds the number of its entry (`~feed`), so the commit that
//! replaces or deletes it removes that entry: the feed keeps one entry per document.

use std::pin::pin;
use std::time::UNIX_EPOCH;

use futures_channel::oneshot;
use futures_util::future::{Either, select};
use http::StatusCode;
use ifmatch_azure::swap::Attempts;
use ifmatch_table::{
    Change, DateTime, Entity, EntityKey, Expected, Scan, TableError, Tables, Value, satisfies,
};
use serde_json::json;

use super::answers::{Answered, Done};
use super::documents::document_json;
use super::{Asked, Committed, Front, Policies, Scope, documents_table, rid};

use crate::charge;
use crate::commits::{Group, Grouped, Member, Waiting};
use crate::document;
use crate::failure::{Failure, backend, bad_request, not_found, raced, unknown_outcome};
use crate::feed_entries::{FEED, NUMBER, counter_key, entry_key, number_of};
use crate::query::SCAN_BUDGET;
use crate::unique;
use crate::versions::{self, VERSIONS};

impl<T: Tables> Front<'_, T> {
    /// The change feed: the documents written since the position `If-None-Match` names
    /// (none: from the beginning; `*`: from now; else the `etag` of an earlier page), each
    /// in its latest version, in the order their commits landed; 304 when none is.
    pub(crate) async fn changes(&self, db: &str, coll: &str, asked: &Asked<'_>) -> Answered {
        let container = self.container(db, coll).await?;
        let (default, now) = (crate::ttl::of(&container), crate::ttl::ticks(self.now));
        let all_versions = asked
            .header("a-im")
            .is_some_and(|v| v.eq_ignore_ascii_case("full-fidelity feed"));
        if all_versions && versions::of(&container).is_none() {
            return Err(bad_request(
                "The all-versions-and-deletes change feed is the container's when its changeFeedPolicy has a retentionDuration (minutes).",
            ));
        }
        let log = if all_versions { VERSIONS } else { FEED };
        // The SDKs scope a feed to a partition key by a range of effective partition keys
        // (its hash): a point range, both ends the key's.
        let range = match (asked.header("x-ms-start-epk"), asked.header("x-ms-end-epk")) {
            (Some(start), Some(end)) => {
                Some((start.to_ascii_uppercase(), end.to_ascii_uppercase()))
            }
            // A range named by its id (the SDKs' feed of a whole range): its keys.
            (None, None) => {
                (self.range_named(db, coll, asked).await?).map(|range| (range.min, range.max))
            }
            _ => {
                return Err(bad_request(
                    "x-ms-start-epk and x-ms-end-epk come together.",
                ));
            }
        };
        let in_range = |stored: &str| {
            let Some((start, end)) = &range else {
                return true;
            };
            let key = document::stored_effective(stored);
            key >= *start && (key < *end || (start == end && key == *end))
        };
        let table = documents_table(db, coll);
        // Documents written before `since` are not news (a start from a point in time).
        let mut since = None;
        let after = match asked.header("if-none-match").map(str::trim) {
            None => {
                if let Some(date) = asked.header("if-modified-since") {
                    let date = httpdate::parse_http_date(date)
                        .map_err(|_| bad_request("If-Modified-Since is not an HTTP date."))?;
                    let date = date.duration_since(UNIX_EPOCH).unwrap_or_default();
                    since = Some(DateTime::from_unix(date.as_secs() as i64, 0));
                }
                0
            }
            Some("*") => self.last_number(&table).await?,
            // A position is one the feed can go on from: the next, one past it, is a number.
            Some(tag) => (tag.trim_matches('"').parse::<i64>().ok())
                .filter(|n| (0..i64::MAX).contains(n))
                .ok_or_else(|| {
                    bad_request(format!(
                        "The change feed's If-None-Match is *, or an etag of the feed: a number from 0 to {}.",
                        i64::MAX - 1
                    ))
                })?,
        };
        let partition = match asked.header("x-ms-documentdb-partitionkey") {
            Some(header) => Some(Scope::of_header(&container, header)?),
            None => None,
        };
        let in_partition = |pk: &str| match &partition {
            None => true,
            Some(Scope::Key(stored)) => pk == stored,
            Some(Scope::Prefix(start)) => pk.starts_with(start.as_str()),
        };
        let size = asked.page_size()?;
        let mut position = after;
        // Entries of other partitions count too: a page reads at most the budget, and its etag
        // says how far it got, so the next goes on from there. (Not so for a start from a point
        // in time: the SDKs resume from the etag alone, without `If-Modified-Since`, so its
        // first page reads on until it finds news or the end.)
        let mut scanned = 0;
        let mut documents = Vec::new();
        'pages: loop {
            let from = entry_key(position + 1);
            let scan = Scan {
                from: Some((log, &from)),
                partition: Some(log),
                limit: size,
            };
            let entries = match self.tables.scan(&table, scan).await {
                Ok(entries) => entries,
                Err(TableError::TableNotFound(_)) => Vec::new(),
                Err(error) => return Err(backend(error)),
            };
            let full = entries.len() == size;
            scanned += entries.len();
            self.meter.examined(entries.len());
            for entry in &entries {
                let Ok(number) = entry.row_key.parse::<i64>() else {
                    continue;
                };
                position = number;
                let text = |name: &str| match entry.properties.get(name) {
                    Some(Value::String(s)) => s.clone(),
                    _ => String::new(),
                };
                let pk = text("pk");
                if !in_partition(&pk)
                    || !in_range(&pk)
                    || since.is_some_and(|since| entry.timestamp < since)
                {
                    continue;
                }
                if all_versions {
                    documents.extend(versions::item(entry, |e| document_json(db, coll, e)));
                    if documents.len() == size {
                        break 'pages;
                    }
                    continue;
                }
                // The entry is the document's latest (a later write would have moved it), but
                // the document is read again: it may have been written since the scan.
                if let Some(stored) = self.get(&table, &pk, &text("id")).await?
                    && number_of(&stored) == Some(number)
                {
                    let doc = document_json(db, coll, &stored);
                    if crate::ttl::past(default, stored.timestamp, doc.get("ttl"), now) {
                        continue;
                    }
                    documents.push(doc);
                    if documents.len() == size {
                        break 'pages;
                    }
                }
            }
            if !full || (since.is_none() && scanned >= SCAN_BUDGET) {
                break;
            }
        }
        let etag = Some(format!("\"{position}\""));
        if documents.is_empty() {
            let mut done = Done::empty(StatusCode::NOT_MODIFIED, None);
            done.etag = etag;
            return Ok(done);
        }
        let count = documents.len();
        let mut done = Done::of(
            StatusCode::OK,
            json!({ "_rid": rid(&[db, coll]), "Documents": documents, "_count": count }),
            None,
        );
        done.etag = etag;
        done.count = Some(count);
        Ok(done)
    }

    /// The last number the counter of `table` gave (0: none yet).
    async fn last_number(&self, table: &str) -> Result<i64, Failure> {
        let counter = self.get(table, FEED, "").await?;
        Ok(counter.as_ref().and_then(number_of).unwrap_or(0))
    }

    /// Commits changes to documents, each with what it replaces (`None`: nothing), with the
    /// change feed's entries: each document written gets the next number of the counter and an
    /// entry under it, each document replaced or deleted loses its entry, and the counter moves,
    /// all in the one commit, with the unique keys' entries the documents take and leave.
    /// Another instance's commit that took the counter's numbers first makes this one start
    /// over (the documents' own checks still decide); on this instance the commits of a
    /// container take turns, so they never race for the counter, and those that wait for the
    /// turn are committed together (`commits.rs`). A unique value held by an item past its
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

    async fn commit_in_turn(&self, table: &str, member: &Member<'_>) -> Result<(), Committed> {
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
        let _turn = {
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
                    self.commit_group(table, group).await;
                }
                Err(canceled) => return unknown(canceled),
            }
        }
    }

    /// Commits `group` (its turn taken), telling each member how it ended: a member whose
    /// check fails leaves it (a document not as expected: `Conflict`; a unique value taken:
    /// to commit alone), and the others are committed again.
    async fn commit_group(&self, table: &str, mut group: Group<'_>) {
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
            let attempt = self.commit_once(table, &members).await;
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

    /// [`Self::commit_documents`] of `member` with no one else, `_turn` taken.
    async fn commit_alone(
        &self,
        table: &str,
        member: &Member<'_>,
        _turn: impl Drop,
    ) -> Result<(), Committed> {
        let mut attempts = Attempts::default();
        while attempts.another() {
            let attempt = self.commit_once(table, std::slice::from_ref(member));
            match attempt.await.map_err(Committed::Failed)? {
                Attempt::Done => return Ok(()),
                Attempt::Counter => continue,
                Attempt::Conflict(_) => return Err(Committed::Conflict),
                Attempt::Taken(_, entry) => {
                    if !self.free(table, member.policies, &entry).await? {
                        return Err(Committed::Failed(unique::violation()));
                    }
                }
            }
        }
        Err(Committed::Failed(raced()))
    }

    /// One try of the commits of `members` together (their turn taken).
    async fn commit_once(&self, table: &str, members: &[Member<'_>]) -> Result<Attempt, Failure> {
        let counter = self.get(table, FEED, "").await?;
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
        all.push(Change {
            key: counter_key(),
            expected: counter
                .as_ref()
                .map_or(Expected::Absent, |c| Expected::Version(c.timestamp)),
            write: Some(Entity::new(FEED, "", at, [(NUMBER, Value::Int64(number))])),
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
        match self.tables.commit(table, &all).await {
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
    /// now (then the commit that wanted it tries again).
    async fn free(
        &self,
        table: &str,
        policies: &Policies,
        entry: &EntityKey,
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
        (self.commit_once(table, &[member]).await).map_err(Committed::Failed)?;
        Ok(true)
    }
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
