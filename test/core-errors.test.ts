import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import OpenAI from "openai";
import { startServer, tempDir, modelsDir, type TestServer } from "../harness/server.ts";

let srv: TestServer;
let key: string;
let brokenDir: string;
const adminToken = randomBytes(32).toString("base64url");
const metricsToken = randomBytes(32).toString("base64url");

before(async () => {
  brokenDir = tempDir();
  writeFileSync(path.join(brokenDir, "broken.gguf"), "this is not a gguf file");
  srv = await startServer({
    server: { trustProxy: ["127.0.0.0/8"] },
    adminToken,
    metrics: { token: metricsToken },
    models: [
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat", "embeddings"], contextSize: 256, parallel: 1, threads: 1 },
      { id: "broken", engine: "llama", source: path.join(brokenDir, "broken.gguf"), capabilities: ["rerank"], threads: 1 },
    ],
  });
  key = (await srv.createKey()).key;
});

after(async () => {
  await srv?.close();
});

function auth(extra: Record<string, string> = {}): Record<string, string> {
  return { authorization: `Bearer ${key}`, ...extra };
}

async function expectError(res: Response, status: number, type: string, code: string, param: string | null) {
  const body = (await res.json()) as { error: { message: string; type: string; code: string; param: string | null } };
  assert.equal(res.status, status, JSON.stringify(body));
  assert.equal(body.error.type, type);
  assert.equal(body.error.code, code);
  assert.equal(body.error.param, param);
  assert.equal(typeof body.error.message, "string");
  assert.ok(res.headers.get("x-request-id"), "x-request-id on error responses");
  assert.match(res.headers.get("content-type") ?? "", /application\/json/);
  return body;
}

test("§7 unknown path is 404 model_not_found with param null (decisions.md)", async () => {
  const res = await srv.fetch(`${srv.origin}/v1/nope`, { headers: auth() });
  await expectError(res, 404, "invalid_request_error", "model_not_found", null);
});

test("decisions.md: wrong method on a known path is 405 invalid_parameter with Allow", async () => {
  const res = await srv.fetch(`${srv.baseURL}/models`, { method: "DELETE", headers: auth() });
  assert.equal(res.headers.get("allow"), "GET");
  await expectError(res, 405, "invalid_request_error", "invalid_parameter", null);
});

test("§5.2 a missing key is 401 authentication_error invalid_api_key, before the 404 of an unknown path", async () => {
  const res = await srv.fetch(`${srv.origin}/v1/nope`);
  await expectError(res, 401, "authentication_error", "invalid_api_key", null);
});

test("§7 malformed JSON is 400 invalid_parameter", async () => {
  const res = await srv.fetch(`${srv.baseURL}/rerank`, { method: "POST", headers: auth({ "content-type": "application/json" }), body: "{not json" });
  await expectError(res, 400, "invalid_request_error", "invalid_parameter", null);
});

test("§7 a wrong content type is 400 invalid_parameter", async () => {
  const res = await srv.fetch(`${srv.baseURL}/rerank`, { method: "POST", headers: auth({ "content-type": "text/plain" }), body: "hello" });
  await expectError(res, 400, "invalid_request_error", "invalid_parameter", null);
});

test("§7 a missing required field is 400 invalid_parameter naming it", async () => {
  const res = await srv.post("/v1/rerank", { model: "stories", documents: ["a"] }, { key });
  await expectError(res, 400, "invalid_request_error", "invalid_parameter", "query");
});

test("§7 an unknown model is 404 model_not_found with param model", async () => {
  const res = await srv.post("/v1/rerank", { model: "no-such-model", query: "q", documents: ["a"] }, { key });
  await expectError(res, 404, "invalid_request_error", "model_not_found", "model");
});

test("issue 3.8 a model without the endpoint's capability is 400 invalid_parameter param model, naming what it can do", async () => {
  const res = await srv.post("/v1/rerank", { model: "stories", query: "q", documents: ["a"] }, { key });
  const body = await expectError(res, 400, "invalid_request_error", "invalid_parameter", "model");
  assert.match(body.error.message, /chat, embeddings/);
});

test("§7 an engine failure is 500 internal_error that leaks no internals", async () => {
  const res = await srv.post("/v1/rerank", { model: "broken", query: "q", documents: ["a"] }, { key });
  const body = await expectError(res, 500, "server_error", "internal_error", null);
  assert.doesNotMatch(body.error.message, /gguf|\/tmp|stack|Error:/i);
});

test("§7 the openai client sees the envelope as typed errors", async () => {
  const client = srv.openai(key);
  await assert.rejects(client.models.retrieve("no-such-model"), (err: unknown) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.code, "model_not_found");
    assert.equal(err.param, "model");
    assert.equal(err.type, "invalid_request_error");
    return true;
  });
  await assert.rejects(srv.openai("mg_wrong").models.list(), OpenAI.AuthenticationError);
});

test("§2.1 GET /v1/models lists model objects; models.retrieve returns one", async () => {
  const client = srv.openai(key);
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id).sort();
  assert.deepEqual(ids, ["broken", "stories"]);
  for (const model of page.data) {
    assert.equal(model.object, "model");
    assert.equal(typeof model.created, "number");
    assert.equal(model.owned_by, "modelgate");
  }
  const one = await client.models.retrieve("stories");
  assert.deepEqual(Object.keys(one).sort(), ["created", "id", "object", "owned_by"]);
});

