//! A queue's messages, in the table of their queue's generation, each as two entities changed
//! together in one compare-and-swap:
//!
//! - under partition `v`, the message itself, keyed by the instant it is next visible and its
//!   id (`{microseconds:020}{id}`), so that Get Messages reads the visible ones first and stops
//!   at the first that is not: its cost is the messages it answers, not the ones stored;
//! - under partition `i`, keyed by its id, where it is (its `v` key) and its pop receipt, so
//!   that Update and Delete Message find it by the id and receipt the client holds.
//!
//! The pop receipt is the message's ETag and the visibility timeout its lease: Get Messages
//! moves each message it answers to its new visible instant with a new receipt, in a
//! compare-and-swap against the entity it read, so two consumers never both get one message
//! while it is invisible; Update and Delete Message must carry the latest receipt (a stale one
//! is 404 `MessageNotFound`, as Azure's reference says; Azurite answers 400
//! `PopReceiptMismatch`). A message past its time to live is gone for every operation
//! and its entities are removed by the next Get Messages that meets it.

use std::time::{SystemTime, UNIX_EPOCH};

use ifmatch_azure::Env;
use ifmatch_table::{Change, DateTime, Entity, Expected, Scan, TableError, Tables, Value};

use crate::failure::{ErrorCode, Failure, Result};

/// The largest message text, in bytes: 64 KiB.
pub const MAX_MESSAGE: usize = 64 << 10;
/// The partition of the messages, by the instant they are next visible.
const VISIBLE: &str = "v";
/// The partition of the messages' places, by id.
const INDEX: &str = "i";
/// Messages past their time a Get Messages removes at most, besides those it answers.
const MAX_EXPIRED: usize = 256;
/// Stored messages one Get or Peek Messages reads at most: however many past their time lie
/// before the visible ones, a call's cost is bounded (a Get removes some of them each time).
const MAX_READ: usize = 4096;
/// The most messages counted for `x-ms-approximate-messages-count`.
pub const MAX_COUNTED: usize = 100_000;

/// A message as an answer gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its id.
    pub id: String,
    /// Its text.
    pub text: String,
    /// When it was put, in microseconds since the Unix epoch.
    pub inserted: i64,
    /// When it expires (`i64::MAX`: never).
    pub expires: i64,
    /// When it is next visible.
    pub visible: i64,
    /// How many times Get Messages gave it.
    pub dequeues: i64,
    /// Its pop receipt.
    pub receipt: String,
}

/// Microseconds since the Unix epoch of `time`.
pub fn micros(time: SystemTime) -> i64 {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

/// `now` plus `seconds`, in microseconds (never past the end of time).
fn after(now: i64, seconds: i64) -> i64 {
    now.saturating_add(seconds.saturating_mul(1_000_000))
}

fn row(visible: i64, id: &str) -> String {
    format!("{visible:020}{id}")
}

/// A new pop receipt: 16 random bytes, base64.
fn receipt(env: &impl Env) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(env.random_uuid().as_bytes())
}

impl Message {
    fn of(entity: &Entity) -> Option<Self> {
        let text = |name: &str| match entity.properties.get(name) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let number = |name: &str| match entity.properties.get(name) {
            Some(Value::Int64(n)) => Some(*n),
            _ => None,
        };
        Some(Self {
            id: text("id")?,
            text: text("text")?,
            inserted: number("inserted")?,
            expires: number("expires")?,
            visible: entity.row_key.get(..20)?.parse().ok()?,
            dequeues: number("dequeues")?,
            receipt: text("receipt")?,
        })
    }

    fn key(&self) -> (String, String) {
        (VISIBLE.to_owned(), row(self.visible, &self.id))
    }

    fn index_key(&self) -> (String, String) {
        (INDEX.to_owned(), self.id.clone())
    }

    fn entity(&self, at: DateTime) -> Entity {
        let (pk, rk) = self.key();
        Entity::new(
            &pk,
            &rk,
            at,
            [
                ("id", Value::String(self.id.clone())),
                ("text", Value::String(self.text.clone())),
                ("inserted", Value::Int64(self.inserted)),
                ("expires", Value::Int64(self.expires)),
                ("dequeues", Value::Int64(self.dequeues)),
                ("receipt", Value::String(self.receipt.clone())),
            ],
        )
    }

