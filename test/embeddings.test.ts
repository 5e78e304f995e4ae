import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { usageRows } from "./helpers/usage.ts";

let srv: TestServer;
let key: string;
let client: OpenAI;

before(async () => {
  srv = await startServer({
    models: [
      { id: "bert-embed", engine: "llama", source: path.join(modelsDir, "forged/bert-embed-tiny.gguf"), capabilities: ["embeddings"], threads: 1 },
      { id: "stories-embed", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["embeddings"], contextSize: 128, threads: 1 },
      { id: "stories-chat", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 128, threads: 1 },
    ],
  });
  key = (await srv.createKey()).key;
  client = srv.openai(key);
});

after(async () => {
  await srv?.close();
});

function dot(a: number[], b: number[]): number {
  return a.reduce((sum, v, i) => sum + v * b[i], 0);
}

const post = (body: Record<string, unknown>) => srv.post("/v1/embeddings", body, { key });

async function errorBody(res: Response): Promise<{ status: number; code: string; param: string | null }> {
  const body = (await res.json()) as { error: { code: string; param: string | null } };
  return { status: res.status, code: body.error.code, param: body.error.param };
}

test("§2.5 a string input gives one L2-normalised vector with usage (float)", async () => {
  const res = await post({ model: "bert-embed", input: "The cat sat on the mat.", encoding_format: "float" });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { object: string; model: string; data: { object: string; index: number; embedding: number[] }[]; usage: { prompt_tokens: number; total_tokens: number } };
  assert.equal(body.object, "list");
  assert.equal(body.model, "bert-embed");
  assert.equal(body.data.length, 1);
  assert.equal(body.data[0].object, "embedding");
  assert.equal(body.data[0].index, 0);
  assert.equal(body.data[0].embedding.length, 64);
  assert.ok(Math.abs(dot(body.data[0].embedding, body.data[0].embedding) - 1) < 1e-4, "unit length");
  assert.ok(body.usage.prompt_tokens > 0);
  assert.equal(body.usage.total_tokens, body.usage.prompt_tokens);
});

test("§4.3 an array input gives one vector per input, ordered by index; related sentences are closer (openai client, base64)", async () => {
  const input = ["The cat sat on the mat.", "A dog runs in the park.", "The cat sat on the red mat."];
  const res = await client.embeddings.create({ model: "bert-embed", input });
  assert.equal(res.data.length, 3);
  assert.deepEqual(res.data.map((d) => d.index), [0, 1, 2]);
  const [a, b, c] = res.data.map((d) => d.embedding);
  assert.ok(dot(a, c) > dot(a, b) + 0.2, `related ${dot(a, c)} vs unrelated ${dot(a, b)}`);
  // The openai client asked for base64 by default and decoded it: same numbers as the float form.
  const float = (await (await post({ model: "bert-embed", input, encoding_format: "float" })).json()) as { data: { embedding: number[] }[] };
  for (let i = 0; i < 3; i++) {
    for (let j = 0; j < 64; j++) assert.ok(Math.abs(float.data[i].embedding[j] - res.data[i].embedding[j]) < 1e-6);
  }
});

test("§2.5 base64 is little-endian float32", async () => {
  const res = await post({ model: "bert-embed", input: "hello world", encoding_format: "base64" });
  const body = (await res.json()) as { data: { embedding: string }[] };
  const bytes = Buffer.from(body.data[0].embedding, "base64");
  assert.equal(bytes.length, 64 * 4);
  const values = Array.from({ length: 64 }, (_, i) => bytes.readFloatLE(i * 4));
  assert.ok(Math.abs(dot(values, values) - 1) < 1e-4);
});

test("§4.3 GGUF embeddings also work on stories260K", async () => {
  const res = await client.embeddings.create({ model: "stories-embed", input: ["Once upon a time", "Lily had a dog"] });
  assert.equal(res.data.length, 2);
  assert.ok(res.data[0].embedding.length > 0);
  assert.ok(Math.abs(dot(res.data[0].embedding, res.data[0].embedding) - 1) < 1e-3);
  assert.ok(res.usage.prompt_tokens > 0);
});

test("decisions.md: a too-long input is 400 invalid_parameter with param input or input[i]", async () => {
  const long = "the cat sat on the mat ".repeat(200);
  assert.deepEqual(await errorBody(await post({ model: "stories-embed", input: long })), { status: 400, code: "invalid_parameter", param: "input" });
  assert.deepEqual(await errorBody(await post({ model: "stories-embed", input: ["short", long] })), {
    status: 400,
    code: "invalid_parameter",
    param: "input[1]",
  });
});

test("§4.3 dimensions is not supported: 400 param dimensions; bad encoding_format 400", async () => {
  assert.deepEqual(await errorBody(await post({ model: "bert-embed", input: "x", dimensions: 32 })), { status: 400, code: "invalid_parameter", param: "dimensions" });
  assert.deepEqual(await errorBody(await post({ model: "bert-embed", input: "x", encoding_format: "int8" })), {
    status: 400,
    code: "invalid_parameter",
    param: "encoding_format",
  });
  assert.deepEqual(await errorBody(await post({ model: "bert-embed", input: [] })), { status: 400, code: "invalid_parameter", param: "input" });
});

test("§4.3 a model without the embeddings capability is 400 param model; unknown model 404", async () => {
  assert.deepEqual(await errorBody(await post({ model: "stories-chat", input: "x" })), { status: 400, code: "invalid_parameter", param: "model" });
  assert.deepEqual(await errorBody(await post({ model: "nope", input: "x" })), { status: 404, code: "model_not_found", param: "model" });
});

test("usage is recorded per key and model under the embeddings endpoint", async () => {
  const { key: usageKey, id, accountId } = await srv.createKey();
  const res = await srv.openai(usageKey).embeddings.create({ model: "bert-embed", input: ["one two", "three four five"] });
  assert.deepEqual(await usageRows(srv.server, srv.config, accountId, id), [["bert-embed", "embeddings", 1, res.usage.prompt_tokens, 0]]);
});
