// Issue 32: token quotas per account on UTC calendar periods, rebuilt from the usage table after a restart (SQLite,
// no Redis) and after a restart and a Redis flush (PostgreSQL and Redis). Issue 47: a request running past midnight
// counts on one day, the same in the usage table and in the quota counter.
import { after, describe, mock, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";
import { modelsDir, startServer, tempDir, type TestServer } from "../harness/server.ts";
import { freshPostgres, redisTestUrl, silentLogger } from "../harness/keys.ts";
import { calendarPeriod } from "../src/config/periods.ts";
import { openStore } from "../src/store/store.ts";
import { until } from "./helpers/wait-for.ts";

const stories = { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 512, parallel: 1, threads: 1 };
const plans = { daily: { quota: { tokens: 120, period: "day" }, tokenLimit: { tokens: 100_000, window: "1h" } } };
const windowLeft = async (s: TestServer, key: string) => Number((await s.get("/v1/models", { key })).headers.get("x-ratelimit-remaining-tokens"));
const ask = (s: TestServer, key: string, maxTokens: number) => s.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: maxTokens }, { key });

/** Spends the quota with requests of 40 tokens at most until one is refused; returns the tokens the answers used. */
async function spend(s: TestServer, key: string): Promise<number> {
  let used = 0;
  for (let i = 0; i < 10; i++) {
    const res = await ask(s, key, 30);
    if (res.status === 429) return used;
    assert.equal(res.status, 200);
    used += ((await res.json()) as { usage: { total_tokens: number } }).usage.total_tokens;
  }
  throw new Error("the quota never refused");
}

async function assertQuotaRefusal(res: Response): Promise<void> {
  assert.equal(res.status, 429);
  const { error } = (await res.json()) as { error: { code: string; message: string } };
  assert.equal(error.code, "rate_limit_exceeded");
  const midnight = new Date(calendarPeriod("day").endsAt).toISOString().replace(/\.\d+Z$/, "Z");
  assert.match(error.message, new RegExp(`The account's token quota of 120 tokens per day (is exhausted|has \\d+ tokens left, fewer than this request reserves .*); it resets at ${midnight} \\(00:00 UTC\\)\\.`));
  const expected = (calendarPeriod("day").endsAt - Date.now()) / 1000;
  const retryAfter = Number(res.headers.get("retry-after"));
  assert.ok(Math.abs(retryAfter - expected) <= 3, `Retry-After ${retryAfter} counts the seconds to 00:00 UTC (${expected})`);
}

describe("issue 32 quotas survive a restart", () => {
  const dirs: string[] = [];
  after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  test("SQLite, no Redis: the quota spent before a restart is still spent after it (rebuilt from the usage table)", async () => {
    const dataDir = tempDir();
    dirs.push(dataDir);
    let s = await startServer({ models: [stories], plans }, { dataDir });
    const { key } = await s.createKey({ plan: "daily" });
    const used = await spend(s, key);
    assert.ok(used > 0 && used <= 120, `${used} tokens used within the quota`);
    await assertQuotaRefusal(await ask(s, key, 30));
    assert.equal(await windowLeft(s, key), 100_000 - used);
    await s.close();
    s = await startServer({ models: [stories], plans }, { dataDir });
    try {
      await assertQuotaRefusal(await ask(s, key, 30));
      // The token window is in memory without Redis: a restart starts it again, as the request limiter's.
      assert.equal(await windowLeft(s, key), 100_000);
      // What is left still admits a request that fits it.
      const left = 120 - used;
      if (left > 8) assert.equal((await ask(s, key, left - 7)).status, 200);
    } finally {
      await s.close();
    }
  });

  test("PostgreSQL and Redis: a restart and a flush of the quota's Redis key rebuild it from the usage table", async () => {
    const db = await freshPostgres();
    const dataDir = tempDir();
    dirs.push(dataDir);
    const raw = { models: [stories], plans, database: { url: db.url }, redis: { url: redisTestUrl }, keySecret: "tokens-quota-test-secret-0123456789" };
    let s = await startServer(raw, { dataDir });
    const redis = new Redis(redisTestUrl);
    try {
      const { key, accountId } = await s.createKey({ plan: "daily" });
      const used = await spend(s, key);
      await assertQuotaRefusal(await ask(s, key, 30));
      assert.equal(await windowLeft(s, key), 100_000 - used);
      await s.close();
      // Only this account's counters: other tests share the Redis.
      const keys = await redis.keys(`modelgate:tok:q:${accountId}:*`);
      assert.equal(keys.length, 1);
      await redis.del(...keys);
      s = await startServer(raw, { dataDir });
      await assertQuotaRefusal(await ask(s, key, 30));
      assert.equal(await windowLeft(s, key), 100_000 - used, "the token window is in Redis: the restart kept it");
      assert.equal((await redis.keys(`modelgate:tok:q:${accountId}:*`)).length, 1, "seeded again");
    } finally {
      redis.disconnect();
      await s.close();
      await db.drop();
    }
  });
});

