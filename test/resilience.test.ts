// test: long (29 s alone, 19 s of it CPU)
// Issue 16: keep serving when Redis or PostgreSQL go away, limit admin-token guessing, drain cleanly at shutdown.
// Outages are cut with a TCP proxy in front of the shared services; each scenario runs real `modelgate serve`
// processes.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { Redis } from "ioredis";
import pg from "pg";
import { createKey, freshPostgresBehindProxy, redisTestUrl } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { modelsDir, requester, spawnServer, startServer, tempDir, trustingFetch, writeConfig, type SpawnedServer } from "../harness/server.ts";
import { sseFrames } from "./helpers/sse.ts";
import { TcpProxy } from "../harness/tcp-proxy.ts";
import { until } from "./helpers/wait-for.ts";

const keySecret = "resilience-test-key-secret-0123456789";
const adminToken = "6qFYlsDcg7vavYM6xkDCGpci3JleFTH26xnzYi-fw2I";
const cleanups: (() => Promise<unknown> | unknown)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const stories = { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 2048, parallel: 2, threads: 1 };

/** A spawned server with a client that trusts its certificate. */
async function serve(raw: Record<string, unknown>, dir: string): Promise<{ server: SpawnedServer; post: ReturnType<typeof requester>["post"]; get: ReturnType<typeof requester>["get"] }> {
  const server = await spawnServer(raw, dir);
  cleanups.push(() => server.stop());
  const { fetch } = trustingFetch(readFileSync(path.join(raw.dataDir as string, "tls", "cert.pem"), "utf8"));
  return { server, ...requester(fetch, server.origin) };
}

