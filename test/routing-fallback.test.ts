// Issue 45.1, fallback: a route's ordered fallbacks on real engines (stories260K in-process, the upstream engine in
// front of upstreams in their own processes), each charged once, to the target that served.
import assert from "node:assert/strict";
import path from "node:path";
import { Writable } from "node:stream";
import { after, before, test } from "node:test";
import { startLlamaServer, type LlamaServer } from "../harness/llama-server.ts";
import { startCanned, startListening, type Peer } from "../harness/peers.ts";
import { modelsDir, repoRoot, startServer, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";
import { readSse } from "./helpers/sse.ts";
import { usageRows } from "./helpers/usage.ts";
import { waitFor } from "./helpers/wait-for.ts";

const adminToken = "Yd3kq8Rw_Lm2Zp7Tn4Vx9Bc6Hs1Jf5Gt0Ka-Ue";
const stories = path.join(modelsDir, "stories260K.gguf");
const llama = (id: string, source: string, extra: Record<string, unknown>) => ({ id, engine: "llama", source, capabilities: ["chat"], threads: 1, ...extra });
/**
 * An upstream engine on one upstream, ejected after two failures; no health checks (the paced upstream would answer
 * one as a 20-second chat).
 */
const upstream = (id: string, port: number) => ({
  id,
  engine: "upstream",
  capabilities: ["chat"],
  upstreams: [{ url: `http://127.0.0.1:${port}/v1`, model: "m" }],
  breaker: { failures: 2, cooldown: "1m" },
  health: { interval: "0s" },
});
/** The paced upstream (harness/paced-upstream.mjs): every answer takes `ms`, streamed evenly or as JSON at the end. */
const paced = (ms: number) => startListening(path.join(repoRoot, "harness/paced-upstream.mjs"), ["0", String(ms), "0"]);

let slow: Peer;
let slowStreams: Peer;
let canned: Peer;
let llamaServer: LlamaServer;
let srv: TestServer;
/** The server's log lines (the access line among them). */
const lines: Record<string, unknown>[] = [];

before(async () => {
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  [slow, slowStreams, canned, llamaServer] = await Promise.all([paced(20_000), paced(20_000), startCanned(), startLlamaServer(stories, ["-c", "256"])]);
  srv = await startServer({
    adminToken,
    plans: { metered: { tokenLimit: { tokens: 1_000_000, window: "1h" } } },
    defaultPlan: "metered",
    models: [
      upstream("pool-a", slow.port),
      upstream("pool-c", slowStreams.port),
      upstream("pool-b", canned.port),
      llama("busy", stories, { contextSize: 512, parallel: 1, queueSize: 0 }),
      llama("spare", stories, { capabilities: ["chat", "json"], contextSize: 512, parallel: 2 }),
      llama("short", stories, { contextSize: 2048, parallel: 1 }),
      // Flash attention off: llama.cpp evaluates a long prompt of this tiny model several times faster without it.
      llama("long", stories, { contextSize: 4096, parallel: 1, flashAttention: false }),
      { id: "ls", engine: "upstream", capabilities: ["chat", "json"], upstreams: [{ url: `${llamaServer.origin}/v1`, model: "stories" }], tokenize: "none" },
    ],
    routes: [
      { id: "ha", targets: [{ model: "pool-a" }], fallbacks: ["pool-b"] },
      { id: "ha-stream", targets: [{ model: "pool-c" }], fallbacks: ["pool-b"] },
      { id: "overflow", targets: [{ model: "busy" }], fallbacks: ["spare"] },
      { id: "window", targets: [{ model: "short" }], fallbacks: ["long"] },
      { id: "window-off", targets: [{ model: "short" }], fallbacks: ["long"], fallbackOn: { contextWindow: false } },
      { id: "strict-first", targets: [{ model: "ls" }], fallbacks: ["spare"] },
    ],
  }, { logger: { level: "info", stream } });
});

after(async () => {
  await srv?.close();
  for (const peer of [slow, slowStreams, canned]) peer?.child.kill("SIGKILL");
  await llamaServer?.stop();
});

type Chat = { model: string; usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } };
const once = [{ role: "user", content: "Once upon a time" }];

/** The key's token window left (the meter's header on any /v1 answer). */
async function remaining(key: string): Promise<number> {
  return Number((await srv.get("/v1/models", { key })).headers.get("x-ratelimit-remaining-tokens"));
}

