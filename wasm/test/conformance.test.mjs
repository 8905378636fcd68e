// The records conformance suite of ifmatch-blob (records, errors, a race of writers, listings,
// staged blocks) and the tables suite of ifmatch-table, run inside the Worker against the
// Durable Objects in miniflare: the same suites memory, the local disk and Redis pass. Needs the build with the suite's route:
// `build.sh conformance` (build-conformance/). Not the objects suite: see src/conformance.rs.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startWorker } from "./targets.mjs";

describe("the records conformance suite on the Durable Object (miniflare)", () => {
  let worker;
  before(async () => {
    worker = await startWorker({ build: "build-conformance" });
  });
  after(async () => {
    await worker?.stop();
  });

  // The records suites, then the Table backends' (tables, key order, compare-and-swap,
  // batches, a 32-writer race).
  for (const suite of ["records", "errors", "race", "listing", "staging", "tables", "entities", "cas", "batch", "table-race"]) {
    test(suite, async () => {
      const answer = await fetch(`${worker.origin}/__conformance/${suite}`);
      const said = await answer.text();
      assert.equal(answer.status, 200, said);
      assert.equal(said, "ok");
    });
  }
});
