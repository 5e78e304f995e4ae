import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { testConfig } from "../harness/config.ts";
import { createKey, freshPostgres, redisTestUrl } from "../harness/keys.ts";
import { startCanned, type Peer } from "../harness/peers.ts";
import { requester, spawnServer, tempDir, trustingFetch, type SpawnedServer } from "../harness/server.ts";

/**
 * Three front replicas (separate processes) sharing PostgreSQL and Redis, in front of two upstreams (the fixed,
 * canned OpenAI-style server the benchmarks use too, harness/canned-upstream.mjs). The limits stay exact whichever
 * replica a request reaches.
 */
let replicas: SpawnedServer[] = [];
let upstreams: Peer[] = [];
let dropDb: () => Promise<void>;
let raw: Record<string, unknown>;
const dir = tempDir("upstream-replicas-");

before(async () => {
  const db = await freshPostgres();
  dropDb = db.drop;
  upstreams = await Promise.all([startCanned(), startCanned()]);
  raw = {
    dataDir: dir,
    logLevel: "warn",
    database: { url: db.url },
    redis: { url: redisTestUrl },
    keySecret: `shared-secret-${randomBytes(8).toString("hex")}`,
    plans: { fifty: { rateLimit: { requests: 50, window: "1m" } } },
    defaultPlan: "fifty",
    models: [{ id: "pool", engine: "upstream", capabilities: ["chat"], upstreams: upstreams.map((u) => ({ url: `http://127.0.0.1:${u.port}/v1`, model: "canned" })) }],
  };
  // One after the other: the first start writes the shared self-signed certificate into the data dir.
  for (let i = 0; i < 3; i++) replicas.push(await spawnServer(raw, dir));
});

after(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
  for (const u of upstreams) u.child.kill();
  await dropDb?.();
});

test("three replicas sharing PostgreSQL and Redis in front of two upstreams: exactly the plan's 50 requests per window pass", async () => {
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const { fetch } = trustingFetch(readFileSync(path.join(dir, "tls/cert.pem"), "utf8"));
  const clients = replicas.map((r) => requester(fetch, r.origin));
  // Warm each replica first (its first requests compile code paths, which on this small machine can stall Redis
  // replies past the limiter's 250 ms fail-fast timeout), with another key so the window under test stays fresh.
  const warm = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  for (const c of clients) for (let i = 0; i < 5; i++) await (await c.post("/v1/chat/completions", { model: "pool", messages: [{ role: "user", content: "Hi" }] }, { key: warm.key })).arrayBuffer();
  // 12 clients in parallel, each request to the next replica in turn (a load balancer's round robin).
  const statuses: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 12 }, async () => {
      while (next < 120) {
        const i = next++;
        const res = await clients[i % 3].post("/v1/chat/completions", { model: "pool", messages: [{ role: "user", content: "Hi" }] }, { key });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
    }),
  );
  assert.equal(statuses.filter((s) => s === 200).length, 50, `replica logs: ${replicas.map((r) => r.stderr.join("").split("\n").filter((l) => /redis|limit/i.test(l)).join("\n")).join("\n---\n")}`);
  assert.equal(statuses.filter((s) => s === 429).length, 70);
});
