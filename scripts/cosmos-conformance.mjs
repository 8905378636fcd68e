// The client of scripts/cosmos-conformance, with Azure's JS SDK (@azure/cosmos, from wasm/):
// runs the query samples of a checkout of Azure-Samples' cosmos-db-nosql-query-samples (each
// `scripts/NAME/` holds `query.sql`, `result.json` and maybe `seed.json`) against one Cosmos
// endpoint, as that repository's own validation does: every seed upserted into one container
// partitioned by `/pk`, each query run across it, its results compared with `result.json` in
// order. Prints one JSON line: the counts, and each sample that differs with what it got.
//
// Usage: node scripts/cosmos-conformance.mjs SAMPLES_DIR ENDPOINT KEY
//        node scripts/cosmos-conformance.mjs SAMPLES_DIR worker   (the Worker in miniflare)

import { readdirSync, readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { CosmosClient } from "../wasm/node_modules/@azure/cosmos/dist/esm/index.js";

const [samples, target, key] = process.argv.slice(2);
const KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";

let endpoint = target;
let stop = async () => {};
if (target === "worker") {
  const { startWorker } = await import("../wasm/test/targets.mjs");
  const worker = await startWorker({ anonymous: false });
  endpoint = worker.cosmosOrigin;
  stop = worker.stop;
}

const client = new CosmosClient({
  endpoint,
  key: key ?? KEY,
  connectionPolicy: { enableEndpointDiscovery: false },
});
const { database } = await client.databases.createIfNotExists({ id: "validation-automated" });
const { container } = await database.containers.createIfNotExists({
  id: "data-automated",
  partitionKey: { paths: ["/pk"] },
});

const dirs = readdirSync(join(samples, "scripts")).sort();
const read = (dir, name) => {
  const path = join(samples, "scripts", dir, name);
  return existsSync(path) ? readFileSync(path, "utf8") : undefined;
};
for (const dir of dirs) {
  const seed = read(dir, "seed.json");
  if (seed) for (const item of JSON.parse(seed)) await container.items.upsert(item);
}

const out = { passed: 0, unordered: 0, failed: 0, skipped: 0, differs: [] };
for (const dir of dirs) {
  const [query, result] = [read(dir, "query.sql"), read(dir, "result.json")];
  if (query === undefined || result === undefined) {
    out.skipped++;
    continue;
  }
  const expected = JSON.parse(result);
  let got;
  try {
    ({ resources: got } = await container.items.query(query).fetchAll());
  } catch (error) {
    out.failed++;
    out.differs.push({ sample: dir, error: `${error.code}: ${String(error.message).split("\n")[0].slice(0, 200)}` });
    continue;
  }
  if (isDeepStrictEqual(got, expected)) {
    out.passed++;
  } else if (sameItems(got, expected)) {
    out.unordered++;
    out.differs.push({ sample: dir, order: true });
  } else {
    out.failed++;
    out.differs.push({ sample: dir, expected: JSON.stringify(expected).slice(0, 300), got: JSON.stringify(got).slice(0, 300) });
  }
}
console.log(JSON.stringify(out));
await stop();

/** Whether two arrays hold the same items, in any order. */
function sameItems(a, b) {
  if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
  const key = (x) => JSON.stringify(x, Object.keys(x ?? {}).sort());
  const count = new Map();
  for (const x of a) count.set(key(x), (count.get(key(x)) ?? 0) + 1);
  for (const x of b) {
    const n = count.get(key(x));
    if (!n) return false;
    count.set(key(x), n - 1);
  }
  return true;
}
