// The JS SDKs for blobs, queues and tables through `https://` endpoints, unchanged: run by
// sdk.test.mjs with NODE_EXTRA_CA_CERTS naming the certificate `ifmatch serve --https` made, the
// one certificate the client trusts beyond the system's.
// Then Entra ID tokens as production code sends them (a TokenCredential), minted by
// `ifmatch token` with a role: blobs and Cosmos DB do what the role permits and are refused the
// rest (403 AuthorizationPermissionMismatch; Cosmos's 403 with substatus 5301); a user's
// permission's resource token (resourceTokens) reaches its partition in its mode alone. And the
// management API through @azure/arm-storage with a management token: a container's retention
// policy created and locked under its etag and a legal hold set, each refusing the container's
// blob changes; a data role refused 403 AuthorizationFailed.
// Usage: node https-client.mjs CONNECTION_STRING COSMOS_ENDPOINT TOKENS_JSON

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { BlobServiceClient } from "@azure/storage-blob";
import { QueueServiceClient } from "@azure/storage-queue";
import { TableClient, TableServiceClient } from "@azure/data-tables";
import { CosmosClient } from "@azure/cosmos";
import { StorageManagementClient } from "@azure/arm-storage";

const [connection, cosmosEndpoint, tokensJson] = process.argv.slice(2);
const tokens = JSON.parse(tokensJson);
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

// What DefaultAzureCredential is to the SDKs: getToken gives a token.
const credential = (token) => ({
  getToken: async () => ({ token, expiresOnTimestamp: Date.now() + 3600_000 }),
});
const refused = async (call, status, check) => {
  try {
    await call();
  } catch (error) {
    assert.equal(error.statusCode ?? error.code, status, String(error));
    check?.(error);
    return;
  }
  assert.fail("not refused");
};

const byToken = (token) => new BlobServiceClient(blobs.url, credential(token)).getContainerClient(container.containerName);
await byToken(tokens.blobContributor).getBlockBlobClient("b.txt").upload("by token", 8);
const reader = byToken(tokens.blobReader);
assert.equal((await reader.getBlobClient("b.txt").downloadToBuffer()).toString(), "by token");
await refused(() => reader.getBlockBlobClient("c.txt").upload("no", 2), 403, (error) =>
  assert.equal(error.details?.errorCode ?? error.code, "AuthorizationPermissionMismatch"),
);
passed += 1;

const COSMOS_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";
const { database } = await new CosmosClient({ endpoint: cosmosEndpoint, key: COSMOS_KEY }).databases.create({ id: name("d") });
await database.containers.create({ id: "orders", partitionKey: { paths: ["/pk"] } });
const items = (token) =>
  new CosmosClient({ endpoint: cosmosEndpoint, aadCredentials: credential(token) })
    .database(database.id)
    .container("orders").items;
await items(tokens.cosmosContributor).create({ id: "1", pk: "a", n: 1 });
const cosmosReader = items(tokens.cosmosReader);
const { resources } = await cosmosReader.query("SELECT * FROM c").fetchAll();
assert.deepEqual(resources.map((r) => r.id), ["1"]);
await refused(() => cosmosReader.create({ id: "2", pk: "a" }), 403, (error) => assert.equal(error.substatus, 5301));
passed += 1;

// A user's permission gives a resource token for one partition of one container, in Read mode.
const { user } = await new CosmosClient({ endpoint: cosmosEndpoint, key: COSMOS_KEY }).database(database.id).users.create({ id: "bob" });
const ordersLink = `dbs/${database.id}/colls/orders`;
const { resource: permission } = await user.permissions.create({
  id: "read-a",
  permissionMode: "Read",
  resource: ordersLink,
  resourcePartitionKey: ["a"],
});
const byResource = new CosmosClient({ endpoint: cosmosEndpoint, resourceTokens: { [ordersLink]: permission._token } })
  .database(database.id)
  .container("orders");
assert.equal((await byResource.item("1", "a").read()).resource.n, 1);
await refused(() => byResource.items.create({ id: "8", pk: "a" }), 403);
await refused(() => byResource.item("1", "b").read(), 403);
passed += 1;

const management = (token) =>
  new StorageManagementClient(credential(token), randomUUID(), {
    endpoint: new URL(blobs.url).origin,
    credentials: { scopes: ["https://management.azure.com/.default"] },
  }).blobContainers;
const arm = management(tokens.management);
const kept = blobs.getContainerClient(name("c"));
await kept.create();
await kept.getBlockBlobClient("old").upload("kept", 4);
const account = "devstoreaccount1";
let policy = await arm.createOrUpdateImmutabilityPolicy("group", account, kept.containerName, {
  parameters: { immutabilityPeriodSinceCreationInDays: 1 },
});
assert.deepEqual([policy.immutabilityPeriodSinceCreationInDays, policy.state], [1, "Unlocked"]);
const immutable = (code) => (error) => assert.equal(error.details?.errorCode ?? error.code, code);
await refused(() => kept.getBlockBlobClient("old").upload("over", 4), 409, immutable("BlobImmutableDueToPolicy"));
policy = await arm.lockImmutabilityPolicy("group", account, kept.containerName, policy.etag);
assert.equal(policy.state, "Locked");
await refused(() => arm.deleteImmutabilityPolicy("group", account, kept.containerName, policy.etag), 409);
const held = await arm.setLegalHold("group", account, kept.containerName, { tags: ["case1"] });
assert.deepEqual([held.hasLegalHold, held.tags], [true, ["case1"]]);
await refused(() => kept.deleteBlob("old"), 409, immutable("BlobImmutableDueToLegalHold"));
await refused(
  () => management(tokens.managementReader).setLegalHold("group", account, kept.containerName, { tags: ["nope"] }),
  403,
  (error) => assert.equal(error.code, "AuthorizationFailed"),
);
passed += 1;

console.log(`js https: ${passed} passed`);
