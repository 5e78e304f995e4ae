// test: alone (B, one request every 500 ms, keeps within its half of the slots only while generation keeps pace)
import { test, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import type { Server } from "node:http";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { startPacedUpstream } from "../harness/paced-upstream.mjs";
import { waitFor } from "./helpers/wait-for.ts";

/*
 * Fair share through the real server: a real upstream (an HTTP server started here that streams a fixed completion
 * over 200 ms) and stories260K in-process. Account A floods a model with more connections than its slots and queue
 * hold; account B, sending one request at a time, gets every answer (no 503 overloaded).
 */

const adminToken = "Qk3v9Zr7Lw2Xp8Tn5Hy4Md6Fb1Gc0Js";
/** A flood is not slowed by the per-key rate limit: what is measured is the scheduler. */
const plans = { default: { rateLimit: { requests: 1_000_000, window: "1m" } } };
const servers: TestServer[] = [];
let upstream: Server | null = null;
after(async () => {
  for (const s of servers) await s.close();
  upstream?.close();
});

interface Tally {
  ok: number;
  refused: number;
  other: string[];
}

/** One streamed chat: its status (200 once the whole stream was read). */
async function chat(srv: TestServer, key: string, model: string, extra: Record<string, unknown> = {}): Promise<number> {
  const res = await srv.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Once upon a time" }], stream: true, ...extra }, { key });
  await res.text();
  return res.status;
}

/** A floods with `connections` loops until `stop`; B sends one request every `everyMs`, `count` times. */
async function noisyNeighbour(srv: TestServer, model: string, connections: number, count: number, everyMs: number, extra: Record<string, unknown> = {}, extraB = extra) {
  const a = await srv.createKey();
  const b = await srv.createKey();
  const tallyA: Tally = { ok: 0, refused: 0, other: [] };
  const tallyB: Tally = { ok: 0, refused: 0, other: [] };
  const count1 = (t: Tally, status: number) => (status === 200 ? t.ok++ : status === 503 ? t.refused++ : t.other.push(String(status)));
  let stop = false;
  const flood = Array.from({ length: connections }, async () => {
    while (!stop) count1(tallyA, await chat(srv, a.key, model, extra));
  });
  // Let A fill the slots and the queue first.
  await waitFor(() => srv.server.ctx.catalog.get(model).stats(), (s) => s.queueDepth >= Math.min(s.active, 1) && tallyA.refused > 0, "A floods the model", 20_000, 10);
  const sent: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    sent.push(chat(srv, b.key, model, extraB).then((status) => void count1(tallyB, status)));
    await new Promise((r) => setTimeout(r, everyMs));
  }
  await Promise.all(sent);
  const tenants = srv.server.ctx.catalog.get(model).stats().tenants;
  stop = true;
  await Promise.all(flood);
  return { a, b, tallyA, tallyB, tenants };
}

test("noisy neighbour on an upstream pool: A floods with 40 connections, B gets 0 × 503; the admin API shows both accounts' shares", async () => {
  const paced = await startPacedUpstream({ durationMs: 200, jitter: 0.25 });
  upstream = paced.server;
  const srv = await startServer({
    adminToken,
    plans,
    models: [{ id: "pool", engine: "upstream", capabilities: ["chat"], parallel: 4, upstreams: [{ url: `http://127.0.0.1:${paced.port}/v1`, model: "paced", maxInFlight: 4 }] }],
  });
  servers.push(srv);
  const { a, b, tallyA, tallyB, tenants } = await noisyNeighbour(srv, "pool", 40, 12, 250);
  assert.deepEqual(tallyB, { ok: 12, refused: 0, other: [] }, "B: every request answered");
  assert.ok(tallyA.ok > 12, `A kept the capacity B left: ${JSON.stringify(tallyA)}`);
  assert.ok(tallyA.refused > 0, "A, over its share of the queue, was refused");
  assert.deepEqual(tallyA.other, []);

  const accounts = new Map(tenants.map((t) => [t.account, t]));
  assert.ok(accounts.get(a.accountId)!.waiting.interactive > 0, "A is in the queue");
  const shareB = accounts.get(b.accountId)!.shareLastMinute;
  assert.ok(shareB > 0 && shareB < 0.5, `B's share of the service over the last minute: ${shareB}`);

  const admin = await srv.get("/admin/v1/models/pool", { headers: { authorization: `Bearer ${adminToken}` } });
  assert.equal(admin.status, 200);
  const view = (await admin.json()) as { tenants: { account: string; tokensLastMinute: number; shareLastMinute: number }[] };
  const listed = new Map(view.tenants.map((t) => [t.account, t]));
  assert.ok(listed.get(a.accountId)!.tokensLastMinute > listed.get(b.accountId)!.tokensLastMinute);
  assert.ok(Math.abs(view.tenants.reduce((sum, t) => sum + t.shareLastMinute, 0) - 1) < 1e-6);

  const metrics = await (await srv.get("/metrics", { headers: { authorization: `Bearer ${adminToken}` } })).text();
  assert.match(metrics, /modelgate_overloaded_total\{model="pool",reason="queue_full"\} [1-9]/);
  assert.match(metrics, /modelgate_queue_wait_seconds_count\{model="pool",priority="interactive"\} [1-9]/);
  assert.match(metrics, /modelgate_service_tokens_total\{model="pool",priority="interactive"\} [1-9]/);
});

