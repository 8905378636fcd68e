// The shared suite against the Worker, in miniflare (workerd with R2 and Durable Objects), and
// what only the Worker does.
import assert from "node:assert/strict";
import { request } from "node:http";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { suite } from "./suite.mjs";
import { startNative, startWorker } from "./targets.mjs";

suite("Cloudflare Worker (miniflare)", startWorker);

describe("Cloudflare Worker only: copies from another server", () => {
  let origin;
  let worker;
  before(async () => {
    origin = await startNative();
    worker = await startWorker({ copyFrom: new URL(origin.origin).host });
  });
  after(async () => {
    await worker?.stop();
    await origin?.stop();
  });

  test("Put Blob From URL, Copy Blob and Put Block From URL read a server COPY_FROM names, and no other", async () => {
    for (const base of [origin.base, worker.base]) {
      assert.equal((await fetch(`${base}/box?restype=container`, { method: "PUT" })).status, 201);
    }
    const source = `${origin.base}/box/a.txt`;
    const put = await fetch(source, {
      method: "PUT",
      headers: { "x-ms-blob-type": "BlockBlob", "content-type": "text/plain", "x-ms-meta-team": "a" },
      body: "hello, world",
    });
    assert.equal(put.status, 201);
    const fromUrl = await fetch(`${worker.base}/box/b`, {
      method: "PUT",
      headers: { "x-ms-blob-type": "BlockBlob", "x-ms-copy-source": source },
    });
    assert.equal(fromUrl.status, 201, await fromUrl.text());
    const read = await fetch(`${worker.base}/box/b`);
    assert.deepEqual([read.headers.get("content-type"), await read.text()], ["text/plain", "hello, world"]);
    const copied = await fetch(`${worker.base}/box/c`, { method: "PUT", headers: { "x-ms-copy-source": source } });
    assert.deepEqual([copied.status, copied.headers.get("x-ms-copy-status")], [202, "success"]);
    assert.equal((await fetch(`${worker.base}/box/c`, { method: "HEAD" })).headers.get("x-ms-meta-team"), "a");
    const block = await fetch(`${worker.base}/box/d?comp=block&blockid=YQ==`, {
      method: "PUT",
      headers: { "x-ms-copy-source": source, "x-ms-source-range": "bytes=7-11" },
    });
    assert.equal(block.status, 201, await block.text());
    const list = "<BlockList><Latest>YQ==</Latest></BlockList>";
    assert.equal((await fetch(`${worker.base}/box/d?comp=blocklist`, { method: "PUT", body: list })).status, 201);
    assert.equal(await (await fetch(`${worker.base}/box/d`)).text(), "world");
    const elsewhere = await fetch(`${worker.base}/box/e`, {
      method: "PUT",
      headers: { "x-ms-blob-type": "BlockBlob", "x-ms-copy-source": "http://169.254.169.254/latest/meta-data" },
    });
    assert.deepEqual([elsewhere.status, elsewhere.headers.get("x-ms-error-code")], [403, "CannotVerifyCopySource"]);
  });
});

// Tests under `name` on a Worker of their own, started before them and stopped after; `body`
// is given a function that answers it.
function ownWorker(name, body) {
  describe(name, () => {
    let worker;
    before(async () => {
      worker = await startWorker();
    });
    after(async () => {
      await worker?.stop();
    });
    body(() => worker);
  });
}

