//! The backends' conformance suite over the in-memory tables.

use ifmatch_table::{MemoryTables, conformance};

#[tokio::test]
async fn memory_tables_keep_the_contract() {
    conformance::tables_come_and_go(&MemoryTables::new()).await;
    conformance::entities_come_in_key_order(&MemoryTables::new()).await;
    conformance::commits_compare_and_swap(&MemoryTables::new()).await;
    conformance::a_batch_applies_all_or_none(&MemoryTables::new()).await;
    conformance::one_of_racing_writers_wins(&MemoryTables::new()).await;
}
