// test: alone (replicas share a limit through a Redis slowed by 300 ms: each command must still answer within the limiter's timeout)
// Issues 32 and 42.12: the outage policy every limiter shares (plugins/rate-limit/shared-redis.ts). A slow Redis
// (every command answering 300 ms late) is not an outage: replicas keep sharing their limits. While Redis is away
// (`redis.onError: open`), each replica counts from where Redis left off; `closed` answers 503. Redis is slowed and
// cut with a proxy in front of the real one.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { freshPostgres, redisTestUrl, sharedRedis } from "../harness/keys.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { TcpProxy } from "../harness/tcp-proxy.ts";
import { RedisConcurrency } from "../src/plugins/rate-limit/redis-concurrency.ts";
import { RedisStore } from "../src/plugins/rate-limit/redis-store.ts";
import { RedisTokenStore } from "../src/plugins/rate-limit/token-redis-store.ts";
import type { SharedRedis } from "../src/plugins/rate-limit/shared-redis.ts";
import type { ReserveOutcome } from "../src/plugins/rate-limit/token-store.ts";
import { until } from "./helpers/wait-for.ts";

const cleanups: (() => Promise<unknown> | unknown)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const commandDelayMs = 300;
const unique = (prefix: string) => `${prefix}-${randomBytes(6).toString("hex")}`;

/** The real Redis behind a proxy the test can slow down or cut. */
async function proxiedRedis(): Promise<{ proxy: TcpProxy; url: string }> {
  const redis = await TcpProxy.inFrontOf(redisTestUrl);
  cleanups.push(() => redis.proxy.close());
  return redis;
}

/** A node's shared Redis, through `url`. */
async function node(url: string, onError: "open" | "closed" = "open"): Promise<SharedRedis> {
  const redis = await sharedRedis(url, onError);
  cleanups.push(() => redis.close());
  return redis;
}

/** Calls that fail until the circuit is open (5 in a row; none of them counts anything). */
async function failUntilOpen(redis: SharedRedis, call: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 5; i++) await call().catch(() => null);
  assert.equal(redis.healthy, false, "the circuit is open");
}

test("issue 42.12 three replicas under a Redis command delay of 300 ms hold the request limit within 10%", async () => {
  const redis = await proxiedRedis();
  const db = await freshPostgres();
  cleanups.push(() => db.drop());
  const raw = {
    keySecret: randomBytes(32).toString("hex"),
    database: { url: db.url },
    redis: { url: redis.url },
    models: [],
    // The address's bucket is shared with every other test on this Redis: out of the way.
    anonymousRateLimit: { requests: 1_000_000, window: "1m" },
    plans: { thirty: { rateLimit: { requests: 30, window: "1m" } } },
  };
  // The first one migrates the database; the other two start together.
  const first = await startServer(raw);
  const replicas: TestServer[] = [first, ...(await Promise.all([startServer(raw), startServer(raw)]))];
  cleanups.push(...replicas.map((r) => () => r.close()));
  const { key } = await replicas[0].createKey({ plan: "thirty" });
  redis.proxy.delay(commandDelayMs);
  const statuses = await Promise.all(
    Array.from({ length: 90 }, async (_, i) => {
      const res = await replicas[i % 3].get("/v1/models", { key });
      await res.arrayBuffer();
      return res.status;
    }),
  );
  const admitted = statuses.filter((s) => s === 200).length;
  assert.equal(statuses.filter((s) => s !== 200 && s !== 429).length, 0, statuses.join(","));
  assert.ok(Math.abs(admitted - 30) <= 3, `${admitted} of 90 admitted against a limit of 30 shared by 3 replicas`);
  assert.ok(replicas.every((r) => r.server.app.limiterHealthy()), "no replica opened its circuit");
});

test("issue 42.12 the concurrency leases of three nodes under a Redis command delay of 300 ms hold maxConcurrent", async () => {
  const redis = await proxiedRedis();
  const nodes = await Promise.all([0, 1, 2].map(async () => new RedisConcurrency(await node(redis.url))));
  const holder = { keyId: unique("k"), accountId: unique("a"), plan: { name: "five", maxConcurrent: 5, maxConcurrentPerAccount: null } };
  redis.proxy.delay(commandDelayMs);
  const outcomes = await Promise.allSettled(Array.from({ length: 30 }, (_, i) => nodes[i % 3].acquire(holder)));
  const leases = outcomes.filter((o) => o.status === "fulfilled").map((o) => o.value);
  for (const release of leases) release();
  const refusals = outcomes.filter((o) => o.status === "rejected").map((o) => (o.reason as { code?: string }).code);
  assert.deepEqual([leases.length, refusals.filter((c) => c !== "rate_limit_exceeded")], [5, []], `${leases.length} of 30 held at once against maxConcurrent 5`);
});

