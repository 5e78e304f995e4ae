// Issue 29.1 and 29.19: the admin token is counted before it is compared (per address, and in a budget of failures
// from all addresses), it must be strong at start, and logins and failed attempts are audited without a flood
// filling the audit log.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import { ConfigError } from "../src/config/load-config.ts";
import { AuthAudit } from "../src/auth/auth-audit.ts";
import { openStore } from "../src/store/store.ts";
import { testConfig } from "../harness/config.ts";
import { silentLogger } from "../harness/keys.ts";
import { startServer, tempDir, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";
import { rmSync } from "node:fs";

const adminToken = randomBytes(32).toString("base64");
const metricsToken = randomBytes(32).toString("base64");
const cleanups: (() => Promise<unknown> | unknown)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const from = (address: string, token?: string) => ({
  "x-forwarded-for": address,
  ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
});

/** Runs `calls` with at most `concurrency` in flight; resolves with their statuses in call order. */
async function statuses(calls: (() => Promise<Response>)[], concurrency: number): Promise<number[]> {
  const out: number[] = new Array(calls.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < calls.length) {
        const i = next++;
        const res = await calls[i]();
        await res.arrayBuffer();
        out[i] = res.status;
      }
    }),
  );
  return out;
}

async function audit(srv: TestServer, action: string): Promise<Record<string, unknown>[]> {
  const res = await srv.get(`/admin/v1/audit?action=${action}`, { headers: { authorization: `Bearer ${adminToken}` } });
  assert.equal(res.status, 200);
  return ((await res.json()) as { data: Record<string, unknown>[] }).data;
}

test("issue 29.1 1,000 wrong admin tokens then the right one from one address: the right one gets 429 on /admin/v1 and /metrics; other addresses are not affected", async () => {
  const srv = await startServer({ adminToken, metrics: { token: metricsToken }, server: { trustProxy: ["127.0.0.1"] }, models: [] });
  cleanups.push(() => srv.close());
  const guesser = "203.0.113.7";
  const wrong = Array.from({ length: 1000 }, (_, i) => () => srv.get("/admin/v1/accounts", { headers: from(guesser, `${randomBytes(32).toString("base64")}${i}`) }));
  const answered = await statuses(wrong, 16);
  assert.deepEqual(
    [answered.filter((s) => s === 401).length, answered.filter((s) => s === 429).length],
    [300, 700],
    "the anonymous limit (300 a minute) counts every attempt, before any comparison",
  );

  const right = [
    srv.get("/admin/v1/accounts", { headers: from(guesser, adminToken) }),
    srv.get("/metrics", { headers: from(guesser, adminToken) }),
    srv.get("/metrics", { headers: from(guesser, metricsToken) }),
  ];
  for (const res of await Promise.all(right)) {
    assert.deepEqual(await errorOf(res), { status: 429, type: "rate_limit_error", code: "rate_limit_exceeded", param: null }, res.url);
    assert.ok(Number(res.headers.get("retry-after")) >= 1);
    assert.equal(res.headers.get("x-ratelimit-remaining-requests"), "0");
  }

  const elsewhere = await srv.get("/admin/v1/accounts", { headers: from("203.0.113.8", adminToken) });
  assert.equal(elsewhere.status, 200, "another address is not refused");
  // A right token is not counted: it leaves the address's window as it found it.
  assert.equal(elsewhere.headers.get("x-ratelimit-remaining-requests"), "300");

  // Issue 29.19: one auth.failed entry for the guessing address in this minute, however many it sent.
  const failed = (await audit(srv, "auth.failed")).filter((e) => e.source === guesser);
  assert.deepEqual(
    failed.map((e) => [e.actor, e.detail]),
    [["admin-token", { surface: "admin" }]],
  );
});

