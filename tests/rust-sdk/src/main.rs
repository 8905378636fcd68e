//! Azure's Rust SDK for Cosmos DB (`azure_data_cosmos`, key authentication), unchanged, against
//! the endpoint given: the seed flow (read, replace with the tag read; a second replace with it
//! is 412 and changes nothing), a 409, the 304 of a read with the current tag, 16 writers on one
//! counter with retries on 412 (an exact total), a query with a parameter in one partition in
//! pages, a transactional batch that fails and leaves nothing, the change feed resumed from its
//! token, and a wrong key refused. (A patch with a predicate: the SDK exposes none, on purpose.)
//! Prints a line per check and a last line `rust cosmos: N passed`; exits 1 at the first failure.
//!
//! Usage: cosmos-rust-sdk ENDPOINT KEY

use std::num::NonZeroU32;

use azure_data_cosmos::clients::ContainerClient;
use azure_data_cosmos::feed::ChangeFeedPageIterator;
use azure_data_cosmos::models::ChangeFeedItem;
use azure_data_cosmos::models::{ContainerProperties, TimeToLive, UniqueKey, UniqueKeyPolicy};
use azure_data_cosmos::options::{
    ChangeFeedOptions, ChangeFeedStartFrom, ItemReadOptions, ItemWriteOptions, MaxItemCountHint,
    Precondition, QueryOptions, Region,
};
use azure_data_cosmos::{
    AccountReference, CosmosClientBuilder, FeedScope, Query, RoutingStrategy, TransactionalBatch,
};
use futures::StreamExt;
use serde_json::{Value, json};

/// The status an SDK call answered or failed with.
fn status<T>(result: &azure_data_cosmos::Result<T>, ok: impl Fn(&T) -> u16) -> u16 {
    match result {
        Ok(response) => ok(response),
        Err(error) => u16::from(error.status().status_code()),
    }
}

struct Checks(usize);

impl Checks {
    fn check(&mut self, what: &str, holds: bool, detail: impl std::fmt::Debug) {
        if !holds {
            println!("FAIL {what} {detail:?}");
            std::process::exit(1);
        }
        self.0 += 1;
        println!("ok {what}");
    }
}

