// The patterns of Azure's concurrency docs with the official JS SDK (@azure/storage-blob),
// unchanged: the same checks as tests/sdk/patterns.py, for the test files to run against any
// Blob endpoint.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import {
  AccountSASPermissions,
  BlobClient,
  BlobSASPermissions,
  BlobServiceClient,
  ContainerClient,
  ContainerSASPermissions,
  StorageSharedKeyCredential,
  generateAccountSASQueryParameters,
  generateBlobSASQueryParameters,
} from "@azure/storage-blob";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function text(blob, options = {}) {
  const response = await blob.download(0, undefined, options);
  const chunks = [];
  for await (const chunk of response.readableStreamBody) chunks.push(chunk);
  return Buffer.concat(chunks).toString();
}

/** Runs `fn`, which must fail with `status` (and `code`, when given); answers the error. */
async function refused(fn, status, code) {
  try {
    await fn();
  } catch (error) {
    assert.equal(error.statusCode, status, `${error.code}: ${error.message}`);
    if (code) assert.equal(error.code, code);
    return error;
  }
  assert.fail(`expected ${status} ${code ?? ""}`);
}

/** The checks, as node:test tests; `connection()` answers the connection string. */
export function jsPatterns(connection) {
  const parts = () => Object.fromEntries(connection().split(";").filter(Boolean).map((p) => p.split(/=(.*)/s)));
  const service = () => BlobServiceClient.fromConnectionString(connection());
  const credential = () => new StorageSharedKeyCredential(parts().AccountName, parts().AccountKey);
  async function freshContainer(options) {
    const container = service().getContainerClient(`c${randomUUID().replaceAll("-", "").slice(0, 20)}`);
    await container.create(options);
    return container;
  }
  const upload = (blob, data, options) => blob.getBlockBlobClient().upload(data, Buffer.byteLength(data), options);

  test("JS SDK: create a container (a container, not a blob), exists, delete", async () => {
    const container = await freshContainer();
    assert.ok(await container.exists());
    await refused(() => container.create(), 409, "ContainerAlreadyExists");
    await upload(container.getBlobClient("a.txt"), "hello");
    await container.delete();
    assert.equal(await container.exists(), false);
  });

  test("JS SDK: optimistic concurrency with If-Match", async () => {
    const blob = (await freshContainer()).getBlobClient("doc.txt");
    const { etag } = await upload(blob, "v1");
    await upload(blob, "v2", { conditions: { ifMatch: etag } });
    await refused(() => upload(blob, "lost", { conditions: { ifMatch: etag } }), 412, "ConditionNotMet");
    assert.equal(await text(blob), "v2");
  });

  test("JS SDK: conditional download with 304, create-only with 409", async () => {
    const blob = (await freshContainer()).getBlobClient("photo");
    const { etag } = await upload(blob, "a photo");
    await refused(() => blob.download(0, undefined, { conditions: { ifNoneMatch: etag } }), 304);
    await refused(() => upload(blob, "again", { conditions: { ifNoneMatch: "*" } }), 409, "BlobAlreadyExists");
    assert.equal(await text(blob), "a photo");
  });

  test("JS SDK: a counter under contention, backoff with jitter, exact total", async () => {
    const container = await freshContainer();
    const name = container.containerName;
    await upload(container.getBlobClient("counter"), "0");
    const [workers, increments] = [6, 8];
    await Promise.all(
      Array.from({ length: workers }, async () => {
        const blob = service().getContainerClient(name).getBlobClient("counter");
        for (let i = 0; i < increments; i++) {
          for (let delay = 10; ; delay = Math.min(delay * 2, 500)) {
            const response = await blob.download();
            const chunks = [];
            for await (const c of response.readableStreamBody) chunks.push(c);
            const value = Number(Buffer.concat(chunks).toString());
            try {
              await upload(blob, String(value + 1), { conditions: { ifMatch: response.etag } });
              break;
            } catch (error) {
              if (error.statusCode !== 412) throw error;
              await sleep(delay * (0.5 + Math.random()));
            }
          }
        }
      }),
    );
    assert.equal(Number(await text(container.getBlobClient("counter"))), workers * increments);
  });

  test("JS SDK: lease-guarded writes and the whole lease lifecycle", async () => {
    const blob = (await freshContainer()).getBlobClient("guarded");
    await upload(blob, "v1");
    const lease = blob.getBlobLeaseClient();
    await lease.acquireLease(15);
    await refused(() => upload(blob, "intruder"), 412, "LeaseIdMissing");
    await upload(blob, "v2", { conditions: { leaseId: lease.leaseId } });
    let props = await blob.getProperties();
    assert.deepEqual([props.leaseState, props.leaseStatus, props.leaseDuration], ["leased", "locked", "fixed"]);
    await refused(() => blob.getBlobLeaseClient().acquireLease(15), 409, "LeaseAlreadyPresent");
    await lease.renewLease();
    const proposed = randomUUID();
    await lease.changeLease(proposed);
    assert.equal(lease.leaseId, proposed);
    await lease.breakLease(1);
    assert.equal((await blob.getProperties()).leaseState, "breaking");
    await sleep(1500);
    assert.equal((await blob.getProperties()).leaseState, "broken");
    const again = blob.getBlobLeaseClient();
    await again.acquireLease(-1);
    props = await blob.getProperties();
    assert.equal(props.leaseDuration, "infinite");
    await again.releaseLease();
    assert.equal((await blob.getProperties()).leaseState, "available");
  });

  test("JS SDK: a container lease guards delete", async () => {
    const container = await freshContainer();
    const lease = container.getBlobLeaseClient();
    await lease.acquireLease(15);
    await refused(() => container.delete(), 412, "LeaseIdMissing");
    await container.delete({ conditions: { leaseId: lease.leaseId } });
    assert.equal(await container.exists(), false);
  });

  test("JS SDK: leader election, a lock and a work queue by leases", async () => {
    const container = await freshContainer();
    const name = container.containerName;
    await upload(container.getBlobClient("leader"), "");
    const tries = await Promise.allSettled(
      Array.from({ length: 6 }, () =>
        service().getContainerClient(name).getBlobClient("leader").getBlobLeaseClient().acquireLease(15),
      ),
    );
    assert.equal(tries.filter((t) => t.status === "fulfilled").length, 1, "one leader");

    await upload(container.getBlobClient("state"), "0");
    await upload(container.getBlobClient("lock"), "");
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        const client = service().getContainerClient(name);
        for (let i = 0; i < 4; i++) {
          const lock = client.getBlobClient("lock").getBlobLeaseClient();
          for (;;) {
            try {
              await lock.acquireLease(15);
              break;
            } catch (error) {
              if (error.statusCode !== 409) throw error;
              await sleep(5 + Math.random() * 15);
            }
          }
          const value = Number(await text(client.getBlobClient("state")));
          await upload(client.getBlobClient("state"), String(value + 1));
          await lock.releaseLease();
        }
      }),
    );
    assert.equal(await text(container.getBlobClient("state")), "16");

    const items = Array.from({ length: 16 }, (_, i) => `item-${String(i).padStart(2, "0")}`);
    for (const item of items) await upload(container.getBlobClient(item), item);
    const processed = [];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        const client = service().getContainerClient(name);
        for await (const blob of client.listBlobsFlat({ prefix: "item-" })) {
          const item = client.getBlobClient(blob.name);
          const lease = item.getBlobLeaseClient();
          try {
            await lease.acquireLease(15);
          } catch (error) {
            if (error.statusCode === 409 || error.statusCode === 404) continue;
            throw error;
          }
          processed.push(blob.name);
          await item.delete({ conditions: { leaseId: lease.leaseId } });
        }
      }),
    );
    assert.deepEqual(processed.sort(), items);
  });

  test("JS SDK: auth: wrong key 403, SAS permissions and expiry, anonymous only where public", async () => {
    const container = await freshContainer();
    await upload(container.getBlobClient("doc"), "secret");
    const { AccountName: account, AccountKey: key } = parts();
    const wrongKey = (key.startsWith("AAAA") ? "BBBB" : "AAAA") + key.slice(4);
    const intruder = new BlobServiceClient(
      service().url,
      new StorageSharedKeyCredential(account, wrongKey),
    ).getContainerClient(container.containerName);
    await refused(() => upload(intruder.getBlobClient("x"), "x"), 403, "AuthenticationFailed");
    await refused(() => intruder.delete(), 403, "AuthenticationFailed");
    assert.ok(await container.exists());

    const expiresOn = new Date(Date.now() + 3600_000);
    const blobSas = (permissions, expires = expiresOn) =>
      new BlobClient(
        `${container.url}/doc?${generateBlobSASQueryParameters(
          { containerName: container.containerName, blobName: "doc", permissions: BlobSASPermissions.parse(permissions), expiresOn: expires },
          credential(),
        )}`,
      );
    assert.equal(await text(blobSas("r")), "secret");
    await refused(() => text(blobSas("w")), 403, "AuthorizationPermissionMismatch");
    await refused(() => upload(blobSas("r"), "x"), 403, "AuthorizationPermissionMismatch");
    await refused(() => blobSas("r").delete(), 403, "AuthorizationPermissionMismatch");
    await refused(() => text(blobSas("r", new Date(Date.now() - 60_000))), 403, "AuthenticationFailed");
    await upload(blobSas("w"), "written by SAS");
    const listing = new ContainerClient(
      `${container.url}?${generateBlobSASQueryParameters(
        { containerName: container.containerName, permissions: ContainerSASPermissions.parse("l"), expiresOn },
        credential(),
      )}`,
    );
    const names = [];
    for await (const b of listing.listBlobsFlat()) names.push(b.name);
    assert.deepEqual(names, ["doc"]);
    const accountSas = generateAccountSASQueryParameters(
      { permissions: AccountSASPermissions.parse("r"), services: "b", resourceTypes: "co", expiresOn },
      credential(),
    ).toString();
    const readOnly = new BlobServiceClient(`${service().url}?${accountSas}`);
    await refused(() => readOnly.getContainerClient(`c${randomUUID().slice(0, 8)}`).create(), 403, "AuthorizationPermissionMismatch");

    const anonymous = (c) => new BlobClient(`${c.url}/doc`);
    await refused(() => text(anonymous(container)), 403);
    const open = await freshContainer({ access: "blob" });
    await upload(open.getBlobClient("doc"), "public");
    assert.equal(await text(anonymous(open)), "public");
    await refused(() => upload(anonymous(open), "vandal"), 403);
    assert.equal(await text(open.getBlobClient("doc")), "public");
  });
}
