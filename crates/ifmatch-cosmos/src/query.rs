//! Running a query over a container's documents, one page at a time: a partition's when the
//! request names one, else the container's, read in key order in chunks.
//!
//! A query that streams (no `ORDER BY`, aggregate or `DISTINCT`) reads from where the last
//! page stopped, at most [`SCAN_BUDGET`] documents, [`PAGE_WORK`] units of evaluation and
//! [`PAGE_BYTES`] of results a page, and its continuation token says where to go on (with what
//! `OFFSET` and `TOP` have used). One that needs every match first reads its whole scope for
//! each page, and keeps at most [`MAX_SORTED`] results and [`MAX_GATHERED`] bytes: past that,
//! it asks for `TOP` or `OFFSET ... LIMIT` rather than hold the container in memory; past
//! [`GATHER_WORK`] units or [`GATHER_DOCUMENTS`] documents it is answered 408. Each document's evaluation is bounded on its own
//! ([`DOCUMENT_WORK`](crate::sql::DOCUMENT_WORK)), and a page gives the runtime back its
//! thread every [`SLICE_WORK`] units, so that one query never holds up the others.

use base64::Engine;
use ifmatch_table::{Entity, Scan, TableError, Tables};
use serde_json::{Value as Json, json};

use crate::failure::{Code, Failure, bad_request, unavailable};
use crate::feed_entries::documents_only;
use crate::script::udf::{self, Functions};
use crate::sql::{Collector, Meter, Query, weight};

/// Documents read from the backend at a time.
const CHUNK: usize = 200;
/// The most documents a streaming page reads before it answers with what it found.
pub const SCAN_BUDGET: usize = 10_000;
/// The most work units (see [`Meter`]) a streaming page's evaluation spends before it answers
/// with what it found.
pub const PAGE_WORK: u64 = 256 << 20;
/// The most bytes of results a page holds (Cosmos's limit of a response).
pub const PAGE_BYTES: usize = 4 << 20;
/// The most results a sorting or de-duplicating query keeps.
pub const MAX_SORTED: usize = 100_000;
/// The most bytes of results a sorting or de-duplicating query keeps.
pub const MAX_GATHERED: usize = 64 << 20;
/// The most work units a query that needs every match first spends on one page.
pub const GATHER_WORK: u64 = 1 << 30;
/// The most documents a query that needs every match first reads for one page: what bounds
/// its time where evaluating each costs little (`SELECT VALUE COUNT(1)`), since reading does.
pub const GATHER_DOCUMENTS: usize = 2_000_000;
/// The work units between two yields to the runtime.
pub const SLICE_WORK: u64 = 4 << 20;

/// A page of results, and the token of the next, if any.
pub struct Page {
    /// The results.
    pub results: Vec<Json>,
    /// Where the next page starts.
    pub continuation: Option<String>,
}

/// Where a query's next page starts.
#[derive(Default)]
struct Position {
    /// The key of the next document to read (streaming queries).
    key: Option<(String, String)>,
    /// The results of the document at `key` already skipped or sent (its rows are many
    /// under a `JOIN`, and a page may end among them).
    rows: u64,
    /// Results `OFFSET` has skipped so far, or (for queries that need every match) the
    /// results already sent.
    skipped: u64,
    /// Results sent so far (for `TOP` and `LIMIT`).
    sent: u64,
}

impl Position {
    fn token(&self) -> String {
        let json = json!({ "k": self.key, "r": self.rows, "s": self.skipped, "n": self.sent });
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json.to_string())
    }

    fn of(token: &str) -> Result<Self, Failure> {
        let bad = || bad_request("The continuation token is not one this server gave.");
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim())
            .map_err(|_| bad())?;
        let json: Json = serde_json::from_slice(&json).map_err(|_| bad())?;
        let key = match &json["k"] {
            Json::Null => None,
            Json::Array(parts) => match parts.as_slice() {
                [Json::String(p), Json::String(r)] => Some((p.clone(), r.clone())),
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        };
        // Counts this server gave: below 2^53, so that nothing counted on from them overflows.
        let count = |name: &str| json[name].as_u64().filter(|n| *n < 1 << 53).ok_or_else(bad);
        Ok(Self {
            key,
            rows: count("r")?,
            skipped: count("s")?,
            sent: count("n")?,
        })
    }
}

