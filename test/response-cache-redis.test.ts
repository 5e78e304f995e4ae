// Issue 45.2: the response cache in Redis: shared by the replicas, compressed, purged on every replica, and
// bypassed (requests still served, one log line) while Redis is away. Redis is the shared test instance: every key
// here is under a deployment name of this run's own.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import { zstdDecompressSync } from "node:zlib";
import { Redis } from "ioredis";
import pino from "pino";
import { freshPostgres, redisTestUrl } from "../harness/keys.ts";
import type { AppConfig } from "../src/config/app-config.ts";
import { ResponseCacheStore } from "../src/plugins/response-cache/response-cache.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { startCanned, type Peer } from "../harness/peers.ts";
import { TcpProxy } from "../harness/tcp-proxy.ts";
import { until } from "./helpers/wait-for.ts";

const adminToken = "Rk2m9Xp4Qw7Lz1Vb6Nc3Jd8Hf5Gt0Sy2Ua4Ie6Oo8Pq";
const keySecret = "response-cache-redis-test-secret-0123";
const cleanups: (() => Promise<unknown> | unknown)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const redisTarget = new URL(redisTestUrl);

async function setup(redisUrl: string, logs?: Writable): Promise<{ deployment: string; start: (db: string) => Promise<TestServer> }> {
  const canned = await startCanned();
  cleanups.push(() => canned.child.kill());
  const deployment = `cache-test-${randomBytes(6).toString("hex")}`;
  const raw = (db: string) => ({
    adminToken,
    keySecret,
    deployment,
    database: { url: db },
    redis: { url: redisUrl },
    plans: { cached: { cache: {} } },
    models: [{ id: "canned", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${(canned as Peer).port}/v1`, model: "canned" }], cache: { ttl: "10m" } }],
  });
  return {
    deployment,
    start: async (db) => {
      const srv = await startServer(raw(db), logs ? { logger: { level: "info", stream: logs } } : {});
      cleanups.push(() => srv.close());
      return srv;
    },
  };
}

const body = (content: string) => ({ model: "canned", messages: [{ role: "user", content }], max_tokens: 24, temperature: 0 });

async function chat(srv: TestServer, key: string, content: string): Promise<{ status: number; cache: string | null; json: any }> {
  const res = await srv.post("/v1/chat/completions", body(content), { key });
  return { status: res.status, cache: res.headers.get("x-modelgate-cache"), json: await res.json() };
}

test("issue 45.2 cache: with Redis, one replica's entry is another's hit; short entries are stored as JSON, expire by their ttl, and a purge reaches every replica", async () => {
  const db = await freshPostgres();
  cleanups.push(() => db.drop());
  const { deployment, start } = await setup(redisTestUrl);
  const one = await start(db.url);
  const two = await start(db.url);
  // Keys bound to this run's deployment (an unbound key is valid only on the `shared` one).
  const { key } = await one.createKey({ plan: "cached", deployment });
  const miss = await chat(one, key, "the first replica writes");
  const hit = await chat(two, key, "the first replica writes");
  assert.deepEqual([miss.cache, hit.cache], ["miss", "hit"]);
  assert.equal(JSON.stringify(hit.json.choices), JSON.stringify(miss.json.choices));

  const redis = new Redis(redisTestUrl);
  cleanups.push(() => redis.disconnect());
  const keys = await redis.keys(`mg:cache:${deployment}:*`);
  assert.equal(keys.length, 1);
  const stored = (await redis.getBuffer(keys[0]))!;
  // A short answer's entry is its JSON as it is (from 2 KiB, zstd: the next test).
  const entry = stored.toString("utf8");
  assert.ok(stored.length < 2048 && entry.startsWith("{"), `${stored.length} bytes of JSON`);
  assert.equal((JSON.parse(entry) as { deltas: { text: string }[] }).deltas.map((d) => d.text).join(""), miss.json.choices[0].message.content);
  const ttl = await redis.pttl(keys[0]);
  assert.ok(ttl > 590_000 && ttl <= 600_000, `expires with the model's ttl (${ttl} ms left)`);

  const purge = await two.get("/admin/v1/cache?model=canned", { key: adminToken, method: "DELETE" });
  assert.deepEqual(await purge.json(), { object: "cache.purge", model: "canned", deleted: 1 });
  assert.equal((await chat(one, key, "the first replica writes")).cache, "miss", "purged for every replica");
});

test("issue 45.2 cache: Redis down: the cache is bypassed, requests are still served, and one log line says so", async () => {
  const db = await freshPostgres();
  cleanups.push(() => db.drop());
  const proxy = await TcpProxy.start(redisTarget.hostname, Number(redisTarget.port || 6379));
  cleanups.push(() => proxy.close());
  const lines: { level: number; msg: string }[] = [];
  const logs = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(l) as { level: number; msg: string });
      done();
    },
  });
  const { deployment, start } = await setup(`redis://127.0.0.1:${proxy.port}`, logs);
  const srv = await start(db.url);
  const { key } = await srv.createKey({ plan: "cached", deployment });
  assert.equal((await chat(srv, key, "before the outage")).cache, "miss");
  assert.equal((await chat(srv, key, "before the outage")).cache, "hit");

  proxy.cut("refuse");
  for (let i = 0; i < 8; i++) {
    const res = await chat(srv, key, i % 2 ? "before the outage" : `during the outage ${i}`);
    assert.equal(res.status, 200, "served without the cache");
    assert.equal(res.cache, "bypass");
    assert.ok(res.json.choices[0].message.content.length > 0);
  }
  assert.ok(lines.filter((l) => l.msg === "request" && (l as { cache?: string }).cache === "bypass").length >= 8, "the access lines say bypass");
  assert.ok(lines.some((l) => l.msg === "request" && (l as { cache?: string }).cache === "hit"), "and hit before the outage");
  const cacheLines = () => lines.filter((l) => /response cache/.test(l.msg) && l.level >= 40);
  assert.deepEqual(cacheLines().map((l) => l.msg), ["redis unreachable: the response cache is bypassed until it returns"]);

  proxy.restore();
  await until(async () => (await chat(srv, key, "before the outage")).cache === "hit", "the cache to come back with Redis", 5000);
  assert.ok(lines.some((l) => l.msg === "redis reachable again: the response cache is back"));
  assert.equal(cacheLines().length, 1, "still one warning for the whole outage");
});

