// The official Azure SDKs, unchanged, against both targets started as a user would (no
// --anonymous: every request signed with the development account's key, or a SAS), with the
// connection string a user brings from Azurite: the Python SDK (azure-storage-blob, from the
// virtual environment the test command makes) and the JS SDK (@azure/storage-blob).

import assert from "node:assert/strict";
import { constants as cryptoConstants, generateKeyPairSync, sign as cryptoSign } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test as nodeTest } from "node:test";
import { fileURLToPath } from "node:url";
import {
  BlobServiceClient,
  ContainerSASPermissions,
  StorageSharedKeyCredential,
  generateBlobSASQueryParameters,
} from "@azure/storage-blob";
import { python, run } from "./programs.mjs";
import { jsPatterns } from "./sdk.mjs";
import { DEV_KEY, connectionString, startNative, startNativeOverBucket, startWorker } from "./targets.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const patterns = join(here, "../../tests/sdk/patterns.py");
// The Rust client's coordination patterns (examples/patterns.rs, built by the test command).
const rustPatterns = process.env.IFMATCH_PATTERNS ?? join(here, "../../target/debug/examples/patterns");


function runPython(connection) {
  return run(python, [patterns, connection]);
}

// The Azure CLI, in a virtual environment of its own (scripts/test makes it: it is large).
const az = process.env.IFMATCH_AZ ?? join(here, "../../target/az-venv/bin/az");