/** An upstream that answers a chat completion (streamed) only once the test lets it: `arrived` resolves when one comes in. */
async function gatedUpstream(usage: { prompt_tokens: number; completion_tokens: number }) {
  let arrive!: () => void;
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const chunk = (choices: unknown[], extra = {}) => `data: ${JSON.stringify({ id: "chatcmpl-gated", object: "chat.completion.chunk", created: 1, model: "gated", choices, ...extra })}\n\n`;
  const server = createServer((req, res) => {
    req.resume().on("end", async () => {
      if (req.method !== "POST") return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ object: "list", data: [] }));
      arrive();
      await released;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(
        chunk([{ index: 0, delta: { role: "assistant", content: "Once upon a time" }, logprobs: null, finish_reason: null }]) +
          chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: "stop" }]) +
          chunk([], { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } }) +
          "data: [DONE]\n\n",
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, arrived, release, close: () => new Promise((resolve) => server.close(resolve)) };
}

test("issue 47 a request running past midnight UTC counts on the day it was admitted: in that day's usage rows, as in that day's quota counter", async () => {
  const db = await freshPostgres();
  const upstream = await gatedUpstream({ prompt_tokens: 8, completion_tokens: 19 });
  const raw = {
    models: [{ id: "gated", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${upstream.port}/v1`, model: "gated" }] }],
    plans: { daily: { quota: { tokens: 1_000_000, period: "day" } } },
    database: { url: db.url },
    redis: { url: redisTestUrl },
    keySecret: "tokens-quota-midnight-secret-0123456789",
  };
  const s = await startServer(raw);
  const redis = new Redis(redisTestUrl);
  const { key, accountId } = await s.createKey({ plan: "daily" });
  const counter = (day: string) => redis.hget(`modelgate:tok:q:${accountId}:${day}`, "u");
  try {
    mock.timers.enable({ apis: ["Date"], now: Date.UTC(2031, 0, 1, 23, 59, 59, 900) });
    const answer = s.post("/v1/chat/completions", { model: "gated", messages: [{ role: "user", content: "Once" }], max_tokens: 48 }, { key });
    await upstream.arrived; // reserved on 2031-01-01
    mock.timers.setTime(Date.UTC(2031, 0, 2, 0, 0, 0, 100));
    upstream.release();
    const res = await answer;
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(((await res.json()) as { usage: { total_tokens: number } }).usage.total_tokens, 27);
    await s.server.ctx.usage.flush();
    const store = await openStore(s.config, silentLogger());
    try {
      const tokensOn = async (day: string) => (await store.usage.periodTotals(accountId, day, day)).reduce((n, r) => n + r.promptTokens + r.completionTokens, 0);
      assert.deepEqual([await tokensOn("2031-01-01"), await tokensOn("2031-01-02")], [27, 0]);
    } finally {
      await store.close();
    }
    // The settle does not hold the answer back.
    await until(async () => (await counter("2031-01-01")) === "27", "the day's quota counter settled", 5_000);
    assert.equal(await counter("2031-01-02"), null);
  } finally {
    mock.timers.reset();
    await redis.del(`modelgate:tok:q:${accountId}:2031-01-01`, `modelgate:tok:q:${accountId}:2031-01-02`);
    redis.disconnect();
    await s.close();
    await upstream.close();
    await db.drop();
  }
});
