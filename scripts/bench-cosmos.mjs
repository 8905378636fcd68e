// The load client of scripts/bench-cosmos, with Azure's JS SDK (@azure/cosmos, from wasm/):
//   counter ENDPOINT KEY DOCS SECONDS  16 writers incrementing DOCS counters (read, replace with
//                                      If-Match, again on 412): prints commits/s, 412s, and
//                                      whether the counters add up to the commits
//   load ENDPOINT KEY DOCS             DOCS documents in 100-document batches over 1,000
//                                      partitions, 8 at a time
//   reads ENDPOINT KEY COUNT           COUNT point reads and COUNT partition-scoped query pages,
//                                      one at a time: prints the median latency of each (ms)
//   batches ENDPOINT KEY COUNT         COUNT 100-operation batches, one at a time: the median (ms)
//   tag ENDPOINT KEY DOCS              DOCS documents with five tags each, in one partition
//   join ENDPOINT KEY                  a JOIN over that partition, every page: ms and rows
//   group ENDPOINT KEY                 GROUP BY across the loaded container: ms and groups
//   vectors ENDPOINT KEY DOCS DIMS     DOCS documents with a vector of DIMS numbers each (a
//                                      container whose policy says cosine), in 100-document
//                                      batches over 1,000 partitions, 8 at a time
//   nearest ENDPOINT KEY DIMS          the 10 most similar to a vector, across the container:
//                                      ms and the ids
// Every command prints one JSON line.

import { CosmosClient } from "../wasm/node_modules/@azure/cosmos/dist/esm/index.js";

const [command, endpoint, key, arg, seconds] = process.argv.slice(2);
const client = new CosmosClient({ endpoint, key, connectionPolicy: { enableEndpointDiscovery: false } });
const { database } = await client.databases.createIfNotExists({ id: "bench" });
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function container(id) {
  const { container } = await database.containers.createIfNotExists({ id, partitionKey: { paths: ["/pk"] } });
  return container;
}

// `docs` documents written by 8 loaders in transactional batches of 100 (`operationType` each),
// a batch to a partition `p0` to `p999`; `body(i)` is the i-th document but its `pk`. Prints
// how long it took.
async function loadBatches(c, docs, operationType, body) {
  let next = 0;
  const loader = async () => {
    for (let b = next++; b * 100 < docs; b = next++) {
      const pk = `p${b % 1000}`;
      const operations = Array.from({ length: Math.min(100, docs - b * 100) }, (_, j) => ({
        operationType,
        resourceBody: { ...body(b * 100 + j), pk },
      }));
      const response = await c.items.batch(operations, pk);
      if (response.code >= 400) throw new Error(`batch ${b}: ${response.code}`);
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: 8 }, loader));
  console.log(JSON.stringify({ loaded: docs, seconds: (Date.now() - started) / 1000 }));
}

