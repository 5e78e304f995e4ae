// Issue 45.2: the exact-match response cache, on stories260K (llama, in-process) and the canned upstream, with the
// in-process store; test/response-cache-redis.test.ts covers Redis (replicas, an outage).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";
import { startCanned, type Peer } from "../harness/peers.ts";
import { readSse } from "./helpers/sse.ts";
import { errorOf } from "./helpers/errors.ts";
import { waitFor } from "./helpers/wait-for.ts";
import { MemoryResponseStore } from "../src/plugins/response-cache/response-store.ts";

const adminToken = "Zq3v8kQ1xT5mW2rY7uN4pL6sD9fG0hJ1aB3cE5gI7kM";
const stories = (id: string, cache?: Record<string, unknown>) => ({
  id,
  engine: "llama",
  source: path.join(modelsDir, "stories260K.gguf"),
  capabilities: ["chat", "logprobs"],
  contextSize: 256,
  parallel: 1,
  threads: 1,
  ...(cache ? { cache } : {}),
});

let srv: TestServer;
let canned: Peer;

before(async () => {
  canned = await startCanned();
  srv = await startServer({
    adminToken,
    plans: {
      cached: { cache: {} },
      full: { cache: { charge: "full" } },
      metered: { cache: {}, quota: { tokens: 150, period: "day" } },
      brief: { cache: { ttl: "1ms" } },
    },
    models: [
      stories("stories", { ttl: "10m" }),
      stories("stories-shared", { ttl: "10m", shared: true }),
      stories("stories-plain"),
      stories("stories-small", { ttl: "10m", maxEntryBytes: 200 }),
      { ...stories("stories-lazy"), load: "lazy" },
      { ...stories("stories-cold"), load: "lazy", defaults: { temperature: 0 } },
      { id: "canned", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${canned.port}/v1`, model: "canned" }], cache: { ttl: "10m" } },
    ],
    routes: [
      // Cached as a route; its target is lazy, so the first request is served by the fallback while it loads.
      { id: "stories-route", targets: [{ model: "stories-lazy" }], fallbacks: ["stories-plain"], cache: { ttl: "10m" } },
      // No cache of its own: its target's does not apply to it.
      { id: "stories-alias", targets: [{ model: "stories" }] },
      // An upstream among its targets: a seed does not make it deterministic.
      { id: "mixed-route", targets: [{ model: "stories-plain" }], fallbacks: ["canned"], cache: { ttl: "10m" } },
      // Its first target defaults to temperature 0, the one that serves (the other takes no requests) does not.
      { id: "cold-route", targets: [{ model: "stories-cold", weight: 0 }, { model: "stories-plain" }], cache: { ttl: "10m" } },
    ],
  });
});

after(async () => {
  await srv?.close();
  canned?.child.kill();
});

let prompts = 0;
/** A prompt no other request of this file sends, so each test starts from an empty cache. */
const fresh = () => `Once upon a time ${++prompts} little`;
const chatBody = (model: string, content: string, extra: Record<string, unknown> = {}) => ({ model, messages: [{ role: "user", content }], max_tokens: 12, temperature: 0, ...extra });

async function chat(key: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<{ status: number; cache: string | null; json: any }> {
  const res = await srv.post("/v1/chat/completions", body, { key, headers });
  return { status: res.status, cache: res.headers.get("x-modelgate-cache"), json: await res.json() };
}

/** A metric's value from GET /metrics (0 when the series is absent). */
async function metric(name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await srv.get("/metrics", { key: adminToken })).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) && want.every((w) => l.includes(w)));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
}

test("issue 45.2 cache on a route: a hit answers with the target that served its miss, in the body, every chunk, the route header and the usage", async () => {
  const { key, id, accountId } = await srv.createKey({ plan: "cached" });
  const body = chatBody("stories-route", fresh());
  const miss = await srv.post("/v1/chat/completions", body, { key });
  assert.equal(miss.headers.get("x-modelgate-cache"), "miss");
  assert.equal(miss.headers.get("x-modelgate-route"), "stories-route; target=stories-plain; fallbacks=1", "its target was still loading");
  const missed = (await miss.json()) as { model: string; choices: unknown };
  assert.equal(missed.model, "stories-plain");
  await waitFor(() => srv.server.ctx.catalog.get("stories-lazy").state, (s) => s === "ready", "stories-lazy to load");
  const fresher = await srv.post("/v1/chat/completions", body, { key, headers: { "cache-control": "no-cache, no-store" } });
  assert.equal(((await fresher.json()) as { model: string }).model, "stories-lazy", "the route now runs the request on its target");

  const hit = await srv.post("/v1/chat/completions", body, { key });
  assert.equal(hit.headers.get("x-modelgate-cache"), "hit");
  assert.equal(hit.headers.get("x-modelgate-route"), "stories-route; target=stories-plain; fallbacks=0");
  const hitBody = (await hit.json()) as { model: string; choices: unknown };
  assert.equal(hitBody.model, "stories-plain", "the target that generated the entry");
  assert.equal(JSON.stringify(hitBody.choices), JSON.stringify(missed.choices));
  const streamed = await readSse(await srv.post("/v1/chat/completions", { ...body, stream: true }, { key }));
  assert.ok(streamed.events.length >= 2);
  for (const chunk of streamed.events) assert.equal(chunk.model, "stories-plain");
  await srv.server.ctx.usage.flush();
  const rows = ((await (await srv.get(`/admin/v1/usage?account=${accountId}`, { key: adminToken })).json()) as { data: { keyId: string; model: string; requests: number; cachedRequests: number }[] }).data.filter((r) => r.keyId === id);
  assert.deepEqual(rows.map((r) => [r.model, r.requests, r.cachedRequests]).sort(), [["stories-lazy", 1, 0], ["stories-plain", 3, 2]], "each hit charged to the target that generated it");

  // A key of the same account that may not name that target gets no hit: it runs on the target it may name.
  const narrow = await srv.createKey({ account: accountId, models: ["stories-route", "stories-lazy"] });
  const own = await srv.post("/v1/chat/completions", body, { key: narrow.key });
  assert.equal(own.headers.get("x-modelgate-cache"), "miss");
  assert.equal(((await own.json()) as { model: string }).model, "stories-lazy");
  // A key that may name the route but none of its models is refused before any lookup, as its miss would be.
  const routeOnly = await srv.createKey({ account: accountId, models: ["stories-route"] });
  const refused = await srv.post("/v1/chat/completions", body, { key: routeOnly.key });
  assert.equal(refused.headers.get("x-modelgate-cache"), null);
  assert.deepEqual(await errorOf(refused), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });
});

test("issue 45.2 cache on a route: only the route's own cache applies to it, and a seed is deterministic only when every target repeats a seeded run", async () => {
  const { key } = await srv.createKey({ plan: "cached" });
  const aliased = chatBody("stories-alias", fresh());
  for (let i = 0; i < 2; i++) assert.equal((await chat(key, aliased)).cache, null, "its target's cache is not the route's");
  const seeded = chatBody("stories-route", fresh(), { temperature: 1, seed: 7 });
  assert.deepEqual([(await chat(key, seeded)).cache, (await chat(key, seeded)).cache], ["miss", "hit"], "llama targets repeat a seeded run");
  assert.equal((await chat(key, chatBody("mixed-route", fresh(), { temperature: 1, seed: 7 }))).cache, "bypass", "an upstream fallback may not");
  const cold = chatBody("mixed-route", fresh());
  assert.deepEqual([(await chat(key, cold)).cache, (await chat(key, cold)).cache], ["miss", "hit"], "temperature 0 is deterministic on any target");
  const unset = await chat(key, { model: "cold-route", messages: [{ role: "user", content: fresh() }], max_tokens: 4 });
  assert.equal(unset.cache, "bypass", "a default temperature of 0 on one target only is not the route's");
});

test("issue 45.2 cache: the openai client gets byte-identical choices on a hit, non-streamed and streamed", async () => {
  const { key } = await srv.createKey({ plan: "cached" });
  const client = srv.openai(key);
  const params = { model: "stories", messages: [{ role: "user" as const, content: fresh() }], max_tokens: 16, temperature: 0 };
  const miss = await client.chat.completions.create(params).withResponse();
  const completionsBefore = await metric("modelgate_completion_tokens_total", { model: "stories" });
  const hit = await client.chat.completions.create(params).withResponse();
  assert.equal(miss.response.headers.get("x-modelgate-cache"), "miss");
  assert.equal(hit.response.headers.get("x-modelgate-cache"), "hit");
  assert.ok(miss.data.choices[0].message.content!.length > 0);
  assert.equal(JSON.stringify(hit.data.choices), JSON.stringify(miss.data.choices), "choices byte for byte");
  assert.deepEqual(hit.data.usage, miss.data.usage, "the answer's usage is the answer's");
  assert.notEqual(hit.data.id, miss.data.id, "a hit is a response of its own");
  assert.equal(await metric("modelgate_completion_tokens_total", { model: "stories" }), completionsBefore, "a hit runs no engine");

  // Streamed: the miss's chunks, in its order and coalescing, the usage chunk, then [DONE].
  const streamParams = { ...params, messages: [{ role: "user" as const, content: fresh() }], stream: true as const, stream_options: { include_usage: true } };
  const collect = async () => {
    const { data, response } = await client.chat.completions.create(streamParams).withResponse();
    const chunks = [];
    for await (const chunk of data) chunks.push({ choices: chunk.choices, usage: chunk.usage });
    return { chunks, cache: response.headers.get("x-modelgate-cache") };
  };
  const streamedMiss = await collect();
  const streamedHit = await collect();
  assert.equal(streamedMiss.cache, "miss");
  assert.equal(streamedHit.cache, "hit");
  assert.ok(streamedMiss.chunks.length >= 3);
  assert.equal(JSON.stringify(streamedHit.chunks), JSON.stringify(streamedMiss.chunks), "the same chunks, choices and usage byte for byte");
  const raw = await readSse(await srv.post("/v1/chat/completions", { ...streamParams }, { key }));
  assert.ok(raw.done, "the replay ends with data: [DONE] (§6 framing checked)");
  assert.equal(raw.events.at(-1).choices.length, 0, "the usage chunk, last");

  // A non-streamed request and a streamed one share their entry.
  const text = streamedMiss.chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
  const plain = await chat(key, { ...streamParams, stream: false, stream_options: undefined });
  assert.equal(plain.cache, "hit");
  assert.equal(plain.json.choices[0].message.content, text);
});

test("issue 45.2 cache: logprobs are replayed exactly, streamed and not", async () => {
  const { key } = await srv.createKey({ plan: "cached" });
  const body = chatBody("stories", fresh(), { logprobs: true, top_logprobs: 2 });
  const miss = await chat(key, body);
  const hit = await chat(key, body);
  assert.deepEqual([miss.cache, hit.cache], ["miss", "hit"]);
  assert.ok(miss.json.choices[0].logprobs.content.length > 0);
  assert.equal(JSON.stringify(hit.json.choices), JSON.stringify(miss.json.choices));
  const streamed = await readSse(await srv.post("/v1/chat/completions", { ...body, stream: true }, { key }));
  const tokens = streamed.events.flatMap((e) => e.choices[0]?.logprobs?.content ?? []);
  assert.deepEqual(tokens, miss.json.choices[0].logprobs.content, "the same tokens and alternatives, streamed");
});

test("issue 45.2 cache: the hit ratio and the cached usage column add up (charge none: a hit is recorded with no tokens)", async () => {
  const { key, id, accountId } = await srv.createKey({ plan: "cached" });
  const model = "stories-shared";
  const before = { hit: await metric("modelgate_cache_requests_total", { model, result: "hit" }), miss: await metric("modelgate_cache_requests_total", { model, result: "miss" }) };
  const bodies = [chatBody(model, fresh()), chatBody(model, fresh()), chatBody(model, fresh())];
  let missTokens = 0;
  for (let round = 0; round < 3; round++) {
    for (const body of bodies) {
      const res = await chat(key, body);
      assert.equal(res.cache, round === 0 ? "miss" : "hit");
      if (round === 0) missTokens += res.json.usage.total_tokens;
    }
  }
  const bypass = await chat(key, chatBody(model, fresh(), { temperature: 1 }));
  assert.equal(bypass.cache, "bypass", "temperature 1 without a seed is not deterministic");
  const hits = (await metric("modelgate_cache_requests_total", { model, result: "hit" })) - before.hit;
  const misses = (await metric("modelgate_cache_requests_total", { model, result: "miss" })) - before.miss;
  assert.deepEqual({ hits, misses }, { hits: 6, misses: 3 });
  const ratio = await metric("modelgate_cache_hit_ratio", { model });
  const allHits = before.hit + hits;
  assert.equal(ratio, allHits / (allHits + before.miss + misses));

  await srv.server.ctx.usage.flush();
  const res = await srv.get(`/admin/v1/usage?account=${accountId}`, { key: adminToken });
  const rows = ((await res.json()) as { data: { keyId: string; model: string; requests: number; cachedRequests: number; promptTokens: number; completionTokens: number; spend: string }[] }).data.filter((r) => r.keyId === id);
  assert.equal(rows.length, 1);
  assert.equal(rows[0].requests, 10);
  assert.equal(rows[0].cachedRequests, hits, "the cached column counts the hits the metrics count");
  assert.equal(rows[0].promptTokens + rows[0].completionTokens, missTokens + bypass.json.usage.total_tokens, "hits charged no tokens");
});

test("issue 45.2 cache: with charge: full a hit is recorded with the answer's tokens", async () => {
  const { key, id, accountId } = await srv.createKey({ plan: "full" });
  const body = chatBody("stories", fresh());
  const first = await chat(key, body);
  const second = await chat(key, body);
  assert.deepEqual([first.cache, second.cache], ["miss", "hit"]);
  await srv.server.ctx.usage.flush();
  const rows = ((await (await srv.get(`/admin/v1/usage?account=${accountId}`, { key: adminToken })).json()) as { data: { keyId: string; requests: number; cachedRequests: number; promptTokens: number; completionTokens: number }[] }).data.filter((r) => r.keyId === id);
  assert.deepEqual(rows.map((r) => [r.requests, r.cachedRequests, r.promptTokens + r.completionTokens]), [[2, 1, 2 * first.json.usage.total_tokens]]);
});

test("issue 45.2 cache: a second account never gets the first account's entry, on every generating route of the route table", async () => {
  const a = await srv.createKey({ plan: "cached" });
  const b = await srv.createKey({ plan: "cached" });
  const prompt = fresh();
  // Every POST under /v1 is here: a route that generates, with its request, or a route that does not (and why).
  const generating: Record<string, (stream: boolean) => Record<string, unknown>> = {
    "/v1/chat/completions": (stream) => ({ ...chatBody("stories", prompt), stream }),
    "/v1/responses": (stream) => ({ model: "stories", input: `${prompt} responses`, max_output_tokens: 12, temperature: 0, stream }),
    "/v1/messages": (stream) => ({ model: "stories", messages: [{ role: "user", content: `${prompt} messages` }], max_tokens: 12, temperature: 0, stream }),
  };
  // Routes that generate without the cache (docs/routing.md says why): never looked up, so nothing is shared.
  const generatingUncached: Record<string, (stream: boolean) => Record<string, unknown>> = {
    // Prompts × n choices with their own events (echo's prompt logprobs): not the chat generation an entry holds.
    "/v1/completions": (stream) => ({ model: "stories", prompt: `${prompt} completions`, max_tokens: 12, temperature: 0, stream }),
  };
  const notGenerating = new Set([
    "/v1/embeddings",
    "/v1/rerank",
    "/v1/audio/transcriptions",
    "/v1/tokenize",
    "/v1/detokenize",
    "/v1/messages/count_tokens",
    "/v1/files",
    // Batch lines run through the chat and embeddings services, the same cache path as those routes.
    "/v1/batches",
    "/v1/batches/:id/cancel",
  ]);
  const posts = srv.server.app.routeTable.routes.filter((r) => r.method === "POST" && r.url.startsWith("/v1/")).map((r) => r.url);
  const unknown = posts.filter((url) => !generating[url] && !generatingUncached[url] && !notGenerating.has(url));
  assert.deepEqual(unknown, [], "a new /v1 route must be added to this test, with its request if it generates");
  const send = async (key: string, url: string, stream: boolean) => {
    const res = await srv.post(url, (generating[url] ?? generatingUncached[url])(stream), { key });
    assert.equal(res.status, 200, `${url}: ${res.status}`);
    await res.text();
    return res.headers.get("x-modelgate-cache");
  };
  for (const url of Object.keys(generating)) {
    for (const stream of [false, true]) {
      assert.equal(await send(a.key, url, stream), stream ? "hit" : "miss", `${url} stream ${stream}: account A writes (its streamed request shares the entry)`);
      assert.equal(await send(a.key, url, stream), "hit", `${url} stream ${stream}: account A reads its own entry`);
      assert.equal(await send(b.key, url, stream), stream ? "hit" : "miss", `${url} stream ${stream}: account B never reads A's entry (only its own)`);
    }
  }
  for (const url of Object.keys(generatingUncached)) {
    for (const stream of [false, true]) {
      for (const key of [a.key, a.key, b.key]) assert.equal(await send(key, url, stream), null, `${url} stream ${stream}: not looked up, on a cached model and plan`);
    }
  }
  // What the operator turns on for a model: its entries are read by every account.
  const shared = chatBody("stories-shared", fresh());
  assert.equal((await chat(a.key, shared)).cache, "miss");
  assert.equal((await chat(b.key, shared)).cache, "hit");
});

test("issue 45.2 cache: a revoked key gets no hit, and a hit is refused by the quota that would refuse its miss", async () => {
  const { key, id } = await srv.createKey({ plan: "cached" });
  const body = chatBody("stories", fresh());
  assert.equal((await chat(key, body)).cache, "miss");
  assert.equal((await chat(key, body)).cache, "hit");
  const revoked = await srv.post(`/admin/v1/keys/${id}/revoke`, {}, { key: adminToken });
  assert.equal(revoked.status, 200);
  const after = await srv.post("/v1/chat/completions", body, { key });
  assert.equal(after.status, 401);
  assert.equal(after.headers.get("x-modelgate-cache"), null);

  // Quota 150 tokens a day; each request reserves its prompt and max_tokens 12. Hits charge nothing (charge: none)...
  const metered = await srv.createKey({ plan: "metered" });
  const first = chatBody("stories", fresh());
  assert.equal((await chat(metered.key, first)).cache, "miss");
  for (let i = 0; i < 5; i++) assert.equal((await chat(metered.key, first)).cache, "hit", "a hit leaves the quota as it was");
  // ...until misses have used it up: then the same hit is refused, as its miss would be.
  let refused = null;
  for (let i = 0; i < 20 && !refused; i++) {
    const res = await chat(metered.key, chatBody("stories", fresh()));
    if (res.status === 429) refused = res;
  }
  assert.ok(refused, "the quota ran out");
  const res = await srv.post("/v1/chat/completions", first, { key: metered.key });
  assert.equal(res.status, 429);
  assert.equal((await errorOf(res)).code, "rate_limit_exceeded");
});

test("issue 45.2 cache: Cache-Control no-cache answers afresh and stores it, no-store is not stored", async () => {
  const { key } = await srv.createKey({ plan: "cached" });
  const body = chatBody("stories", fresh());
  assert.equal((await chat(key, body, { "cache-control": "no-store" })).cache, "miss");
  assert.equal((await chat(key, body)).cache, "miss", "no-store wrote nothing");
  assert.equal((await chat(key, body)).cache, "hit");
  assert.equal((await chat(key, body, { "cache-control": "no-cache" })).cache, "bypass", "no-cache does not read");
  assert.equal((await chat(key, body, { "cache-control": "max-age=0, no-store, no-cache" })).cache, "bypass");
  assert.equal((await chat(key, body)).cache, "hit");
});

test("issue 45.2 cache: only deterministic requests: temperature 0, or a seed on an engine that honours it", async () => {
  const { key } = await srv.createKey({ plan: "cached" });
  const seeded = chatBody("stories", fresh(), { temperature: 1, seed: 7 });
  assert.equal((await chat(key, seeded)).cache, "miss", "llama honours seed");
  const again = await chat(key, seeded);
  assert.equal(again.cache, "hit");
  assert.equal((await chat(key, chatBody("stories", fresh(), { temperature: 0.7 }))).cache, "bypass");
  assert.equal((await chat(key, { model: "stories", messages: [{ role: "user", content: fresh() }], max_tokens: 4 })).cache, "bypass", "no temperature and no model default");
  // An upstream is not known to repeat a seeded run: only temperature 0 is cached there.
  assert.equal((await chat(key, chatBody("canned", fresh(), { temperature: 1, seed: 7 }))).cache, "bypass");
  const upstream = chatBody("canned", fresh());
  assert.equal((await chat(key, upstream)).cache, "miss");
  assert.equal((await chat(key, upstream)).cache, "hit");
});

test("issue 45.2 cache: off by default (no header without the model's and the plan's cache), a size cap, a plan's shorter ttl", async () => {
  const cached = await srv.createKey({ plan: "cached" });
  const plain = await srv.createKey();
  const body = chatBody("stories", fresh());
  for (let i = 0; i < 2; i++) assert.equal((await chat(plain.key, body)).cache, null, "the default plan has no cache");
  const uncachedModel = chatBody("stories-plain", fresh());
  for (let i = 0; i < 2; i++) assert.equal((await chat(cached.key, uncachedModel)).cache, null, "a model without cache");
  const large = chatBody("stories-small", fresh());
  assert.equal((await chat(cached.key, large)).cache, "miss");
  assert.equal((await chat(cached.key, large)).cache, "miss", "an answer over maxEntryBytes is not stored");
  const brief = await srv.createKey({ plan: "brief" });
  const soon = chatBody("stories", fresh());
  assert.equal((await chat(brief.key, soon)).cache, "miss");
  await new Promise((r) => setTimeout(r, 5));
  assert.equal((await chat(brief.key, soon)).cache, "miss", "the plan's ttl of 1ms is over");
});

test("issue 45.2 cache: DELETE /admin/v1/cache?model= purges that model's entries and no other's", async () => {
  const { key } = await srv.createKey({ plan: "cached" });
  const one = chatBody("stories", fresh());
  const other = chatBody("canned", fresh());
  for (const body of [one, other]) await chat(key, body);
  assert.equal((await chat(key, one)).cache, "hit");
  const res = await srv.get("/admin/v1/cache?model=stories", { key: adminToken, method: "DELETE" });
  assert.equal(res.status, 200);
  const purged = (await res.json()) as { object: string; model: string; deleted: number };
  assert.equal(purged.object, "cache.purge");
  assert.ok(purged.deleted >= 1);
  assert.equal((await chat(key, one)).cache, "miss");
  assert.equal((await chat(key, other)).cache, "hit", "another model's entries stay");
  const denied = await srv.get("/admin/v1/cache", { key, method: "DELETE" });
  assert.equal(denied.status, 401, "an API key is no admin credential");
});

test("issue 45.2 cache: the in-process store is an LRU bounded in bytes", async () => {
  const store = new MemoryResponseStore(1000);
  for (let i = 0; i < 20; i++) await store.set(`k${i}`, Buffer.alloc(100, i), 60_000);
  assert.ok(store.size <= 1000, `held ${store.size} bytes`);
  assert.equal(await store.get("k0"), null, "the least recently used went first");
  assert.deepEqual(await store.get("k19"), Buffer.alloc(100, 19));
  assert.equal(await store.deletePrefix("k19"), 1);
  assert.equal(await store.get("k19"), null);
});
