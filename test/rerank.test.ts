// test: alone (the slot is freed in under 0.6 of a whole request's time after an abort)
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import { usageRows } from "./helpers/usage.ts";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";

const query = "What is the capital of France?";
const documents = ["The cat sat on the mat.", "Paris is the capital of France.", "France is a country in Europe."];

let srv: TestServer;
let key: string;

before(async () => {
  srv = await startServer({
    deployment: "shared",
    plans: {
      norerank: { endpoints: ["models", "chat", "embeddings"] },
      dedicated: { endpoints: ["models", "chat"] },
    },
    models: [
      { id: "bert-rerank", engine: "llama", source: path.join(modelsDir, "forged/bert-rerank-tiny.gguf"), capabilities: ["rerank"], threads: 1 },
      { id: "bert-rerank-q0", engine: "llama", source: path.join(modelsDir, "forged/bert-rerank-tiny.gguf"), capabilities: ["rerank"], threads: 1, parallel: 1, queueSize: 0 },
      { id: "cross-encoder", engine: "onnx", source: path.join(modelsDir, "forged/cross-encoder-tiny"), capabilities: ["rerank"], threads: 1 },
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 128, threads: 1, load: "lazy" },
    ],
  });
  key = (await srv.createKey()).key;
});

after(async () => {
  await srv?.close();
});

interface ErrorBody {
  error: { message: string; type: string; code: string; param: string | null };
}
interface RerankBody {
  id: string;
  model: string;
  results: { index: number; relevance_score: number }[];
  usage: { prompt_tokens: number; total_tokens: number };
}

function rerank(body: unknown, apiKey = key): Promise<Response> {
  return srv.post("/v1/rerank", body, { key: apiKey });
}

async function expectError(res: Response, status: number, code: string, param: string | null): Promise<ErrorBody> {
  const body = (await res.json()) as ErrorBody;
  assert.equal(res.status, status, JSON.stringify(body));
  assert.equal(body.error.code, code);
  assert.equal(body.error.param, param);
  return body;
}

test("§4.5 §2.7 results are ordered by relevance with indices into the request's documents", async () => {
  const res = await rerank({ model: "bert-rerank", query, documents });
  assert.equal(res.status, 200);
  assert.ok(res.headers.get("x-request-id"));
  const body = (await res.json()) as RerankBody;
  assert.equal(body.model, "bert-rerank");
  assert.deepEqual(
    body.results.map((r) => r.index),
    [1, 2, 0],
  );
  const expected = [0.845, 0.49, 0.119];
  body.results.forEach((r, i) => assert.ok(Math.abs(r.relevance_score - expected[i]) < 0.01, `${r.index}: ${r.relevance_score}`));
  assert.match(body.id, /^rerank-/);
  assert.ok(body.usage.prompt_tokens > 0);
  assert.equal(body.usage.total_tokens, body.usage.prompt_tokens);
});

test("§4.5 top_n returns only the highest-scoring documents, indices mapped back", async () => {
  const docs = ["France is a country in Europe.", "The cat sat on the mat.", "A dog.", "Paris is the capital of France."];
  const body = (await (await rerank({ model: "bert-rerank", query, documents: docs, top_n: 2 })).json()) as RerankBody;
  assert.deepEqual(
    body.results.map((r) => r.index),
    [3, 0],
  );
  const all = (await (await rerank({ model: "bert-rerank", query, documents: docs, top_n: 10 })).json()) as RerankBody;
  assert.equal(all.results.length, 4);
});

test("§4.5 the same endpoint serves an ONNX cross-encoder: sorted, top_n, indices mapped back", async () => {
  const docs = ["The cat sat on the mat.", "France is a country in Europe.", "Paris is the capital of France."];
  const res = await rerank({ model: "cross-encoder", query, documents: docs, top_n: 2 });
  const body = (await res.json()) as RerankBody;
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.equal(body.model, "cross-encoder");
  assert.deepEqual(
    body.results.map((r) => r.index),
    [2, 1],
  );
  assert.ok(body.results[0].relevance_score > body.results[1].relevance_score);
  assert.ok(body.usage.prompt_tokens > 0);
});

test("§4.5 unlisted parameters are ignored", async () => {
  const res = await rerank({ model: "bert-rerank", query, documents, return_documents: false, user: "x" });
  assert.equal(res.status, 200);
});

test("§4.5 empty documents is 400 invalid_parameter param documents", async () => {
  await expectError(await rerank({ model: "bert-rerank", query, documents: [] }), 400, "invalid_parameter", "documents");
});

test("§4.5 a non-string document is 400 invalid_parameter naming it", async () => {
  await expectError(await rerank({ model: "bert-rerank", query, documents: ["a", "b", 3] }), 400, "invalid_parameter", "documents[2]");
});