test("issue 42.12 the request limiter while Redis is away (open): each window starts at the count Redis last gave, not afresh", async () => {
  const redis = await proxiedRedis();
  const shared = await node(redis.url);
  const store = new RedisStore(shared);
  const bucket = unique("test:rl");
  for (let i = 0; i < 8; i++) assert.equal((await store.hit(bucket, 10, 60_000)).allowed, true);
  redis.proxy.cut("refuse");
  await failUntilOpen(shared, () => store.peek(bucket, 10, 60_000));
  const [ninth, tenth, eleventh] = [await store.hit(bucket, 10, 60_000), await store.hit(bucket, 10, 60_000), await store.hit(bucket, 10, 60_000)];
  assert.deepEqual([ninth.allowed, tenth.allowed, eleventh.allowed], [true, true, false], "8 counted in Redis, 2 left here");
  assert.equal(tenth.count, 10);
  assert.ok(eleventh.resetMs > 50_000 && eleventh.resetMs <= 60_000, "the window ends when Redis's would");
});

test("issue 42.12 concurrency leases while Redis is away (open): this node's requests and the others' last seen still count; closed refuses with 503", async () => {
  const redis = await proxiedRedis();
  const [a, b, closed] = [await node(redis.url), await node(redisTestUrl), await node(redis.url, "closed")];
  const [nodeA, nodeB, nodeC] = [new RedisConcurrency(a), new RedisConcurrency(b), new RedisConcurrency(closed)];
  const holder = { keyId: unique("k"), accountId: unique("a"), plan: { name: "four", maxConcurrent: 4, maxConcurrentPerAccount: null } };
  const held = [await nodeB.acquire(holder), await nodeB.acquire(holder), await nodeA.acquire(holder)];
  redis.proxy.cut("refuse");
  const other = { keyId: unique("k"), accountId: unique("a"), plan: holder.plan };
  await failUntilOpen(a, async () => (await nodeA.acquire(other))());
  held.push(await nodeA.acquire(holder));
  await assert.rejects(async () => nodeA.acquire(holder), (err: { code?: string; message?: string }) => err.code === "rate_limit_exceeded" && /has 4 requests/.test(err.message ?? ""));
  for (const release of held) release();

  await failUntilOpen(closed, async () => nodeC.acquire(other));
  await assert.rejects(async () => nodeC.acquire(holder), (err: { code?: string }) => err.code === "overloaded");
});

const taken = (o: ReserveOutcome) => (o.missing ? null : o.taken);

for (const onError of ["open", "closed"] as const) {
  test(`issue 32 token counters while Redis is away (redis.onError: ${onError})`, async () => {
    const redis = await proxiedRedis();
    const shared = await node(redis.url, onError);
    const store = new RedisTokenStore(shared);
    const hit = { bucket: unique("test:tok"), limit: 1000, amount: 900, windowMs: 60_000 };
    assert.equal(taken(await store.reserve([hit])), true, "900 of 1000 reserved in Redis");
    redis.proxy.cut("refuse");
    await failUntilOpen(shared, () => store.peek([hit]));
    if (onError === "closed") {
      await assert.rejects(store.reserve([{ ...hit, amount: 50 }]), (err: { code?: string }) => err.code === "overloaded");
    } else {
      // The fallback starts the window at the 900 Redis last reported: 100 left, not a fresh 1000.
      assert.equal(taken(await store.reserve([{ ...hit, amount: 200 }])), false);
      assert.equal(taken(await store.reserve([{ ...hit, amount: 100 }])), true);
    }
  });
}

test("issue 47 a day's quota counter in Redis still equals what was used after an outage: what a replica counted alone is added back", async () => {
  const redis = await proxiedRedis();
  const shared = await node(redis.url, "open");
  const store = new RedisTokenStore(shared);
  const day = { bucket: unique("test:q"), limit: 1_000_000, expireAt: Date.now() + 3_600_000 };
  const reserve = async (amount: number) => {
    const outcome = await store.reserve([{ ...day, amount }]);
    assert.equal(taken(outcome), true);
    return outcome.missing ? "" : outcome.results[0]!.windowId;
  };
  await store.seed(day.bucket, 0, day.expireAt);
  await store.settle([{ bucket: day.bucket, delta: -40, windowId: await reserve(100) }]);
  const before = await reserve(30);
  redis.proxy.cut("refuse");
  await failUntilOpen(shared, () => store.peek([{ ...day, amount: 0 }]));
  // Alone (seeded from the usage table, as the meter does): a reservation made before the outage is settled,
  // another is made and settled.
  await store.seed(day.bucket, 90, day.expireAt);
  await store.settle([{ bucket: day.bucket, delta: -5, windowId: before }]);
  await store.settle([{ bucket: day.bucket, delta: -10, windowId: await reserve(50) }]);
  redis.proxy.restore();
  await until(() => shared.healthy, "Redis shared again", 5_000);
  await reserve(1);
  const [counted] = await store.peek([{ ...day, amount: 0 }]);
  assert.equal(counted!.used, 100 - 40 + 30 - 5 + 50 - 10 + 1);
});