// Over a bucket (moto's S3 server) the whole suite takes two minutes, most of it the bucket's
// round trips: every run takes the JS SDK's data protection checks there (the Python SDK's run
// over a bucket and over Redis in the fleets' tests), `scripts/test --full` (IFMATCH_FULL=1) all
// of it. Every run keeps the bucket's own conformance suites, its fleets' tests and the Table
// SDK's suite over a bucket.
const PROTECTION = /index tags|snapshots|page blobs|soft delete|change feed|versions|immutability|copy a blob/;
for (const [name, start, full] of [
  ["native ifmatch serve", startNative],
  ["native ifmatch serve over a bucket", startNativeOverBucket, true],
  ["Cloudflare Worker (miniflare)", startWorker],
]) {
  const some = full && !process.env.IFMATCH_FULL;
  const skip = some && "slow over a bucket: scripts/test --full runs it";
  const test = (label, fn) => nodeTest(label, { skip }, fn);
  describe(`Azure SDKs against ${name}`, { concurrency: true }, () => {
    let server;
    before(async () => {
      server = await start({ anonymous: false });
    });
    after(async () => {
      await server?.stop();
    });

    // The account's settings are one for all the tests: those that change them take turns.
    let last = Promise.resolve();
    const settings = (run) => {
      const turn = last.then(run);
      last = turn.catch(() => {});
      return turn;
    };

    test("the Python SDK runs the concurrency docs' patterns and the auth checks", async () => {
      assert.ok(existsSync(python), `${python} missing: run scripts/test, which makes the venv`);
      const { code, out } = await settings(() => runPython(connectionString(server)));
      const tally = out.split("\n").find((l) => l.startsWith("python sdk:")) ?? "no tally";
      assert.equal(code, 0, `${tally}\n${out}`);
    });

    test("the Rust client (ifmatch-client) runs the coordination patterns", async () => {
      assert.ok(existsSync(rustPatterns), `${rustPatterns} missing: cargo build -p examples --example patterns`);
      const { code, out } = await run(rustPatterns, [connectionString(server)]);
      assert.equal(code, 0, out);
    });

    test("rclone (Debian's) copies and moves server-side, with a container SAS", async () => {
      const container = BlobServiceClient.fromConnectionString(connectionString(server))
        .getContainerClient(`rclone${Date.now()}`);
      await container.create();
      const sas = generateBlobSASQueryParameters(
        {
          containerName: container.containerName,
          permissions: ContainerSASPermissions.parse("racwdl"),
          expiresOn: new Date(Date.now() + 3600_000),
        },
        new StorageSharedKeyCredential("devstoreaccount1", DEV_KEY),
      );
      const dir = mkdtempSync(join(tmpdir(), "rclone-"));
      const config = join(dir, "rclone.conf");
      writeFileSync(config, `[ifm]\ntype = azureblob\nsas_url = ${container.url}?${sas}\n`);
      writeFileSync(join(dir, "a.txt"), "hello rclone\n");
      const rclone = (...args) =>
        run("rclone", ["--config", config, "--retries", "1", "--low-level-retries", "1", ...args]);
      const at = (name) => `ifm:${container.containerName}/${name}`;
      for (const args of [
        ["copyto", join(dir, "a.txt"), at("a.txt")],
        ["copyto", at("a.txt"), at("b.txt"), "-v"],
        ["moveto", at("b.txt"), at("c.txt"), "-v"],
      ]) {
        const { code, out } = await rclone(...args);
        assert.equal(code, 0, `rclone ${args.join(" ")}: ${out}`);
        if (args.includes("-v")) assert.match(out, /server-side copy|Moved \(server-side\)/, out);
      }
      const listed = await rclone("lsf", `ifm:${container.containerName}`);
      assert.deepEqual(listed.out.trim().split("\n").sort(), ["a.txt", "c.txt"]);
      const cat = await rclone("cat", at("c.txt"));
      assert.equal(cat.out, "hello rclone\n");
      rmSync(dir, { recursive: true, force: true });
    });

    test("the Azure CLI (az, from PyPI) copies a blob and writes an append blob", async () => {
      assert.ok(existsSync(az), `${az} missing: run scripts/test, which installs the Azure CLI`);
      const connection = connectionString(server);
      const container = `az${Date.now()}`;
      const dir = mkdtempSync(join(tmpdir(), "az-"));
      writeFileSync(join(dir, "a.txt"), "hello az\n");
      const call = async (...args) => {
        const { code, out } = await run(az, [...args, "--connection-string", connection], {
          AZURE_CORE_COLLECT_TELEMETRY: "false",
          AZURE_CORE_ONLY_SHOW_ERRORS: "true",
          AZURE_CONFIG_DIR: dir,
        });
        assert.equal(code, 0, `az ${args.join(" ")}: ${out}`);
        return out;
      };
      await call("storage", "container", "create", "-n", container, "-o", "none");
      await call("storage", "blob", "upload", "-c", container, "-n", "a.txt", "-f", join(dir, "a.txt"), "-o", "none");
      const started = JSON.parse(await call("storage", "blob", "copy", "start", "--destination-container", container,
        "--destination-blob", "b.txt", "--source-uri", `${server.origin}/devstoreaccount1/${container}/a.txt`, "-o", "json"));
      assert.equal(started.copy_status, "success");
      const copy = JSON.parse(await call("storage", "blob", "show", "-c", container, "-n", "b.txt", "--query", "properties.copy", "-o", "json"));
      assert.deepEqual([copy.status, copy.id, copy.progress], ["success", started.copy_id, "9/9"]);
      await call("storage", "blob", "download", "-c", container, "-n", "b.txt", "-f", join(dir, "b.txt"), "-o", "none");
      assert.equal(readFileSync(join(dir, "b.txt"), "utf8"), "hello az\n");
      // Named by container and blob, the CLI sends the source host-style
      // (https://devstoreaccount1.blob.core.windows.net/...), unsigned: the same account's.
      const named = JSON.parse(await call("storage", "blob", "copy", "start", "--destination-container", container,
        "--destination-blob", "c.txt", "--source-container", container, "--source-blob", "a.txt", "-o", "json"));
      assert.equal(named.copy_status, "success");
      await call("storage", "blob", "download", "-c", container, "-n", "c.txt", "-f", join(dir, "c.txt"), "-o", "none");
      assert.equal(readFileSync(join(dir, "c.txt"), "utf8"), "hello az\n");
      await call("storage", "blob", "upload", "-c", container, "-n", "log.txt", "-f", join(dir, "a.txt"), "--type", "append", "-o", "none");
      const kind = await call("storage", "blob", "show", "-c", container, "-n", "log.txt", "--query", "properties.blobType", "-o", "tsv");
      assert.equal(kind.trim(), "AppendBlob");
      rmSync(dir, { recursive: true, force: true });
    });

    jsPatterns(() => connectionString(server), settings, { only: some && PROTECTION, skip });
  });
}