test("§4.5 top_n below 1 is 400 invalid_parameter param top_n", async () => {
  await expectError(await rerank({ model: "bert-rerank", query, documents, top_n: 0 }), 400, "invalid_parameter", "top_n");
  await expectError(await rerank({ model: "bert-rerank", query, documents, top_n: 1.5 }), 400, "invalid_parameter", "top_n");
});

test("§4.5 a document too long for the model is 400 invalid_parameter naming it", async () => {
  const long = "Paris is the capital of France. ".repeat(600);
  const body = await expectError(await rerank({ model: "bert-rerank", query, documents: ["short", long] }), 400, "invalid_parameter", "documents[1]");
  assert.equal(body.error.type, "invalid_request_error");
  await expectError(await rerank({ model: "bert-rerank", query: long, documents: ["short"] }), 400, "invalid_parameter", "query");
});

test("§7 an unknown model is 404 model_not_found param model", async () => {
  await expectError(await rerank({ model: "no-such-model", query, documents }), 404, "model_not_found", "model");
});

test("§4.5 §7 a key whose plan excludes rerank is 403 model_not_in_plan param model", async () => {
  const limited = (await srv.createKey({ plan: "norerank" })).key;
  const body = await expectError(await rerank({ model: "bert-rerank", query, documents }, limited), 403, "model_not_in_plan", "model");
  assert.equal(body.error.type, "permission_error");
});

test("decisions.md: a key bound to this dedicated node may rerank whatever its plan", async () => {
  const dedicated = (await srv.createKey({ plan: "dedicated", deployment: "shared" })).key;
  const res = await rerank({ model: "bert-rerank", query, documents }, dedicated);
  assert.equal(res.status, 200, await res.clone().text());
});

test("§4.2 rule 6 a model without rerank capability is 400 invalid_parameter param model", async () => {
  await expectError(await rerank({ model: "stories", query, documents }), 400, "invalid_parameter", "model");
});

test("usage is recorded per key and model under the rerank endpoint", async () => {
  const { key: usageKey, id, accountId } = await srv.createKey();
  const body = (await (await rerank({ model: "bert-rerank", query, documents }, usageKey)).json()) as RerankBody;
  assert.deepEqual(await usageRows(srv.server, srv.config, accountId, id), [["bert-rerank", "rerank", 1, body.usage.prompt_tokens, 0]]);
});

test("decisions.md check order: input length (400) before capacity (503 overloaded with Retry-After)", async () => {
  const many = Array.from({ length: 300 }, (_, i) => `Paris is the capital of France ${i}.`);
  const busy = rerank({ model: "bert-rerank-q0", query, documents: many });
  const runner = srv.server.ctx.catalog.find("bert-rerank-q0")!;
  const deadline = Date.now() + 10_000;
  while (runner.stats().active === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.equal(runner.stats().active, 1, "the long request holds the only slot");
  const tooLong = await rerank({ model: "bert-rerank-q0", query, documents: ["Paris ".repeat(3000)] });
  const overloaded = await rerank({ model: "bert-rerank-q0", query, documents });
  const first = await busy;
  assert.equal(first.status, 200);
  await expectError(tooLong, 400, "invalid_parameter", "documents[0]");
  const body = await expectError(overloaded, 503, "overloaded", null);
  assert.equal(body.error.type, "server_error");
  assert.ok(Number(overloaded.headers.get("retry-after")) >= 1);
});

test("STYLE abort: a client that disconnects frees the model's slot before the work would have finished", async () => {
  const many = Array.from({ length: 400 }, (_, i) => `Paris is the capital of France ${i}.`);
  const runner = srv.server.ctx.catalog.find("bert-rerank-q0")!;
  const timedStart = Date.now();
  const full = await rerank({ model: "bert-rerank-q0", query, documents: many.slice(0, 100) });
  assert.equal(full.status, 200);
  const fullMs = (Date.now() - timedStart) * 4;
  const controller = new AbortController();
  const pending = srv.post("/v1/rerank", { model: "bert-rerank-q0", query, documents: many }, { key: key, signal: controller.signal })
    .catch((err: Error) => err);
  const deadline = Date.now() + 10_000;
  while (runner.stats().active === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  const aborted = Date.now();
  controller.abort();
  assert.ok((await pending) instanceof Error);
  while (runner.stats().active > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  const freedMs = Date.now() - aborted;
  assert.equal(runner.stats().active, 0);
  assert.ok(freedMs < fullMs * 0.6, `slot freed ${freedMs} ms after the abort; the whole request takes about ${fullMs} ms`);
});