/// The ids and `n` of the documents a change feed iterator gives until its first empty page
/// (nothing new).
async fn changes(feed: &mut ChangeFeedPageIterator<ChangeFeedItem<Value>>) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for _ in 0..10 {
        let Some(page) = feed.next().await else { break };
        let page = page.expect("a page");
        if page.items().is_empty() {
            break;
        }
        let documents = page.items().iter().filter_map(|item| item.current());
        out.extend(documents.map(|d| {
            let id = d["id"].as_str().unwrap_or("").to_owned();
            (id, d["n"].as_i64().unwrap_or(-1))
        }));
    }
    out
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let endpoint = args[1].parse().expect("an endpoint URL");
    let key = azure_core::credentials::Secret::from(args[2].clone());
    let account = AccountReference::with_authentication_key(endpoint, key);
    let routing = RoutingStrategy::ProximityTo(Region::EAST_US);
    let client = CosmosClientBuilder::new()
        .build(account, routing)
        .await
        .expect("a client");
    let mut checks = Checks(0);
    client
        .create_database("rust", None)
        .await
        .expect("the database");
    let database = client.database_client("rust");
    let properties = ContainerProperties::new("carts", "/user".into());
    database
        .create_container(properties, None)
        .await
        .expect("the container");
    let carts = database
        .container_client("carts")
        .await
        .expect("its client");
    let cart = json!({"id": "a", "user": "ann", "items": []});
    let created = carts.create_item("ann", "a", cart.clone(), None).await;
    checks.check(
        "create is 201",
        status(&created, |r| u16::from(r.status().status_code())) == 201,
        (),
    );
    let again = carts.create_item("ann", "a", cart, None).await;
    checks.check(
        "create of the same id is 409",
        status(&again, |_| 0) == 409,
        (),
    );

    let read = carts.read_item("ann", "a", None).await.expect("a read");
    let tag = read.headers().etag().cloned().expect("an etag");
    let if_match =
        |tag| Some(ItemWriteOptions::default().with_precondition(Precondition::IfMatch(tag)));
    let apple = json!({"id": "a", "user": "ann", "items": ["apple"]});
    let replaced = carts
        .replace_item("ann", "a", apple, if_match(tag.clone()))
        .await
        .expect("a replace");
    let current = replaced.headers().etag().cloned().expect("an etag");
    checks.check(
        "a replace with the tag read passes, with a new tag",
        current != tag,
        (),
    );
    let pear = json!({"id": "a", "user": "ann", "items": ["pear"]});
    let stale = carts
        .replace_item("ann", "a", pear, if_match(tag.clone()))
        .await;
    checks.check(
        "a replace with a stale tag is 412",
        status(&stale, |_| 0) == 412,
        (),
    );
    let now: Value = carts
        .read_item("ann", "a", None)
        .await
        .expect("a read")
        .into_model()
        .expect("JSON");
    checks.check(
        "and changes nothing",
        now["items"] == json!(["apple"]),
        &now,
    );

    let if_none =
        |tag| Some(ItemReadOptions::default().with_precondition(Precondition::IfNoneMatch(tag)));
    let unchanged = carts.read_item("ann", "a", if_none(current)).await;
    let code = status(&unchanged, |r| u16::from(r.status().status_code()));
    checks.check("a read with the current tag is 304", code == 304, code);
    let changed = carts.read_item("ann", "a", if_none(tag)).await;
    let code = status(&changed, |r| u16::from(r.status().status_code()));
    checks.check("a read with an old tag is 200", code == 200, code);

    let counter = json!({"id": "counter", "user": "shared", "n": 0});
    carts
        .create_item("shared", "counter", counter, None)
        .await
        .expect("the counter");
    let writers: Vec<_> = (0..16)
        .map(|_| {
            let carts = carts.clone();
            tokio::spawn(async move {
                for _ in 0..8 {
                    loop {
                        let read = carts
                            .read_item("shared", "counter", None)
                            .await
                            .expect("a read");
                        let tag = read.headers().etag().cloned().expect("an etag");
                        let mut doc: Value = read.into_model().expect("JSON");
                        doc["n"] = (doc["n"].as_i64().expect("a number") + 1).into();
                        let options = ItemWriteOptions::default()
                            .with_precondition(Precondition::IfMatch(tag));
                        let written = carts
                            .replace_item("shared", "counter", doc, Some(options))
                            .await;
                        match status(&written, |_| 0) {
                            0 => break,
                            412 => continue,
                            other => panic!("a write failed with {other}"),
                        }
                    }
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("a writer");
    }
    let total: Value = carts
        .read_item("shared", "counter", None)
        .await
        .expect("a read")
        .into_model()
        .expect("JSON");
    checks.check(
        "16 writers with retries on 412 count exactly",
        total["n"] == 128,
        &total,
    );
    // A query with a parameter, in one partition, in pages of two.
    for i in 0..5 {
        let id = format!("q{i}");
        let doc = json!({"id": id, "user": "quinn", "n": i});
        carts
            .create_item("quinn", &id, doc, None)
            .await
            .expect("a document");
    }
    let query = Query::from("SELECT * FROM c WHERE c.n >= @min")
        .with_parameter("@min", 2)
        .expect("a parameter");
    let mut options = QueryOptions::default();
    options.feed.max_item_count = Some(MaxItemCountHint::Limit(NonZeroU32::new(2).unwrap()));
    let mut pages = carts
        .query_items::<Value>(query, FeedScope::partition("quinn"), Some(options))
        .await
        .expect("a query")
        .into_pages();
    let (mut ids, mut count) = (Vec::new(), 0);
    while let Some(page) = pages.next().await {
        count += 1;
        let page = page.expect("a page");
        ids.extend(
            page.items()
                .iter()
                .map(|d| d["id"].as_str().unwrap_or("").to_owned()),
        );
    }
    ids.sort();
    checks.check(
        "a query with a parameter in one partition, in pages",
        ids == ["q2", "q3", "q4"] && count >= 2,
        (&ids, count),
    );

    // The query language across the container: a JOIN, and GROUP BY over its rows.
    for (id, user, tags) in [("j1", "jo", json!(["a", "b"])), ("j2", "kim", json!(["c"]))] {
        let doc = json!({"id": id, "user": user, "tags": tags});
        carts
            .create_item(user, id, doc, None)
            .await
            .expect("a document");
    }
    let mut tags: Vec<String> = all(
        &carts,
        "SELECT VALUE t FROM c JOIN t IN c.tags",
        FeedScope::full_container(),
    )
    .await
    .iter()
    .map(|t| t.as_str().unwrap_or("").to_owned())
    .collect();
    tags.sort();
    checks.check("a JOIN across partitions", tags == ["a", "b", "c"], &tags);
    let mut groups: Vec<String> = all(
        &carts,
        "SELECT c.user, COUNT(1) AS n FROM c JOIN t IN c.tags GROUP BY c.user",
        FeedScope::full_container(),
    )
    .await
    .iter()
    .map(|g| format!("{}:{}", g["user"].as_str().unwrap_or(""), g["n"]))
    .collect();
    groups.sort();
    checks.check(
        "GROUP BY over a JOIN's rows, across partitions",
        groups == ["jo:2", "kim:1"],
        &groups,
    );

    // A batch whose second operation fails leaves nothing of the first.
    let batch = TransactionalBatch::new("quinn")
        .create_item(json!({"id": "b1", "user": "quinn"}))
        .expect("an operation")
        .create_item(json!({"id": "q0", "user": "quinn"}))
        .expect("an operation");
    let answered = carts.execute_transactional_batch(batch, None).await;
    let failed = match answered {
        Err(_) => true,
        Ok(response) => match response.into_model() {
            Ok(model) => model.results().iter().any(|r| r.status_code() == 409),
            Err(_) => true,
        },
    };
    let left = carts.read_item("quinn", "b1", None).await;
    checks.check(
        "a batch with a failing operation applies nothing",
        failed && status(&left, |_| 0) == 404,
        (),
    );

    // The change feed of one partition from the beginning, then resumed from its token: only
    // what changed since.
    let mut feed = carts
        .query_change_feed::<Value>(
            FeedScope::partition("quinn"),
            ChangeFeedStartFrom::Beginning,
            None,
        )
        .await
        .expect("a change feed");
    let first = changes(&mut feed).await;
    let token = feed.to_continuation_token().expect("a token");
    let mut from_start: Vec<String> = first.iter().map(|(id, _)| id.clone()).collect();
    from_start.sort();
    checks.check(
        "the change feed from the beginning",
        from_start == ["q0", "q1", "q2", "q3", "q4"],
        &from_start,
    );
    let q1 = json!({"id": "q1", "user": "quinn", "n": 100});
    carts
        .upsert_item("quinn", "q1", q1, None)
        .await
        .expect("an upsert");
    let mut options = ChangeFeedOptions::default();
    options.feed.continuation_token = Some(token);
    let mut resumed = carts
        .query_change_feed::<Value>(
            FeedScope::partition("quinn"),
            ChangeFeedStartFrom::Beginning,
            Some(options),
        )
        .await
        .expect("a change feed");
    let since = changes(&mut resumed).await;
    checks.check(
        "the change feed resumed from its token: only what changed since",
        since == [("q1".to_owned(), 100)],
        &since,
    );

    // A hierarchical partition key: whole keys for points, a prefix for a query.
    let sessions = ContainerProperties::new("sessions", ("/tenant", "/user").into());
    database
        .create_container(sessions, None)
        .await
        .expect("a container with a hierarchical key");
    let sessions = database
        .container_client("sessions")
        .await
        .expect("its client");
    for (tenant, user) in [("t1", "u1"), ("t1", "u2"), ("t2", "u1")] {
        let item = json!({"id": format!("{tenant}-{user}"), "tenant": tenant, "user": user});
        sessions
            .create_item((tenant, user), &format!("{tenant}-{user}"), item, None)
            .await
            .expect("an item under a whole key");
    }
    let read = sessions.read_item(("t1", "u2"), "t1-u2", None).await;
    let wrong = sessions.read_item(("t1", "u1"), "t1-u2", None).await;
    checks.check(
        "a point read with the whole hierarchical key (another key: 404)",
        status(&read, |r| u16::from(r.status().status_code())) == 200
            && status(&wrong, |_| 0) == 404,
        (),
    );
    let mut tenant: Vec<String> = all(
        &sessions,
        "SELECT VALUE c.id FROM c",
        FeedScope::partition("t1"),
    )
    .await
    .iter()
    .map(|id| id.as_str().unwrap_or("").to_owned())
    .collect();
    tenant.sort();
    checks.check(
        "a query scoped to a prefix of the key",
        tenant == ["t1-u1", "t1-u2"],
        &tenant,
    );

    // A container's unique keys and time to live, as this SDK declares them.
    let members = ContainerProperties::new("members", "/team".into())
        .with_unique_key_policy(
            UniqueKeyPolicy::default().with_unique_key(UniqueKey::default().with_path("/email")),
        )
        .with_default_ttl(3600u32);
    database
        .create_container(members, None)
        .await
        .expect("a container with unique keys and a time to live");
    let members = database
        .container_client("members")
        .await
        .expect("its client");
    let first = members
        .create_item("red", "1", json!({"id": "1", "team": "red", "email": "a@e"}), None)
        .await;
    let twin = members
        .create_item("red", "2", json!({"id": "2", "team": "red", "email": "a@e"}), None)
        .await;
    let elsewhere = members
        .create_item("blue", "2", json!({"id": "2", "team": "blue", "email": "a@e"}), None)
        .await;
    checks.check(
        "a unique key: taken in the partition is 409, free in another",
        status(&first, |r| u16::from(r.status().status_code())) == 201
            && status(&twin, |_| 0) == 409
            && status(&elsewhere, |r| u16::from(r.status().status_code())) == 201,
        (),
    );
    let read = members.read(None).await.expect("the container's properties");
    let properties = read.into_model().expect("properties");
    let paths = (properties.unique_key_policy.as_ref())
        .and_then(|p| p.unique_keys.first())
        .map(|k| k.paths.clone());
    checks.check(
        "the container keeps its time to live and unique keys",
        matches!(properties.default_ttl, TimeToLive::Seconds(3600))
            && paths == Some(vec!["/email".to_owned()]),
        (&properties.default_ttl, &paths),
    );

    // A client with another key is refused.
    let stranger = AccountReference::with_authentication_key(
        args[1].parse().expect("an endpoint URL"),
        azure_core::credentials::Secret::from("d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXk="),
    );
    let refused = match CosmosClientBuilder::new()
        .build(stranger, RoutingStrategy::ProximityTo(Region::EAST_US))
        .await
    {
        Err(error) => u16::from(error.status().status_code()),
        Ok(client) => {
            let read = client.database_client("rust").read(None).await;
            status(&read, |_| 0)
        }
    };
    checks.check("a wrong key is refused (401)", refused == 401, refused);

    println!("rust cosmos: {} passed", checks.0);
}

/// Every result of `text` over `scope` of `container`, page after page.
async fn all(container: &ContainerClient, text: &str, scope: FeedScope) -> Vec<Value> {
    let mut pages = container
        .query_items::<Value>(Query::from(text), scope, None)
        .await
        .expect("a query")
        .into_pages();
    let mut out = Vec::new();
    while let Some(page) = pages.next().await {
        out.extend(page.expect("a page").items().iter().cloned());
    }
    out
}