describe("the JS SDKs over HTTPS (ifmatch serve --https)", () => {
  let server;
  // Tokens of the server's development issuer, one for each role https-client.mjs plays.
  const tokens = () => ({
    blobContributor: server.token("Storage Blob Data Contributor"),
    blobReader: server.token("Storage Blob Data Reader"),
    cosmosContributor: server.token("Cosmos DB Built-in Data Contributor"),
    cosmosReader: server.token("Cosmos DB Built-in Data Reader"),
    management: server.token("Storage Account Contributor", "/", "https://management.azure.com/"),
    managementReader: server.token("Storage Blob Data Reader", "/", "https://management.azure.com/"),
  });
  before(async () => {
    server = await startNative({ anonymous: false, args: ["--https"] });
  });
  after(async () => {
    await server?.stop();
  });

  nodeTest("blobs, queues and tables through https:// endpoints, trusting the certificate the server made; Entra ID tokens judged by their roles; a container's protection through @azure/arm-storage", async () => {
    const endpoint = (origin) => `${origin}/devstoreaccount1`;
    const connection =
      `DefaultEndpointsProtocol=https;AccountName=devstoreaccount1;AccountKey=${DEV_KEY};` +
      `BlobEndpoint=${endpoint(server.origin)};QueueEndpoint=${endpoint(server.queueOrigin)};` +
      `TableEndpoint=${endpoint(server.tableOrigin)};`;
    const client = join(here, "https-client.mjs");
    const args = [client, connection, `${server.cosmosOrigin}/`, JSON.stringify(tokens())];
    const { code, out } = await run(process.execPath, args, {
      NODE_EXTRA_CA_CERTS: server.certificate,
    });
    assert.equal(code, 0, out);
    assert.match(out, /js https: 7 passed/);
  });

  nodeTest("the same through the Worker over HTTPS: tokens of the issuer DEV_ISSUER_JWKS names, signatures checked by WebCrypto", async () => {
    const worker = await startWorker({
      anonymous: false,
      tls: { cert: server.certificate, key: server.certificateKey },
      bindings: { DEV_ISSUER_JWKS: server.jwks() },
    });
    try {
      const endpoint = (origin) => `${origin}/devstoreaccount1`;
      const connection =
        `DefaultEndpointsProtocol=https;AccountName=devstoreaccount1;AccountKey=${DEV_KEY};` +
        `BlobEndpoint=${endpoint(worker.origin)};QueueEndpoint=${endpoint(worker.queueOrigin)};` +
        `TableEndpoint=${endpoint(worker.tableOrigin)};`;
      const args = [join(here, "https-client.mjs"), connection, `${worker.cosmosOrigin}/`, JSON.stringify(tokens())];
      const { code, out } = await run(process.execPath, args, {
        NODE_EXTRA_CA_CERTS: server.certificate,
      });
      assert.equal(code, 0, out);
      assert.match(out, /js https: 7 passed/);
    } finally {
      await worker.stop();
    }
  });

  nodeTest("the Worker's IDENTITY: issuers' keys fetched from their jwksUri once, ES256, RS256 and PS256 tokens judged by the assignments alone, forgeries refused", async () => {
    let fetches = 0;
    // An Entra-like issuer's RSA key (RS256, PS256), beside the development issuer's (ES256).
    const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const entra = { keys: [{ ...rsa.publicKey.export({ format: "jwk" }), kid: "rsa-1", use: "sig" }] };
    const keys = createHttpServer((request, answer) => {
      fetches += 1;
      const body = request.url === "/entra" ? JSON.stringify(entra) : server.jwks();
      answer.writeHead(200, { "content-type": "application/json" }).end(body);
    });
    await new Promise((resolve) => keys.listen(0, "127.0.0.1", resolve));
    // The issuer and tenant of the tokens `ifmatch token` mints, here trusted as any issuer.
    const claims = (token) => JSON.parse(Buffer.from(token.split(".")[1], "base64url"));
    const { iss, tid } = claims(server.token("Storage Blob Data Reader"));
    const at = (path) => `http://127.0.0.1:${keys.address().port}${path}`;
    const entraIssuer = "https://login.microsoftonline.com/tenant-x/v2.0";
    const identity = {
      issuers: [
        { issuer: iss, tenant: tid, jwksUri: at("/keys") },
        { issuer: entraIssuer, tenant: "tenant-x", jwksUri: at("/entra") },
      ],
      assignments: [{ principal: "reader-1", role: "Storage Blob Data Reader", scope: "/" }],
    };
    const worker = await startWorker({
      anonymous: false,
      tls: { cert: server.certificate, key: server.certificateKey },
      bindings: { IDENTITY: JSON.stringify(identity) },
    });
    const ca = readFileSync(server.certificate);
    const ask = (method, path, token) =>
      new Promise((resolve, reject) => {
        const request = httpsRequest(`${worker.base}${path}`, {
          method, ca,
          headers: { authorization: `Bearer ${token}`, "x-ms-version": "2021-08-06", "content-length": 0 },
        }, (answer) => {
          answer.resume();
          answer.on("end", () => resolve({ status: answer.statusCode, code: answer.headers["x-ms-error-code"] }));
        });
        request.on("error", reject);
        request.end();
      });
    try {
      // The carried Owner role counts for nothing: the file assigns a reader.
      const reader = server.token("Storage Blob Data Owner", "/", undefined, "reader-1");
      assert.equal((await ask("GET", "?comp=list", reader)).status, 200);
      assert.deepEqual(await ask("PUT", "/made?restype=container", reader), { status: 403, code: "AuthorizationPermissionMismatch" });
      const stranger = server.token("Storage Blob Data Owner", "/", undefined, "someone-else");
      assert.deepEqual(await ask("GET", "?comp=list", stranger), { status: 403, code: "AuthorizationPermissionMismatch" });
      // The reader's signature over the stranger's claims: refused, as is a token of no key.
      const [head, , signature] = reader.split(".");
      const forged = `${head}.${stranger.split(".")[1]}.${signature}`;
      assert.deepEqual(await ask("GET", "?comp=list", forged), { status: 401, code: "InvalidAuthenticationInfo" });
      assert.equal((await ask("GET", "?comp=list", "a.b.c")).status, 401);
      for (let i = 0; i < 5; i += 1) assert.equal((await ask("GET", "?comp=list", reader)).status, 200);
      assert.equal(fetches, 2, "each issuer's keys are fetched once, not per request");
      // RS256 and PS256 tokens of the Entra-like issuer; one signed by another key refused.
      const now = Math.floor(Date.now() / 1000);
      const body = { iss: entraIssuer, tid: "tenant-x", aud: "https://storage.azure.com", oid: "reader-1", nbf: now, exp: now + 600 };
      const jwt = (alg, sign) => {
        const part = (json) => Buffer.from(JSON.stringify(json)).toString("base64url");
        const input = `${part({ alg, kid: "rsa-1", typ: "JWT" })}.${part(body)}`;
        return `${input}.${sign(Buffer.from(input)).toString("base64url")}`;
      };
      const pss = { padding: cryptoConstants.RSA_PKCS1_PSS_PADDING, saltLength: 32 };
      const rs256 = jwt("RS256", (data) => cryptoSign("sha256", data, rsa.privateKey));
      const ps256 = jwt("PS256", (data) => cryptoSign("sha256", data, { key: rsa.privateKey, ...pss }));
      const other = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
      const impostor = jwt("RS256", (data) => cryptoSign("sha256", data, other));
      assert.equal((await ask("GET", "?comp=list", rs256)).status, 200, "RS256");
      assert.equal((await ask("GET", "?comp=list", ps256)).status, 200, "PS256");
      assert.deepEqual(await ask("GET", "?comp=list", impostor), { status: 401, code: "InvalidAuthenticationInfo" });
      assert.equal((await ask("PUT", "/made?restype=container", rs256)).status, 403);
    } finally {
      await worker.stop();
      keys.close();
    }
  });
});

describe("the Worker's accounts come from its ACCOUNTS secret", () => {
  const second = Buffer.from("the second account's key").toString("base64");
  let worker;
  before(async () => {
    worker = await startWorker({
      anonymous: false,
      accounts: `devstoreaccount1:${DEV_KEY};second:${second}`,
    });
  });
  after(async () => {
    await worker?.stop();
  });

  nodeTest("each account signs with its own key, and only its own", async () => {
    const client = (account, key) =>
      new BlobServiceClient(`${worker.origin}/${account}`, new StorageSharedKeyCredential(account, key));
    const mine = client("second", second).getContainerClient("box");
    await mine.create();
    assert.ok(await mine.exists());
    await assert.rejects(client("second", DEV_KEY).getContainerClient("other").create(), (e) => e.statusCode === 403);
    // The development account's own `box` is another container.
    assert.equal(await client("devstoreaccount1", DEV_KEY).getContainerClient("box").exists(), false);
  });
});