/// Where a query reads: a container's table, and the partition it is narrowed to, if any.
pub struct Reading<'a, T> {
    /// The account's tables.
    pub tables: &'a T,
    /// The container's table.
    pub table: &'a str,
    /// The partition, when the request names one.
    pub partition: Option<&'a str>,
    /// The start the stored keys of the partitions read share, when the request names a
    /// hierarchical key's prefix: the run of keys read.
    pub prefix: Option<&'a str>,
    /// The user-defined functions the query calls, if any.
    pub functions: Option<&'a Functions>,
}

/// One page of `query` over what `reading` names, at most `size` results, from `token`, at
/// `now`; `document` makes a stored entity the JSON a query sees.
pub async fn page<T: Tables>(
    reading: Reading<'_, T>,
    query: &Query,
    size: usize,
    token: Option<&str>,
    now: std::time::SystemTime,
    document: impl Fn(&Entity) -> Option<Json>,
) -> Result<Page, Failure> {
    let mut work = Work::at(now);
    work.functions = reading.functions.cloned();
    let position = match token {
        Some(token) => Position::of(token)?,
        None => Position::default(),
    };
    if !query.reads_container() {
        // One row of nothing: its results, whole.
        let mut collector = Collector::new(query);
        work.evaluate(|meter| collector.add(None, meter))?;
        let results = work.evaluate(|meter| collector.finish(meter))?;
        return Ok(paged(results, size, position));
    }
    match query.needs_all() {
        false => streamed(reading, query, size, position, work, document).await,
        true => gathered(reading, query, size, position, work, document).await,
    }
}

/// The page of `results` (every one of the query's) from `position`.
fn paged(results: Vec<Json>, size: usize, position: Position) -> Page {
    let total = results.len() as u64;
    let start = usize::try_from(position.skipped).unwrap_or(usize::MAX);
    let mut bytes = 0;
    let mut page = Vec::new();
    for result in results.into_iter().skip(start) {
        if page.len() == size || (bytes >= PAGE_BYTES && !page.is_empty()) {
            break;
        }
        bytes += weight(&result);
        page.push(result);
    }
    let sent = position.skipped + page.len() as u64;
    let continuation = (sent < total).then(|| {
        Position {
            skipped: sent,
            sent,
            ..Position::default()
        }
        .token()
    });
    Page {
        results: page,
        continuation,
    }
}

/// The most results the query may still send, after `sent`.
fn remaining(query: &Query, sent: u64) -> u64 {
    let top = query.top.unwrap_or(u64::MAX);
    let limit = query.offset_limit.map_or(u64::MAX, |(_, limit)| limit);
    top.min(limit).saturating_sub(sent)
}

