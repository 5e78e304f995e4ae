// Spec audit: what GET /v1/models lists (§1, §4.1, issue 4.4) and request-shape rules of §4 the other files don't reach.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";

let srv: TestServer;
let key: string;

const stories = path.join(modelsDir, "stories260K.gguf");

before(async () => {
  srv = await startServer({
    plans: {
      chatonly: { endpoints: ["models", "chat"] },
      globbed: { models: ["stories*"] },
      limit: { maxBodyBytes: 1000 },
    },
    models: [
      { id: "stories", engine: "llama", source: stories, capabilities: ["chat", "embeddings"], contextSize: 256, parallel: 1, threads: 1 },
      { id: "embed-only", engine: "llama", source: stories, capabilities: ["embeddings"], contextSize: 256, parallel: 1, threads: 1, load: "lazy" },
      { id: "rerank-only", engine: "llama", source: "/nonexistent/rerank.gguf", capabilities: ["rerank"], threads: 1, load: "lazy" },
    ],
  });
  key = (await srv.createKey()).key;
});

after(async () => {
  await srv?.close();
});

const bearer = (k: string) => ({ authorization: `Bearer ${k}` });

async function listIds(k: string): Promise<string[]> {
  const res = await srv.fetch(`${srv.baseURL}/models`, { headers: bearer(k) });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { object: string; data: { id: string; object: string; created: number; owned_by: string }[] };
  assert.equal(body.object, "list");
  for (const m of body.data) {
    assert.equal(m.object, "model");
    assert.ok(Number.isInteger(m.created) && m.created > 1_600_000_000 && m.created <= Date.now() / 1000 + 1, String(m.created));
    assert.equal(typeof m.owned_by, "string");
  }
  return body.data.map((m) => m.id).sort();
}

const post = (route: string, body: unknown, k = key) => srv.post(`/v1${route}`, body, { key: k });

test("§4.1 GET /v1/models is filtered by the plan's model globs", async () => {
  const { key: globbed } = await srv.createKey({ plan: "globbed" });
  assert.deepEqual(await listIds(globbed), ["stories"]);
});

test("§4.1 GET /v1/models is filtered by the key's model scope", async () => {
  const { key: scoped } = await srv.createKey({ models: ["*-only"] });
  assert.deepEqual(await listIds(scoped), ["embed-only", "rerank-only"]);
});

test("§1 §4.1 GET /v1/models lists only models the key may call: none reachable through an endpoint outside its plan", async () => {
  const { key: chatOnly } = await srv.createKey({ plan: "chatonly" });
  // embed-only and rerank-only can only be called on embeddings / rerank, which the plan excludes (403 there).
  const res = await post("/embeddings", { model: "embed-only", input: "hi" }, chatOnly);
  assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });
  assert.deepEqual(await listIds(chatOnly), ["stories"]);
});

test("§1 §4.1 GET /v1/models lists only models the key may call: a key scoped to endpoints [models, embeddings]", async () => {
  const { key: embedKey } = await srv.createKey({ endpoints: ["models", "embeddings"] });
  assert.deepEqual(await listIds(embedKey), ["embed-only", "stories"]);
});

