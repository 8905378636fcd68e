// The shared suite against the Worker, in miniflare (workerd with R2 and Durable Objects), and
// what only the Worker does.
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";
import { suite } from "./suite.mjs";
import { startWorker } from "./targets.mjs";

suite("Cloudflare Worker (miniflare)", startWorker);

describe("Cloudflare Worker only", () => {
  let worker;
  before(async () => {
    worker = await startWorker();
  });
  after(async () => {
    await worker?.stop();
  });

  test("an upload without Content-Length is 411 MissingContentLengthHeader (R2 needs the length)", async () => {
    const created = await fetch(`${worker.base}/nolength?restype=container`, { method: "PUT" });
    assert.equal(created.status, 201);
    const answer = await new Promise((resolve, reject) => {
      const headers = { "x-ms-blob-type": "BlockBlob" };
      const r = request(`${worker.base}/nolength/b`, { method: "PUT", headers, agent: false }, (res) => {
        res.resume();
        res.on("end", () => resolve([res.statusCode, res.headers["x-ms-error-code"]]));
      });
      r.on("error", reject);
      // No length given: node sends the body chunked.
      r.write("chunk one, ");
      r.end("chunk two");
    });
    assert.deepEqual(answer, [411, "MissingContentLengthHeader"]);
    const missing = await fetch(`${worker.base}/nolength/b`);
    assert.equal(missing.status, 404);
  });
});