    fn index(&self, at: DateTime) -> Entity {
        let (pk, rk) = self.index_key();
        let (_, place) = self.key();
        Entity::new(
            &pk,
            &rk,
            at,
            [
                ("at", Value::String(place)),
                ("receipt", Value::String(self.receipt.clone())),
            ],
        )
    }

    /// The changes that move `self` (stored at `version`) to `moved`; in place when it stays
    /// at its instant (a clock that did not move since: a Worker's stands still within a
    /// request, and reads milliseconds), where a remove and an insert of one key would
    /// conflict for ever.
    fn moved(&self, version: DateTime, moved: &Message, at: DateTime) -> Vec<Change> {
        let index = Change {
            key: moved.index_key(),
            expected: Expected::Present,
            write: Some(moved.index(at)),
        };
        if moved.key() == self.key() {
            let entity = Change {
                key: self.key(),
                expected: Expected::Version(version),
                write: Some(moved.entity(at)),
            };
            return vec![entity, index];
        }
        let entity = Change {
            key: moved.key(),
            expected: Expected::Absent,
            write: Some(moved.entity(at)),
        };
        vec![self.deleted(version), entity, index]
    }

    /// The changes that remove `self` (stored at `version`).
    fn removed(&self, version: DateTime) -> Vec<Change> {
        let index = Change {
            key: self.index_key(),
            expected: Expected::Anything,
            write: None,
        };
        vec![self.deleted(version), index]
    }

    /// The change that deletes `self`'s entity, stored at `version`.
    fn deleted(&self, version: DateTime) -> Change {
        Change {
            key: self.key(),
            expected: Expected::Version(version),
            write: None,
        }
    }
}

/// A failure of the messages' table: the queue went away (404) or the backend failed (503).
fn backend(error: TableError) -> Failure {
    match error {
        TableError::TableNotFound(_) => ErrorCode::QueueNotFound.into(),
        error => error.into(),
    }
}

/// Put Message: `text`, first visible `visibility` seconds from `now`, living `ttl` seconds
/// (`None`: forever).
pub(crate) async fn put(
    tables: &impl Tables,
    table: &str,
    env: &impl Env,
    text: String,
    (visibility, ttl): (i64, Option<i64>),
    at: DateTime,
) -> Result<Message> {
    let now = micros(env.now());
    let expires = ttl.map_or(i64::MAX, |ttl| after(now, ttl));
    let visible = after(now, visibility);
    if visible >= expires {
        return Err(crate::failure::out_of_range(
            "visibilitytimeout",
            "less than the message's time to live",
        ));
    }
    let message = Message {
        id: env.random_uuid().hyphenated().to_string(),
        text,
        inserted: now,
        expires,
        visible,
        dequeues: 0,
        receipt: receipt(env),
    };
    let changes = vec![
        Change {
            key: message.index_key(),
            expected: Expected::Absent,
            write: Some(message.index(at)),
        },
        Change {
            key: message.key(),
            expected: Expected::Absent,
            write: Some(message.entity(at)),
        },
    ];
    tables.commit(table, &changes).await.map_err(backend)?;
    Ok(message)
}

/// Get Messages (`dequeue` true: each given a new receipt and made invisible for
/// `visibility` seconds, its dequeue count one more) or Peek Messages: at most `count`
/// messages visible now, the earliest visible first.
pub(crate) async fn get(
    tables: &impl Tables,
    table: &str,
    env: &impl Env,
    (count, dequeue, visibility): (usize, bool, i64),
    at: DateTime,
) -> Result<Vec<Message>> {
    let now = micros(env.now());
    let mut out = Vec::with_capacity(count);
    let (mut expired, mut read) = (0, 0);
    let mut from = String::new();
    while read < MAX_READ {
        let scan = Scan {
            from: Some((VISIBLE, &from)),
            partition: Some(VISIBLE),
            limit: count + 8,
        };
        let entities = match tables.scan(table, scan).await {
            Ok(entities) => entities,
            Err(error) => return taken_or(out, error),
        };
        let full = entities.len() == count + 8;
        read += entities.len();
        for entity in &entities {
            let Some(message) = Message::of(entity) else {
                continue;
            };
            if message.visible > now {
                return Ok(out);
            }
            if message.expires <= now {
                if dequeue && expired < MAX_EXPIRED {
                    expired += 1;
                    // Whoever removes it first, it is gone: a conflict changes nothing.
                    match tables
                        .commit(table, &message.removed(entity.timestamp))
                        .await
                    {
                        Ok(()) | Err(TableError::Conflict { .. }) => {}
                        Err(error) => return taken_or(out, error),
                    }
                }
                continue;
            }
            if !dequeue {
                out.push(message);
            } else {
                let taken = Message {
                    visible: after(now, visibility).min(message.expires),
                    dequeues: message.dequeues + 1,
                    receipt: receipt(env),
                    ..message.clone()
                };
                match tables
                    .commit(table, &message.moved(entity.timestamp, &taken, at))
                    .await
                {
                    Ok(()) => out.push(taken),
                    // Another consumer took it first.
                    Err(TableError::Conflict { .. }) => continue,
                    Err(error) => return taken_or(out, error),
                }
            }
            if out.len() == count {
                return Ok(out);
            }
        }
        match entities.last() {
            Some(last) if full => from = format!("{}\u{0}", last.row_key),
            _ => return Ok(out),
        }
    }
    Ok(out)
}

