//! What every [`Tables`] backend must do, as named behaviours, one public function each:
//! a backend's tests call them all (`crates/ifmatch-table/tests/conformance.rs` for memory).

use crate::store::{Change, EntityKey, Expected, Scan, TableError, Tables};
use crate::value::{DateTime, Entity, Value};

/// An entity of `table`'s tests: `n` in its `N` property, written at second `at`.
pub fn entity(pk: &str, rk: &str, n: i32, at: i64) -> Entity {
    Entity::new(pk, rk, DateTime::from_unix(at, 0), [("N", Value::Int32(n))])
}

fn key(pk: &str, rk: &str) -> EntityKey {
    (pk.to_owned(), rk.to_owned())
}

/// Inserts `entity` into `table`, which has none under its key.
async fn insert(store: &impl Tables, table: &str, entity: &Entity) {
    let change = put(entity, Expected::Absent);
    store.commit(table, &[change]).await.unwrap();
}

fn put(entity: &Entity, expected: Expected) -> Change {
    let key = key(&entity.partition_key, &entity.row_key);
    let write = Some(entity.clone());
    Change {
        key,
        expected,
        write,
    }
}

/// Every check of the contract, each on the store `fresh` makes for its name (`a` to `e`):
/// a fresh store each, or prefixes of one (the checks name the same tables).
pub async fn every<T: Tables>(fresh: impl Fn(&'static str) -> T) {
    tables_come_and_go(&fresh("a")).await;
    entities_come_in_key_order(&fresh("b")).await;
    commits_compare_and_swap(&fresh("c")).await;
    a_batch_applies_all_or_none(&fresh("d")).await;
    one_of_racing_writers_wins(&fresh("e")).await;
}

/// Tables are created once, listed in order after a name, and deleted with their entities.
pub async fn tables_come_and_go(store: &impl Tables) {
    assert!(store.create_table("beta").await.unwrap());
    assert!(!store.create_table("beta").await.unwrap(), "created twice");
    assert!(store.create_table("alpha").await.unwrap());
    assert!(store.create_table("gamma").await.unwrap());
    assert_eq!(
        store.tables("", 10).await.unwrap(),
        ["alpha", "beta", "gamma"]
    );
    assert_eq!(store.tables("alpha", 1).await.unwrap(), ["beta"]);
    let one = entity("p", "r", 1, 1);
    insert(store, "beta", &one).await;
    assert!(store.delete_table("beta").await.unwrap());
    assert!(!store.delete_table("beta").await.unwrap());
    assert!(store.create_table("beta").await.unwrap());
    let gone = store.get("beta", &key("p", "r")).await.unwrap();
    assert_eq!(gone, None, "a table deleted and created again is empty");
    let missing = store.get("delta", &key("p", "r")).await;
    assert_eq!(missing, Err(TableError::TableNotFound("delta".into())));
}

/// A scan returns entities in (PartitionKey, RowKey) order, from a key on, within a
/// partition when asked, and no more than its limit.
pub async fn entities_come_in_key_order(store: &impl Tables) {
    store.create_table("ordered").await.unwrap();
    let keys = [("b", "2"), ("a", "9"), ("b", "1"), ("c", "0"), ("a", "10")];
    for (i, (pk, rk)) in keys.iter().enumerate() {
        let one = entity(pk, rk, i as i32, 1);
        insert(store, "ordered", &one).await;
    }
    let listed = |found: Vec<Entity>| -> Vec<(String, String)> {
        (found.into_iter())
            .map(|e| (e.partition_key, e.row_key))
            .collect()
    };
    let all = Scan {
        from: None,
        partition: None,
        limit: 100,
    };
    let found = listed(store.scan("ordered", all).await.unwrap());
    let want = [("a", "10"), ("a", "9"), ("b", "1"), ("b", "2"), ("c", "0")];
    assert_eq!(found, want.map(|(p, r)| key(p, r)));
    let partition = Scan {
        partition: Some("b"),
        ..all
    };
    let found = listed(store.scan("ordered", partition).await.unwrap());
    assert_eq!(found, [key("b", "1"), key("b", "2")]);
    let from = Scan {
        from: Some(("a", "9")),
        limit: 2,
        ..all
    };
    let found = listed(store.scan("ordered", from).await.unwrap());
    assert_eq!(
        found,
        [key("a", "9"), key("b", "1")],
        "from a key, inclusive, limited"
    );
    let within = Scan {
        from: Some(("b", "2")),
        partition: Some("b"),
        ..all
    };
    let found = listed(store.scan("ordered", within).await.unwrap());
    assert_eq!(found, [key("b", "2")]);
    // Several read at once: each in its place, absent ones too.
    let asked = [key("c", "0"), key("a", "1"), key("b", "2"), key("c", "0")];
    let found = store.get_many("ordered", &asked).await.unwrap();
    let found: Vec<_> = found.into_iter().map(|e| e.map(|e| e.row_key)).collect();
    assert_eq!(
        found,
        [Some("0"), None, Some("2"), Some("0")].map(|r| r.map(String::from))
    );
    let missing = store.get_many("nowhere", &asked).await;
    assert!(
        matches!(missing, Err(TableError::TableNotFound(_))),
        "{missing:?}"
    );
}

/// A commit is a compare-and-swap: an insert finds nothing, a replace or delete finds the
/// version it names (or any, with `Present`); a change that finds otherwise applies nothing.
pub async fn commits_compare_and_swap(store: &impl Tables) {
    store.create_table("cas").await.unwrap();
    let first = entity("p", "r", 1, 1);
    insert(store, "cas", &first).await;
    let again = store.commit("cas", &[put(&first, Expected::Absent)]).await;
    assert_eq!(
        again,
        Err(TableError::Conflict {
            index: 0,
            present: true
        })
    );
    let second = entity("p", "r", 2, 2);
    let stale = put(&second, Expected::Version(DateTime::from_unix(7, 0)));
    let conflict = store.commit("cas", &[stale]).await;
    assert_eq!(
        conflict,
        Err(TableError::Conflict {
            index: 0,
            present: true
        })
    );
    let current = put(&second, Expected::Version(first.timestamp));
    store.commit("cas", &[current]).await.unwrap();
    assert_eq!(
        store.get("cas", &key("p", "r")).await.unwrap(),
        Some(second.clone())
    );
    let any = put(&entity("p", "r", 3, 3), Expected::Present);
    store.commit("cas", &[any]).await.unwrap();
    let delete = |expected| Change {
        key: key("p", "r"),
        expected,
        write: None,
    };
    let old = delete(Expected::Version(second.timestamp));
    let refused = store.commit("cas", &[old]).await;
    assert_eq!(
        refused,
        Err(TableError::Conflict {
            index: 0,
            present: true
        })
    );
    store
        .commit("cas", &[delete(Expected::Present)])
        .await
        .unwrap();
    let gone = store.commit("cas", &[delete(Expected::Present)]).await;
    assert_eq!(
        gone,
        Err(TableError::Conflict {
            index: 0,
            present: false
        })
    );
    let upsert = put(&entity("p", "r", 4, 4), Expected::Anything);
    for _ in 0..2 {
        store
            .commit("cas", std::slice::from_ref(&upsert))
            .await
            .unwrap();
    }
}

/// A commit of several changes applies all of them or, when one finds otherwise than it
/// expects, none, and names the first that failed.
pub async fn a_batch_applies_all_or_none(store: &impl Tables) {
    store.create_table("batch").await.unwrap();
    let existing = entity("p", "0", 0, 1);
    insert(store, "batch", &existing).await;
    let mut changes: Vec<Change> = (1..100)
        .map(|i| put(&entity("p", &i.to_string(), i, 2), Expected::Absent))
        .collect();
    changes.insert(50, put(&existing, Expected::Absent));
    let failed = store.commit("batch", &changes).await;
    assert_eq!(
        failed,
        Err(TableError::Conflict {
            index: 50,
            present: true
        })
    );
    let scan = Scan {
        from: None,
        partition: Some("p"),
        limit: 1000,
    };
    assert_eq!(
        store.scan("batch", scan).await.unwrap(),
        std::slice::from_ref(&existing),
        "none applied"
    );
    changes[50] = put(
        &entity("p", "0", 100, 2),
        Expected::Version(existing.timestamp),
    );
    store.commit("batch", &changes).await.unwrap();
    let all = store.scan("batch", scan).await.unwrap();
    assert_eq!(all.len(), 100, "all applied");
    // A replace and a delete, then a check that fails: both are as they were.
    let (one, two) = (&all[1], &all[12]);
    let changes = [
        put(
            &entity("p", &one.row_key, -1, 3),
            Expected::Version(one.timestamp),
        ),
        Change {
            key: key("p", &two.row_key),
            expected: Expected::Present,
            write: None,
        },
        put(
            &entity("p", "0", -1, 3),
            Expected::Version(DateTime::from_unix(9, 0)),
        ),
    ];
    assert_eq!(
        store.commit("batch", &changes).await,
        Err(TableError::Conflict {
            index: 2,
            present: true
        })
    );
    assert_eq!(
        store.scan("batch", scan).await.unwrap(),
        all,
        "none applied"
    );
}

/// 32 writers holding one version: exactly one commit applies.
pub async fn one_of_racing_writers_wins(store: &impl Tables) {
    store.create_table("race").await.unwrap();
    let first = entity("p", "r", 0, 1);
    insert(store, "race", &first).await;
    let writers = (0..32).map(|w| {
        let change = put(
            &entity("p", "r", w + 1, 2),
            Expected::Version(first.timestamp),
        );
        async move { store.commit("race", &[change]).await }
    });
    let outcomes = futures_util::future::join_all(writers).await;
    let won = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
    assert_eq!(won, 1, "{outcomes:?}");
    let lost = TableError::Conflict {
        index: 0,
        present: true,
    };
    assert!(
        outcomes
            .iter()
            .all(|o| o.is_ok() || *o == Err(lost.clone()))
    );
}
