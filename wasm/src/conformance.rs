//! The backend conformance suites of `ifmatch-blob` and `ifmatch-table`, run inside the Worker
//! against its Durable Object records and tables, as every other backend runs them:
//! `GET /__conformance/{suite}` answers 200 `ok` once the suite passed; a failed check
//! panics, which aborts the request. Built only with the `conformance` feature, for the tests
//! (`build.sh conformance`); a deployed Worker has no such route.
//!
//! Not the objects suite: it streams a body of unknown length, which R2 cannot take (it must
//! know an upload's length first); the Worker answers such an upload 411, as
//! `test/worker.test.mjs` checks.

use ifmatch_blob::conformance;
use ifmatch_table::conformance as tables;
use worker::{Env, Response};

use crate::bindings::{RECORDS, TABLES};
use crate::records::DurableRecords;
use crate::tables::DurableTables;

/// Runs the suite `name` names.
pub async fn run(name: &str, env: &Env) -> worker::Result<Response> {
    let records = DurableRecords::new(env.durable_object(RECORDS)?);
    let store = DurableTables::new(env.durable_object(TABLES)?);
    match name {
        "tables" => tables::tables_come_and_go(&store).await,
        "entities" => tables::entities_come_in_key_order(&store).await,
        "cas" => tables::commits_compare_and_swap(&store).await,
        "batch" => tables::a_batch_applies_all_or_none(&store).await,
        "table-race" => tables::one_of_racing_writers_wins(&store).await,
        "records" => conformance::records(&records).await,
        "errors" => conformance::errors(&records).await,
        "race" => conformance::race(&records).await,
        "listing" => conformance::listing(&records).await,
        "staging" => conformance::staging(&records).await,
        _ => return Response::error(format!("no conformance suite {name}"), 404),
    }
    Response::ok("ok")
}
