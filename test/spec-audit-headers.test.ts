// Spec audit: header and error-contract rules (§7, §8, decisions.md) on responses the other test files don't reach.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import { revokeKey } from "../src/keys/lifecycle.ts";
import { openStore } from "../src/store/store.ts";
import { silentLogger } from "../harness/keys.ts";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";
import { readSse } from "./helpers/sse.ts";

let srv: TestServer;
let key: string;

const stories = path.join(modelsDir, "stories260K.gguf");

before(async () => {
  srv = await startServer({
    plans: {
      small: { maxBodyBytes: 2000 },
      tiny: { rateLimit: { requests: 1, window: "1h" }, maxBodyBytes: 2000 },
      dedicated: { ipAllowlist: true },
      fenced: { ipAllowlist: true, rateLimit: { requests: 1, window: "1h" } },
    },
    models: [
      { id: "stories", engine: "llama", source: stories, capabilities: ["chat", "embeddings"], contextSize: 256, parallel: 1, threads: 1, queueSize: 1 },
      { id: "lazy-chat", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1, load: "lazy" },
      // Never loaded by any test here: proves a capability 400 answers without starting a load.
      { id: "cold-chat", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1, load: "lazy" },
    ],
  });
  key = (await srv.createKey()).key;
});

after(async () => {
  await srv?.close();
});

const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
const jsonHeaders = (k: string) => ({ ...bearer(k), "content-type": "application/json" });
const once = [{ role: "user", content: "Once upon a time" }];

const post = (route: string, body: unknown, k = key) => srv.post(`/v1${route}`, body, { key: k });

interface ErrorBody {
  error: { message: string; type: string; code: string; param: string | null };
}

/** §8 "on every response" and §7 "x-request-id is present on every response". */
function assertContractHeaders(res: Response, what: string) {
  assert.ok(res.headers.get("x-request-id"), `${what}: x-request-id`);
  assert.match(res.headers.get("x-ratelimit-limit-requests") ?? "", /^\d+$/, `${what}: x-ratelimit-limit-requests`);
  assert.match(res.headers.get("x-ratelimit-remaining-requests") ?? "", /^\d+$/, `${what}: x-ratelimit-remaining-requests`);
  assert.match(res.headers.get("x-ratelimit-reset-requests") ?? "", /^(\d+h)?(\d+m)?\d+s$/, `${what}: x-ratelimit-reset-requests`);
}

/** decisions.md Retry-After: whole seconds, at least 1, plus retry-after-ms. */
function assertRetryAfter(res: Response, what: string) {
  const ra = res.headers.get("retry-after");
  const ms = res.headers.get("retry-after-ms");
  assert.match(ra ?? "", /^\d+$/, `${what}: Retry-After is whole seconds (${ra})`);
  assert.ok(Number(ra) >= 1, `${what}: Retry-After >= 1 (${ra})`);
  assert.match(ms ?? "", /^\d+$/, `${what}: retry-after-ms (${ms})`);
  assert.ok(Number(ms) >= 1, `${what}: retry-after-ms >= 1`);
}

test("§8 rate-limit headers and §7 x-request-id on a 404 unknown path with a valid key", async () => {
  const res = await srv.fetch(`${srv.baseURL}/no/such/path`, { headers: bearer(key) });
  assertContractHeaders(res, "404");
  assert.deepEqual(await errorOf(res), { status: 404, type: "invalid_request_error", code: "model_not_found", param: null });
});

test("§8 rate-limit headers and §7 x-request-id on a 405 wrong method", async () => {
  const res = await srv.fetch(`${srv.baseURL}/chat/completions`, { method: "GET", headers: bearer(key) });
  assertContractHeaders(res, "405");
  assert.deepEqual(await errorOf(res), { status: 405, type: "invalid_request_error", code: "invalid_parameter", param: null });
});

test("§8 rate-limit headers on a 400 schema validation error", async () => {
  const res = await post("/chat/completions", { model: "stories", messages: once, temperature: 5 });
  assertContractHeaders(res, "400");
  assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "temperature" });
});

test("§8 rate-limit headers and §7 x-request-id on a 413 for a chunked body (no Content-Length), param null", async () => {
  const { key: small } = await srv.createKey({ plan: "small" });
  const chunk = new TextEncoder().encode("a".repeat(1024));
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode('{"model":"stories","pad":"'));
    },
    pull(controller) {
      if (sent++ < 8) controller.enqueue(chunk);
      else controller.close();
    },
  });
  const res = await srv.fetch(`${srv.baseURL}/chat/completions`, {
    method: "POST",
    headers: jsonHeaders(small),
    body,
    duplex: "half",
  } as RequestInit);
  assertContractHeaders(res, "413 chunked");
  assert.deepEqual(await errorOf(res), { status: 413, type: "invalid_request_error", code: "request_too_large", param: null });
});

