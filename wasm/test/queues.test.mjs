// The Queue service through Azure's own SDKs, unchanged, with the connection string a user brings
// from Azurite: the JS SDK (@azure/storage-queue), the Python SDK (azure-storage-queue,
// tests/sdk/queues.py) and kombu's transport (tests/sdk/kombu_queues.py), against the native server and the Worker in miniflare (its queues under
// /queue, each queue's messages in a Durable Object of their own). Over Redis and a bucket:
// crates/ifmatch-server/tests/queues.rs.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { QueueServiceClient } from "@azure/storage-queue";
import { existsSync } from "node:fs";
import { python, runPython } from "./programs.mjs";
import { ACCOUNT, DEV_KEY, connectionString, startNative, startWorker } from "./targets.mjs";

for (const [name, start] of [
  ["native ifmatch serve", startNative],
  ["Cloudflare Worker (miniflare)", startWorker],
]) describe(`the Queue SDK against ${name}`, () => {
  let server;
  before(async () => {
    server = await start({ anonymous: false });
  });
  after(() => server?.stop());

  test("the JS SDK's everyday calls: send, receive, update, delete, peek, clear, metadata, list", async () => {
    const service = QueueServiceClient.fromConnectionString(connectionString(server, "queue"));
    const name = `js${Date.now()}`;
    const queue = service.getQueueClient(name);
    await queue.create({ metadata: { team: "js" } });
    const sent = await queue.sendMessage("hello & <goodbye>");
    assert.ok(sent.messageId && sent.popReceipt);
    const [peeked] = (await queue.peekMessages()).peekedMessageItems;
    assert.equal(peeked.messageText, "hello & <goodbye>");
    assert.equal(peeked.dequeueCount, 0);
    const received = (await queue.receiveMessages({ numberOfMessages: 5, visibilityTimeout: 30 }))
      .receivedMessageItems;
    assert.equal(received.length, 1);
    assert.equal(received[0].dequeueCount, 1);
    assert.equal((await queue.receiveMessages()).receivedMessageItems.length, 0, "invisible to the others");
    const updated = await queue.updateMessage(received[0].messageId, received[0].popReceipt, "changed", 0);
    assert.ok(updated.popReceipt && updated.popReceipt !== received[0].popReceipt);
    const stale = await queue.deleteMessage(received[0].messageId, received[0].popReceipt).catch((e) => e);
    assert.equal(stale.statusCode, 404, "a stale receipt");
    const [again] = (await queue.receiveMessages()).receivedMessageItems;
    assert.equal(again.messageText, "changed");
    assert.equal(again.dequeueCount, 2);
    await queue.deleteMessage(again.messageId, again.popReceipt);
    for (let i = 0; i < 5; i++) await queue.sendMessage(`m${i}`);
    assert.equal((await queue.getProperties()).approximateMessagesCount, 5);
    await queue.clearMessages();
    assert.equal((await queue.peekMessages({ numberOfMessages: 32 })).peekedMessageItems.length, 0);
    await queue.setMetadata({ team: "js2" });
    assert.deepEqual((await queue.getProperties()).metadata, { team: "js2" });
    const listed = [];
    for await (const item of service.listQueues({ prefix: name, includeMetadata: true })) listed.push(item);
    assert.deepEqual(listed.map((q) => [q.name, q.metadata]), [[name, { team: "js2" }]]);
    await queue.delete();
    assert.equal((await queue.exists()), false);
  });

  test("the Python SDK's checks (azure-storage-queue, tests/sdk/queues.py)", async () => {
    assert.ok(existsSync(python), `${python} missing: run scripts/test, which makes the venv`);
    const { code, out } = await runPython("queues.py", [connectionString(server, "queue")]);
    const tally = out.split("\n").find((l) => l.startsWith("python queues:")) ?? "no tally";
    assert.equal(code, 0, `${tally}\n${out}`);
  });

  test("kombu's azurestoragequeues:// transport (Celery's): every message delivered once", async () => {
    const { code, out } = await runPython("kombu_queues.py", [DEV_KEY, `${server.queueOrigin}/${ACCOUNT}`]);
    const tally = out.split("\n").find((l) => l.startsWith("kombu queues:")) ?? "no tally";
    assert.equal(code, 0, `${tally}\n${out}`);
  });
});
