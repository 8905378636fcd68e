//! The Table backends' conformance suite over the local disk's redb database.

use ifmatch_backends::local::LocalTables;
use ifmatch_table::conformance;

fn tables(dir: &tempfile::TempDir, name: &str) -> LocalTables {
    LocalTables::open(&dir.path().join(format!("{name}.redb"))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_tables_keep_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    conformance::tables_come_and_go(&tables(&dir, "a")).await;
    conformance::entities_come_in_key_order(&tables(&dir, "b")).await;
    conformance::commits_compare_and_swap(&tables(&dir, "c")).await;
    conformance::a_batch_applies_all_or_none(&tables(&dir, "d")).await;
    conformance::one_of_racing_writers_wins(&tables(&dir, "e")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_tables_outlive_their_process_handle() {
    let dir = tempfile::tempdir().unwrap();
    let entity = conformance::entity("p", "r", 7, 1);
    {
        use ifmatch_table::{Change, Expected, Tables};
        let store = tables(&dir, "kept");
        store.create_table("kept").await.unwrap();
        let key = ("p".to_owned(), "r".to_owned());
        let write = Some(entity.clone());
        let change = Change {
            key,
            expected: Expected::Absent,
            write,
        };
        store.commit("kept", &[change]).await.unwrap();
    }
    use ifmatch_table::Tables;
    let again = tables(&dir, "kept");
    let key = ("p".to_owned(), "r".to_owned());
    assert_eq!(again.get("kept", &key).await.unwrap(), Some(entity));
}

/// Commits in flight at once are written together (one transaction, one sync) yet each keeps
/// its own outcome: of 96 writers over three tables each one's own entity lands, one of those
/// racing for a shared key per table wins, and a commit to a table that is not there fails
/// alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commits_written_together_keep_their_own_outcomes() {
    use ifmatch_table::{Change, Expected, TableError, Tables};
    let dir = tempfile::tempdir().unwrap();
    let store = tables(&dir, "grouped");
    for table in ["t0", "t1", "t2"] {
        store.create_table(table).await.unwrap();
    }
    let insert = |row: &str, value| Change {
        key: ("p".to_owned(), row.to_owned()),
        expected: Expected::Absent,
        write: Some(conformance::entity("p", row, value, 1)),
    };
    let mut writers = tokio::task::JoinSet::new();
    for n in 0..96_i32 {
        let (store, table) = (store.clone(), format!("t{}", n % 3));
        let (own, shared) = (insert(&format!("own{n}"), n), insert("shared", n));
        writers.spawn(async move {
            let own = store.commit(&table, &[own]).await;
            let shared = store.commit(&table, &[shared]).await;
            let missing = if n == 50 {
                Some(store.commit("gone", &[insert_gone()]).await)
            } else {
                None
            };
            (own, shared, missing)
        });
    }
    fn insert_gone() -> Change {
        Change {
            key: ("p".to_owned(), "x".to_owned()),
            expected: Expected::Absent,
            write: Some(conformance::entity("p", "x", 0, 1)),
        }
    }
    let (mut won, mut lost) = (0, 0);
    while let Some(outcome) = writers.join_next().await {
        let (own, shared, missing) = outcome.unwrap();
        own.unwrap();
        match shared {
            Ok(()) => won += 1,
            Err(TableError::Conflict {
                index: 0,
                present: true,
            }) => lost += 1,
            Err(error) => panic!("{error}"),
        }
        if let Some(missing) = missing {
            assert!(
                matches!(missing, Err(TableError::TableNotFound(_))),
                "{missing:?}"
            );
        }
    }
    assert_eq!((won, lost), (3, 93));
    for n in 0..96_i32 {
        let key = ("p".to_owned(), format!("own{n}"));
        let found = store.get(&format!("t{}", n % 3), &key).await.unwrap();
        assert_eq!(found, Some(conformance::entity("p", &key.1, n, 1)));
    }
}
