// Spec audit: §4.2 rule 4 (errors before the first streamed token are JSON), §2.2 text-part arrays, request ids.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { startServer, modelsDir, tempDir, type TestServer } from "../harness/server.ts";
import { readSse } from "./helpers/sse.ts";

let srv: TestServer;
let key: string;
let brokenDir: string;

const stories = path.join(modelsDir, "stories260K.gguf");

before(async () => {
  brokenDir = tempDir();
  writeFileSync(path.join(brokenDir, "broken.gguf"), "this is not a gguf file");
  srv = await startServer({
    models: [
      { id: "stories", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1, queueSize: 1 },
      { id: "cold", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1, load: "lazy" },
      { id: "broken", engine: "llama", source: path.join(brokenDir, "broken.gguf"), capabilities: ["rerank"], threads: 1 },
    ],
  });
  key = (await srv.createKey()).key;
});

after(async () => {
  await srv?.close();
  if (brokenDir) rmSync(brokenDir, { recursive: true, force: true });
});

const once = [{ role: "user", content: "Once upon a time" }];

const post = (route: string, body: unknown, headers: Record<string, string> = {}) => srv.post(`/v1${route}`, body, { key, headers });

async function jsonError(res: Response) {
  assert.match(res.headers.get("content-type") ?? "", /application\/json/, "a JSON error, not an event stream");
  const body = (await res.json()) as { error: { type: string; code: string; param: string | null } };
  return { status: res.status, type: body.error.type, code: body.error.code, param: body.error.param };
}

test("§4.2 rule 4 stream: true on a model still loading is a JSON 503 model_loading with Retry-After, not a stream", async () => {
  const res = await post("/chat/completions", { model: "cold", messages: once, max_tokens: 2, stream: true });
  assert.deepEqual(await jsonError(res), { status: 503, type: "server_error", code: "model_loading", param: null });
  assert.ok(Number(res.headers.get("retry-after")) >= 1);
  assert.ok(res.headers.get("retry-after-ms"));
});

test("§4.2 rule 4 stream: true on a full queue is a JSON 503 overloaded with Retry-After, not a stream", async () => {
  const responses = await Promise.all(Array.from({ length: 4 }, () => post("/chat/completions", { model: "stories", messages: once, max_tokens: 100, stream: true })));
  const refused = responses.filter((r) => r.status !== 200);
  assert.ok(refused.length >= 1, responses.map((r) => r.status).join(","));
  assert.deepEqual(await jsonError(refused[0]), { status: 503, type: "server_error", code: "overloaded", param: null });
  assert.match(refused[0].headers.get("retry-after") ?? "", /^[1-9]\d*$/);
  for (const r of responses) await r.arrayBuffer().catch(() => undefined);
});

test("§4.2 rule 4 stream: true with an invalid parameter is a JSON 400, not a stream", async () => {
  const res = await post("/chat/completions", { model: "stories", messages: once, stream: true, temperature: 3 });
  assert.deepEqual(await jsonError(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "temperature" });
});

test("§2.2 a content array of text parts only is accepted on a text-only model", async () => {
  const res = await post("/chat/completions", {
    model: "stories",
    messages: [{ role: "user", content: [{ type: "text", text: "Once upon" }, { type: "text", text: " a time" }] }],
    max_tokens: 3,
    temperature: 0,
  });
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { choices: { message: { content: string } }[] };
  assert.equal(typeof body.choices[0].message.content, "string");
});

test("decisions.md x-request-id: a client's safe id is echoed on a streamed response and on an error", async () => {
  const streamed = await post("/chat/completions", { model: "stories", messages: once, max_tokens: 2, stream: true }, { "x-request-id": "audit-stream-1" });
  assert.equal(streamed.status, 200);
  assert.equal(streamed.headers.get("x-request-id"), "audit-stream-1");
  await streamed.text();
  const failed = await post("/chat/completions", { model: "nope", messages: once }, { "x-request-id": "audit-error-1" });
  assert.equal(failed.status, 404);
  assert.equal(failed.headers.get("x-request-id"), "audit-error-1");
  await failed.arrayBuffer();
  const unauth = await srv.fetch(`${srv.baseURL}/models`, { headers: { "x-request-id": "audit-401" } });
  assert.equal(unauth.status, 401);
  assert.equal(unauth.headers.get("x-request-id"), "audit-401");
  await unauth.arrayBuffer();
});

test("§7 500 internal_error carries x-request-id and the rate-limit headers, param null", async () => {
  const res = await post("/rerank", { model: "broken", query: "q", documents: ["a"] });
  assert.ok(res.headers.get("x-request-id"));
  assert.ok(res.headers.get("x-ratelimit-limit-requests"));
  assert.ok(res.headers.get("x-ratelimit-remaining-requests"));
  assert.ok(res.headers.get("x-ratelimit-reset-requests"));
  assert.deepEqual(await jsonError(res), { status: 500, type: "server_error", code: "internal_error", param: null });
});

test("§2.4 §6 streamed chunks: object chat.completion.chunk, model id, index 0, final delta {} with finish_reason length at max_tokens", async () => {
  const res = await post("/chat/completions", { model: "stories", messages: once, max_tokens: 3, temperature: 0, stream: true });
  assert.equal(res.status, 200);
  const { events, done } = await readSse(res);
  assert.ok(done, "ends with data: [DONE]");
  const chunks = events as { object: string; model: string; choices: { index: number; delta: object; finish_reason: string | null }[] }[];
  assert.ok(chunks.every((c) => c.object === "chat.completion.chunk" && c.model === "stories" && c.choices[0].index === 0));
  assert.deepEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" });
  const last = chunks.at(-1)!;
  assert.deepEqual(last.choices[0].delta, {});
  assert.equal(last.choices[0].finish_reason, "length");
});

test("§4.2 rule 5 §8 context window: prompt + max_tokens exactly equal to the served context is accepted; one more is 400 context_length_exceeded", async () => {
  const probe = await post("/chat/completions", { model: "stories", messages: once, max_tokens: 1, temperature: 0 });
  assert.equal(probe.status, 200);
  const prompt = ((await probe.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
  const fits = await post("/chat/completions", { model: "stories", messages: once, max_tokens: 256 - prompt, temperature: 0 });
  assert.equal(fits.status, 200, await fits.clone().text());
  const usage = ((await fits.json()) as { usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } }).usage;
  assert.ok(usage.total_tokens <= 256, JSON.stringify(usage));
  const over = await post("/chat/completions", { model: "stories", messages: once, max_tokens: 257 - prompt, temperature: 0 });
  assert.deepEqual(await jsonError(over), { status: 400, type: "invalid_request_error", code: "context_length_exceeded", param: "messages" });
});
