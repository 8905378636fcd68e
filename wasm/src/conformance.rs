//! The backend conformance suite of `ifmatch-blob`, run inside the Worker against its Durable
//! Object records, as every other records backend runs it:
//! `GET /__conformance/{suite}` answers 200 `ok` once the suite passed; a failed check
//! panics, which aborts the request. Built only with the `conformance` feature, for the tests
//! (`build.sh conformance`); a deployed Worker has no such route.
//!
//! Not the objects suite: it streams a body of unknown length, which R2 cannot take (it must
//! know an upload's length first); the Worker answers such an upload 411, as
//! `test/worker.test.mjs` checks.

use ifmatch_blob::conformance;
use worker::{Env, Response};

use crate::{DurableRecords, RECORDS};

/// Runs the suite `name` names.
pub async fn run(name: &str, env: &Env) -> worker::Result<Response> {
    let records = DurableRecords::new(env.durable_object(RECORDS)?);
    match name {
        "records" => conformance::records(&records).await,
        "errors" => conformance::errors(&records).await,
        "race" => conformance::race(&records).await,
        "listing" => conformance::listing(&records).await,
        "staging" => conformance::staging(&records).await,
        _ => return Response::error(format!("no conformance suite {name}"), 404),
    }
    Response::ok("ok")
}