async function inFlight(model: string): Promise<number> {
  const res = await srv.get(`/admin/v1/models/${model}`, { key: adminToken });
  return ((await res.json()) as { upstreams: { inFlight: number }[] }).upstreams[0].inFlight;
}

async function fallbackCount(route: string): Promise<string> {
  const text = await (await srv.get("/metrics", { key: adminToken })).text();
  return text.split("\n").filter((l) => l.startsWith(`modelgate_route_fallbacks_total{route="${route}"`)).join("\n");
}

test("issue 45.1 fallback: kill -9 the only upstream of target 1 mid-load: 0 failed requests, every answer names target 2, charged once to it", async () => {
  const { key, id, accountId } = await srv.createKey();
  const ask = async () => {
    const res = await srv.post("/v1/chat/completions", { model: "ha", messages: once, max_tokens: 8 }, { key });
    const body = (await res.json()) as Chat;
    return { status: res.status, model: body.model, header: res.headers.get("x-modelgate-route"), usage: body.usage };
  };
  // Eight requests in flight at target 1, whose every answer takes 20 s: none can have been answered when it dies.
  const inFlightAtKill = Array.from({ length: 8 }, ask);
  await waitFor(() => inFlight("pool-a"), (n) => n === 8, "8 requests in flight at pool-a");
  slow.child.kill("SIGKILL");
  const afterKill = Array.from({ length: 24 }, ask);
  const answers = await Promise.all([...inFlightAtKill, ...afterKill]);
  assert.deepEqual(
    answers.map((a) => a.status),
    answers.map(() => 200),
  );
  for (const a of answers) {
    assert.equal(a.model, "pool-b");
    assert.equal(a.header, "ha; target=pool-b; fallbacks=1");
  }
  // A stream that falls back before its first byte is served by target 2 too.
  const stream = await srv.post("/v1/chat/completions", { model: "ha", messages: once, max_tokens: 8, stream: true }, { key });
  assert.equal(stream.status, 200);
  assert.equal(stream.headers.get("x-modelgate-route"), "ha; target=pool-b; fallbacks=1");
  const events = await readSse(stream);
  assert.ok(events.done && events.events.length > 2 && events.events.every((c: { model: string }) => c.model === "pool-b"));
  // Usage and the token window: each request once, to pool-b; pool-a is charged nothing and nothing stays reserved.
  const rows = await usageRows(srv.server, srv.config, accountId, id);
  assert.deepEqual(
    rows.map(([model, endpoint, requests]) => [model, endpoint, requests]),
    [["pool-b", "chat", 33]],
  );
  const used = rows.reduce((n, [, , , prompt, completion]) => n + prompt + completion, 0);
  assert.equal(await remaining(key), 1_000_000 - used);
  assert.match(await fallbackCount("ha"), /target="pool-a",reason="(upstream_error|unavailable)"\} \d+/);
});

test("issue 45.1 fallback: never after the first byte of a stream has gone to the client", async () => {
  const { key, id, accountId } = await srv.createKey();
  const res = await srv.post("/v1/chat/completions", { model: "ha-stream", messages: once, max_tokens: 8, stream: true }, { key });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("x-modelgate-route"), "ha-stream; target=pool-c; fallbacks=0");
  const reader = res.body!.getReader();
  const first = new TextDecoder().decode((await reader.read()).value);
  assert.match(first, /"model":"pool-c"/);
  slowStreams.child.kill("SIGKILL");
  let rest = "";
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += new TextDecoder().decode(chunk.value);
  // The stream ends with one error event, not an answer from target 2.
  assert.match(rest, /"error":\{/);
  assert.doesNotMatch(rest, /pool-b|\[DONE\]/);
  // What target 1 streamed is its usage; target 2 never saw the request.
  const rows = await usageRows(srv.server, srv.config, accountId, id);
  assert.deepEqual(
    rows.map(([model, , requests]) => [model, requests]),
    [["pool-c", 1]],
  );
  assert.equal(await fallbackCount("ha-stream"), "");
});

