//! The backends' conformance suite over the in-memory tables.

use ifmatch_table::{MemoryTables, conformance};

#[tokio::test]
async fn memory_tables_keep_the_contract() {
    conformance::every(|_| MemoryTables::new()).await;
}