async fn streamed<T: Tables>(
    reading: Reading<'_, T>,
    query: &Query,
    size: usize,
    mut position: Position,
    mut work: Work,
    document: impl Fn(&Entity) -> Option<Json>,
) -> Result<Page, Failure> {
    let offset = query.offset_limit.map_or(0, |(offset, _)| offset);
    let mut results = Vec::new();
    let mut read = 0;
    let mut bytes = 0;
    // The results of the first document already taken by the pages before.
    let mut done_rows = position.rows;
    loop {
        if remaining(query, position.sent) == 0 {
            return Ok(Page {
                results,
                continuation: None,
            });
        }
        let from = position.key.as_ref().map(|(p, r)| (p.as_str(), r.as_str()));
        let scan = Scan {
            from,
            partition: reading.partition,
            limit: CHUNK + 1,
        };
        let mut chunk = scan_of(reading, scan).await?;
        let ended = documents_only(&mut chunk);
        let next = (!ended && chunk.len() > CHUNK).then(|| chunk.remove(CHUNK));
        for (i, entity) in chunk.iter().enumerate() {
            // A document past its time to live is gone (and so are the rows of it a page
            // sent before).
            let Some(doc) = document(entity) else {
                done_rows = 0;
                continue;
            };
            let made = work.evaluate(|meter| query.results(&doc, meter))?;
            work.pause().await;
            let count = made.len() as u64;
            let mut taken = std::mem::take(&mut done_rows);
            for result in made
                .into_iter()
                .skip(usize::try_from(taken).unwrap_or(usize::MAX))
            {
                taken += 1;
                if position.skipped < offset {
                    position.skipped += 1;
                } else {
                    bytes += weight(&result);
                    results.push(result);
                    position.sent += 1;
                }
                let full = results.len() == size
                    || remaining(query, position.sent) == 0
                    || bytes >= PAGE_BYTES;
                if full && taken < count {
                    // Go on from this document's next result.
                    position.key = Some((entity.partition_key.clone(), entity.row_key.clone()));
                    position.rows = taken;
                    let more = remaining(query, position.sent) > 0;
                    return Ok(Page {
                        results,
                        continuation: more.then(|| position.token()),
                    });
                }
            }
            let full = results.len() == size
                || remaining(query, position.sent) == 0
                || bytes >= PAGE_BYTES
                || work.spent > PAGE_WORK;
            if full {
                // Go on from the document after this one.
                let after = chunk.get(i + 1).or(next.as_ref());
                position.key = after.map(|e| (e.partition_key.clone(), e.row_key.clone()));
                position.rows = 0;
                let more = position.key.is_some() && remaining(query, position.sent) > 0;
                return Ok(Page {
                    results,
                    continuation: more.then(|| position.token()),
                });
            }
        }
        read += chunk.len();
        position.key = next.map(|e| (e.partition_key, e.row_key));
        position.rows = 0;
        if position.key.is_none() {
            return Ok(Page {
                results,
                continuation: None,
            });
        }
        if read >= SCAN_BUDGET {
            // A page may be short, even empty: the client asks again from here.
            return Ok(Page {
                results,
                continuation: Some(position.token()),
            });
        }
    }
}

async fn gathered<T: Tables>(
    reading: Reading<'_, T>,
    query: &Query,
    size: usize,
    position: Position,
    mut work: Work,
    document: impl Fn(&Entity) -> Option<Json>,
) -> Result<Page, Failure> {
    let mut collector = Collector::new(query);
    let mut read = 0;
    let mut from: Option<(String, String)> = None;
    loop {
        let start = from.as_ref().map(|(p, r)| (p.as_str(), r.as_str()));
        let scan = Scan {
            from: start,
            partition: reading.partition,
            limit: CHUNK + 1,
        };
        let mut chunk = scan_of(reading, scan).await?;
        let ended = documents_only(&mut chunk);
        let next = (!ended && chunk.len() > CHUNK).then(|| chunk.remove(CHUNK));
        for entity in &chunk {
            let Some(doc) = document(entity) else {
                continue;
            };
            work.evaluate(|meter| collector.add(Some(&doc), meter))?;
            work.pause().await;
            read += 1;
            if work.spent > GATHER_WORK || read > GATHER_DOCUMENTS {
                return Err(Failure::new(
                    Code::RequestTimeout,
                    format!(
                        "The query read more than {GATHER_DOCUMENTS} documents or spent more than {} Mi units of work (bytes built and compared) before its first result: narrow its filter, or narrow it to a partition.",
                        GATHER_WORK >> 20
                    ),
                ));
            }
            let (kept, held) = collector.held();
            if kept > MAX_SORTED || held > MAX_GATHERED {
                return Err(bad_request(format!(
                    "The query sorts, groups or de-duplicates more than {MAX_SORTED} results or {} MiB: add TOP or OFFSET ... LIMIT, or narrow it to a partition.",
                    MAX_GATHERED >> 20
                )));
            }
        }
        from = next.map(|e| (e.partition_key, e.row_key));
        if from.is_none() {
            break;
        }
    }
    let results = work.evaluate(|meter| collector.finish(meter))?;
    Ok(paged(results, size, position))
}

impl<T> Clone for Reading<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Reading<'_, T> {}