test("§8 rate-limit headers and §7 x-request-id on an SSE stream response", async () => {
  const res = await post("/chat/completions", { model: "stories", messages: once, max_tokens: 4, temperature: 0, stream: true });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
  assertContractHeaders(res, "SSE");
  assert.ok((await readSse(res)).done, "the stream ends with data: [DONE]");
});

test("§8 rate-limit headers on a 403 ip_not_allowed (param null)", async () => {
  const { key: fenced } = await srv.createKey({ plan: "dedicated", allowIps: ["10.0.0.0/8"] });
  const res = await srv.fetch(`${srv.baseURL}/models`, { headers: bearer(fenced) });
  assertContractHeaders(res, "403 ip");
  assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "ip_not_allowed", param: null });
});

test("§7 429 carries Retry-After (whole seconds >= 1), retry-after-ms, x-request-id and the rate-limit headers", async () => {
  const { key: tiny } = await srv.createKey({ plan: "tiny" });
  const first = await srv.fetch(`${srv.baseURL}/models`, { headers: bearer(tiny) });
  assert.equal(first.status, 200);
  await first.arrayBuffer();
  const res = await srv.fetch(`${srv.baseURL}/models`, { headers: bearer(tiny) });
  assertContractHeaders(res, "429");
  assertRetryAfter(res, "429");
  assert.deepEqual(await errorOf(res), { status: 429, type: "rate_limit_error", code: "rate_limit_exceeded", param: null });
});

test("decisions.md check order: rate limit (429) before body size (413)", async () => {
  const { key: tiny } = await srv.createKey({ plan: "tiny" });
  const first = await srv.fetch(`${srv.baseURL}/models`, { headers: bearer(tiny) });
  await first.arrayBuffer();
  const res = await post("/chat/completions", { model: "stories", messages: [{ role: "user", content: "x".repeat(5000) }] }, tiny);
  assert.deepEqual(await errorOf(res), { status: 429, type: "rate_limit_error", code: "rate_limit_exceeded", param: null });
});

