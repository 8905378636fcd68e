// The two servers the shared suite runs against: the Worker in miniflare (workerd, with R2
// and Durable Objects emulated) and the native `ifmatch serve`, each on a loopback port.

import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");

/** The Worker as built by worker-build (in `build`, or another output directory), served by miniflare. */
/**
 * `tls` ({ cert, key }: PEM files) serves it over HTTPS; `bindings` adds secrets and vars
 * (`IDENTITY`, `DEV_ISSUER_JWKS`, ...).
 */
export async function startWorker({ anonymous = true, accounts = undefined, build = "build", copyFrom = undefined, tls = undefined, bindings = {} } = {}) {
  const mf = new Miniflare({
    modules: true,
    scriptPath: join(root, build, "worker/shim.mjs"),
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: "2025-09-01",
    r2Buckets: ["BLOBS"],
    durableObjects: {
      RECORDS: { className: "ContainerRecords", useSQLite: true },
      TABLES: { className: "TableEntities", useSQLite: true },
    },
    // The suite sends no credentials: anonymous access, as `serve --anonymous`. The SDK tests
    // sign with the development account's key instead (ANONYMOUS unset).
    bindings: {
      MAX_BODY: String(8 << 20),
      ...(anonymous ? { ANONYMOUS: "true" } : {}),
      // What `wrangler secret put ACCOUNTS` gives a deployed Worker.
      ...(accounts ? { ACCOUNTS: accounts } : {}),
      // The other servers copies may read (a `wrangler.toml` var).
      ...(copyFrom ? { COPY_FROM: copyFrom } : {}),
      ...bindings,
    },
    ...(tls ? { https: true, httpsCertPath: tls.cert, httpsKeyPath: tls.key } : {}),
    host: "127.0.0.1",
    port: 0,
  });
  const ready = await mf.ready;
  // Over HTTPS, by the name the certificate holds.
  const url = tls ? new URL(`https://localhost:${ready.port}`) : ready;
  return {
    origin: url.origin,
    // The Table service beside the blobs, under /table (src/lib.rs).
    tableOrigin: `${url.origin}/table`,
    // The Queue service beside them, under /queue.
    queueOrigin: `${url.origin}/queue`,
    // The Cosmos endpoint at the root, as the SDKs take it (src/lib.rs).
    cosmosOrigin: url.origin,
    base: `${url.origin}/devstoreaccount1`,
    // What the cron trigger of wrangler.toml runs: the Cosmos items past their time removed.
    sweep: async () => (await mf.getWorker()).scheduled({ cron: "* * * * *" }),
    stop: () => mf.dispose(),
  };
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}

/**
 * The native server (`IFMATCH_BIN`, default the workspace's debug build) on a fresh data
 * directory, with `args` more and `env` set.
 */