test("decisions.md GET /v1/models on a dedicated node: a key bound to it sees the rerank model whatever its plan", async () => {
  const node = await startServer({
    deployment: "node-a",
    plans: { chatonly: { endpoints: ["models", "chat"] } },
    models: [
      { id: "chat-m", engine: "llama", source: "/nonexistent/chat.gguf", capabilities: ["chat"], load: "lazy" },
      { id: "embed-m", engine: "llama", source: "/nonexistent/embed.gguf", capabilities: ["embeddings"], load: "lazy" },
      { id: "rerank-m", engine: "llama", source: "/nonexistent/rerank.gguf", capabilities: ["rerank"], load: "lazy" },
    ],
  });
  try {
    const { key: bound } = await node.createKey({ plan: "chatonly", deployment: "node-a" });
    const res = await node.fetch(`${node.baseURL}/models`, { headers: bearer(bound) });
    assert.equal(res.status, 200);
    const ids = ((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id).sort();
    assert.deepEqual(ids, ["chat-m", "rerank-m"]);
  } finally {
    await node.close();
  }
});

test("§4.1 GET /v1/models takes no parameters: a query string is ignored", async () => {
  const res = await srv.fetch(`${srv.baseURL}/models?limit=1&after=x`, { headers: bearer(key) });
  assert.equal(res.status, 200);
  assert.equal(((await res.json()) as { data: unknown[] }).data.length, 3);
});

test("§8 body size: a JSON body of exactly maxBodyBytes passes the size check; one byte more is 413", async () => {
  const { key: limited } = await srv.createKey({ plan: "limit" });
  const make = (n: number) => {
    const base = JSON.stringify({ model: "no-such-model", input: "" });
    return JSON.stringify({ model: "no-such-model", input: "x".repeat(n - base.length) });
  };
  const exact = make(1000);
  assert.equal(Buffer.byteLength(exact), 1000);
  let res = await srv.fetch(`${srv.baseURL}/embeddings`, { method: "POST", headers: { ...bearer(limited), "content-type": "application/json" }, body: exact });
  assert.deepEqual(await errorOf(res), { status: 404, type: "invalid_request_error", code: "model_not_found", param: "model" });
  res = await srv.fetch(`${srv.baseURL}/embeddings`, { method: "POST", headers: { ...bearer(limited), "content-type": "application/json" }, body: make(1001) });
  assert.deepEqual(await errorOf(res), { status: 413, type: "invalid_request_error", code: "request_too_large", param: null });
});

test("§4.3 input is a string or an array of strings: token arrays and non-string elements are 400", async () => {
  for (const input of [[1, 2, 3], [[1, 2]], ["ok", 5]]) {
    const res = await post("/embeddings", { model: "stories", input });
    const err = await errorOf(res);
    assert.equal(err.status, 400, JSON.stringify(input));
    assert.equal(err.code, "invalid_parameter");
    assert.match(err.param ?? "", /^input/, JSON.stringify(input));
  }
});

test("§2.5 §4.3 embeddings: model field, one element per input ordered by index, usage integers (raw fetch)", async () => {
  const res = await post("/embeddings", { model: "stories", input: ["a cat", "the dog ran", "x"] });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { object: string; model: string; data: { object: string; index: number; embedding: number[] }[]; usage: { prompt_tokens: number; total_tokens: number } };
  assert.equal(body.object, "list");
  assert.equal(body.model, "stories");
  assert.deepEqual(body.data.map((d) => d.index), [0, 1, 2]);
  assert.ok(body.data.every((d) => d.object === "embedding" && Array.isArray(d.embedding)));
  assert.equal(new Set(body.data.map((d) => d.embedding.length)).size, 1, "dimensionality fixed per model");
  assert.ok(Number.isInteger(body.usage.prompt_tokens) && Number.isInteger(body.usage.total_tokens));
});

test("§4.2 seed must be an integer and stream a boolean: 400 naming them", async () => {
  const once = [{ role: "user", content: "Once" }];
  for (const [extra, param] of [[{ seed: 1.5 }, "seed"], [{ stream: "yes" }, "stream"], [{ max_tokens: 2.5 }, "max_tokens"]] as const) {
    const res = await post("/chat/completions", { model: "stories", messages: once, ...extra });
    assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param }, JSON.stringify(extra));
  }
});

test("§4.2 tool_choice required or a named function without tools is 400 param tool_choice", async () => {
  const once = [{ role: "user", content: "Once" }];
  for (const tool_choice of ["required", { type: "function", function: { name: "f" } }]) {
    const res = await post("/chat/completions", { model: "stories", messages: once, tool_choice });
    assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "tool_choice" }, JSON.stringify(tool_choice));
  }
});

test("§4.1 models.retrieve of a model reachable through no endpoint of the key's plan is 403 model_not_in_plan", async () => {
  const { key: chatOnly } = await srv.createKey({ plan: "chatonly" });
  const res = await srv.fetch(`${srv.baseURL}/models/embed-only`, { headers: bearer(chatOnly) });
  assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });
  const ok = await srv.fetch(`${srv.baseURL}/models/stories`, { headers: bearer(chatOnly) });
  assert.equal(ok.status, 200);
  assert.equal(((await ok.json()) as { id: string }).id, "stories");
});

test("§2.5 dimensionality is fixed per model: an empty input is 400 invalid_parameter naming it, never a zero-length vector", async () => {
  for (const [input, param] of [["", "input"], [["a cat", ""], "input[1]"]] as const) {
    const res = await post("/embeddings", { model: "stories", input });
    assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param }, JSON.stringify(input));
  }
});
