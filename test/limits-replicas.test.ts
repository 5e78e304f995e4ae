import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import OpenAI from "openai";
import { testConfig } from "../harness/config.ts";
import { RedisStore } from "../src/plugins/rate-limit/redis-store.ts";
import { createKey, freshPostgres, redisTestUrl, sharedRedis } from "../harness/keys.ts";
import { runCli, spawnServer, tempDir, trustingFetch, writeConfig, type SpawnedServer, type TlsFetch } from "../harness/server.ts";
import { waitFor } from "./helpers/wait-for.ts";

test("§8 Redis limiter is atomic and does not count refused requests", async () => {
  const redis = await sharedRedis();
  const store = new RedisStore(redis);
  try {
    const bucket = `test:${randomBytes(6).toString("hex")}`;
    const results = await Promise.all(Array.from({ length: 50 }, () => store.hit(bucket, 10, 60_000)));
    assert.equal(results.filter((r) => r.allowed).length, 10);
    assert.deepEqual(results.filter((r) => r.allowed).map((r) => r.count).sort((a, b) => a - b), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const more = await store.hit(bucket, 10, 60_000);
    assert.equal(more.allowed, false);
    assert.equal(more.count, 10, "the 429s above did not count");
    assert.ok(more.resetMs > 0 && more.resetMs <= 60_000);
    const short = `test:${randomBytes(6).toString("hex")}`;
    assert.equal((await store.hit(short, 1, 300)).allowed, true);
    assert.equal((await store.hit(short, 1, 300)).allowed, false);
    const next = await waitFor(() => store.hit(short, 1, 300), (hit) => hit.allowed, "the 300 ms window to end", 350, 20);
    assert.deepEqual(next, { count: 1, resetMs: 300, allowed: true });
  } finally {
    await store.close();
    await redis.close();
  }
});

test("issue 29.18 Redis counts a request in several buckets atomically: in all of them, or (one full) in none", async () => {
  const redis = await sharedRedis();
  const store = new RedisStore(redis);
  try {
    const key = { bucket: `test:k:${randomBytes(6).toString("hex")}`, limit: 100, windowMs: 60_000 };
    const account = { bucket: `test:acct:${randomBytes(6).toString("hex")}`, limit: 10, windowMs: 60_000 };
    const results = await Promise.all(Array.from({ length: 30 }, () => store.hitAll([key, account])));
    assert.equal(results.filter((r) => r[0].allowed && r[1].allowed).length, 10);
    assert.deepEqual([(await store.peek(key.bucket, key.limit, key.windowMs)).count, (await store.peek(account.bucket, account.limit, account.windowMs)).count], [10, 10], "the 20 refused were counted in neither");
    await store.release(account.bucket, account.windowMs);
    assert.equal((await store.peek(account.bucket, account.limit, account.windowMs)).count, 9);
  } finally {
    await store.close();
    await redis.close();
  }
});

describe("two server processes sharing PostgreSQL and Redis", () => {
  const dir = tempDir();
  let raw: Record<string, unknown>;
  let configFile: string;
  let a: SpawnedServer;
  let b: SpawnedServer;
  let tlsFetch: TlsFetch;
  let ca: string;
  let dropDb: () => Promise<void>;

  before(async () => {
    const db = await freshPostgres();
    dropDb = db.drop;
    raw = {
      dataDir: dir,
      logLevel: "warn",
      models: [{ id: "test-chat", engine: "llama", source: "/nonexistent/test-chat.gguf", capabilities: ["chat"], load: "lazy" }],
      database: { url: db.url },
      redis: { url: redisTestUrl },
      keySecret: `shared-secret-${randomBytes(8).toString("hex")}`,
      plans: {
        ten: { rateLimit: { requests: 10, window: "1m" } },
        retry: { rateLimit: { requests: 1, window: "2s" } },
        pooled: { rateLimit: { requests: 100, window: "1m" }, accountRateLimit: { requests: 10, window: "1m" } },
      },
    };
    // One after the other: the first start writes the shared self-signed certificate into the data dir.
    a = await spawnServer(raw, dir);
    b = await spawnServer(raw, dir);
    configFile = writeConfig(dir, raw, "replicas.yaml");
    ca = readFileSync(path.join(dir, "tls", "cert.pem"), "utf8");
    tlsFetch = trustingFetch(ca).fetch;
  });
  after(async () => {
    await a?.stop();
    await b?.stop();
    await dropDb?.();
    rmSync(dir, { recursive: true, force: true });
  });

  const key = (opts: Parameters<typeof createKey>[1] = {}) => createKey(testConfig(raw, null), opts);
  const get = (origin: string, k: string) => tlsFetch(`${origin}/v1/models`, { headers: { authorization: `Bearer ${k}` } });

  test("§8 20 concurrent requests against a limit of 10 across both replicas get exactly 10 × 200", async () => {
    const { key: k } = await key({ plan: "ten" });
    const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => get(i % 2 ? a.origin : b.origin, k)));
    const statuses = responses.map((r) => r.status);
    await Promise.all(responses.map((r) => r.arrayBuffer()));
    assert.equal(statuses.filter((s) => s === 200).length, 10, statuses.join(","));
    assert.equal(statuses.filter((s) => s === 429).length, 10, statuses.join(","));
    // Requests without a valid key carry the anonymous limiter's headers from Redis too.
    const anonymous = await tlsFetch(`${a.origin}/v1/models`);
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.headers.get("x-ratelimit-limit-requests"), "300");
    assert.match(anonymous.headers.get("x-ratelimit-reset-requests") ?? "", /^(1m0s|\d+s)$/);
    const remaining = responses.filter((r) => r.status === 200).map((r) => Number(r.headers.get("x-ratelimit-remaining-requests"))).sort((x, y) => x - y);
    assert.deepEqual(remaining, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  test("issue 29.18 the account's bucket is exact across replicas: 20 concurrent requests with two keys of one account (limit 10) get exactly 10 × 200", async () => {
    const first = await key({ plan: "pooled" });
    const second = await key({ account: first.accountId });
    const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => get(i % 2 ? a.origin : b.origin, i % 4 < 2 ? first.key : second.key)));
    const statuses = responses.map((r) => r.status);
    await Promise.all(responses.map((r) => r.arrayBuffer()));
    assert.equal(statuses.filter((s) => s === 200).length, 10, statuses.join(","));
    assert.equal(statuses.filter((s) => s === 429).length, 10, statuses.join(","));
  });

  test("§3 a revocation made with the CLI is seen by both replicas within 1 s", async () => {
    const { key: k, id } = await key();
    assert.equal((await get(a.origin, k)).status, 200);
    assert.equal((await get(b.origin, k)).status, 200);
    const cli = await runCli(["keys", "revoke", id, "--config", configFile, "--json"]);
    assert.equal(cli.code, 0, cli.stderr + cli.stdout);
    const revoked = JSON.parse(cli.stdout) as { id: string; revokedAt: string };
    assert.equal(revoked.id, id);
    const done = Date.now();
    for (const origin of [a.origin, b.origin]) {
      let status = 200;
      while (status === 200 && Date.now() - done < 2000) {
        const res = await get(origin, k);
        status = res.status;
        await res.arrayBuffer();
      }
      assert.equal(status, 401);
      assert.ok(Date.now() - done <= 1000, `seen after ${Date.now() - done} ms`);
    }
  });

  test("§3 a key created with the CLI works on both replicas at once", async () => {
    const acct = await runCli(["accounts", "create", `cli-${randomBytes(3).toString("hex")}`, "--config", configFile, "--json"]);
    assert.equal(acct.code, 0, acct.stderr + acct.stdout);
    const account = JSON.parse(acct.stdout) as Record<string, unknown>;
    assert.deepEqual(Object.keys(account).sort(), ["allowIps", "id", "name", "plan"]);
    const created = await runCli(["keys", "create", "--account", String(account.name), "--models", "test-*", "--config", configFile, "--json"]);
    assert.equal(created.code, 0, created.stderr + created.stdout);
    const k = JSON.parse(created.stdout) as { id: string; key: string; prefix: string; account: string };
    assert.deepEqual(Object.keys(k).sort(), ["account", "id", "key", "prefix"]);
    assert.equal(k.account, account.id);
    assert.equal((await get(a.origin, k.key)).status, 200);
    assert.equal((await get(b.origin, k.key)).status, 200);
  });

  test("§7 openai client: RateLimitError from one replica after the other used the window; retry succeeds", async () => {
    const { key: k } = await key({ plan: "retry" });
    const { agent } = trustingFetch(ca);
    const client = (origin: string, maxRetries: number) =>
      new OpenAI({ apiKey: k, baseURL: `${origin}/v1`, maxRetries, fetchOptions: { dispatcher: agent } as never });
    await client(a.origin, 0).models.list();
    await assert.rejects(client(b.origin, 0).models.list(), (err: unknown) => {
      assert.ok(err instanceof OpenAI.RateLimitError, String(err));
      assert.equal(err.code, "rate_limit_exceeded");
      return true;
    });
    const page = await client(b.origin, 2).models.list();
    assert.equal(page.data[0].id, "test-chat");
    await agent.close();
  });
});