export async function startNative({ anonymous = true, args = [], env = {} } = {}) {
  const bin = process.env.IFMATCH_BIN ?? join(root, "../target/debug/ifmatch");
  const data = mkdtempSync(join(tmpdir(), "ifmatch-suite-"));
  // Over HTTPS (`--https`) with the certificate it makes under `data/tls`, for `localhost`.
  const https = args.includes("--https");
  const certificate = join(data, "tls/cert.pem");
  // The suites start their servers at once: a port `freePort` found free may be another's
  // before this server binds it, and the server then exits. It starts again on other ports.
  let child, port, tablePort, cosmosPort, queuePort;
  for (let attempt = 1; ; attempt++) {
    [port, tablePort, cosmosPort, queuePort] = [
      await freePort(), await freePort(), await freePort(), await freePort(),
    ];
    child = spawn(
      bin,
      [
        "serve", "--data", data, "--listen", `127.0.0.1:${port}`, "--max-body", String(8 << 20),
        "--table-listen", `127.0.0.1:${tablePort}`,
        "--cosmos-listen", `127.0.0.1:${cosmosPort}`,
        "--queue-listen", `127.0.0.1:${queuePort}`,
        ...(anonymous ? ["--anonymous"] : []),
        ...args,
      ],
      { stdio: "ignore", env: { ...process.env, ...env } },
    );
    const deadline = Date.now() + 20_000;
    // Every listener, not the blob one alone: the server binds that one first, and exits
    // when another's port is taken, after a client may have connected to the first.
    const ports = [["", port], ["--table-listen", tablePort], ["--cosmos-listen", cosmosPort],
      ["--queue-listen", queuePort]].filter(([flag]) => !flag || !args.includes(flag));
    const listening = async () => {
      for (const [, p] of ports) {
        await new Promise((resolve, reject) => {
          const socket = connect(p, "127.0.0.1", () => socket.end(resolve));
          socket.on("error", reject);
        });
      }
    };
    const exited = () => child.exitCode !== null || child.signalCode !== null;
    for (;;) {
      try {
        await listening();
        // Made before the server serves; a client reads it as it starts.
        if (https && !(existsSync(certificate) && statSync(certificate).size > 0)) throw new Error("no certificate yet");
        break;
      } catch {
        if (exited()) break;
        if (Date.now() > deadline) throw new Error(`${bin} did not start`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    if (!exited()) break;
    if (attempt === 3) throw new Error(`${bin} exited (${child.exitCode ?? child.signalCode}) three times`);
  }
  const at = (p) => (https ? `https://localhost:${p}` : `http://127.0.0.1:${p}`);
  const origin = at(port);
  const tableOrigin = at(tablePort);
  const base = `${origin}/devstoreaccount1`;
  return {
    origin,
    tableOrigin,
    queueOrigin: at(queuePort),
    cosmosOrigin: at(cosmosPort),
    base,
    certificate,
    // The key of that certificate.
    certificateKey: join(data, "tls/key.pem"),
    // The development issuer's public keys, as the Worker is given them (DEV_ISSUER_JWKS).
    jwks: () => execFileSync(bin, ["token", "--data", data, "--jwks"]).toString().trim(),
    // A bearer token of the server's development issuer (`ifmatch token`) with `role` at `scope`
    // (for Storage's audience, or `audience`; for a new principal, or `principal`).
    token: (role, scope = "/", audience = undefined, principal = undefined) =>
      execFileSync(bin, [
        "token", "--data", data, "--role", role, "--scope", scope,
        ...(audience ? ["--audience", audience] : []),
        ...(principal ? ["--principal", principal] : []),
      ]).toString().trim(),
    // The native server sweeps on a timer (every 2 s): a sweep has gone by after 2.5 s.
    sweep: () => new Promise((r) => setTimeout(r, 2500)),
    stop: async () => {
      child.kill("SIGKILL");
      rmSync(data, { recursive: true, force: true });
    },
  };
}

/** The development account's key (Azurite's, public), which the native server and the Worker accept. */
export const DEV_KEY =
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/** The development account's name (Azurite's). */
export const ACCOUNT = "devstoreaccount1";

/**
 * The connection string a user brings from Azurite, for `server` (as a `start...` gives it): its
 * blob endpoint, and its queue or table endpoint too when `services` names it.
 */
export function connectionString(server, ...services) {
  const endpoints = { queue: ["QueueEndpoint", server.queueOrigin], table: ["TableEndpoint", server.tableOrigin] };
  const more = services.map((service) => `${endpoints[service][0]}=${endpoints[service][1]}/${ACCOUNT};`);
  return `DefaultEndpointsProtocol=http;AccountName=${ACCOUNT};AccountKey=${DEV_KEY};` +
    `BlobEndpoint=${server.origin}/${ACCOUNT};${more.join("")}`;
}

/**
 * The native server with nothing but a bucket (`--backend az://fleet/ifmatch`: records,
 * leases, staged blocks, entities and bytes as objects changed by conditional PUTs), the bucket
 * being a second `ifmatch serve` on its own disk, reached through object_store's Azure backend.
 */
export async function startNativeOverBucket({ anonymous = true } = {}) {
  const store = await startNative();
  const made = await fetch(`${store.base}/fleet?restype=container`, { method: "PUT" });
  if (made.status !== 201) throw new Error(`the bucket's container: ${made.status}`);
  const env = {
    AZURE_STORAGE_ACCOUNT_NAME: "devstoreaccount1",
    AZURE_STORAGE_ACCOUNT_KEY: DEV_KEY,
    AZURE_STORAGE_ENDPOINT: store.base,
    AZURE_ALLOW_HTTP: "true",
  };
  const front = await startNative({ anonymous, args: ["--backend", "az://fleet/ifmatch"], env });
  return {
    ...front,
    stop: async () => {
      await front.stop();
      await store.stop();
    },
  };
}