test("issue 45.2 cache: an entry from 2 KiB is stored as a zstd frame, a shorter one as JSON; both read back whole", async () => {
  const deployment = `cache-test-${randomBytes(6).toString("hex")}`;
  const config = { deployment, redisUrl: redisTestUrl, cache: { maxBytes: 1 << 20 }, models: [] } as unknown as AppConfig;
  const cache = await ResponseCacheStore.create({ config, log: pino({ level: "silent" }) });
  cleanups.push(() => cache.close());
  const redis = new Redis(redisTestUrl);
  cleanups.push(() => redis.disconnect());
  const short = { deltas: ["a short answer"] };
  const long = { deltas: Array.from({ length: 200 }, (_, i) => `piece ${i} of a long answer`) };
  assert.ok(cache.put("m", "short", short, 60_000, 1 << 20) && cache.put("m", "long", long, 60_000, 1 << 20));
  await until(async () => (await redis.keys(`mg:cache:${deployment}:*`)).length === 2, "both entries written");
  const stored = await Promise.all((await redis.keys(`mg:cache:${deployment}:*`)).sort().map(async (k) => (await redis.getBuffer(k))!));
  const [frame, json] = stored.sort((a, b) => a[0] - b[0]);
  assert.deepEqual([...frame.subarray(0, 4)], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
  assert.ok(frame.length < zstdDecompressSync(frame).length, "compressed");
  assert.deepEqual(JSON.parse(json.toString("utf8")), short);
  assert.deepEqual(await cache.get("m", "short", 1 << 20), short);
  assert.deepEqual(await cache.get("m", "long", 1 << 20), long);
  assert.equal(await cache.get("m", "long", 1024), null, "never inflated past the reader's bound");
});