test("decisions.md check order: auth (401) before body size (413)", async () => {
  const res = await srv.fetch(`${srv.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "stories", messages: [{ role: "user", content: "x".repeat(5000) }] }),
  });
  assert.deepEqual(await errorOf(res), { status: 401, type: "authentication_error", code: "invalid_api_key", param: null });
});

test("§7 503 model_loading: server_error, param null, Retry-After whole seconds >= 1 and retry-after-ms", async () => {
  const res = await post("/chat/completions", { model: "lazy-chat", messages: once, max_tokens: 2 });
  assertContractHeaders(res, "503 model_loading");
  assertRetryAfter(res, "503 model_loading");
  assert.deepEqual(await errorOf(res), { status: 503, type: "server_error", code: "model_loading", param: null });
});

test("§7 503 overloaded: server_error, param null, Retry-After whole seconds >= 1 and retry-after-ms", async () => {
  // stories: parallel 1, queueSize 1 -> of 4 concurrent requests at least one finds the queue full.
  const responses = await Promise.all(Array.from({ length: 4 }, () => post("/chat/completions", { model: "stories", messages: once, max_tokens: 100 })));
  const overloaded = responses.filter((r) => r.status === 503);
  assert.ok(overloaded.length >= 1, responses.map((r) => r.status).join(","));
  assertContractHeaders(overloaded[0], "503 overloaded");
  assertRetryAfter(overloaded[0], "503 overloaded");
  assert.deepEqual(await errorOf(overloaded[0]), { status: 503, type: "server_error", code: "overloaded", param: null });
  for (const r of responses) await r.arrayBuffer().catch(() => undefined);
});

test("decisions.md check order: schema (400) before model exists (404)", async () => {
  const res = await post("/chat/completions", { model: "no-such-model", messages: once, temperature: 5 });
  assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "temperature" });
});

test("decisions.md check order: model exists (404) before scope (403)", async () => {
  const { key: scoped } = await srv.createKey({ models: ["stories"] });
  const res = await post("/chat/completions", { model: "no-such-model", messages: once }, scoped);
  assert.deepEqual(await errorOf(res), { status: 404, type: "invalid_request_error", code: "model_not_found", param: "model" });
});

test("§5.3 a key scoped to other models gets 403 model_not_in_plan param model on chat; scope (403) before capability (400)", async () => {
  const { key: scoped } = await srv.createKey({ models: ["stories"] });
  let res = await post("/chat/completions", { model: "lazy-chat", messages: once }, scoped);
  assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });
  // lazy-chat has no embeddings capability, but the key may not use it at all: 403 answers first.
  res = await post("/embeddings", { model: "lazy-chat", input: "hi" }, scoped);
  assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });
});

test("decisions.md check order: capability (400 param model) before capacity/loading (503)", async () => {
  // cold-chat is not loaded; a capability mismatch answers 400 (twice: it started no load that would turn it into 503).
  for (let i = 0; i < 2; i++) {
    const res = await post("/embeddings", { model: "cold-chat", input: "hi" });
    assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "model" });
  }
});

test("§5.3 a key scoped to endpoints [chat] calling embeddings is 403 model_not_in_plan param model", async () => {
  const { key: chatOnly } = await srv.createKey({ endpoints: ["chat"] });
  const res = await post("/embeddings", { model: "stories", input: "hi" }, chatOnly);
  assertContractHeaders(res, "403 scope");
  assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });
  await assert.rejects(srv.openai(chatOnly).embeddings.create({ model: "stories", input: "hi" }), (err: unknown) => {
    assert.ok(err instanceof OpenAI.PermissionDeniedError, String(err));
    assert.equal(err.code, "model_not_in_plan");
    assert.equal(err.param, "model");
    return true;
  });
});

test("§3 a revoked key through the openai client is AuthenticationError invalid_api_key, param null", async () => {
  const { key: doomed, id } = await srv.createKey();
  assert.ok((await srv.openai(doomed).models.list()).data.length >= 1);
  const store = await openStore(srv.config, silentLogger());
  try {
    await revokeKey(store, id, { actor: "cli" });
  } finally {
    await store.close();
  }
  const deadline = Date.now() + 1500;
  let last: unknown = null;
  while (Date.now() < deadline) {
    try {
      await srv.openai(doomed).models.list();
    } catch (err) {
      last = err;
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(last instanceof OpenAI.AuthenticationError, String(last));
  assert.equal(last.status, 401);
  assert.equal(last.code, "invalid_api_key");
  assert.equal(last.type, "authentication_error");
  assert.equal(last.param, null);
});

test("§4.2 §8 stop: exactly 4 sequences are accepted; a single string is accepted", async () => {
  const client = srv.openai(key);
  const four = await client.chat.completions.create({ model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 4, temperature: 0, stop: ["zzq1", "zzq2", "zzq3", "zzq4"] });
  assert.equal(four.object, "chat.completion");
  const single = await client.chat.completions.create({ model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 4, temperature: 0, stop: "zzq" });
  assert.equal(single.object, "chat.completion");
});

test("§4.2 §8 temperature bounds 0 and 2 are accepted", async () => {
  const client = srv.openai(key);
  for (const temperature of [0, 2]) {
    const res = await client.chat.completions.create({ model: "stories", messages: [{ role: "user", content: "Once" }], max_tokens: 3, temperature });
    assert.equal(res.choices.length, 1, `temperature ${temperature}`);
  }
});

test("decisions.md top_logprobs: without logprobs true it is 400 param top_logprobs; 21 is 400", async () => {
  for (const extra of [{ top_logprobs: 2 }, { logprobs: false, top_logprobs: 2 }, { logprobs: true, top_logprobs: 21 }]) {
    const res = await post("/chat/completions", { model: "stories", messages: once, ...extra });
    assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "top_logprobs" }, JSON.stringify(extra));
  }
});

test("§1 §7 x-request-id on a response outside /v1 (unknown root path)", async () => {
  const res = await srv.fetch(`${srv.origin}/`);
  assert.ok(res.headers.get("x-request-id"));
  assert.ok(res.status >= 400, String(res.status));
  const body = (await res.json()) as ErrorBody;
  assert.equal(typeof body.error.code, "string");
});

test("decisions.md check order: IP allowlist (403) before rate limit (429); refused requests never reach the limiter", async () => {
  const { key: fenced } = await srv.createKey({ plan: "fenced", allowIps: ["10.0.0.0/8"] });
  for (let i = 0; i < 3; i++) {
    const res = await srv.fetch(`${srv.baseURL}/models`, { headers: bearer(fenced) });
    assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "ip_not_allowed", param: null }, `request ${i + 1}`);
  }
});

test("decisions.md check order: body size (413) before JSON parsing (400)", async () => {
  const { key: small } = await srv.createKey({ plan: "small" });
  const res = await srv.fetch(`${srv.baseURL}/chat/completions`, { method: "POST", headers: jsonHeaders(small), body: "{not json" + "x".repeat(5000) });
  assert.deepEqual(await errorOf(res), { status: 413, type: "invalid_request_error", code: "request_too_large", param: null });
});

test("decisions.md check order: capability (400 on the image part) before context (400 context_length_exceeded)", async () => {
  const png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
  const long = "Once upon a time there was a little girl. ".repeat(40);
  const res = await post("/chat/completions", {
    model: "stories",
    messages: [{ role: "user", content: [{ type: "text", text: long }, { type: "image_url", image_url: { url: png } }] }],
  });
  assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "messages[0].content[1]" });
});
