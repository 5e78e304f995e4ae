// Issue 29.2, 29.3 (pool timeouts) and 29.10 (third bullet): what a node answers for keys while PostgreSQL is
// away, cut with a TCP proxy in front of it.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import pg from "pg";
import { revokeKey } from "../src/keys/lifecycle.ts";
import { openStore } from "../src/store/store.ts";
import { StoreHealth, isStoreBusy, isStoreUnreachable } from "../src/store/store-health.ts";
import { freshPostgres, freshPostgresBehindProxy, redisTestUrl, silentLogger } from "../harness/keys.ts";
import { startServer, tempDir, type TestServer } from "../harness/server.ts";
import { testConfig } from "../harness/config.ts";
import { sql } from "kysely";
import { errorOf } from "./helpers/errors.ts";
import type { TcpProxy } from "../harness/tcp-proxy.ts";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";

const adminToken = randomBytes(32).toString("base64");
// With PostgreSQL every node needs the shared key secret (issue 29.8).
const keySecret = randomBytes(32).toString("hex");
const cleanups: (() => Promise<unknown> | unknown)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const plans = { polling: { rateLimit: { requests: 100000, window: "1m" } } };

/** A server on a fresh database reached through a proxy the test can cut. */
async function behindProxy(raw: Record<string, unknown> = {}): Promise<{ srv: TestServer; proxy: TcpProxy; dbUrl: string }> {
  const db = await freshPostgresBehindProxy();
  cleanups.push(() => db.close());
  const srv = await startServer({ adminToken, keySecret, plans, models: [], database: { url: db.url }, ...raw });
  cleanups.push(() => srv.close());
  // Cleanups run last first: the database is back before the server closes, even after a failed assertion.
  cleanups.push(() => db.proxy.restore());
  return { srv, proxy: db.proxy, dbUrl: db.direct };
}

const status = async (srv: TestServer, key: string) => {
  const res = await srv.get("/v1/models", { key });
  await res.arrayBuffer();
  return res.status;
};

/** Polls `key` for `ms`: every status seen, and when the first 401 came. */
async function watch(srv: TestServer, key: string, ms: number): Promise<{ statuses: Set<number>; first401: number }> {
  const started = Date.now();
  const statuses = new Set<number>();
  let first401 = Infinity;
  while (Date.now() - started < ms) {
    const s = await status(srv, key);
    if (s === 401 && first401 === Infinity) first401 = Date.now() - started;
    statuses.add(s);
    await new Promise((r) => setTimeout(r, 25));
  }
  return { statuses, first401 };
}

test("issue 29.2 without Redis: a key revoked through this node's admin API, and one this node saw revoked, stay 401 through a PostgreSQL outage; issue 29.10 a never-seen key's 503 carries the rate-limit headers", async () => {
  const { srv, proxy } = await behindProxy();
  const viaAdmin = await srv.createKey({ plan: "polling" });
  const elsewhere = await srv.createKey({ plan: "polling" });
  const unseen = await srv.createKey({ plan: "polling" });
  assert.equal(await status(srv, viaAdmin.key), 200);
  assert.equal(await status(srv, elsewhere.key), 200);

  // Revoked by the CLI (or a replica without Redis): this node learns it from its next database read.
  const store = await openStore(srv.config, silentLogger());
  try {
    await revokeKey(store, elsewhere.id, { actor: "cli" });
  } finally {
    await store.close();
  }
  const seenRevoked = await watch(srv, elsewhere.key, 1200);
  assert.ok(seenRevoked.first401 <= 1000, `revocation seen after ${seenRevoked.first401} ms`);

  // Revoked here, then the database goes away at once: the key's cached answer must not outlive the revocation.
  const revoked = await srv.post(`/admin/v1/keys/${viaAdmin.id}/revoke`, {}, { key: adminToken });
  assert.equal(revoked.status, 200);
  proxy.cut("refuse");
  const [a, b] = await Promise.all([watch(srv, viaAdmin.key, 3000), watch(srv, elsewhere.key, 3000)]);
  assert.deepEqual([...a.statuses], [401], "revoked through this node: 401 at once and through the outage");
  assert.ok(a.first401 < 1000);
  assert.deepEqual([...b.statuses], [401], "seen revoked before the outage: 401 through it");

  const never = await srv.get("/v1/models", { key: unseen.key });
  assert.deepEqual(await errorOf(never), { status: 503, type: "server_error", code: "overloaded", param: null });
  assert.ok(Number(never.headers.get("retry-after")) >= 1);
  for (const header of ["x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"]) {
    assert.ok(never.headers.get(header), `${header} on the 503 of a key that cannot be checked`);
  }
  proxy.restore();
});

