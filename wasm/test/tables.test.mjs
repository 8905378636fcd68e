// The Table service through Azure's own SDKs, unchanged, started as a user would (every request
// signed with the development account's key, or a SAS), with the connection string a user brings
// from Azurite: the JS SDK (@azure/data-tables) and the classic Node example with the legacy
// azure-storage 0.9.0, against the native server and the Worker (its tables under /table); the
// Python SDK (tests/sdk/tables.py) and the lease lock across two tables (tests/sdk/table_lock.py)
// against the Worker here, against the native server in crates/ifmatch-server/tests/tables.rs.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  AzureNamedKeyCredential,
  AzureSASCredential,
  TableClient,
  TableServiceClient,
  generateTableSas,
  odata,
} from "@azure/data-tables";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { python, runPython } from "./programs.mjs";
import { failure } from "./rejects.mjs";
import { ACCOUNT, DEV_KEY, connectionString, startNative, startWorker } from "./targets.mjs";

// The legacy package (the last version with updateEntity), as the classic Node example uses it.
const legacy = createRequire(import.meta.url)("azure-storage");

for (const [name, start] of [
  ["native ifmatch serve", startNative],
  ["Cloudflare Worker (miniflare)", startWorker],
]) describe(`Table SDKs against ${name}`, { concurrency: true }, () => {
  let server;
  before(async () => {
    server = await start({ anonymous: false });
  });
  after(async () => {
    await server?.stop();
  });

  // The native server runs these from its own tests (crates/ifmatch-server/tests/tables.rs).
  const workerOnly = { skip: start === startNative };
  for (const [script, tally] of [["tables.py", "python tables:"], ["table_lock.py", "table lock:"]]) {
    test(`the Python SDK: ${script}`, workerOnly, async () => {
      assert.ok(existsSync(python), `${python} missing: run scripts/test, which makes the venv`);
      const { code, out } = await runPython(script, [connectionString(server, "table")]);
      const line = out.split("\n").find((l) => l.startsWith(tally)) ?? "no tally";
      assert.equal(code, 0, `${line}\n${out}`);
    });
  }

  test("the JS SDK (@azure/data-tables): If-Match, 412, 409, types, pages, a batch, a table SAS", async () => {
    const options = { allowInsecureConnection: true };
    const service = TableServiceClient.fromConnectionString(connectionString(server, "table"), options);
    const name = `js${Date.now()}`;
    await service.createTable(name);
    const table = TableClient.fromConnectionString(connectionString(server, "table"), name, options);

    const created = await table.createEntity({ partitionKey: "p", rowKey: "r", count: 1 });
    assert.match(created.etag, /^W\/"datetime'/);
    const conflict = await failure(table.createEntity({ partitionKey: "p", rowKey: "r" }));
    assert.equal(conflict.statusCode, 409);
    assert.equal(conflict.details.errorCode, "EntityAlreadyExists");

    const updated = await table.updateEntity(
      { partitionKey: "p", rowKey: "r", count: 2 }, "Replace", { etag: created.etag });
    assert.notEqual(updated.etag, created.etag);
    const stale = await failure(table.updateEntity(
      { partitionKey: "p", rowKey: "r", count: 3 }, "Merge", { etag: created.etag }));
    assert.equal(stale.statusCode, 412);
    assert.equal(stale.details.errorCode, "UpdateConditionNotSatisfied");
    const kept = await table.getEntity("p", "r");
    assert.equal(kept.count, 2);
    assert.equal(kept.etag, updated.etag);

    await table.upsertEntity({ partitionKey: "p", rowKey: "u", a: 1 }, "Merge");
    await table.upsertEntity({ partitionKey: "p", rowKey: "u", b: 2 }, "Merge");
    const merged = await table.getEntity("p", "u");
    assert.deepEqual([merged.a, merged.b], [1, 2]);

    const big = { value: "9007199254740993", type: "Int64" };
    const when = new Date("2026-11-24T08:30:15.123Z");
    await table.createEntity({
      partitionKey: "t", rowKey: "1", big, when, bytes: new Uint8Array([0, 1, 254, 255]),
      flag: true, ratio: 0.5,
    });
    const typed = await table.getEntity("t", "1");
    assert.equal(typed.big, 9007199254740993n, "Int64 back as a BigInt, every digit kept");
    assert.equal(typed.when.getTime(), when.getTime());
    assert.deepEqual([...typed.bytes], [0, 1, 254, 255]);
    assert.equal(typed.flag, true);
    assert.equal(typed.ratio, 0.5);

    for (let i = 0; i < 12; i++) {
      await table.createEntity({ partitionKey: "q", rowKey: String(i).padStart(2, "0"), n: i });
    }
    const filter = odata`PartitionKey eq ${"q"} and n ge ${5}`;
    const found = [];
    for await (const page of table.listEntities({ queryOptions: { filter } }).byPage({ maxPageSize: 3 })) {
      assert.ok(page.length <= 3);
      found.push(...page.map((e) => e.n));
    }
    assert.deepEqual(found, [5, 6, 7, 8, 9, 10, 11]);

    const batch = Array.from({ length: 50 }, (_, i) => ["create", { partitionKey: "b", rowKey: `${i}`, i }]);
    const applied = await table.submitTransaction(batch);
    assert.equal(applied.status, 202);
    assert.equal(applied.subResponses.length, 50);
    const refusedBatch = await failure(table.submitTransaction([
      ["create", { partitionKey: "b", rowKey: "new" }],
      ["create", { partitionKey: "b", rowKey: "7" }],
    ]));
    assert.equal(refusedBatch.statusCode, 409);
    const missingNew = await failure(table.getEntity("b", "new"));
    assert.equal(missingNew.statusCode, 404, "a failed batch applies nothing");

    const sas = generateTableSas(name, new AzureNamedKeyCredential(ACCOUNT, DEV_KEY), {
      permissions: { query: true },
      expiresOn: new Date(Date.now() + 3600_000),
    });
    const reader = new TableClient(
      `${server.tableOrigin}/${ACCOUNT}`, name, new AzureSASCredential(sas), options);
    assert.equal((await reader.getEntity("q", "03")).n, 3);
    const denied = await failure(reader.deleteEntity("q", "03"));
    assert.equal(denied.statusCode, 403);

    const current = await table.getEntity("p", "r");
    const gone = await failure(table.deleteEntity("p", "r", { etag: created.etag }));
    assert.equal(gone.statusCode, 412);
    await table.deleteEntity("p", "r", { etag: current.etag });
    const missing = await failure(table.getEntity("p", "r"));
    assert.equal(missing.statusCode, 404);
    await service.deleteTable(name);
  });

  test("the classic Node example with azure-storage 0.9.0: updateEntity with checkEtag", async () => {
    // The package drops a custom endpoint's path: its requests name no account, and reach the
    // first account's tables.
    const tableService = legacy.createTableService(connectionString(server, "table"));
    const entGen = legacy.TableUtilities.entityGenerator;
    const call = (method, ...args) =>
      new Promise((resolve) => tableService[method](...args, (error, result) => resolve({ error, result })));
    assert.equal((await call("createTableIfNotExists", "tasktable")).error, null);
    const task = {
      PartitionKey: entGen.String("hometasks"),
      RowKey: entGen.String("1"),
      description: entGen.String("take out the trash"),
    };
    assert.equal((await call("insertOrReplaceEntity", "tasktable", task)).error, null);
    const { result: serverEntity } = await call("retrieveEntity", "tasktable", "hometasks", "1");
    const { result: otherCopy } = await call("retrieveEntity", "tasktable", "hometasks", "1");
    // Another worker writes first.
    otherCopy.description._ = "take out the recycling";
    assert.equal((await call("updateEntity", "tasktable", otherCopy, { checkEtag: true })).error, null);
    // The example, verbatim: its entity is now stale.
    const outcome = await new Promise((resolve) => {
      serverEntity.description._ = "wash the dishes";
      tableService.updateEntity("tasktable", serverEntity, { checkEtag: true }, function (error) {
        resolve(error);
      });
    });
    assert.ok(outcome, "a stale entity must not be written");
    assert.equal(outcome.code, "UpdateConditionNotSatisfied");
    assert.equal(outcome.statusCode, 412);
    const { result: now } = await call("retrieveEntity", "tasktable", "hometasks", "1");
    assert.equal(now.description._, "take out the recycling", "the first write stands");
  });
});
