// The patterns of Azure's concurrency docs with the official JS SDK (@azure/storage-blob),
// unchanged: the same checks as tests/sdk/patterns.py, for the test files to run against any
// Blob endpoint.

import assert from "node:assert/strict";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import { test as nodeTest } from "node:test";
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
import { BlobChangeFeedClient } from "@azure/storage-blob-changefeed";

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

/**
 * The checks, as node:test tests; `connection()` answers the connection string. The checks
 * that change the account's settings (versioning, delete retention) run inside `settings`, one
 * at a time with whatever else a caller runs there (the Python suite changes them too). With
 * `only` (a pattern), the checks whose names it does not match are skipped, `skip` saying why.
 */
export function jsPatterns(connection, settings = (run) => run(), { only, skip } = {}) {
  const test = (name, fn) => nodeTest(name, { skip: only && !only.test(name) && skip }, fn);
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
    // A 5 s break period: under the suite's parallel load a request can take over a second.
    // The period starts when the Worker handles the break, between the request and its answer:
    // the state must be "breaking" when a read answered within 5 s of the request, and
    // "broken" once 5 s have passed since the answer.
    const breaking = Date.now();
    await lease.breakLease(5);
    const broken = Date.now();
    const state = (await blob.getProperties()).leaseState;
    if (Date.now() - breaking < 5000) assert.equal(state, "breaking");
    else assert.ok(["breaking", "broken"].includes(state), state);
    await sleep(Math.max(0, broken + 5500 - Date.now()));
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
              // A minute, the longest finite lease: a host stalled past a shorter one would
              // let the next holder in, and the release would be refused as it should be.
              await lock.acquireLease(60);
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
            await lease.acquireLease(60);
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

  test("JS SDK: uploadStream in parallel blocks, uploadData, ranged parallel download, block lists", async () => {
    const container = await freshContainer();
    const data = randomBytes(10 * 1024 * 1024 + 123);
    const sha = `"${createHash("sha256").update(data).digest("hex")}"`;
    const streamed = container.getBlockBlobClient("streamed.bin");
    const put = await streamed.uploadStream(Readable.from([data]), 1024 * 1024, 4, {
      metadata: { source: "stream" },
      blobHTTPHeaders: { blobContentType: "application/x-test" },
    });
    assert.notEqual(put.etag, sha, "metadata and headers are in the tag");
    const blocks = await streamed.getBlockList("committed");
    assert.equal(blocks.committedBlocks.length, 11);
    const props = await streamed.getProperties();
    assert.deepEqual([props.metadata, props.contentType, props.contentLength], [{ source: "stream" }, "application/x-test", data.length]);
    const whole = container.getBlockBlobClient("data.bin");
    const plain = await whole.uploadData(data, { blockSize: 2 * 1024 * 1024, concurrency: 4, maxSingleShotSize: 1024 * 1024 });
    assert.equal(plain.etag, sha, "no metadata: the bytes' tag, put in blocks as put whole");
    const back = await whole.downloadToBuffer(0, undefined, { blockSize: 1024 * 1024, concurrency: 4 });
    assert.ok(back.equals(data));

    const staged = container.getBlockBlobClient("staged");
    const id = (n) => Buffer.from(`block-${n}`).toString("base64");
    await staged.stageBlock(id(1), "hello ", 6);
    await staged.stageBlock(id(2), "world", 5);
    assert.equal(await staged.exists(), false, "staged blocks are no blob yet");
    const list = await staged.getBlockList("uncommitted");
    assert.deepEqual(list.uncommittedBlocks.map((b) => [b.name, b.size]), [[id(1), 6], [id(2), 5]]);
    await refused(() => staged.commitBlockList([id(1), id(3)]), 400, "InvalidBlockList");
    await staged.commitBlockList([id(1), id(2)], { conditions: { ifNoneMatch: "*" } });
    assert.equal(await text(staged), "hello world");
    await refused(() => staged.commitBlockList([id(1)], { conditions: { ifNoneMatch: "*" } }), 409, "BlobAlreadyExists");
  });

  test("JS SDK: index tags: setTags, getTags, tags on upload, tagConditions 412 when false, findBlobsByTags by page", async () => {
    const container = await freshContainer();
    const blob = container.getBlobClient("tagged.txt");
    await upload(blob, "v1", { tags: { team: "a", stage: "draft" } });
    assert.deepEqual((await blob.getTags()).tags, { team: "a", stage: "draft" });
    assert.equal((await blob.getProperties()).tagCount, 2);
    const etag = (await blob.getProperties()).etag;
    const conditions = { tagConditions: `"team" = 'nobody'` };
    await refused(() => blob.getProperties({ conditions }), 412);
    await refused(() => blob.setMetadata({ k: "v" }, { conditions }), 412, "ConditionNotMet");
    await refused(() => blob.setTags({ team: "b" }, { conditions }), 412, "ConditionNotMet");
    await refused(() => blob.delete({ conditions }), 412, "ConditionNotMet");
    await blob.setTags({ team: "a", stage: "done" }, { conditions: { tagConditions: `"stage" = 'draft'` } });
    assert.equal((await blob.getProperties()).etag, etag, "tags are not part of the ETag");
    for (const name of ["b.txt", "c.txt", "d.txt"]) await upload(container.getBlobClient(name), "x", { tags: { team: "a" } });
    await upload(container.getBlobClient("e.txt"), "x", { tags: { team: "b" } });
    const found = [];
    for await (const page of container.findBlobsByTags(`"team" = 'a'`).byPage({ maxPageSize: 2 })) {
      for (const item of page.blobs) found.push(`${item.name}:${item.tags?.team}`);
    }
    assert.deepEqual(found, ["b.txt:a", "c.txt:a", "d.txt:a", "tagged.txt:a"]);
    // On the account: every container's, by container then name.
    const mark = randomUUID().slice(0, 12);
    const other = await freshContainer();
    for (const c of [container, other]) await upload(c.getBlobClient("marked.txt"), "x", { tags: { mark } });
    const across = [];
    for await (const item of service().findBlobsByTags(`"mark" = '${mark}'`)) across.push(`${item.containerName}/${item.name}`);
    assert.deepEqual(across, [container, other].map((c) => `${c.containerName}/marked.txt`).sort());
  });

  test("JS SDK: snapshots: createSnapshot, withSnapshot reads and copies, listBlobsFlat({ includeSnapshots }), delete({ deleteSnapshots })", async () => {
    const container = await freshContainer();
    const blob = container.getBlobClient("doc.txt");
    await upload(blob, "v1");
    const { snapshot } = await blob.createSnapshot();
    await upload(blob, "v2");
    const old = blob.withSnapshot(snapshot);
    assert.equal(await text(old), "v1");
    assert.equal(await text(blob), "v2");
    const listed = [];
    for await (const item of container.listBlobsFlat({ includeSnapshots: true })) listed.push(`${item.name}@${item.snapshot ?? ""}`);
    assert.deepEqual(listed, ["doc.txt@", `doc.txt@${snapshot}`]);
    await refused(() => blob.delete(), 409, "SnapshotsPresent");
    const copy = container.getBlobClient("copy.txt");
    await (await copy.beginCopyFromURL(old.url)).pollUntilDone();
    assert.equal(await text(copy), "v1");
    await blob.delete({ deleteSnapshots: "include" });
    await refused(() => old.getProperties(), 404);
  });

  test("JS SDK: page blobs: create, uploadPages, clearPages, getPageRanges, getPageRangesDiff, resize, updateSequenceNumber, ifSequenceNumberEqualTo 412", async () => {
    const container = await freshContainer();
    const disk = container.getPageBlobClient("disk.vhd");
    await disk.create(4096, { blobSequenceNumber: 1 });
    await disk.uploadPages(Buffer.alloc(1024, "a"), 0, 1024);
    const { snapshot } = await disk.createSnapshot();
    await disk.uploadPages(Buffer.alloc(512, "b"), 2048, 512, { conditions: { ifSequenceNumberEqualTo: 1 } });
    await disk.clearPages(512, 512);
    // The SDK answers each range as { offset: Start, count: End - Start } (its own mapping).
    const ranges = await disk.getPageRanges();
    assert.deepEqual(ranges.pageRange.map((r) => [r.offset, r.count]), [[0, 511], [2048, 511]]);
    const diff = await disk.getPageRangesDiff(0, 4096, snapshot);
    assert.deepEqual(diff.pageRange.map((r) => [r.offset, r.count]), [[2048, 511]]);
    assert.deepEqual(diff.clearRange.map((r) => [r.offset, r.count]), [[512, 511]]);
    const expected = "a".repeat(512) + "\0".repeat(1536) + "b".repeat(512) + "\0".repeat(1536);
    assert.equal(await text(disk), expected);
    await refused(() => disk.uploadPages(Buffer.alloc(512, "c"), 0, 512, { conditions: { ifSequenceNumberLessThan: 1 } }), 412, "SequenceNumberConditionNotMet");
    assert.equal((await disk.updateSequenceNumber("increment")).blobSequenceNumber, 2);
    await disk.resize(1024);
    const properties = await disk.getProperties();
    assert.deepEqual([properties.blobType, properties.contentLength, properties.blobSequenceNumber], ["PageBlob", 1024, 2]);
    await refused(() => disk.uploadPages(Buffer.alloc(512, "c"), 1024, 512), 416, "InvalidPageRange");
  });

  test("JS SDK: soft delete: setProperties({ deleteRetentionPolicy }), delete, listBlobsFlat({ includeDeleted }), undelete", () => settings(async () => {
    const container = await freshContainer();
    const blob = container.getBlobClient("doc.txt");
    await service().setProperties({ deleteRetentionPolicy: { enabled: true, days: 2 } });
    try {
      await upload(blob, "kept");
      await blob.delete();
      await refused(() => blob.getProperties(), 404);
      const listed = [];
      for await (const item of container.listBlobsFlat({ includeDeleted: true })) listed.push(`${item.name}:${item.deleted}`);
      assert.deepEqual(listed, ["doc.txt:true"]);
      await blob.undelete();
      assert.equal(await text(blob), "kept");
    } finally {
      await service().setProperties({ deleteRetentionPolicy: { enabled: false } });
    }
  }));

  // The account's settings Azure sets through its management API (IsVersioningEnabled,
  // ContainerDeleteRetentionPolicy), for which the JS SDK has no parameter: a PUT of the
  // properties with an account SAS that may write them.
  async function setServiceProperty(element) {
    const expiresOn = new Date(Date.now() + 3600_000);
    const sas = generateAccountSASQueryParameters(
      { permissions: AccountSASPermissions.parse("w"), services: "b", resourceTypes: "s", expiresOn },
      credential(),
    ).toString();
    const xml = `<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties>${element}</StorageServiceProperties>`;
    const url = `${service().url.replace(/\/$/, "")}/?restype=service&comp=properties&${sas}`;
    const answer = await fetch(url, { method: "PUT", body: xml, headers: { "x-ms-version": "2021-12-02" } });
    assert.equal(answer.status, 202, await answer.text());
  }
  const setVersioning = (enabled) => setServiceProperty(`<IsVersioningEnabled>${enabled}</IsVersioningEnabled>`);

  test("JS SDK: container soft delete: delete, listContainers({ includeDeleted }), undeleteContainer with its blobs", () => settings(async () => {
    const policy = (on) =>
      `<ContainerDeleteRetentionPolicy><Enabled>${on}</Enabled><Days>2</Days></ContainerDeleteRetentionPolicy>`;
    await setServiceProperty(policy(true));
    try {
      const container = await freshContainer();
      await upload(container.getBlobClient("doc.txt"), "kept");
      await container.delete();
      await refused(() => container.getProperties(), 404);
      const deleted = [];
      for await (const item of service().listContainers({ includeDeleted: true })) {
        if (item.name === container.containerName) deleted.push(item);
      }
      assert.deepEqual(deleted.map((c) => [c.deleted, Boolean(c.version)]), [[true, true]]);
      const { containerClient } = await service().undeleteContainer(container.containerName, deleted[0].version);
      assert.equal(await text(containerClient.getBlobClient("doc.txt")), "kept");
    } finally {
      await setServiceProperty(policy(false));
    }
  }));

  test("JS SDK: change feed: BlobChangeFeedClient.listChanges() reads a blob's creation, metadata, snapshot and deletion, once, in order", () => settings(async () => {
    const feedOn = (on) => setServiceProperty(`<ChangeFeed><Enabled>${on}</Enabled></ChangeFeed>`);
    await feedOn(true);
    try {
      const container = await freshContainer();
      const blob = container.getBlobClient("doc.txt");
      const { etag } = await upload(blob, "v1");
      await blob.setMetadata({ k: "v" });
      const { snapshot } = await blob.createSnapshot();
      await blob.delete({ deleteSnapshots: "include" });
      const subject = `/blobServices/default/containers/${container.containerName}/blobs/doc.txt`;
      const want = [
        ["BlobCreated", "PutBlob", null],
        ["BlobPropertiesUpdated", "SetBlobMetadata", null],
        ["BlobSnapshotCreated", "SnapshotBlob", snapshot],
        ["BlobDeleted", "DeleteBlob", null],
      ];
      // Published a moment after the writes (after each write's answer on the Worker).
      let events = [];
      for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(500)) {
        const feed = BlobChangeFeedClient.fromConnectionString(connection());
        events = [];
        for await (const event of feed.listChanges()) {
          if (event.subject === subject) events.push(event);
        }
        if (events.length >= want.length) break;
      }
      assert.deepEqual(events.map((e) => [e.eventType, e.data.api, e.data.snapshot ?? null]), want);
      assert.deepEqual([events[0].data.etag, events[0].data.contentLength, events[0].data.blobType], [etag, 2, "BlockBlob"]);
      assert.ok(events[0].eventTime instanceof Date && !Number.isNaN(events[0].eventTime.getTime()));
      // Again two at a time, each page from the last one's continuation token (a reader that
      // stops and resumes). With an end: this SDK reads a token without one as ending in 1970
      // from the second resumption on (`new Date(undefined)`, then `new Date(null)`).
      const resumed = [];
      const end = new Date(Date.now() + 2 * 3600_000);
      let continuationToken;
      for (let i = 0; i < 1000; i++) {
        const feed = BlobChangeFeedClient.fromConnectionString(connection());
        const pages = feed.listChanges(continuationToken ? {} : { end });
        const { value, done } = await pages.byPage({ maxPageSize: 2, continuationToken }).next();
        if (done || value.events.length === 0) break;
        resumed.push(...value.events.filter((e) => e.subject === subject));
        continuationToken = value.continuationToken;
        if (!continuationToken) break;
      }
      assert.deepEqual(resumed.map((e) => [e.eventType, e.data.api, e.data.snapshot ?? null]), want);
      await refused(() => upload(service().getContainerClient("$blobchangefeed").getBlobClient("x"), "x"), 403, "AuthorizationPermissionMismatch");
    } finally {
      await feedOn(false);
    }
  }));

  test("JS SDK: versions: versionId on uploads, withVersion reads, listBlobsFlat({ includeVersions }), a version copied back", () => settings(async () => {
    await setVersioning(true);
    try {
      const container = await freshContainer();
      const blob = container.getBlobClient("doc.txt");
      const first = (await upload(blob, "v1")).versionId;
      const second = (await upload(blob, "v2")).versionId;
      assert.ok(first && second && first < second, `${first} ${second}`);
      assert.equal(await text(blob.withVersion(first)), "v1");
      const listed = [];
      for await (const item of container.listBlobsFlat({ includeVersions: true })) listed.push(`${item.versionId}:${item.isCurrentVersion ?? false}`);
      assert.deepEqual(listed, [`${second}:true`, `${first}:false`]);
      await (await blob.beginCopyFromURL(blob.withVersion(first).url)).pollUntilDone();
      assert.equal(await text(blob), "v1", "the old version promoted");
    } finally {
      await setVersioning(false);
    }
  }));

  test("JS SDK: immutability: setLegalHold, setImmutabilityPolicy, writes refused 409, deleteImmutabilityPolicy", async () => {
    const container = await freshContainer();
    const blob = container.getBlobClient("record.txt");
    await upload(blob, "kept");
    await blob.setLegalHold(true);
    assert.equal((await blob.getProperties()).legalHold, true);
    await refused(() => upload(blob, "changed"), 409, "BlobImmutableDueToLegalHold");
    await blob.setLegalHold(false);
    const expiriesOn = new Date(Math.floor(Date.now() / 1000) * 1000 + 86_400_000);
    await blob.setImmutabilityPolicy({ expiriesOn, policyMode: "Unlocked" });
    assert.equal((await blob.getProperties()).immutabilityPolicyExpiresOn?.getTime(), expiriesOn.getTime());
    await refused(() => blob.delete(), 409, "BlobImmutableDueToPolicy");
    await blob.deleteImmutabilityPolicy();
    await blob.delete();
  });

  test("JS SDK: metadata and properties, listing by hierarchy, list containers by page", async () => {
    const container = await freshContainer();
    for (const name of ["a.txt", "dir1/b.txt", "dir1/sub/c.txt", "dir2/d.txt"]) {
      await upload(container.getBlobClient(name), "x", { metadata: { n: name.length.toString() } });
    }
    const top = [];
    for await (const item of container.listBlobsByHierarchy("/")) top.push(item.kind === "prefix" ? item.name : `${item.name}:${item.metadata?.n ?? ""}`);
    assert.deepEqual(top.sort(), ["a.txt:", "dir1/", "dir2/"]);
    const withMetadata = [];
    for await (const item of container.listBlobsFlat({ includeMetadata: true, prefix: "dir1/" })) withMetadata.push([item.name, item.metadata.n]);
    assert.deepEqual(withMetadata, [["dir1/b.txt", "10"], ["dir1/sub/c.txt", "14"]]);
    const blob = container.getBlobClient("a.txt");
    const before = (await blob.getProperties()).etag;
    const after = (await blob.setMetadata({ owner: "alice" })).etag;
    assert.notEqual(after, before, "a metadata change is a new tag");
    await refused(() => blob.setMetadata({ owner: "mallory" }, { conditions: { ifMatch: before } }), 412, "ConditionNotMet");
    await blob.setHTTPHeaders({ blobContentType: "text/plain", blobCacheControl: "no-cache" });
    const props = await blob.getProperties();
    assert.deepEqual([props.metadata, props.contentType, props.cacheControl], [{ owner: "alice" }, "text/plain", "no-cache"]);

    const prefix = `p${randomUUID().slice(0, 8)}`;
    for (let i = 0; i < 5; i++) await service().getContainerClient(`${prefix}-${i}`).create({ metadata: { i: `${i}` } });
    const pages = [];
    for await (const page of service().listContainers({ prefix, includeMetadata: true }).byPage({ maxPageSize: 2 })) {
      pages.push(page.containerItems.map((c) => `${c.name}:${c.metadata.i}`));
    }
    assert.deepEqual(pages.map((p) => p.length), [2, 2, 1]);
    assert.deepEqual(pages.flat(), [0, 1, 2, 3, 4].map((i) => `${prefix}-${i}:${i}`));
  });

  test("JS SDK: copy a blob (start, sync, Put Blob From URL), its properties, a SAS source, abort", async () => {
    const container = await freshContainer();
    const source = container.getBlockBlobClient("source.bin");
    const data = randomBytes(3 * 1024 * 1024 + 7);
    await source.uploadData(data, {
      blockSize: 1024 * 1024,
      metadata: { origin: "upload" },
      blobHTTPHeaders: { blobContentType: "application/x-copied", blobCacheControl: "max-age=60" },
    });
    const sourceProps = await source.getProperties();

    // Copy Blob, as rclone, az and adlfs start it: finished when it answers.
    const copy = container.getBlobClient("copy.bin");
    const poller = await copy.beginCopyFromURL(source.url);
    const done = await poller.pollUntilDone();
    assert.equal(done.copyStatus, "success");
    const props = await copy.getProperties();
    assert.deepEqual(
      [props.copyStatus, props.copyId, props.copySource, props.copyProgress],
      ["success", done.copyId, source.url, `${data.length}/${data.length}`],
    );
    assert.deepEqual([props.metadata, props.contentType, props.cacheControl], [{ origin: "upload" }, "application/x-copied", "max-age=60"]);
    assert.equal(props.etag, sourceProps.etag, "the same bytes, metadata and headers: the same tag");
    assert.ok((await copy.downloadToBuffer()).equals(data));

    // The copy owns its bytes: the source replaced, then deleted, leaves it whole.
    await upload(source, "replaced");
    assert.ok((await copy.downloadToBuffer()).equals(data));
    await source.delete();
    assert.ok((await copy.downloadToBuffer()).equals(data));
    await refused(() => container.getBlobClient("nothing").beginCopyFromURL(source.url), 404);

    // Copy Blob From URL, metadata replaced; conditions on the source and the destination.
    await upload(source, "second source");
    const etag = (await source.getProperties()).etag;
    const synced = container.getBlobClient("synced.txt");
    const sync = await synced.syncCopyFromURL(source.url, { metadata: { replaced: "yes" }, sourceConditions: { ifMatch: etag } });
    assert.equal(sync.copyStatus, "success");
    assert.deepEqual((await synced.getProperties()).metadata, { replaced: "yes" });
    assert.equal(await text(synced), "second source");
    await refused(() => synced.syncCopyFromURL(source.url, { sourceConditions: { ifMatch: '"stale"' } }), 412, "SourceConditionNotMet");
    await refused(() => synced.syncCopyFromURL(source.url, { conditions: { ifNoneMatch: "*" } }), 409, "BlobAlreadyExists");
    const lease = synced.getBlobLeaseClient();
    await lease.acquireLease(15);
    await refused(() => synced.syncCopyFromURL(source.url), 412, "LeaseIdMissing");
    await synced.syncCopyFromURL(source.url, { conditions: { leaseId: lease.leaseId } });
    await lease.releaseLease();

    // Put Blob From URL: a block blob written from the source, no copy properties.
    const put = container.getBlockBlobClient("put-from-url.txt");
    await put.syncUploadFromURL(source.url);
    assert.equal(await text(put), "second source");
    assert.equal((await put.getProperties()).copyStatus, undefined);

    // A source in another container read through a SAS in its URL, by a client that
    // holds no key (its own destination reached by a SAS too).
    const other = await freshContainer();
    const expiresOn = new Date(Date.now() + 3600_000);
    const sas = (containerName, blobName, permissions) =>
      generateBlobSASQueryParameters(
        { containerName, blobName, permissions: BlobSASPermissions.parse(permissions), expiresOn },
        credential(),
      ).toString();
    const keyless = new BlobClient(`${other.url}/from-sas.txt?${sas(other.containerName, "from-sas.txt", "cw")}`);
    await keyless.syncCopyFromURL(`${source.url}?${sas(container.containerName, "source.bin", "r")}`);
    assert.equal(await text(other.getBlobClient("from-sas.txt")), "second source");
    await refused(() => keyless.syncCopyFromURL(source.url), 403, "CannotVerifyCopySource");
    await refused(() => keyless.syncCopyFromURL(`${source.url}?${sas(container.containerName, "source.bin", "w")}`), 403, "CannotVerifyCopySource");
    await refused(() => copy.syncCopyFromURL("http://example.com/devstoreaccount1/c/b"), 403, "CannotVerifyCopySource");

    // Abort Copy Blob: nothing is ever pending.
    await refused(() => copy.abortCopyFromURL(done.copyId), 409, "NoPendingCopyOperation");
    await refused(() => copy.abortCopyFromURL(randomUUID()), 409, "CopyIdMismatch");
  });

  test("JS SDK: append blobs: appendpos and maxsize, racing appenders exactly once, From URL, seal", async () => {
    const container = await freshContainer();
    const log = container.getAppendBlobClient("app.log");
    await log.create({ metadata: { kind: "log" } });
    const first = await log.appendBlock("hello ", 6);
    assert.equal(first.blobAppendOffset, "0");
    const second = await log.appendBlock("world", 5, { conditions: { appendPosition: 6 } });
    assert.notEqual(second.etag, first.etag, "a new tag per append");
    await refused(() => log.appendBlock("!", 1, { conditions: { appendPosition: 6 } }), 412, "AppendPositionConditionNotMet");
    await refused(() => log.appendBlock("!!", 2, { conditions: { maxSize: 12 } }), 412, "MaxBlobSizeConditionNotMet");
    await refused(() => log.appendBlock("!", 1, { conditions: { ifMatch: first.etag } }), 412, "ConditionNotMet");
    assert.equal(await text(log), "hello world");
    const part = await log.download(3, 5);
    const chunks = [];
    for await (const chunk of part.readableStreamBody) chunks.push(chunk);
    assert.equal(Buffer.concat(chunks).toString(), "lo wo", "a range across two blocks");
    const props = await log.getProperties();
    assert.deepEqual([props.blobType, props.blobCommittedBlockCount, props.metadata], ["AppendBlob", 2, { kind: "log" }]);
    await refused(() => container.getBlockBlobClient("app.log").stageBlock(Buffer.from("b1").toString("base64"), "x", 1), 409, "InvalidBlobType");

    // Appenders racing with appendpos: each record lands once.
    const race = container.getAppendBlobClient("race.log");
    await race.create();
    const appenders = 8, records = 25;
    await Promise.all(Array.from({ length: appenders }, async (_, a) => {
      let at = 0;
      for (let n = 0; n < records; n++) {
        const record = `${a}-${n}\n`;
        for (;;) {
          try {
            const done = await race.appendBlock(record, record.length, { conditions: { appendPosition: at } });
            at = Number(done.blobAppendOffset) + record.length;
            break;
          } catch (error) {
            assert.equal(error.code, "AppendPositionConditionNotMet", error.message);
            at = (await race.getProperties()).contentLength;
          }
        }
      }
    }));
    const lines = (await text(race)).trim().split("\n");
    assert.equal(lines.length, appenders * records);
    assert.equal(new Set(lines).size, appenders * records);

    // Append Block From URL, then sealed.
    const source = container.getBlockBlobClient("source.txt");
    await upload(source, "0123456789");
    await log.appendBlockFromURL(source.url, 2, 3);
    assert.equal(await text(log), "hello world234");
    await log.seal();
    assert.equal((await log.getProperties()).isSealed, true);
    await refused(() => log.appendBlock("late", 4), 409, "BlobIsSealed");
  });
}