test("noisy neighbour on stories260K in-process: B gets 0 × 503", async () => {
  const srv = await startServer({
    plans,
    models: [{ id: "tiny", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 2, queueSize: 8, threads: 1 }],
  });
  servers.push(srv);
  // B's own load (one 4-token generation every 500 ms) stays within its half of the two slots even on a loaded machine.
  // B starts on the fair-share reserve sequence while A's generations pause (stream-chat.test.ts shows the decodes).
  const { tallyA, tallyB } = await noisyNeighbour(srv, "tiny", 16, 8, 500, { max_tokens: 8, temperature: 0 }, { max_tokens: 4, temperature: 0 });
  assert.deepEqual(tallyB, { ok: 8, refused: 0, other: [] }, "B: every request answered");
  assert.ok(tallyA.ok > 8 && tallyA.refused > 0, `A: ${JSON.stringify(tallyA)}`);
});

test("maxConcurrent: a key over its plan's running + queued requests gets 429 rate_limit_exceeded with Retry-After; so does an account over maxConcurrentPerAccount", async () => {
  const paced = await startPacedUpstream({ durationMs: 400 });
  const srv = await startServer({
    plans: { two: { maxConcurrent: 2 }, three: { maxConcurrentPerAccount: 3 } },
    models: [{ id: "slow", engine: "upstream", capabilities: ["chat"], parallel: 8, upstreams: [{ url: `http://127.0.0.1:${paced.port}/v1`, model: "paced" }] }],
  });
  servers.push(srv);
  try {
    const limited = await srv.createKey({ plan: "two" });
    const statuses = await Promise.all([0, 1, 2].map(async (i) => {
      await new Promise((r) => setTimeout(r, i * 50));
      const res = await srv.post("/v1/chat/completions", { model: "slow", messages: [{ role: "user", content: "hi" }] }, { key: limited.key });
      const body = (await res.json()) as { error?: { code: string } };
      return { status: res.status, code: body.error?.code, retryAfter: res.headers.get("retry-after") };
    }));
    assert.deepEqual(statuses.map((s) => s.status), [200, 200, 429]);
    assert.equal(statuses[2].code, "rate_limit_exceeded");
    assert.ok(Number(statuses[2].retryAfter) >= 1);
    // Once they end, the key may send again.
    assert.equal((await srv.post("/v1/chat/completions", { model: "slow", messages: [{ role: "user", content: "hi" }] }, { key: limited.key })).status, 200);

    // Per account: three keys of one account share the limit of 3.
    const first = await srv.createKey({ plan: "three" });
    const keys = [first, await srv.createKey({ account: first.accountId }), await srv.createKey({ account: first.accountId })];
    const four = await Promise.all([...keys, first].map(async (k, i) => {
      await new Promise((r) => setTimeout(r, i * 50));
      return (await srv.post("/v1/chat/completions", { model: "slow", messages: [{ role: "user", content: "hi" }] }, { key: k.key })).status;
    }));
    assert.deepEqual(four, [200, 200, 200, 429]);
  } finally {
    paced.server.close();
  }
});

test("maxConcurrent across replicas (Redis): two nodes share a key's count exactly, and a node that dies frees its places when their leases expire", async () => {
  const { RedisConcurrency } = await import("../src/plugins/rate-limit/redis-concurrency.ts");
  const { sharedRedis } = await import("../harness/keys.ts");
  const plan = { name: "two", maxConcurrent: 2, maxConcurrentPerAccount: null };
  const holder = { keyId: `key_${Math.random().toString(36).slice(2)}`, accountId: `acct_${Math.random().toString(36).slice(2)}`, plan };
  const [redisA, redisB] = await Promise.all([sharedRedis(), sharedRedis()]);
  // Leases of 1.5 s, renewed every 0.5 s: a renewal may run a second late on a loaded machine before the lease
  // lapses (with 0.6 s leases a 0.4-s delay lapsed one, and the count fell short once).
  const nodeA = new RedisConcurrency(redisA, 1500);
  const nodeB = new RedisConcurrency(redisB, 1500);
  try {
    const first = await nodeA.acquire(holder);
    await nodeB.acquire(holder);
    await assert.rejects(async () => nodeA.acquire(holder), (err: unknown) => (err as { code?: string }).code === "rate_limit_exceeded" && ((err as { retryAfterMs?: number }).retryAfterMs ?? 0) >= 1000);
    // A live node renews its leases: past the lease time the count still holds.
    await new Promise((r) => setTimeout(r, 2000));
    await assert.rejects(async () => nodeA.acquire(holder), (err: unknown) => (err as { code?: string }).code === "rate_limit_exceeded");
    first();
    const again = await nodeA.acquire(holder);
    // Node B dies holding its place: once its lease expires, the place is free.
    await redisB.close();
    await assert.rejects(async () => nodeA.acquire(holder), (err: unknown) => (err as { code?: string }).code === "rate_limit_exceeded");
    await new Promise((r) => setTimeout(r, 1700));
    const freed = await nodeA.acquire(holder);
    again();
    freed();
  } finally {
    await redisA.close();
    await redisB.close();
  }
});
