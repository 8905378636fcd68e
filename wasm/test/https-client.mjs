// The JS SDKs for blobs, queues and tables through `https://` endpoints, unchanged: run by
// sdk.test.mjs with NODE_EXTRA_CA_CERTS naming the certificate `ifmatch serve --https` made, the
// one certificate the client trusts beyond the system's.
// Usage: node https-client.mjs CONNECTION_STRING

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { BlobServiceClient } from "@azure/storage-blob";
import { QueueServiceClient } from "@azure/storage-queue";
import { TableClient, TableServiceClient } from "@azure/data-tables";

const connection = process.argv[2];
const name = (prefix) => `${prefix}${randomUUID().replaceAll("-", "").slice(0, 12)}`;
let passed = 0;

const blobs = BlobServiceClient.fromConnectionString(connection);
assert.ok(blobs.url.startsWith("https://"), blobs.url);
const container = blobs.getContainerClient(name("c"));
await container.create();
await container.getBlockBlobClient("a.txt").upload("over tls", 8);
const downloaded = await container.getBlobClient("a.txt").downloadToBuffer();
assert.equal(downloaded.toString(), "over tls");
passed += 1;

const queues = QueueServiceClient.fromConnectionString(connection);
const queue = queues.getQueueClient(name("q"));
await queue.create();
await queue.sendMessage("hello");
const { receivedMessageItems } = await queue.receiveMessages();
assert.deepEqual(receivedMessageItems.map((m) => m.messageText), ["hello"]);
passed += 1;

const tableName = name("t");
await TableServiceClient.fromConnectionString(connection, { allowInsecureConnection: false }).createTable(tableName);
const table = TableClient.fromConnectionString(connection, tableName);
await table.upsertEntity({ partitionKey: "p", rowKey: "r", value: 7 }, "Merge");
assert.equal((await table.getEntity("p", "r")).value, 7);
passed += 1;

console.log(`js https: ${passed} passed`);