if (command === "counter") {
  const docs = Number(arg);
  const id = `counter${docs}-${Date.now()}`;
  const c = await container(id);
  for (let i = 0; i < docs; i++) await c.items.create({ id: `c${i}`, pk: `c${i}`, n: 0 });
  const end = Date.now() + Number(seconds) * 1000;
  let commits = 0;
  let conflicts = 0;
  const writer = async () => {
    while (Date.now() < end) {
      const i = Math.floor(Math.random() * docs);
      const item = c.item(`c${i}`, `c${i}`);
      const { resource } = await item.read();
      try {
        await item.replace({ ...resource, n: resource.n + 1 }, { accessCondition: { type: "IfMatch", condition: resource._etag } });
        commits++;
      } catch (error) {
        if (error.code !== 412) throw error;
        conflicts++;
      }
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: 16 }, writer));
  const elapsed = (Date.now() - started) / 1000;
  let total = 0;
  for (let i = 0; i < docs; i++) total += (await c.item(`c${i}`, `c${i}`).read()).resource.n;
  console.log(JSON.stringify({ commits_per_s: commits / elapsed, conflicts, commits, total, exact: total === commits }));
} else if (command === "load") {
  const docs = Number(arg);
  const c = await container("big");
  await loadBatches(c, docs, "Upsert", (i) => ({ id: `d${i}`, n: i, body: "x".repeat(200) }));
} else if (command === "reads") {
  const count = Number(arg);
  const c = await container("big");
  const { resources: [known] } = await c.items.query("SELECT VALUE COUNT(1) FROM c", { partitionKey: "p7" }).fetchAll();
  const reads = [];
  const pages = [];
  for (let i = 0; i < count; i++) {
    const batch = 7 + 1000 * (i % Math.max(1, Math.floor(known / 100)));
    const id = `d${batch * 100 + (i % 100)}`;
    let t = performance.now();
    const read = await c.item(id, "p7").read();
    reads.push(performance.now() - t);
    if (read.statusCode !== 200) throw new Error(`read ${id}: ${read.statusCode}`);
    t = performance.now();
    await c.items.query({ query: "SELECT * FROM c WHERE c.n >= @n", parameters: [{ name: "@n", value: i }] }, { partitionKey: "p7", maxItemCount: 10 }).fetchNext();
    pages.push(performance.now() - t);
  }
  console.log(JSON.stringify({ point_read_ms: median(reads), query_page_ms: median(pages), partition_documents: known }));
} else if (command === "batches") {
  const count = Number(arg);
  const c = await container(`batches-${Date.now()}`);
  const times = [];
  for (let i = 0; i < count; i++) {
    const operations = Array.from({ length: 100 }, (_, j) => ({
      operationType: "Create",
      resourceBody: { id: `b${i}-${j}`, pk: `b${i}`, n: j },
    }));
    const t = performance.now();
    const response = await c.items.batch(operations, `b${i}`);
    times.push(performance.now() - t);
    if (response.code >= 400) throw new Error(`batch ${i}: ${response.code}`);
  }
  console.log(JSON.stringify({ batch_ms: median(times) }));
} else if (command === "tag") {
  // DOCS documents in one partition, each with five tags of fifty: the JOIN's data.
  const docs = Number(arg);
  const c = await container("tagged");
  let next = 0;
  const loader = async () => {
    for (;;) {
      const i = next++;
      if (i >= docs) return;
      const tags = Array.from({ length: 5 }, (_, t) => `tag${(i * 7 + t * 13) % 50}`);
      await c.items.upsert({ id: `t${i}`, pk: "one", n: i, tags });
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: 16 }, loader));
  console.log(JSON.stringify({ loaded: docs, seconds: (Date.now() - started) / 1000 }));
} else if (command === "join") {
  // The JOIN over the tagged partition, every page fetched: how long, and how many rows.
  const c = await container("tagged");
  const t = performance.now();
  const { resources } = await c.items
    .query("SELECT c.id, t FROM c JOIN t IN c.tags WHERE t = 'tag7'", { partitionKey: "one", maxItemCount: 1000 })
    .fetchAll();
  console.log(JSON.stringify({ ms: performance.now() - t, rows: resources.length }));
} else if (command === "group") {
  // GROUP BY across the whole of the loaded container: how long, and how many groups.
  const c = await container("big");
  const t = performance.now();
  const { resources } = await c.items
    .query("SELECT c.pk, COUNT(1) AS n, SUM(c.n) AS total FROM c GROUP BY c.pk")
    .fetchAll();
  const rows = resources.reduce((sum, g) => sum + g.n, 0);
  console.log(JSON.stringify({ ms: performance.now() - t, groups: resources.length, rows }));
} else if (command === "vectors") {
  const [docs, dims] = [Number(arg), Number(seconds)];
  const { container: c } = await database.containers.createIfNotExists({
    id: "vectors",
    partitionKey: { paths: ["/pk"] },
    vectorEmbeddingPolicy: {
      vectorEmbeddings: [{ path: "/v", dataType: "float32", distanceFunction: "cosine", dimensions: dims }],
    },
    indexingPolicy: { vectorIndexes: [{ path: "/v", type: "diskANN" }] },
  });
  // The same vectors on every run: a linear congruential generator seeded by the index.
  const vector = (i) => {
    let x = (i * 2654435761) % 4294967296;
    return Array.from({ length: dims }, () => {
      x = (x * 1664525 + 1013904223) % 4294967296;
      return Math.round((x / 4294967296 - 0.5) * 1e6) / 1e6;
    });
  };
  await loadBatches(c, docs, "Create", (i) => ({ id: `v${i}`, v: vector(i) }));
} else if (command === "nearest") {
  const dims = Number(arg);
  const c = (await database.container("vectors").read()).container;
  const query = Array.from({ length: dims }, (_, i) => Math.sin(i + 1));
  const t = performance.now();
  const { resources } = await c.items
    .query({
      query: "SELECT TOP 10 c.id, VectorDistance(c.v, @q) AS score FROM c ORDER BY VectorDistance(c.v, @q)",
      parameters: [{ name: "@q", value: query }],
    })
    .fetchAll();
  console.log(JSON.stringify({ ms: performance.now() - t, ids: resources.map((r) => r.id) }));
} else {
  throw new Error(`unknown command ${command}`);
}