/// What a Get that failed part way answers: the messages it has taken already (each now
/// invisible, its receipt new: unanswered, they would be lost to every consumer until their
/// visibility timeout ends), or the failure when it took none.
fn taken_or(out: Vec<Message>, error: TableError) -> Result<Vec<Message>> {
    if out.is_empty() {
        Err(backend(error))
    } else {
        Ok(out)
    }
}

/// The message `id` whose receipt is `receipt`, as stored (with its entity's version): 404
/// `MessageNotFound` when there is none, it is past its time, or it was given another
/// receipt since.
async fn held(
    tables: &impl Tables,
    table: &str,
    (id, receipt): (&str, &str),
    now: i64,
) -> Result<(Message, DateTime)> {
    let gone = || Failure::from(ErrorCode::MessageNotFound);
    let index = tables
        .get(table, &(INDEX.to_owned(), id.to_owned()))
        .await
        .map_err(backend)?
        .ok_or_else(gone)?;
    let place = match index.properties.get("at") {
        Some(Value::String(place)) => place.clone(),
        _ => return Err(gone()),
    };
    let entity = tables
        .get(table, &(VISIBLE.to_owned(), place))
        .await
        .map_err(backend)?
        .ok_or_else(gone)?;
    let message = Message::of(&entity).ok_or_else(gone)?;
    if message.expires <= now {
        return Err(gone());
    }
    // A receipt that is not the latest: Azure's reference answers it 404 `MessageNotFound`
    // (Delete Message and Update Message, "Remarks"), as it answers a message gone; Azurite
    // answers 400 `PopReceiptMismatch`. The reference is what production does.
    if message.receipt != receipt {
        return Err(Failure::new(
            ErrorCode::MessageNotFound,
            "The specified message does not exist: its pop receipt is not the latest (the \
             message was got or updated again since, or its receipt is not one this queue gave).",
        ));
    }
    Ok((message, entity.timestamp))
}

/// Update Message: the message `id` held by `receipt` made visible `visibility` seconds from
/// now (never past its expiry), with `text` as its new text when given, and a new receipt.
pub(crate) async fn update(
    tables: &impl Tables,
    table: &str,
    env: &impl Env,
    (id, receipt_held): (&str, &str),
    (visibility, text): (i64, Option<String>),
    at: DateTime,
) -> Result<Message> {
    loop {
        let now = micros(env.now());
        let (message, version) = held(tables, table, (id, receipt_held), now).await?;
        let visible = after(now, visibility);
        if visible > message.expires {
            return Err(crate::failure::out_of_range(
                "visibilitytimeout",
                "not past the message's expiry",
            ));
        }
        let updated = Message {
            visible,
            receipt: receipt(env),
            text: text.clone().unwrap_or_else(|| message.text.clone()),
            ..message.clone()
        };
        match tables
            .commit(table, &message.moved(version, &updated, at))
            .await
        {
            Ok(()) => return Ok(updated),
            // Changed meanwhile: read again (its receipt is then another's).
            Err(TableError::Conflict { .. }) => continue,
            Err(error) => return Err(backend(error)),
        }
    }
}

/// Delete Message: the message `id` held by `receipt`.
pub(crate) async fn delete(
    tables: &impl Tables,
    table: &str,
    env: &impl Env,
    (id, receipt): (&str, &str),
) -> Result<()> {
    loop {
        let now = micros(env.now());
        let (message, version) = held(tables, table, (id, receipt), now).await?;
        match tables.commit(table, &message.removed(version)).await {
            Ok(()) => return Ok(()),
            Err(TableError::Conflict { .. }) => continue,
            Err(error) => return Err(backend(error)),
        }
    }
}