test("issue 29.2 with Redis: a pending revocation (accepted by a replica while the database was away, its message missed here) is applied on this node before the database has it", async () => {
  const { srv, proxy, dbUrl } = await behindProxy({ redis: { url: redisTestUrl } });
  const { key, id } = await srv.createKey({ plan: "polling" });
  assert.equal(await status(srv, key), 200);
  proxy.cut("refuse");
  assert.equal(await status(srv, key), 200, "seen valid: served while the database is away");

  // What another replica's revokeKey leaves in Redis when the database is unreachable, without its pub/sub message.
  const redis = new Redis(redisTestUrl);
  cleanups.push(() => redis.disconnect());
  await redis.hsetnx("modelgate:revocations:pending", id, new Date().toISOString());
  cleanups.push(() => redis.hdel("modelgate:revocations:pending", id));
  const pending = await watch(srv, key, 4000);
  assert.ok(pending.first401 <= 2500, `pending revocation applied after ${pending.first401} ms`);
  const after = await watch(srv, key, 1000);
  assert.deepEqual([...after.statuses], [401]);

  proxy.restore();
  const client = new pg.Client({ connectionString: dbUrl });
  await client.connect();
  cleanups.push(() => client.end());
  const deadline = Date.now() + 10_000;
  let stored: string | null = null;
  while (!stored && Date.now() < deadline) {
    stored = (await client.query("select revoked_at from api_keys where id = $1", [id])).rows[0].revoked_at as string | null;
    if (!stored) await new Promise((r) => setTimeout(r, 200));
  }
  assert.ok(stored, "written once the database answers");
  assert.equal(await status(srv, key), 401);
});

test("issue 29.2 a PostgreSQL connection lost in the middle of a query fails that query, never the process", async () => {
  const db = await freshPostgresBehindProxy();
  cleanups.push(() => db.close());
  const { proxy } = db;
  const dataDir = tempDir();
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const store = await openStore(testConfig({ dataDir, keySecret, models: [], database: { url: db.url } }, null), silentLogger());
  cleanups.push(() => store.close());
  const query = sql`select pg_sleep(2)`.execute(store.db);
  await new Promise((r) => setTimeout(r, 200));
  proxy.cut("refuse");
  await assert.rejects(query, (err: unknown) => isStoreUnreachable(err));
  // An uncaught error would fail this file (the test runner reports it); give it the time to surface.
  await new Promise((r) => setTimeout(r, 200));
  proxy.restore();
});

test("issue 29.3 a pool-acquire timeout (every connection busy) is not an outage: the circuit stays closed", async () => {
  const db = await freshPostgres();
  cleanups.push(() => db.drop());
  const pool = new pg.Pool({ connectionString: db.url, max: 1, connectionTimeoutMillis: 100 });
  cleanups.push(() => pool.end());
  const held = await pool.connect();
  const health = new StoreHealth(silentLogger());
  for (let i = 0; i < 4; i++) {
    const err = await health.run(() => pool.query("select 1")).then(
      () => assert.fail("the pool has no free connection"),
      (e: unknown) => e,
    );
    assert.ok(isStoreBusy(err), String(err));
    assert.ok(!isStoreUnreachable(err), "not counted as the database being unreachable");
  }
  assert.equal(health.state.state, "ok");
  held.release();
  assert.equal((await health.run(() => pool.query("select 1 as one"))).rows[0].one, 1);
});

test("the store is reported unreachable from the first operation that could not reach it until one succeeds, before the circuit opens", async () => {
  const db = await freshPostgresBehindProxy();
  cleanups.push(() => db.close());
  const pool = new pg.Pool({ connectionString: db.url, connectionTimeoutMillis: 1000 });
  cleanups.push(() => pool.end());
  const health = new StoreHealth(silentLogger());
  await health.run(() => pool.query("select 1"));
  db.proxy.cut("refuse");
  const err = await health.run(() => pool.query("select 1")).then(() => assert.fail("the database is cut"), (e: unknown) => e);
  assert.ok(isStoreUnreachable(err), String(err));
  assert.equal(health.state.state, "unreachable", "one failure: the circuit is still closed, the store is not ok");
  db.proxy.restore();
  await health.run(() => pool.query("select 1"));
  assert.deepEqual(health.state, { state: "ok", since: null });
});
