// The end-to-end suite of the blob front, over plain HTTP against any base URL: the same
// tests run against the native server and the Worker, so the two cannot drift.
//
// Covered: every scenario of ../../shared/spec (conditional-requests.md, leases.md), the
// conditional-header tables of the blob dialect for reads and writes, the lease transition
// table (expired and breaking states with real waits, so the tests of one target run
// concurrently), and 32 concurrent read-modify-write clients on one blob.

import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";

const A = "a0000000-0000-4000-8000-00000000000a";
const B = "b0000000-0000-4000-8000-00000000000b";
const C = "c0000000-0000-4000-8000-00000000000c";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tagOf = (body) => `"${createHash("sha256").update(body).digest("hex")}"`;

export function suite(name, start) {
  describe(name, { concurrency: true }, () => {
    let server;
    before(async () => {
      server = await start();
    });
    after(async () => {
      await server?.stop();
    });

    /**
     * One request on a connection of its own: workerd's local HTTP server closes a kept-alive
     * connection whose request body went unread (a 412 answered before the upload), which a
     * reused connection would report as a failure of the next request.
     */
    function req(method, path, headers = {}, body = undefined) {
      return new Promise((resolve, reject) => {
        const data = body === undefined ? undefined : Buffer.from(body);
        const all = { "accept-encoding": "identity", ...headers };
        // A Put Blob carries its type, as every SDK's does; `raw: true` sends exactly `headers`.
        const [route, query = ""] = path.split("?");
        if (method === "PUT" && route.slice(1).includes("/") && !query.includes("comp=") && !headers.raw) {
          all["x-ms-blob-type"] ??= "BlockBlob";
        }
        delete all.raw;
        if (data !== undefined) all["content-length"] = String(data.length);
        // The management API's paths (ARM) are the endpoint's, not the account's.
        const url = path.startsWith("/subscriptions/") ? server.origin + path : server.base + path;
        const r = request(url, { method, headers: all, agent: false }, (res) => {
          const chunks = [];
          res.on("data", (c) => chunks.push(c));
          res.on("end", () => {
            const h = res.headers;
            resolve({
              status: res.statusCode,
              headers: { get: (name) => h[name.toLowerCase()] ?? null },
              text: Buffer.concat(chunks).toString(),
              code: h["x-ms-error-code"] ?? null,
            });
          });
          res.on("error", reject);
        });
        r.on("error", reject);
        r.end(data);
      });
    }
    /** A fresh container with one blob: its name, the blob's path and tag. */
    async function fixture(content = "v1") {
      const c = `c${randomUUID().replaceAll("-", "").slice(0, 20)}`;
      assert.equal((await req("PUT", `/${c}?restype=container`)).status, 201);
      const put = await req("PUT", `/${c}/b`, {}, content);
      assert.equal(put.status, 201);
      return { c, path: `/${c}/b`, etag: put.headers.get("etag"), lm: put.headers.get("last-modified") };
    }
    const lease = (path, action, headers = {}) =>
      req("PUT", `${path}?comp=lease`, { "x-ms-lease-action": action, ...headers });
    const state = async (path) => {
      const r = await req("HEAD", path);
      return [r.headers.get("x-ms-lease-state"), r.headers.get("x-ms-lease-status"), r.headers.get("x-ms-lease-duration")];
    };

    describe("blobs and containers", { concurrency: true }, () => {
      test("create, read, tag = SHA-256 of the content, list, delete", async () => {
        const { c, path, etag, lm } = await fixture("hello");
        assert.equal(etag, tagOf("hello"));
        assert.ok(lm);
        const got = await req("GET", path);
        assert.equal(got.status, 200);
        assert.equal(got.text, "hello");
        assert.equal(got.headers.get("etag"), etag);
        assert.ok(got.headers.get("x-ms-request-id"));
        const head = await req("HEAD", path);
        assert.equal(head.status, 200);
        assert.equal(head.headers.get("content-length"), "5");
        assert.equal(head.text, "");
        assert.equal((await req("PUT", `/${c}/other`, {}, "x")).status, 201);
        const list = await req("GET", `/${c}?restype=container&comp=list`);
        assert.equal(list.status, 200);
        assert.match(list.text, /<Name>b<\/Name>[\s\S]*<Name>other<\/Name>/);
        assert.ok(list.text.includes(etag.slice(1, -1)));
        assert.equal((await req("DELETE", path)).status, 202);
        assert.equal((await req("GET", path)).code, "BlobNotFound");
        assert.equal((await req("DELETE", `/${c}?restype=container`)).status, 202);
        assert.equal((await req("GET", `/${c}/other`)).code, "ContainerNotFound");
      });

      test("a condition the server does not evaluate is refused 400 naming it, and nothing changes", async () => {
        const { c, path, etag } = await fixture("v1");
        const unserved = {
          "x-ms-source-if-tags": `"team" = 'a'`,
          "x-ms-if-sequence-number-le": "0",
          "x-ms-if-sequence-number-lt": "0",
          "x-ms-if-sequence-number-eq": "0",
          "x-ms-source-lease-id": A,
          "x-ms-source-if-match": etag,
          "x-ms-blob-condition-appendpos": "0",
        };
        const operations = [
          ["GET", path, {}, undefined],
          ["HEAD", path, {}, undefined],
          ["PUT", path, {}, "v2"],
          ["PUT", `${path}?comp=metadata`, { "x-ms-meta-k": "v" }, undefined],
          ["PUT", `${path}?comp=properties`, { "x-ms-blob-content-type": "text/plain" }, undefined],
          ["PUT", `${path}?comp=lease`, { "x-ms-lease-action": "acquire", "x-ms-lease-duration": "-1" }, undefined],
          ["PUT", `${path}?comp=block&blockid=QUFBQQ==`, {}, "blk"],
          ["GET", `${path}?comp=blocklist`, {}, undefined],
          ["DELETE", path, {}, undefined],
          ["GET", `/${c}?restype=container&comp=list`, {}, undefined],
          ["DELETE", `/${c}?restype=container`, {}, undefined],
        ];
        // Index tags: a false `x-ms-if-tags` (the blob has none) is 412 where the operation
        // takes it, refused where Azure's reference lets it take none (Put Block, Get Block
        // List, the container's operations).
        const takesTags = (method, target) => !target.includes("comp=block") && target.startsWith(path);
        for (const [method, target, headers, body] of operations) {
          for (const [name, value] of Object.entries(unserved)) {
            const r = await req(method, target, { ...headers, [name]: value }, body);
            assert.equal(`${r.status} ${r.code}`, "400 UnsupportedHeader", `${method} ${target} with ${name}`);
            if (method !== "HEAD") assert.ok(r.text.includes(name), r.text);
          }
          const r = await req(method, target, { ...headers, "x-ms-if-tags": `"team" = 'a'` }, body);
          const expected = takesTags(method, target) ? "412 ConditionNotMet" : "400 UnsupportedHeader";
          assert.equal(`${r.status} ${r.code}`, expected, `${method} ${target} with x-ms-if-tags`);
        }
        const after = await req("GET", path);
        assert.equal(after.text, "v1");
        assert.equal(after.headers.get("etag"), etag);
        assert.equal(after.headers.get("x-ms-lease-state"), "available");
        assert.equal(after.headers.get("x-ms-meta-k"), null);
      });

      test("paged listings list every blob once, folder blobs (`a/`, `a//`) included", async () => {
        const { c } = await fixture();
        const names = ["a/", "a//", "a/b", "a/c", "a/c/d", "a0", "b", "b/"];
        for (const n of names) assert.equal((await req("PUT", `/${c}/${n}`, {}, n)).status, 201);
        const entries = (xml) =>
          [...xml.matchAll(/<(Blob|BlobPrefix)><Name>([^<]*)<\/Name>/g)].map(([, kind, name]) =>
            kind === "Blob" ? name : `${name}*`);
        for (const [prefix, delimiter] of [["", "/"], ["a/", "/"], ["a/", ""], ["", ""]]) {
          const query = `restype=container&comp=list&prefix=${encodeURIComponent(prefix)}` +
            (delimiter ? `&delimiter=${encodeURIComponent(delimiter)}` : "");
          const whole = entries((await req("GET", `/${c}?${query}`)).text);
          for (let size = 1; size <= whole.length + 1; size++) {
            const paged = [];
            let marker = "";
            for (let page = 0; page <= whole.length; page++) {
              const r = await req("GET", `/${c}?${query}&maxresults=${size}` +
                (marker ? `&marker=${encodeURIComponent(marker)}` : ""));
              assert.equal(r.status, 200);
              paged.push(...entries(r.text));
              marker = /<NextMarker>([^<]*)<\/NextMarker>/.exec(r.text)?.[1] ?? "";
              if (!marker) break;
            }
            assert.deepEqual(paged, whole, `prefix ${prefix} delimiter ${delimiter} pages of ${size}`);
          }
        }
        assert.deepEqual(entries((await req("GET", `/${c}?restype=container&comp=list&prefix=a/&delimiter=/`)).text),
          ["a/", "a//*", "a/b", "a/c", "a/c/*"]);
      });

      test("errors carry status, code, request id and the XML body", async () => {
        const { c } = await fixture();
        const again = await req("PUT", `/${c}?restype=container`);
        assert.equal(again.status, 409);
        assert.equal(again.code, "ContainerAlreadyExists");
        const missing = await req("GET", `/nosuchcontainer${randomUUID().slice(0, 8)}/x`);
        assert.equal(missing.status, 404);
        assert.equal(missing.code, "ContainerNotFound");
        assert.ok(missing.headers.get("x-ms-request-id"));
        assert.match(missing.text, /^<\?xml version="1.0" encoding="utf-8"\?><Error><Code>ContainerNotFound<\/Code><Message>.+<\/Message><\/Error>$/);
        const blob = await req("GET", `/${c}/nope`);
        assert.deepEqual([blob.status, blob.code], [404, "BlobNotFound"]);
        const put = await req("PUT", `/nosuch${randomUUID().slice(0, 8)}/x`, {}, "x");
        assert.deepEqual([put.status, put.code], [404, "ContainerNotFound"]);
      });

      test("careless requests never replace a blob", async () => {
        const { c, path, etag } = await fixture("precious");
        const careless = [
          // No x-ms-blob-type: not a Put Blob.
          [path, { raw: true }, [400, "MissingRequiredHeader"]],
          // A lease action with a misspelt comp.
          [`${path}?Comp=lease`, { raw: true, "x-ms-lease-action": "acquire", "x-ms-lease-duration": "15" }, [400, "MissingRequiredHeader"]],
          [`${path}?comp=Lease`, { "x-ms-lease-action": "acquire" }, [400, "InvalidQueryParameterValue"]],
          // Put Block List with no list: refused, not an empty blob.
          [`${path}?comp=blocklist`, {}, [400, "InvalidXmlDocument"]],
          [`${path}?comp=block`, {}, [400, "InvalidQueryParameterValue"]],
          // restype names container operations only.
          [`${path}?restype=container`, {}, [400, "InvalidQueryParameterValue"]],
          // A blob type of no such kind, and a page blob without its size.
          [path, { "x-ms-blob-type": "FileBlob" }, [400, "InvalidHeaderValue"]],
          [path, { "x-ms-blob-type": "PageBlob" }, [400, "MissingRequiredHeader"]],
        ];
        for (const [target, headers, want] of careless) {
          const r = await req("PUT", target, headers, "");
          assert.deepEqual([r.status, r.code], want, `${target} ${JSON.stringify(headers)}`);
        }
        const got = await req("GET", path);
        assert.deepEqual([got.status, got.text, got.headers.get("etag")], [200, "precious", etag]);
      });

      test("a valid date before 1970 is compared, not ignored", async () => {
        const { path } = await fixture();
        const old = "Sun, 06 Nov 1960 08:49:37 GMT";
        const put = await req("PUT", path, { "if-unmodified-since": old }, "overwrite");
        assert.deepEqual([put.status, put.code], [412, "ConditionNotMet"]);
        const del = await req("DELETE", path, { "if-unmodified-since": old });
        assert.deepEqual([del.status, del.code], [412, "ConditionNotMet"]);
        const get = await req("GET", path, { "if-modified-since": old });
        assert.equal(get.status, 200);
        assert.equal(get.text, "v1");
      });

      test("bad input is a 4xx with its code, and the server stays up", async () => {
        const { c } = await fixture();
        const lease = await req("PUT", `/${c}/b?comp=lease`, { "x-ms-lease-action": "grab" });
        assert.deepEqual([lease.status, lease.code], [400, "InvalidHeaderValue"]);
        const query = await req("GET", `/${c}?restype=container&comp=nonsense`);
        assert.equal(query.status, 400);
        assert.equal((await req("GET", `/${c}/b`)).status, 200);
      });

      test("a range, and If-Range of an old tag answers the whole body (scenario 8)", async () => {
        const { path, etag } = await fixture("0123456789");
        const part = await req("GET", path, { range: "bytes=2-4" });
        assert.equal(part.status, 206);
        assert.equal(part.text, "234");
        assert.equal(part.headers.get("content-range"), "bytes 2-4/10");
        const same = await req("GET", path, { range: "bytes=2-4", "if-range": etag });
        assert.equal(same.status, 206);
        const old = await req("GET", path, { range: "bytes=2-4", "if-range": tagOf("old") });
        assert.equal(old.status, 200);
        assert.equal(old.text, "0123456789");
      });
    });

    describe("conditional requests (conditional-requests.md)", { concurrency: true }, () => {
      test("scenario 1: If-None-Match with the current tag is 304 with the ETag, no body", async () => {
        const { path, etag } = await fixture();
        const r = await req("GET", path, { "if-none-match": etag });
        assert.equal(r.status, 304);
        assert.equal(r.headers.get("etag"), etag);
        assert.equal(r.text, "");
      });

      test("scenario 2: a list with the weak form of the current tag is 304", async () => {
        const { path, etag } = await fixture();
        assert.equal((await req("GET", path, { "if-none-match": `"x", W/${etag}` })).status, 304);
      });

      test("scenario 3: with If-None-Match, a stale If-Modified-Since is ignored", async () => {
        // A date after the last change would answer 304 on its own.
        const { path } = await fixture();
        assert.equal((await req("GET", path, { "if-none-match": '"other"', "if-modified-since": "Fri, 01 Jan 2100 00:00:00 GMT" })).status, 200);
      });

      test("scenario 4: If-Match of the previous tag after another write is 412, blob unchanged", async () => {
        const { path, etag } = await fixture("v1");
        assert.equal((await req("PUT", path, { "if-match": etag }, "v2")).status, 201);
        const stale = await req("PUT", path, { "if-match": etag }, "v3");
        assert.deepEqual([stale.status, stale.code], [412, "ConditionNotMet"]);
        assert.equal((await req("GET", path)).text, "v2");
      });

      test("scenario 5: If-None-Match: * on an existing blob is 409 BlobAlreadyExists", async () => {
        const { c, path } = await fixture();
        const r = await req("PUT", path, { "if-none-match": "*" }, "again");
        assert.deepEqual([r.status, r.code], [409, "BlobAlreadyExists"]);
        assert.equal((await req("PUT", `/${c}/new`, { "if-none-match": "*" }, "x")).status, 201);
      });

      test("scenario 6: DELETE with If-Match: * on an existing blob is 202", async () => {
        const { c, path } = await fixture();
        assert.equal((await req("DELETE", path, { "if-match": "*" })).status, 202);
        const gone = await req("DELETE", `/${c}/b`, { "if-match": "*" });
        assert.equal(gone.status, 412);
      });

      test("scenario 7: If-Match with If-None-Match on a write is 400", async () => {
        const { path, etag } = await fixture();
        const r = await req("PUT", path, { "if-match": etag, "if-none-match": '"x"' }, "v");
        assert.deepEqual([r.status, r.code], [400, "MultipleConditionHeadersNotSupported"]);
      });

      test("the read table: If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since", async () => {
        const { c, path, etag, lm } = await fixture();
        const before = new Date(Date.parse(lm) - 10_000).toUTCString();
        const later = new Date(Date.parse(lm) + 10_000).toUTCString();
        const rows = [
          [{ "if-match": etag }, 200],
          [{ "if-match": `"x", ${etag}` }, 200],
          [{ "if-match": "*" }, 200],
          [{ "if-match": '"x"' }, 412],
          [{ "if-unmodified-since": lm }, 200],
          [{ "if-unmodified-since": before }, 412],
          [{ "if-none-match": '"x"' }, 200],
          [{ "if-none-match": "*" }, 304],
          [{ "if-modified-since": lm }, 304],
          [{ "if-modified-since": before }, 200],
          [{ "if-modified-since": "not a date" }, 200],
          [{ "if-match": etag, "if-none-match": etag }, 304],
          [{ "if-match": '"x"', "if-none-match": etag }, 412],
          [{ "if-match": etag, "if-unmodified-since": before }, 412],
          [{ "if-none-match": '"x"', "if-modified-since": later }, 200],
        ];
        for (const [headers, status] of rows) {
          const r = await req("GET", path, headers);
          assert.equal(r.status, status, JSON.stringify(headers));
          // A 304 carries the code too, as Azure's does: the SDKs read it.
          if (status === 412 || status === 304) assert.equal(r.code, "ConditionNotMet");
        }
        // A read of a missing blob is 404 whatever its conditions (live Azure).
        const missing = await req("GET", `/${c}/missing`, { "if-match": etag });
        assert.deepEqual([missing.status, missing.code], [404, "BlobNotFound"]);
      });

      test("the write table: one condition, the allowed pairs, the rest 400", async () => {
        const { c, etag, lm } = await fixture();
        const before = new Date(Date.parse(lm) - 10_000).toUTCString();
        const rows = [
          [{}, 201],
          [{ "if-match": "CURRENT" }, 201],
          [{ "if-match": '"x"' }, 412],
          [{ "if-match": "*" }, 201],
          [{ "if-none-match": "CURRENT" }, 412],
          [{ "if-none-match": '"x"' }, 201],
          [{ "if-none-match": "*" }, 409],
          [{ "if-modified-since": "LM" }, 412],
          [{ "if-modified-since": before }, 201],
          [{ "if-unmodified-since": "LM" }, 201],
          [{ "if-unmodified-since": before }, 412],
          [{ "if-match": "CURRENT", "if-unmodified-since": before }, 201],
          [{ "if-none-match": '"x"', "if-modified-since": "LM" }, 201],
          [{ "if-match": "CURRENT", "if-none-match": '"x"' }, 400],
          [{ "if-match": "CURRENT", "if-modified-since": before }, 400],
          [{ "if-none-match": '"x"', "if-unmodified-since": "LM" }, 400],
          [{ "if-match": `"x", CURRENT` }, 400],
        ];
        let i = 0;
        for (const [template, status] of rows) {
          // A blob of its own per row, so every row starts from the same state.
          const path = `/${c}/row${i++}`;
          const put = await req("PUT", path, {}, "v1");
          const current = put.headers.get("etag");
          const modified = put.headers.get("last-modified");
          const headers = Object.fromEntries(
            Object.entries(template).map(([k, v]) => [k, v.replace("CURRENT", current).replace("LM", modified)]),
          );
          const r = await req("PUT", path, headers, "v2");
          assert.equal(r.status, status, JSON.stringify(template));
          const expected = { 412: "ConditionNotMet", 409: "BlobAlreadyExists", 400: "MultipleConditionHeadersNotSupported" }[status];
          if (expected) {
            assert.equal(r.code, expected, JSON.stringify(template));
            assert.equal((await req("GET", path)).text, "v1", "a refused write changed the blob");
          }
        }
        assert.ok(etag);
        for (const headers of [{ "if-match": "*" }, { "if-match": etag }]) {
          const r = await req("PUT", `/${c}/absent`, headers, "x");
          assert.deepEqual([r.status, r.code], [412, "ConditionNotMet"], JSON.stringify(headers));
        }
        const stale = await req("DELETE", `/${c}/row1`, { "if-match": '"x"' });
        assert.deepEqual([stale.status, stale.code], [412, "ConditionNotMet"]);
      });

      test("containers honour only the date conditions", async () => {
        const { c } = await fixture();
        const props = await req("HEAD", `/${c}?restype=container`);
        const lm = props.headers.get("last-modified");
        const r = await req("DELETE", `/${c}?restype=container`, { "if-modified-since": lm });
        assert.equal(r.status, 412);
        assert.equal((await req("DELETE", `/${c}?restype=container`, { "if-unmodified-since": lm })).status, 202);
      });
    });

    describe("leases (leases.md)", { concurrency: true }, () => {
      test("scenario 1: acquire 30 s proposing G", async () => {
        const { path } = await fixture();
        const r = await lease(path, "acquire", { "x-ms-lease-duration": "30", "x-ms-proposed-lease-id": A });
        assert.equal(r.status, 201);
        assert.equal(r.headers.get("x-ms-lease-id"), A);
        assert.deepEqual(await state(path), ["leased", "locked", "fixed"]);
      });

      test("scenario 2: acquire -1 without a proposal: a generated UUID, infinite", async () => {
        const { path } = await fixture();
        const r = await lease(path, "acquire", { "x-ms-lease-duration": "-1" });
        assert.equal(r.status, 201);
        assert.match(r.headers.get("x-ms-lease-id"), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        assert.deepEqual(await state(path), ["leased", "locked", "infinite"]);
        const other = await fixture();
        const second = await lease(other.path, "acquire", { "x-ms-lease-duration": "-1" });
        assert.notEqual(second.headers.get("x-ms-lease-id"), r.headers.get("x-ms-lease-id"));
      });

      test("scenario 3 and bad headers: 400 with the code", async () => {
        const { path } = await fixture();
        for (const d of ["10", "61", "abc"]) {
          const r = await lease(path, "acquire", { "x-ms-lease-duration": d });
          assert.deepEqual([r.status, r.code], [400, "InvalidHeaderValue"], d);
        }
        const missing = await lease(path, "acquire");
        assert.deepEqual([missing.status, missing.code], [400, "MissingRequiredHeader"]);
        const renew = await lease(path, "renew");
        assert.deepEqual([renew.status, renew.code], [400, "MissingRequiredHeader"]);
        const period = await lease(path, "break", { "x-ms-lease-break-period": "61" });
        assert.deepEqual([period.status, period.code], [400, "InvalidHeaderValue"]);
        const proposed = await lease(path, "acquire", { "x-ms-lease-duration": "15", "x-ms-proposed-lease-id": "nope" });
        assert.deepEqual([proposed.status, proposed.code], [400, "InvalidHeaderValue"]);
      });

      test("scenarios 4 and 5: expiry, renew after expiry, renew after a write", async () => {
        const one = await fixture();
        const two = await fixture();
        for (const { path } of [one, two]) {
          assert.equal((await lease(path, "acquire", { "x-ms-lease-duration": "15", "x-ms-proposed-lease-id": A })).status, 201);
        }
        await sleep(16_000);
        assert.deepEqual((await state(one.path)).slice(0, 2), ["expired", "unlocked"]);
        const renewed = await lease(one.path, "renew", { "x-ms-lease-id": A });
        assert.equal(renewed.status, 200);
        assert.deepEqual(await state(one.path), ["leased", "locked", "fixed"]);
        assert.equal((await req("PUT", two.path, {}, "written")).status, 201);
        const refused = await lease(two.path, "renew", { "x-ms-lease-id": A });
        assert.deepEqual([refused.status, refused.code], [409, "LeaseIdMismatchWithLeaseOperation"]);
      });

      test("the expired column of the transition table", async () => {
        const blobs = [];
        for (let i = 0; i < 6; i++) blobs.push(await fixture());
        for (const { path } of blobs) {
          assert.equal((await lease(path, "acquire", { "x-ms-lease-duration": "15", "x-ms-proposed-lease-id": A })).status, 201);
        }
        await sleep(16_000);
        const [acquireB, acquireA, renewB, changeAB, releaseA, breakIt] = blobs.map((b) => b.path);
        const b = await lease(acquireB, "acquire", { "x-ms-lease-duration": "15", "x-ms-proposed-lease-id": B });
        assert.deepEqual([b.status, b.headers.get("x-ms-lease-id")], [201, B]);
        assert.equal((await lease(acquireA, "acquire", { "x-ms-lease-duration": "15", "x-ms-proposed-lease-id": A })).status, 201);
        assert.equal((await lease(renewB, "renew", { "x-ms-lease-id": B })).code, "LeaseIdMismatchWithLeaseOperation");
        assert.equal((await lease(changeAB, "change", { "x-ms-lease-id": A, "x-ms-proposed-lease-id": B })).code, "LeaseNotPresentWithLeaseOperation");
        assert.equal((await lease(releaseA, "release", { "x-ms-lease-id": A })).status, 200);
        assert.deepEqual((await state(releaseA)).slice(0, 2), ["available", "unlocked"]);
        const broken = await lease(breakIt, "break");
        assert.equal(broken.status, 202);
        assert.deepEqual((await state(breakIt)).slice(0, 2), ["broken", "unlocked"]);
      });

      test("scenario 6: break with a period: breaking, then broken, then release", async () => {
        // The breaking column's nine requests must all land inside the break period: on a host
        // that stalls past it, the run says nothing and is taken again with a longer period.
        for (const period of [6, 20, 60]) {
          const { path } = await fixture();
          await lease(path, "acquire", { "x-ms-lease-duration": "60", "x-ms-proposed-lease-id": A });
          const started = Date.now();
          const r = await lease(path, "break", { "x-ms-lease-break-period": String(period) });
          const breaking = [
            r.status,
            Number(r.headers.get("x-ms-lease-time")) <= period,
            (await state(path)).slice(0, 2),
            (await lease(path, "acquire", { "x-ms-lease-duration": "15" })).code,
            (await lease(path, "acquire", { "x-ms-lease-duration": "15", "x-ms-proposed-lease-id": A })).code,
            (await lease(path, "renew", { "x-ms-lease-id": A })).code,
            (await lease(path, "change", { "x-ms-lease-id": A, "x-ms-proposed-lease-id": B })).code,
            (await lease(path, "change", { "x-ms-lease-id": B, "x-ms-proposed-lease-id": C })).code,
            (await req("PUT", path, {}, "x")).code,
            (await req("PUT", path, { "x-ms-lease-id": A }, "x")).status,
          ];
          const left = period * 1000 - (Date.now() - started);
          if (left < 500 && period !== 60) continue;
          assert.deepEqual(breaking, [
            202,
            true,
            ["breaking", "locked"],
            "LeaseIsBreakingAndCannotBeAcquired",
            "LeaseIsBreakingAndCannotBeAcquired",
            "LeaseIsBrokenAndCannotBeRenewed",
            "LeaseIsBreakingAndCannotBeChanged",
            "LeaseIdMismatchWithLeaseOperation",
            "LeaseIdMissing",
            201,
          ]);
          await sleep(left + 500);
          assert.deepEqual((await state(path)).slice(0, 2), ["broken", "unlocked"]);
          // The broken column.
          assert.equal((await lease(path, "renew", { "x-ms-lease-id": A })).code, "LeaseIsBrokenAndCannotBeRenewed");
          assert.equal((await lease(path, "change", { "x-ms-lease-id": A, "x-ms-proposed-lease-id": B })).code, "LeaseNotPresentWithLeaseOperation");
          assert.equal((await lease(path, "break", { "x-ms-lease-break-period": "0" })).status, 202);
          assert.equal((await lease(path, "release", { "x-ms-lease-id": B })).code, "LeaseIdMismatchWithLeaseOperation");
          assert.equal((await lease(path, "release", { "x-ms-lease-id": A })).status, 200);
          assert.deepEqual((await state(path)).slice(0, 2), ["available", "unlocked"]);
          return;
        }
      });

      test("the available and leased columns of the transition table", async () => {
        const { path } = await fixture();
        // available
        assert.equal((await lease(path, "renew", { "x-ms-lease-id": A })).code, "LeaseIdMismatchWithLeaseOperation");
        assert.equal((await lease(path, "change", { "x-ms-lease-id": A, "x-ms-proposed-lease-id": B })).code, "LeaseNotPresentWithLeaseOperation");
        assert.equal((await lease(path, "release", { "x-ms-lease-id": A })).code, "LeaseIdMismatchWithLeaseOperation");
        assert.equal((await lease(path, "break")).code, "LeaseNotPresentWithLeaseOperation");
        // leased(A)
        assert.equal((await lease(path, "acquire", { "x-ms-lease-duration": "30", "x-ms-proposed-lease-id": A })).status, 201);
        assert.equal((await lease(path, "acquire", { "x-ms-lease-duration": "15", "x-ms-proposed-lease-id": B })).code, "LeaseAlreadyPresent");
        assert.equal((await lease(path, "acquire", { "x-ms-lease-duration": "-1", "x-ms-proposed-lease-id": A })).status, 201);
        assert.equal((await state(path))[2], "infinite");
        const renewed = await lease(path, "renew", { "x-ms-lease-id": A });
        assert.deepEqual([renewed.status, renewed.headers.get("x-ms-lease-id")], [200, A]);
        assert.equal((await lease(path, "renew", { "x-ms-lease-id": B })).code, "LeaseIdMismatchWithLeaseOperation");
        assert.equal((await lease(path, "change", { "x-ms-lease-id": B, "x-ms-proposed-lease-id": C })).code, "LeaseIdMismatchWithLeaseOperation");
        const changed = await lease(path, "change", { "x-ms-lease-id": A, "x-ms-proposed-lease-id": B });
        assert.deepEqual([changed.status, changed.headers.get("x-ms-lease-id")], [200, B]);
        // A repeat of the change that made it B: idempotent.
        assert.equal((await lease(path, "change", { "x-ms-lease-id": A, "x-ms-proposed-lease-id": B })).status, 200);
        assert.equal((await lease(path, "release", { "x-ms-lease-id": A })).code, "LeaseIdMismatchWithLeaseOperation");
        // An infinite lease breaks at once without a period.
        const broken = await lease(path, "break");
        assert.deepEqual([broken.status, broken.headers.get("x-ms-lease-time")], [202, "0"]);
        assert.deepEqual((await state(path)).slice(0, 2), ["broken", "unlocked"]);
        const again = await lease(path, "acquire", { "x-ms-lease-duration": "15", "x-ms-proposed-lease-id": C });
        assert.deepEqual([again.status, again.headers.get("x-ms-lease-id")], [201, C]);
      });

      test("scenarios 7, 8 and 10: writes and reads against a lease", async () => {
        const { path, etag } = await fixture();
        const r8 = await req("PUT", path, { "x-ms-lease-id": A }, "x");
        assert.deepEqual([r8.status, r8.code], [412, "LeaseNotPresentWithBlobOperation"]);
        await lease(path, "acquire", { "x-ms-lease-duration": "-1", "x-ms-proposed-lease-id": A });
        assert.deepEqual(await req("PUT", path, {}, "x").then((r) => [r.status, r.code]), [412, "LeaseIdMissing"]);
        assert.deepEqual(await req("PUT", path, { "x-ms-lease-id": B }, "x").then((r) => [r.status, r.code]), [412, "LeaseIdMismatchWithBlobOperation"]);
        assert.equal((await req("DELETE", path)).code, "LeaseIdMissing");
        const read = await req("GET", path);
        assert.deepEqual([read.status, read.headers.get("etag")], [200, etag]);
        assert.equal((await req("GET", path, { "x-ms-lease-id": B })).code, "LeaseIdMismatchWithBlobOperation");
        const ok = await req("PUT", path, { "x-ms-lease-id": A }, "by the holder");
        assert.equal(ok.status, 201);
        // A lease operation does not change the ETag.
        const tag = ok.headers.get("etag");
        await lease(path, "renew", { "x-ms-lease-id": A });
        assert.equal((await req("HEAD", path)).headers.get("etag"), tag);
        assert.equal((await req("DELETE", path, { "x-ms-lease-id": A })).status, 202);
      });

      test("scenario 9: a leased container guards Delete Container", async () => {
        const { c } = await fixture();
        const path = `/${c}?restype=container`;
        const r = await req("PUT", `${path}&comp=lease`, { "x-ms-lease-action": "acquire", "x-ms-lease-duration": "-1", "x-ms-proposed-lease-id": A });
        assert.equal(r.status, 201);
        assert.equal((await req("HEAD", path)).headers.get("x-ms-lease-state"), "leased");
        assert.deepEqual(await req("DELETE", path).then((r) => [r.status, r.code]), [412, "LeaseIdMissing"]);
        assert.deepEqual(await req("DELETE", path, { "x-ms-lease-id": B }).then((r) => [r.status, r.code]), [412, "LeaseIdMismatchWithContainerOperation"]);
        assert.equal((await req("DELETE", path, { "x-ms-lease-id": A })).status, 202);
      });
    });

    test("a container's legal hold and policy, set through the management API, refuse its blobs' changes", async () => {
      const { c, path } = await fixture("kept");
      const arm = (what) =>
        `/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/devstoreaccount1` +
        `/blobServices/default/containers/${c}${what}?api-version=2023-05-01`;
      const tags = JSON.stringify({ tags: ["case7"] });
      const held = await req("POST", arm("/setLegalHold"), { "content-type": "application/json" }, tags);
      assert.equal(held.status, 200, held.text);
      assert.deepEqual(JSON.parse(held.text), { hasLegalHold: true, tags: ["case7"] });
      const refused = await req("DELETE", path);
      assert.deepEqual([refused.status, refused.code], [409, "BlobImmutableDueToLegalHold"]);
      const container = await req("DELETE", `/${c}?restype=container`);
      assert.deepEqual([container.status, container.code], [409, "ContainerHasLegalHold"]);
      assert.equal((await req("POST", arm("/clearLegalHold"), {}, tags)).status, 200);
      const policy = JSON.stringify({ properties: { immutabilityPeriodSinceCreationInDays: 1 } });
      const set = await req("PUT", arm("/immutabilityPolicies/default"), {}, policy);
      assert.equal(set.status, 200, set.text);
      const over = await req("PUT", path, {}, "over");
      assert.deepEqual([over.status, over.code], [409, "BlobImmutableDueToPolicy"]);
      assert.equal((await req("GET", path)).text, "kept");
      const wrong = await req("DELETE", arm("/immutabilityPolicies/default"), { "if-match": '"stale"' });
      assert.equal(wrong.status, 412);
      assert.equal(JSON.parse(wrong.text).error.code, "ContainerImmutabilityPolicyFailure");
      const etag = set.headers.get("etag");
      assert.equal((await req("DELETE", arm("/immutabilityPolicies/default"), { "if-match": etag })).status, 200);
      assert.equal((await req("DELETE", path)).status, 202);
    });

    test("32 concurrent read-modify-write clients on one blob: the final count is exact", async () => {
      const CLIENTS = 32;
      const EACH = 4;
      const { path } = await fixture("0");
      let conflicts = 0;
      await Promise.all(
        Array.from({ length: CLIENTS }, async () => {
          for (let done = 0; done < EACH; ) {
            const r = await req("GET", path);
            assert.equal(r.status, 200);
            const next = String(Number(r.text) + 1);
            const w = await req("PUT", path, { "if-match": r.headers.get("etag") }, next);
            if (w.status === 201) done++;
            else {
              assert.equal(w.status, 412);
              conflicts++;
            }
          }
        }),
      );
      const last = await req("GET", path);
      assert.equal(last.text, String(CLIENTS * EACH), `${conflicts} conflicts retried`);
      assert.equal(last.headers.get("etag"), tagOf(last.text));
    });
  });
}
