// The Queue service through Azure's own Python SDK (azure-storage-queue, tests/sdk/queues.py),
// unchanged, with the connection string a user brings from Azurite, against the native server
// and the Worker in miniflare (its queues under /queue, each queue's messages in a Durable
// Object of their own). Over Redis and a bucket: crates/ifmatch-server/tests/queues.rs.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DEV_KEY, startNative, startWorker } from "./targets.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const python = process.env.IFMATCH_PYTHON ?? join(here, "../../.venv/bin/python");
const script = join(here, "../../tests/sdk/queues.py");

const ACCOUNT = "devstoreaccount1";
const connectionString = (server) =>
  `DefaultEndpointsProtocol=http;AccountName=${ACCOUNT};AccountKey=${DEV_KEY};` +
  `BlobEndpoint=${server.origin}/${ACCOUNT};QueueEndpoint=${server.queueOrigin}/${ACCOUNT};`;

for (const [name, start] of [
  ["native ifmatch serve", startNative],
  ["Cloudflare Worker (miniflare)", startWorker],
]) describe(`the Queue SDK against ${name}`, () => {
  let server;
  before(async () => {
    server = await start({ anonymous: false });
  });
  after(() => server?.stop());

  test("the Python SDK's checks (azure-storage-queue, tests/sdk/queues.py)", async () => {
    assert.ok(existsSync(python), `${python} missing: run scripts/test, which makes the venv`);
    const { code, out } = await new Promise((resolve, reject) => {
      const child = spawn(python, [script, connectionString(server)], { stdio: ["ignore", "pipe", "pipe"] });
      let text = "";
      child.stdout.on("data", (d) => (text += d));
      child.stderr.on("data", (d) => (text += d));
      child.on("error", reject);
      child.on("close", (exit) => resolve({ code: exit, out: text }));
    });
    const tally = out.split("\n").find((l) => l.startsWith("python queues:")) ?? "no tally";
    assert.equal(code, 0, `${tally}\n${out}`);
  });
});