test("issue 45.1 fallback: saturate target 1 (queue full): the overflow is served by target 2, not refused, each request charged once", async () => {
  const { key, id, accountId } = await srv.createKey();
  const answers = await Promise.all(
    Array.from({ length: 6 }, async () => {
      const res = await srv.post("/v1/chat/completions", { model: "overflow", messages: once, max_tokens: 200, temperature: 0 }, { key });
      return { status: res.status, header: res.headers.get("x-modelgate-route"), body: (await res.json()) as Chat };
    }),
  );
  assert.deepEqual(
    answers.map((a) => a.status),
    answers.map(() => 200),
  );
  const spared = answers.filter((a) => a.body.model === "spare");
  assert.ok(spared.length >= 1, "the overflow went to target 2");
  for (const a of answers) assert.equal(a.header, a.body.model === "busy" ? "overflow; target=busy; fallbacks=0" : "overflow; target=spare; fallbacks=1");
  const rows = await usageRows(srv.server, srv.config, accountId, id);
  const requests = Object.fromEntries(rows.map(([model, , count]) => [model, count]));
  assert.deepEqual(requests, { ...(spared.length < 6 ? { busy: 6 - spared.length } : {}), spare: spared.length });
  const used = answers.reduce((n, a) => n + a.body.usage.total_tokens, 0);
  assert.equal(await remaining(key), 1_000_000 - used);
  assert.match(await fallbackCount("overflow"), /target="busy",reason="overloaded"\} \d+/);
  // The access line of a request that fell back: the route, the target that served, how many fallbacks and why.
  await waitFor(() => lines.filter((l) => l.msg === "request" && l.modelRoute === "overflow").length, (n) => n === 6, "the access lines");
  const line = lines.find((l) => l.msg === "request" && l.modelRoute === "overflow" && l.model === "spare")!;
  assert.deepEqual([line.status, line.model, line.modelRoute, line.fallbacks, line.fallbackReason], [200, "spare", "overflow", 1, "overloaded"]);
  assert.equal(line.promptTokens, spared[0].body.usage.prompt_tokens);
});

test("issue 45.1 fallback: a 3,000-token prompt on a route of a 2,048-token and a 4,096-token stories260K is served by the second", async () => {
  const { key } = await srv.createKey();
  const messages = [{ role: "user", content: "Once upon a time there was a little girl named Lily. ".repeat(214) }];
  const counted = (await (await srv.post("/v1/tokenize", { model: "long", messages }, { key })).json()) as { count: number };
  assert.ok(counted.count >= 3000 && counted.count < 3100, `${counted.count} tokens`);
  const res = await srv.post("/v1/chat/completions", { model: "window", messages, max_tokens: 1 }, { key });
  assert.equal(res.status, 200);
  const body = (await res.json()) as Chat;
  assert.equal(body.model, "long");
  assert.equal(body.usage.prompt_tokens, counted.count);
  assert.equal(res.headers.get("x-modelgate-route"), "window; target=long; fallbacks=1");
  assert.match(await fallbackCount("window"), /target="short",reason="context_window"\} 1/);
  // With the trigger off, the first target's 400 is the answer.
  const off = await srv.post("/v1/chat/completions", { model: "window-off", messages, max_tokens: 1 }, { key });
  assert.deepEqual(await errorOf(off), { status: 400, type: "invalid_request_error", code: "context_length_exceeded", param: "messages" });
  assert.equal(off.headers.get("x-modelgate-route"), "window-off; target=short; fallbacks=0");
});

test("issue 45.1 fallback: a 400 from target 1 is never retried on target 2", async () => {
  const { key, id, accountId } = await srv.createKey();
  // llama-server refuses a JSON schema whose $ref leads nowhere: 400 invalid_request_error, the request's own fault.
  const response_format = { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { a: { $ref: "#/definitions/missing" } } } } };
  const res = await srv.post("/v1/chat/completions", { model: "strict-first", messages: once, max_tokens: 8, response_format }, { key });
  assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: null });
  assert.equal(res.headers.get("x-modelgate-route"), "strict-first; target=ls; fallbacks=0");
  // Target 2 never saw it: no usage, no fallback counted.
  assert.deepEqual(await usageRows(srv.server, srv.config, accountId, id), []);
  assert.equal(await fallbackCount("strict-first"), "");
  // The same route serves a request without the fault on target 1.
  const fine = await srv.post("/v1/chat/completions", { model: "strict-first", messages: once, max_tokens: 2 }, { key });
  assert.equal(fine.headers.get("x-modelgate-route"), "strict-first; target=ls; fallbacks=0");
});
