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