async function timed(call: () => Promise<Response>): Promise<{ ms: number; res: Response }> {
  const started = performance.now();
  const res = await call();
  await res.arrayBuffer();
  return { ms: performance.now() - started, res };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

test("issue 16.1 Redis cut (onError: open): requests keep their rate-limit headers with < 50 ms added, and shared limits return within 1 s of Redis", async () => {
  const { proxy, url: redisUrl } = await TcpProxy.inFrontOf(redisTestUrl);
  cleanups.push(() => proxy.close());
  const dir = tempDir();
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const raw = { dataDir: path.join(dir, "data"), keySecret, redis: { url: redisUrl }, models: [], plans: { big: { rateLimit: { requests: 100000, window: "1m" } } } };
  const { key, id } = await createKey(testConfig(raw, null), { plan: "big" });
  const { get } = await serve(raw, dir);
  const call = () => timed(() => get("/v1/models", { key }));

  for (let i = 0; i < 5; i++) await call();
  const before: number[] = [];
  for (let i = 0; i < 20; i++) before.push((await call()).ms);

  proxy.cut("blackhole");
  // The requests in flight when Redis went away wait out the command timeout (2 s) together, and their 5 failures
  // open the circuit; after that nothing waits on Redis.
  for (const { res } of await Promise.all(Array.from({ length: 5 }, call))) assert.equal(res.status, 200, "fail-open: admitted");
  const during: number[] = [];
  for (let i = 0; i < 30; i++) {
    const { ms, res } = await call();
    assert.equal(res.status, 200, "fail-open: admitted");
    assert.ok(res.headers.get("x-ratelimit-remaining-requests"), "rate-limit headers from the local fallback counter");
    during.push(ms);
  }
  const added = median(during) - median(before);
  assert.ok(added < 50, `added ${added.toFixed(1)} ms while Redis is away (before ${median(before).toFixed(1)} ms)`);

  const direct = new Redis(redisTestUrl);
  cleanups.push(() => direct.disconnect());
  const bucket = `modelgate:rl:k:${id}:60000`;
  const counted = Number(await direct.get(bucket));
  proxy.restore();
  const restoredAt = Date.now();
  let back = Infinity;
  while (Date.now() - restoredAt < 5000) {
    await call();
    if (Number(await direct.get(bucket)) > counted) {
      back = Date.now() - restoredAt;
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(back <= 1000, `shared counting resumed ${back} ms after Redis returned`);
});

test("issue 16.1 Redis cut (onError: closed): requests get 503 overloaded with Retry-After, and are served again once Redis returns", async () => {
  const { proxy, url: redisUrl } = await TcpProxy.inFrontOf(redisTestUrl);
  cleanups.push(() => proxy.close());
  const dir = tempDir();
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const raw = { dataDir: path.join(dir, "data"), keySecret, redis: { url: redisUrl, onError: "closed" }, models: [] };
  const { key } = await createKey(testConfig(raw, null));
  const { get } = await serve(raw, dir);
  assert.equal((await get("/v1/models", { key })).status, 200);
  proxy.cut("refuse");
  for (let i = 0; i < 5; i++) {
    const res = await get("/v1/models", { key });
    assert.equal(res.status, 503);
    assert.deepEqual(((await res.json()) as { error: { code: string; type: string } }).error.code, "overloaded");
    assert.ok(Number(res.headers.get("retry-after")) >= 1);
  }
  proxy.restore();
  const deadline = Date.now() + 3000;
  let status = 503;
  while (status !== 200 && Date.now() < deadline) {
    status = (await get("/v1/models", { key })).status;
    if (status !== 200) await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(status, 200);
});

test("issue 16.2 PostgreSQL cut: seen keys keep working, unknown keys get 503, a revocation through another replica (Redis) holds within 1 s, usage is written after", async () => {
  const db = await freshPostgresBehindProxy();
  cleanups.push(() => db.close());
  const { proxy } = db;
  const dirA = tempDir();
  const dirB = tempDir();
  cleanups.push(() => rmSync(dirA, { recursive: true, force: true }), () => rmSync(dirB, { recursive: true, force: true }));
  const base = { keySecret, adminToken, database: { url: db.url }, redis: { url: redisTestUrl }, models: [stories] };
  const rawA = { ...base, dataDir: path.join(dirA, "data") };
  const rawB = { ...base, dataDir: path.join(dirB, "data") };
  const seen = await createKey(testConfig(rawA, null));
  const worker = await createKey(testConfig(rawA, null));
  const unseen = await createKey(testConfig(rawA, null));
  const [a, b] = await Promise.all([serve(rawA, dirA), serve(rawB, dirB)]);
  const ask = (key: string) => a.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 3, temperature: 0 }, { key });

  assert.equal((await a.get("/v1/models", { key: seen.key })).status, 200);
  assert.equal((await ask(worker.key)).status, 200);
  const client = new pg.Client({ connectionString: db.direct });
  await client.connect();
  cleanups.push(() => client.end());
  const requestsOf = async (keyId: string) => Number((await client.query("select coalesce(sum(requests), 0) as n from usage where key_id = $1", [keyId])).rows[0].n);
  await until(async () => (await requestsOf(worker.id)) === 1, "the usage of that request to be written");

  proxy.cut("refuse");
  const seenDuring = await a.get("/v1/models", { key: seen.key });
  assert.equal(seenDuring.status, 200, "a key used before the cut keeps working (store.staleIfError)");
  assert.ok(seenDuring.headers.get("x-ratelimit-limit-requests"));
  const unknown = await a.get("/v1/models", { key: unseen.key });
  assert.equal(unknown.status, 503, "a key never seen cannot be checked");
  assert.equal(((await unknown.json()) as { error: { code: string } }).error.code, "overloaded");
  assert.ok(Number(unknown.headers.get("retry-after")) >= 1);
  for (let i = 0; i < 3; i++) assert.equal((await ask(worker.key)).status, 200, "inference goes on; its usage is buffered");
  const ready = (await (await a.get("/readyz", { key: adminToken })).json()) as { store: { state: string } };
  assert.equal(ready.store.state, "unreachable");

  const revoked = await b.post(`/admin/v1/keys/${seen.id}/revoke`, {}, { key: adminToken });
  assert.equal(revoked.status, 202, "accepted while the database is away");
  assert.equal(((await revoked.json()) as { pending: boolean }).pending, true);
  const revokedAt = Date.now();
  let status = 200;
  while (status === 200 && Date.now() - revokedAt < 2000) {
    status = (await a.get("/v1/models", { key: seen.key })).status;
    if (status === 200) await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(status, 401);
  assert.ok(Date.now() - revokedAt <= 1000, `revocation seen on the other replica after ${Date.now() - revokedAt} ms`);

  proxy.restore();
  const deadline = Date.now() + 10_000;
  let usage = 0;
  let stored: string | null = null;
  while (Date.now() < deadline) {
    usage = await requestsOf(worker.id);
    stored = (await client.query("select revoked_at from api_keys where id = $1", [seen.id])).rows[0].revoked_at as string | null;
    if (usage >= 4 && stored) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(usage, 4, "the three requests made during the cut were recorded after it");
  assert.ok(stored, "the revocation made during the cut was written once the database returned");
  const audit = await client.query("select actor, source, detail from audit_log where key_id = $1 and action = 'key.revoke'", [seen.id]);
  assert.deepEqual(
    audit.rows.map((r) => [r.actor, r.source, JSON.parse(r.detail).pending]),
    [["admin-token", "127.0.0.1", true]],
    "issue 29.6: its audit entry was written with it",
  );
  assert.equal((await a.get("/v1/models", { key: unseen.key })).status, 200, "unknown keys are checked again");
  assert.equal((await a.get("/v1/models", { key: seen.key })).status, 401);
});

test("issue 16.3 admin-token guessing is rate limited like key guessing; admin answers carry the limiter's headers", async () => {
  const srv = await startServer({ adminToken, anonymousRateLimit: { requests: 20, window: "1m" }, models: [] });
  cleanups.push(() => srv.close());
  const statuses: number[] = [];
  for (let i = 0; i < 25; i++) {
    const res = await srv.get("/admin/v1/accounts", { key: `wrong-admin-token-${i}` });
    assert.ok(res.headers.get("x-ratelimit-limit-requests"), "limiter headers on refusals");
    statuses.push(res.status);
    if (res.status === 429) assert.ok(Number(res.headers.get("retry-after")) >= 1);
  }
  assert.deepEqual(statuses, [...Array(20).fill(401), ...Array(5).fill(429)]);
  const ok = await srv.get("/v1/models");
  assert.equal(ok.status, 429, "the same address guessing keys is limited too");
});

test("issue 16.4 a stream still running at shutdownTimeout gets one error event (server_error/overloaded) before the connection closes", async () => {
  const dir = tempDir();
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const raw = { dataDir: path.join(dir, "data"), keySecret, server: { shutdownTimeout: "300ms" }, models: [stories] };
  const { key } = await createKey(testConfig(raw, null));
  const { server, post } = await serve(raw, dir);
  const res = await post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 2000, temperature: 1, seed: 1, stream: true }, { key });
  const frames = sseFrames(res);
  const first = await frames.next();
  assert.ok(!first.done);
  const exited = server.stop("SIGTERM");
  const rest: unknown[] = [];
  for await (const frame of frames) rest.push(frame);
  const last = rest.at(-1) as { error?: { type: string; code: string } };
  assert.deepEqual(last.error && { type: last.error.type, code: last.error.code }, { type: "server_error", code: "overloaded" });
  assert.ok(!rest.includes("[DONE]"));
  assert.equal(await exited, 0);
});