test("decisions.md x-request-id: a safe client id is echoed, an unsafe one replaced", async () => {
  const echoed = await srv.fetch(`${srv.baseURL}/models`, { headers: auth({ "x-request-id": "client-id.42:a_b" }) });
  assert.equal(echoed.headers.get("x-request-id"), "client-id.42:a_b");
  const replaced = await srv.fetch(`${srv.baseURL}/models`, { headers: auth({ "x-request-id": "bad id with spaces" }) });
  assert.notEqual(replaced.headers.get("x-request-id"), "bad id with spaces");
  assert.match(replaced.headers.get("x-request-id")!, /^[A-Za-z0-9._:-]{1,128}$/);
  const fresh = await srv.fetch(`${srv.origin}/healthz`);
  assert.ok(fresh.headers.get("x-request-id"));
});

test("issue 3.4 a trusted proxy forwarding plain HTTP gets a spec-shaped 400", async () => {
  const res = await srv.fetch(`${srv.baseURL}/models`, { headers: auth({ "x-forwarded-proto": "http" }) });
  await expectError(res, 400, "invalid_request_error", "invalid_parameter", null);
  const ok = await srv.fetch(`${srv.baseURL}/models`, { headers: auth({ "x-forwarded-proto": "https" }) });
  assert.equal(ok.status, 200);
});

test("§1 plain HTTP on the port is not served", async () => {
  const port = new URL(srv.origin).port;
  const outcome = await new Promise<string>((resolve) => {
    const req = httpRequest({ host: "127.0.0.1", port, path: "/v1/models", timeout: 5000 }, (res) => resolve(`status ${res.statusCode}`));
    req.on("error", (err) => resolve(`error ${err.message}`));
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.end();
  });
  assert.match(outcome, /^error /);
});

test("issue 3.9 /healthz needs no auth; /readyz is 200 once eager models are ready or 503 otherwise", async () => {
  const health = await srv.fetch(`${srv.origin}/healthz`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { status: "ok" });
  const ready = await srv.get("/readyz", { key: adminToken });
  const body = (await ready.json()) as { status: string; models: { id: string; state: string }[] };
  // "broken" failed to load, so the node is not ready.
  assert.equal(ready.status, 503);
  assert.deepEqual(body.models.find((m) => m.id === "stories"), { id: "stories", state: "ready" });
  assert.deepEqual(body.models.find((m) => m.id === "broken"), { id: "broken", state: "failed" });
});

test("issue 29.11 /readyz without a token answers only its status (and the §7 envelope); details need the admin token or metrics.token", async () => {
  const anonymous = await srv.get("/readyz");
  assert.equal(anonymous.status, 503);
  assert.ok(Number(anonymous.headers.get("retry-after")) >= 1);
  const body = (await anonymous.json()) as Record<string, unknown> & { error: { code: string; message: string } };
  assert.deepEqual(Object.keys(body).sort(), ["error", "status"]);
  assert.equal(body.status, "not_ready");
  assert.equal(body.error.code, "model_loading");
  assert.doesNotMatch(body.error.message, /broken|stories/, "no model names without a token");
  for (const token of [adminToken, metricsToken]) {
    const detailed = (await (await srv.get("/readyz", { key: token })).json()) as { models?: unknown[]; store?: unknown; redis?: unknown };
    assert.ok(detailed.models && detailed.store && detailed.redis, JSON.stringify(detailed));
  }
  const alt = (await (await srv.get("/readyz", { headers: { "x-admin-token": adminToken } })).json()) as { models?: unknown[] };
  assert.ok(alt.models);
  const wrong = await srv.get("/readyz", { key: "not-the-token" });
  await expectError(wrong, 401, "authentication_error", "invalid_api_key", null);
  assert.ok(wrong.headers.get("x-ratelimit-limit-requests"), "a wrong token is counted like any other guess");
});

test("issue 3.11 /v1/openapi.json is generated from the route schemas, and like all of /v1 takes a key", async () => {
  const anonymous = await srv.fetch(`${srv.baseURL}/openapi.json`);
  await expectError(anonymous, 401, "authentication_error", "invalid_api_key", null);
  const res = await srv.fetch(`${srv.baseURL}/openapi.json`, { headers: auth() });
  assert.equal(res.status, 200);
  assert.ok(res.headers.get("x-ratelimit-limit-requests"));
  const doc = (await res.json()) as { openapi: string; paths: Record<string, Record<string, { requestBody?: unknown }>> };
  assert.equal(doc.openapi, "3.1.0");
  assert.ok(doc.paths["/v1/models"].get);
  assert.ok(doc.paths["/v1/rerank"].post.requestBody);
  assert.ok(doc.paths["/v1/chat/completions"].post.requestBody);
  assert.ok(doc.paths["/v1/embeddings"].post.requestBody);
  const upload = doc.paths["/v1/audio/transcriptions"].post.requestBody as { content: Record<string, unknown> };
  assert.ok(upload.content["multipart/form-data"]);
});