test("issue 29.1 the budget of failed admin-token attempts from all addresses: past it every attempt is 429, the right token included; logged once; right tokens do not spend it", async () => {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      done();
    },
  });
  const srv = await startServer(
    { adminToken, adminTokenFailureLimit: { requests: 5, window: "1m" }, server: { trustProxy: ["127.0.0.1"] }, models: [] },
    { logger: { level: "warn", stream } },
  );
  cleanups.push(() => srv.close());
  for (let i = 0; i < 10; i++) assert.equal((await srv.get("/admin/v1/accounts", { headers: from(`198.51.100.${i}`, adminToken) })).status, 200);
  for (let i = 0; i < 5; i++) assert.equal((await srv.get("/admin/v1/accounts", { headers: from(`203.0.113.${i}`, `wrong-${i}`) })).status, 401, `failure ${i}`);
  for (let i = 5; i < 10; i++) {
    const res = await srv.get("/admin/v1/accounts", { headers: from(`203.0.113.${i}`, `wrong-${i}`) });
    assert.deepEqual(await errorOf(res), { status: 429, type: "rate_limit_error", code: "rate_limit_exceeded", param: null });
  }
  const right = await srv.get("/admin/v1/accounts", { headers: from("192.0.2.1", adminToken) });
  assert.equal(right.status, 429, "the right token from a fresh address is refused too");
  assert.ok(Number(right.headers.get("retry-after")) >= 1);
  const tripped = lines.filter((l) => l.includes("budget of failed admin-token attempts"));
  assert.equal(tripped.length, 1, lines.join("\n"));
  assert.equal(JSON.parse(tripped[0]).level, 40);
});

test("issue 29.1 an admin token or metrics.token under 128 bits of entropy is refused at start, with how to generate one", () => {
  const weak: [string, RegExp][] = [
    ["x".repeat(48), /one repeated character/],
    ["correcthorsebatterystaple-correcthorse", /common words/],
    ["Password1234567890!Password1234567890!", /common words/],
    ["k9Qz2LmP4xWv7RtY", /about \d+ bits/],
    ["0123456789012345678901234567890123456789", /about \d+ bits/],
  ];
  for (const [token, reason] of weak) {
    for (const raw of [{ adminToken: token }, { metrics: { token } }]) {
      const setting = "adminToken" in raw ? "adminToken" : "metrics.token";
      assert.throws(
        () => testConfig({ ...raw, models: [] }, null),
        (err: unknown) => err instanceof ConfigError && err.message.includes(`${setting} is too weak`) && reason.test(err.message) && err.message.includes("openssl rand -base64 32"),
        `${setting} ${token}`,
      );
    }
  }
  for (const token of [randomBytes(32).toString("base64"), randomBytes(16).toString("hex"), randomBytes(32).toString("base64url")]) {
    assert.equal(testConfig({ adminToken: token, metrics: { token }, models: [] }, null).adminToken, token);
  }
});

test("issue 29.19 auth.failed is written at most once per address per window, for at most N addresses; the rest is one summary count", async () => {
  const dir = tempDir();
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const store = await openStore(testConfig({ dataDir: dir, models: [] }, null), silentLogger());
  cleanups.push(() => store.close());
  let now = Date.parse("2030-01-01T00:00:00Z");
  const audit = new AuthAudit((entry) => store.audit.append(entry), silentLogger(), { windowMs: 60_000, maxAddressesPerWindow: 2, now: () => now });
  for (let i = 0; i < 500; i++) audit.failed("203.0.113.1", "admin");
  for (let i = 0; i < 3; i++) audit.failedSignIn("203.0.113.2", "dev@example.com", "wrong password");
  for (let i = 0; i < 4; i++) audit.failed(`203.0.113.${10 + i}`, "metrics");
  now += 60_000;
  audit.failed("203.0.113.1", "admin");
  await audit.close();
  const entries = (await store.audit.list()).map((e) => JSON.stringify([e.at, e.action, e.actor, e.source, e.detail])).sort();
  const expected = [
    ["2030-01-01T00:00:00.000Z", "auth.failed", "admin-token", "203.0.113.1", { surface: "admin" }],
    ["2030-01-01T00:00:00.000Z", "auth.failed", "anonymous", "203.0.113.2", { surface: "console", email: "dev@example.com", reason: "wrong password" }],
    ["2030-01-01T00:01:00.000Z", "auth.failed", "admin-token", "203.0.113.1", { surface: "admin" }],
    ["2030-01-01T00:01:00.000Z", "auth.failed.summary", "admin-token", null, { failures: 499 + 2 + 4, from: "2030-01-01T00:00:00.000Z", to: "2030-01-01T00:01:00.000Z" }],
  ];
  assert.deepEqual(entries, expected.map((e) => JSON.stringify(e)));
});