/// About how many messages the queue holds: its messages counted, up to [`MAX_COUNTED`]
/// (those past their time not yet removed included, as Azure's count includes them).
pub(crate) async fn count(tables: &impl Tables, table: &str) -> Result<usize> {
    let mut counted = 0;
    let mut from = String::new();
    while counted < MAX_COUNTED {
        let scan = Scan {
            from: Some((INDEX, &from)),
            partition: Some(INDEX),
            limit: 1000,
        };
        let entities = tables.scan(table, scan).await.map_err(backend)?;
        counted += entities.len();
        match entities.last() {
            Some(last) if entities.len() == 1000 => from = format!("{}\u{0}", last.row_key),
            _ => break,
        }
    }
    Ok(counted.min(MAX_COUNTED))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use ifmatch_azure::ManualEnv;
    use ifmatch_table::{EntityKey, MemoryTables};

    use super::*;

    /// Tables that count the entities their reads return: what a call costs, whatever the
    /// machine is doing.
    #[derive(Default)]
    struct Counted {
        tables: MemoryTables,
        read: AtomicUsize,
        /// When set, how many more commits succeed before each one fails.
        commits_left: Option<AtomicUsize>,
    }

    impl Counted {
        fn taken(&self) -> usize {
            self.read.swap(0, Ordering::Relaxed)
        }
    }

    impl Tables for Counted {
        async fn create_table(&self, name: &str) -> Result<bool, TableError> {
            self.tables.create_table(name).await
        }
        async fn delete_table(&self, name: &str) -> Result<bool, TableError> {
            self.tables.delete_table(name).await
        }
        async fn tables(&self, after: &str, limit: usize) -> Result<Vec<String>, TableError> {
            self.tables.tables(after, limit).await
        }
        async fn get(&self, table: &str, key: &EntityKey) -> Result<Option<Entity>, TableError> {
            let found = self.tables.get(table, key).await?;
            self.read.fetch_add(1, Ordering::Relaxed);
            Ok(found)
        }
        async fn scan(&self, table: &str, scan: Scan<'_>) -> Result<Vec<Entity>, TableError> {
            let found = self.tables.scan(table, scan).await?;
            self.read.fetch_add(found.len(), Ordering::Relaxed);
            Ok(found)
        }
        async fn commit(&self, table: &str, changes: &[Change]) -> Result<(), TableError> {
            if let Some(left) = &self.commits_left
                && left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_err()
            {
                return Err(TableError::Generic {
                    backend: "test",
                    message: "the store stopped answering".into(),
                });
            }
            self.tables.commit(table, changes).await
        }
    }

    const TABLE: &str = "messages~q~0";

    /// Stores `n` messages visible from `visible` and expiring at `expires` (microseconds),
    /// many to a commit, as a queue that filled over time holds them.
    async fn fill(tables: &Counted, env: &ManualEnv, n: usize, visible: i64, expires: i64) {
        let at = DateTime::from_unix(0, 0);
        let mut changes = Vec::new();
        for i in 0..n {
            let message = Message {
                id: env.random_uuid().hyphenated().to_string(),
                text: format!("m{i}"),
                inserted: visible,
                expires,
                visible: visible + i as i64,
                dequeues: 0,
                receipt: receipt(env),
            };
            changes.push(Change {
                key: message.index_key(),
                expected: Expected::Absent,
                write: Some(message.index(at)),
            });
            changes.push(Change {
                key: message.key(),
                expected: Expected::Absent,
                write: Some(message.entity(at)),
            });
            if changes.len() >= 20_000 {
                tables.commit(TABLE, &changes).await.unwrap();
                changes.clear();
            }
        }
        tables.commit(TABLE, &changes).await.unwrap();
        tables.taken();
    }

    /// A clock, its time in microseconds, and counted tables holding the queue's, empty.
    async fn empty_queue() -> (ManualEnv, i64, Counted) {
        let env = ManualEnv::default();
        let now = micros(env.now());
        let tables = Counted::default();
        tables.create_table(TABLE).await.unwrap();
        (env, now, tables)
    }

    /// What a Peek, a Get, an Update and a Delete of 32 messages read.
    async fn costs(tables: &Counted, env: &ManualEnv) -> [usize; 4] {
        let at = DateTime::from_unix(1, 0);
        let peeked = get(tables, TABLE, env, (32, false, 0), at).await.unwrap();
        assert_eq!(peeked.len(), 32);
        let peek = tables.taken();
        let got = get(tables, TABLE, env, (32, true, 60), at).await.unwrap();
        assert_eq!(got.len(), 32);
        let get_cost = tables.taken();
        let held = (got[0].id.as_str(), got[0].receipt.as_str());
        let updated = update(tables, TABLE, env, held, (60, None), at)
            .await
            .unwrap();
        let update_cost = tables.taken();
        delete(tables, TABLE, env, (&got[0].id, &updated.receipt))
            .await
            .unwrap();
        [peek, get_cost, update_cost, tables.taken()]
    }

    /// A queue of 200,000 messages is peeked, got, updated and deleted reading what a queue
    /// of 1,000 reads: the page, never the queue (issue 75, point 6). Counted, not timed.
    #[tokio::test]
    async fn a_call_reads_its_page_however_long_the_queue() {
        let (env, now, tables) = empty_queue().await;
        fill(&tables, &env, 1_000, now - 10_000_000, i64::MAX).await;
        let short = costs(&tables, &env).await;
        fill(&tables, &env, 199_000, now - 5_000_000, i64::MAX).await;
        let long = costs(&tables, &env).await;
        assert_eq!(
            short, long,
            "peek, get, update, delete: the same reads at 200 times the length"
        );
        assert!(short[0] <= 32 + 8 && short[1] <= 32 + 8, "{short:?}");
    }

    /// 10,000 messages past their time before the visible ones: a Peek or Get reads at most
    /// MAX_READ of them, a Get removes up to MAX_EXPIRED, and Gets reach the visible ones.
    #[tokio::test]
    async fn messages_past_their_time_cost_a_call_at_most_its_bound() {
        let (env, now, tables) = empty_queue().await;
        fill(&tables, &env, 10_000, now - 20_000_000, now - 1).await;
        fill(&tables, &env, 5, now - 10_000_000, i64::MAX).await;
        let at = DateTime::from_unix(1, 0);
        let bound = MAX_READ + 32 + 8;
        let peeked = get(&tables, TABLE, &env, (32, false, 0), at).await.unwrap();
        assert!(peeked.is_empty(), "the visible ones lie past the bound");
        assert!(tables.taken() <= bound);
        let mut got = Vec::new();
        let mut calls = 0;
        while got.len() < 5 {
            got.extend(get(&tables, TABLE, &env, (32, true, 60), at).await.unwrap());
            assert!(tables.taken() <= bound, "a Get reads at most its bound");
            calls += 1;
            assert!(
                calls <= 10_000 / MAX_EXPIRED + 2,
                "each Get removes its share of them"
            );
        }
        // The visible ones taken, the Gets that follow remove the rest, MAX_EXPIRED a call.
        for _ in 0..10_000 / MAX_EXPIRED + 1 {
            let got = get(&tables, TABLE, &env, (32, true, 60), at).await.unwrap();
            assert!(got.is_empty() && tables.taken() <= bound);
        }
        assert_eq!(
            count(&tables, TABLE).await.unwrap(),
            5,
            "every one past its time removed"
        );
        env.advance(Duration::from_secs(61));
        let again = get(&tables, TABLE, &env, (32, true, 60), at).await.unwrap();
        assert_eq!(again.len(), 5, "visible again once their timeout ran out");
    }

    /// A Get whose store fails after it took some messages answers those: each is invisible
    /// now, so failing the call would hide them from every consumer until their timeout.
    #[tokio::test]
    async fn a_get_that_fails_part_way_answers_what_it_took() {
        let env = ManualEnv::default();
        let now = micros(env.now());
        let mut tables = Counted::default();
        tables.create_table(TABLE).await.unwrap();
        fill(&tables, &env, 5, now - 10_000_000, i64::MAX).await;
        tables.commits_left = Some(AtomicUsize::new(2));
        let at = DateTime::from_unix(1, 0);
        let got = get(&tables, TABLE, &env, (32, true, 60), at).await.unwrap();
        assert_eq!(got.len(), 2, "the two taken before the store failed");
        let failed = get(&tables, TABLE, &env, (32, true, 60), at).await;
        assert!(
            failed.is_err(),
            "with none taken, the failure is the answer"
        );
        tables.commits_left = None;
        let rest = get(&tables, TABLE, &env, (32, true, 60), at).await.unwrap();
        assert_eq!(rest.len(), 3, "the others are still there to take");
    }
}