async fn scan_of<T: Tables>(
    reading: Reading<'_, T>,
    mut scan: Scan<'_>,
) -> Result<Vec<Entity>, Failure> {
    if let Some(prefix) = reading.prefix
        && scan.from.is_none_or(|(partition, _)| partition < prefix)
    {
        scan.from = Some((prefix, ""));
    }
    let mut found = match reading.tables.scan(reading.table, scan).await {
        Ok(found) => found,
        Err(TableError::TableNotFound(_)) => Vec::new(),
        Err(error) => return Err(unavailable(error)),
    };
    // A prefix's run ends at the first key past it.
    if let Some(prefix) = reading.prefix
        && let Some(past) = found
            .iter()
            .position(|e| !e.partition_key.starts_with(prefix))
    {
        found.truncate(past);
    }
    Ok(found)
}

/// The work a page has spent evaluating, and when it last gave the runtime its thread back.
struct Work {
    /// The page's instant, in ticks of 100 ns since the Unix epoch: what the clock functions
    /// read, for each document alike.
    at: i64,
    spent: u64,
    since_pause: u64,
    functions: Option<Functions>,
}

impl Work {
    /// No work yet, for a page read at `now`.
    fn at(now: std::time::SystemTime) -> Self {
        let since = now
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            at: i64::try_from(since.as_nanos() / 100).unwrap_or(i64::MAX),
            spent: 0,
            since_pause: 0,
            functions: None,
        }
    }

    /// `evaluate` for one document, with a meter of its own; refused when the meter is spent.
    fn evaluate<R>(&mut self, evaluate: impl FnOnce(&Meter) -> R) -> Result<R, Failure> {
        let meter = Meter::per_document().at(self.at);
        let result = match &self.functions {
            Some(functions) => udf::with(functions, || evaluate(&meter))?,
            None => evaluate(&meter),
        };
        if meter.exceeded() {
            return Err(bad_request(format!("Query: {}", meter.error())));
        }
        // A document costs a unit even when nothing was built for it.
        self.spent += meter.spent() + 1;
        self.since_pause += meter.spent() + 1;
        Ok(result)
    }

    /// Gives the runtime the thread back once [`SLICE_WORK`] units were spent since the last
    /// time.
    async fn pause(&mut self) {
        if self.since_pause >= SLICE_WORK {
            self.since_pause = 0;
            crate::yield_now::yield_now().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ifmatch_table::{Change, DateTime, Expected, MemoryTables};

    /// A table of `count` documents, each with a string `s` of 1,000 characters.
    async fn documents(count: usize) -> MemoryTables {
        let tables = MemoryTables::new();
        tables.create_table("t").await.unwrap();
        let changes: Vec<Change> = (0..count)
            .map(|i| {
                let entity = Entity::new("p", &format!("{i:05}"), DateTime::from_unix(0, 0), []);
                Change {
                    key: ("p".to_owned(), entity.row_key.clone()),
                    expected: Expected::Absent,
                    write: Some(entity),
                }
            })
            .collect();
        tables.commit("t", &changes).await.unwrap();
        tables
    }

    /// A page of `query` over the table `t` of `tables`, read now.
    async fn over(
        tables: &MemoryTables,
        query: &Query,
        size: usize,
        token: Option<&str>,
        document: impl Fn(&Entity) -> Option<Json>,
    ) -> Result<Page, Failure> {
        let reading = Reading {
            functions: None,
            tables,
            table: "t",
            partition: None,
            prefix: None,
        };
        let now = std::time::SystemTime::now();
        page(reading, query, size, token, now, document).await
    }

    fn document(entity: &Entity) -> Option<Json> {
        Some(json!({ "id": entity.row_key, "s": "a".repeat(1000) }))
    }

    /// Each document costs about 640 KB of work: 20 strings of 10,000 characters, joined by
    /// another, and counted.
    const COSTLY: &str = "LENGTH(StringJoin([REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10), REPLICATE(c.s, 10)], REPLICATE(c.s, 10)))";

    /// `SELECT {select} FROM c` over the documents [`COSTLY`] finds.
    fn costly(select: &str) -> Query {
        let text = format!("SELECT {select} FROM c WHERE {COSTLY} > 0");
        Query::parse(&text, Vec::new()).unwrap()
    }

    #[tokio::test]
    async fn a_costly_streaming_query_is_paged_by_its_work_and_loses_nothing() {
        let tables = documents(600).await;
        let query = costly("VALUE c.id");
        let (mut pages, mut found, mut token) = (0, Vec::new(), None::<String>);
        loop {
            let page = over(&tables, &query, 1000, token.as_deref(), document)
                .await
                .unwrap();
            pages += 1;
            found.extend(page.results);
            match page.continuation {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        assert!(pages >= 3, "{pages} pages: each stops at {PAGE_WORK} units");
        let expected: Vec<Json> = (0..600).map(|i| json!(format!("{i:05}"))).collect();
        assert_eq!(found, expected, "every document once, in order");
    }

    #[tokio::test]
    async fn a_costly_query_that_needs_every_match_first_is_answered_408() {
        let tables = documents(2000).await;
        let query = costly("VALUE COUNT(1)");
        let refused = over(&tables, &query, 100, None, document).await;
        let failure = refused.err().expect("refused");
        assert_eq!(failure.code, Code::RequestTimeout);
        // The same over fewer documents answers.
        let tables = documents(100).await;
        let counted = over(&tables, &query, 100, None, document).await.unwrap();
        assert_eq!(counted.results, [json!(100)]);
    }

    #[tokio::test]
    async fn a_page_holds_at_most_its_bytes_and_distinct_results_are_kept_once() {
        let tables = documents(500).await;
        let query = Query::parse("SELECT VALUE REPLICATE(c.s, 10) FROM c", Vec::new()).unwrap();
        let first = over(&tables, &query, 1000, None, document).await.unwrap();
        let bytes: usize = first.results.iter().map(weight).sum();
        assert!(
            first.continuation.is_some() && bytes <= PAGE_BYTES + 10_002,
            "{bytes}"
        );
        let query = Query::parse("SELECT DISTINCT VALUE LENGTH(c.id) FROM c", Vec::new()).unwrap();
        let distinct = over(&tables, &query, 1000, None, document).await.unwrap();
        assert_eq!(distinct.results, [json!(5)]);
    }

    #[tokio::test]
    async fn a_join_is_paged_among_one_documents_rows_and_loses_nothing() {
        let tables = documents(5).await;
        let tagged = |entity: &Entity| {
            let tags: Vec<String> = (0..30)
                .map(|t| format!("{}-{t:02}", entity.row_key))
                .collect();
            Some(json!({ "id": entity.row_key, "tags": tags }))
        };
        let query = Query::parse(
            "SELECT VALUE t FROM c JOIN t IN c.tags WHERE t != '00002-00'",
            Vec::new(),
        )
        .unwrap();
        let (mut found, mut token, mut pages) = (Vec::new(), None::<String>, 0);
        loop {
            let page = over(&tables, &query, 7, token.as_deref(), tagged)
                .await
                .unwrap();
            assert!(page.results.len() <= 7);
            pages += 1;
            found.extend(page.results);
            match page.continuation {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        let expected: Vec<Json> = (0..5)
            .flat_map(|d| (0..30).map(move |t| format!("{d:05}-{t:02}")))
            .filter(|t| t != "00002-00")
            .map(Json::String)
            .collect();
        assert_eq!(found, expected);
        assert_eq!(pages, 22, "149 results, 7 a page");
        // OFFSET and TOP count rows, not documents.
        let query = Query::parse(
            "SELECT TOP 5 VALUE t FROM c JOIN t IN c.tags OFFSET 28 LIMIT 3",
            Vec::new(),
        )
        .unwrap();
        let first = over(&tables, &query, 2, None, tagged).await.unwrap();
        assert_eq!(first.results, [json!("00000-28"), json!("00000-29")]);
        let token = first.continuation.unwrap();
        let second = over(&tables, &query, 2, Some(&token), tagged)
            .await
            .unwrap();
        assert_eq!(
            (second.results, second.continuation),
            (vec![json!("00001-00")], None)
        );
    }
}