ownWorker("Cloudflare Worker only", (worker) => {

  test("an upload without Content-Length is 411 MissingContentLengthHeader (R2 needs the length)", async () => {
    const created = await fetch(`${worker().base}/nolength?restype=container`, { method: "PUT" });
    assert.equal(created.status, 201);
    const answer = await new Promise((resolve, reject) => {
      const headers = { "x-ms-blob-type": "BlockBlob" };
      const r = request(`${worker().base}/nolength/b`, { method: "PUT", headers, agent: false }, (res) => {
        res.resume();
        res.on("end", () => resolve([res.statusCode, res.headers["x-ms-error-code"]]));
      });
      r.on("error", reject);
      // No length given: node sends the body chunked.
      r.write("chunk one, ");
      r.end("chunk two");
    });
    assert.deepEqual(answer, [411, "MissingContentLengthHeader"]);
    const missing = await fetch(`${worker().base}/nolength/b`);
    assert.equal(missing.status, 404);
  });

  /** The status line and body of `head` sent raw (no client checks its header names). */
  function raw(head) {
    const { hostname, port } = new URL(worker().origin);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => socket.end(head));
      let out = "";
      socket.on("data", (d) => (out += d));
      socket.on("end", () => resolve(out));
      socket.on("error", reject);
    });
  }

  test("a header the runtime passes and http cannot hold is the dialect's 400, never a 500", async () => {
    const host = new URL(worker().origin).host;
    assert.equal((await fetch(`${worker().base}/oddheaders?restype=container`, { method: "PUT" })).status, 201);
    const put = (header) =>
      `PUT /devstoreaccount1/oddheaders/b HTTP/1.1\r\nHost: ${host}\r\nx-ms-blob-type: BlockBlob\r\n${header}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi`;
    const meta = await raw(put("x-ms-meta-'na\u00efve': x"));
    assert.match(meta, /^HTTP\/1\.1 400/, meta);
    assert.match(meta, /InvalidMetadata/, meta);
    const value = await raw(put("x-ms-meta-name: caf\u00e9"));
    assert.match(value, /^HTTP\/1\.1 400/, value);
    assert.equal((await fetch(`${worker().base}/oddheaders/b`)).status, 404, "nothing written");
    const table = await raw(
      `GET /table/devstoreaccount1/Tables HTTP/1.1\r\nHost: ${host}\r\nx-odd\u00ef: 1\r\nConnection: close\r\n\r\n`,
    );
    assert.match(table, /^HTTP\/1\.1 400/, table);
    const cosmos = await raw(`GET /dbs HTTP/1.1\r\nHost: ${host}\r\nx-odd\u00ef: 1\r\nConnection: close\r\n\r\n`);
    assert.match(cosmos, /^HTTP\/1\.1 400/, cosmos);
    assert.match(cosmos, /BadRequest/, cosmos);
  });
});

ownWorker("Cloudflare Worker only: a long block list", (worker) => {

  // Azure takes 50,000 blocks; committing them reads each block's bytes from R2 for the blob's
  // SHA-256, about 2 ms a block in miniflare, so the default run commits 4,000 (a record over
  // half a MiB, kept in parts) and `scripts/test --full` (IFMATCH_FULL=1) the 50,000.
  const blocks = process.env.IFMATCH_FULL ? 50_000 : 4_000;
  test(`a list of ${blocks} blocks commits, as Azure takes it (the record is kept in parts)`, async () => {
    const container = `${worker().base}/manyblocks`;
    assert.equal((await fetch(`${container}?restype=container`, { method: "PUT" })).status, 201);
    const id = (n) => Buffer.from(`block-${n}`).toString("base64");
    for (const n of [0, 1]) {
      const staged = await fetch(`${container}/b?comp=block&blockid=${encodeURIComponent(id(n))}`, {
        method: "PUT",
        body: String(n),
      });
      assert.equal(staged.status, 201);
    }
    const latest = Array.from({ length: blocks }, (_, i) => `<Latest>${id(i % 2)}</Latest>`);
    const xml = `<?xml version="1.0" encoding="utf-8"?><BlockList>${latest.join("")}</BlockList>`;
    const committed = await fetch(`${container}/b?comp=blocklist`, { method: "PUT", body: xml });
    assert.equal(committed.status, 201, await committed.text());
    const read = await fetch(`${container}/b`, { headers: { range: `bytes=${blocks - 10}-${blocks - 1}` } });
    assert.equal(read.status, 206);
    assert.equal(await read.text(), "0101010101");
    const list = await fetch(`${container}/b?comp=blocklist`);
    const listed = (await list.text()).match(/<Block>/g).length;
    assert.equal(listed, blocks);
    // Committed again with two blocks: the record fits one value again, and reads as such.
    const two = `<?xml version="1.0" encoding="utf-8"?><BlockList><Committed>${id(1)}</Committed><Committed>${id(0)}</Committed></BlockList>`;
    assert.equal((await fetch(`${container}/b?comp=blocklist`, { method: "PUT", body: two })).status, 201);
    assert.equal(await (await fetch(`${container}/b`)).text(), "10");
    const names = await (await fetch(`${container}?restype=container&comp=list`)).text();
    assert.match(names, /<Name>b<\/Name>/);
  });
});
