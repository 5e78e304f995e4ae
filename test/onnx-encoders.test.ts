import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";

/**
 * ONNX encoders through the real server: /v1/embeddings with the official client (float and base64) and
 * /v1/rerank with plain fetch, on the forged bert-embed-tiny and cross-encoder-tiny.
 */

let srv: TestServer;
let client: OpenAI;
let key: string;

before(async () => {
  srv = await startServer({
    models: [
      { id: "embed-onnx", engine: "onnx", source: path.join(modelsDir, "forged/bert-embed-tiny"), capabilities: ["embeddings"], threads: 1 },
      { id: "rerank-onnx", engine: "onnx", source: path.join(modelsDir, "forged/cross-encoder-tiny"), capabilities: ["rerank"], threads: 1 },
      { id: "embed-short", engine: "onnx", source: path.join(modelsDir, "forged/bert-embed-tiny"), capabilities: ["embeddings"], threads: 1, maxInputTokens: 16 },
    ],
  });
  key = (await srv.createKey()).key;
  client = srv.openai(key);
});

after(async () => {
  await srv?.close();
});

const texts = [
  "A cat and a dog play in the park.",
  "My dog likes to play with a ball in the park.",
  "The cat sat on the mat.",
  "Stock market prices fall as the bank raises rates.",
];
const dot = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
};

test("§4.3 §2.5 ONNX embeddings: one normalised vector per input, ordered by index, texts sharing words closer", async () => {
  const res = await client.embeddings.create({ model: "embed-onnx", input: texts, encoding_format: "float" });
  assert.equal(res.object, "list");
  assert.equal(res.model, "embed-onnx");
  assert.deepEqual(
    res.data.map((d) => d.index),
    [0, 1, 2, 3],
  );
  for (const d of res.data) {
    assert.equal(d.object, "embedding");
    assert.equal(d.embedding.length, 128);
    assert.ok(Math.abs(Math.hypot(...d.embedding) - 1) < 1e-4, "unit length");
  }
  const [park1, park2, cat] = res.data.map((d) => d.embedding);
  // Values from the models README (mean pooling per the model's 1_Pooling config).
  assert.ok(Math.abs(dot(park1, park2) - 0.685) < 0.005, `park/park ${dot(park1, park2)}`);
  assert.ok(Math.abs(dot(park1, cat) - 0.317) < 0.005, `park/cat ${dot(park1, cat)}`);
  assert.ok(dot(park1, park2) > dot(park1, cat));
  assert.ok(res.usage.prompt_tokens > 0);
  assert.equal(res.usage.total_tokens, res.usage.prompt_tokens);

  // A batched input gets the same vector as the input alone (padding is masked out of the mean).
  const alone = await client.embeddings.create({ model: "embed-onnx", input: texts[2], encoding_format: "float" });
  alone.data[0].embedding.forEach((x, i) => assert.ok(Math.abs(x - cat[i]) < 1e-5));
});

test("§4.3 encoding_format base64 decodes to the same float32 vectors", async () => {
  const floats = await client.embeddings.create({ model: "embed-onnx", input: texts.slice(0, 2), encoding_format: "float" });
  const raw = (await (
    await srv.post("/v1/embeddings", { model: "embed-onnx", input: texts.slice(0, 2), encoding_format: "base64" }, { key: key })
  ).json()) as { data: { index: number; embedding: string }[] };
  assert.equal(raw.data.length, 2);
  raw.data.forEach((d, i) => {
    assert.equal(typeof d.embedding, "string");
    const buf = Buffer.from(d.embedding, "base64");
    const vec = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    assert.equal(vec.length, 128);
    vec.forEach((x, k) => assert.ok(Math.abs(x - floats.data[i].embedding[k]) < 1e-6));
  });
  // The official client asks for base64 by default and decodes it itself.
  const viaClient = await client.embeddings.create({ model: "embed-onnx", input: texts[0] });
  viaClient.data[0].embedding.forEach((x, k) => assert.ok(Math.abs(x - floats.data[0].embedding[k]) < 1e-6));
});

test("§4.3 an input longer than the model's maximum is 400 invalid_parameter naming input / input[i]", async () => {
  const long = "word ".repeat(40);
  const many = await client.embeddings.create({ model: "embed-short", input: ["short", long] }).catch((e: unknown) => e);
  assert.ok(many instanceof OpenAI.BadRequestError, String(many));
  assert.equal(many.code, "invalid_parameter");
  assert.equal(many.param, "input[1]");
  const one = await client.embeddings.create({ model: "embed-short", input: long }).catch((e: unknown) => e);
  assert.ok(one instanceof OpenAI.BadRequestError, String(one));
  assert.equal(one.param, "input");
  // 512 tokens is the forged model's own limit.
  const own = await client.embeddings.create({ model: "embed-onnx", input: ["ok", "ok", "cat ".repeat(600)] }).catch((e: unknown) => e);
  assert.ok(own instanceof OpenAI.BadRequestError, String(own));
  assert.equal(own.param, "input[2]");
});

interface RerankBody {
  model: string;
  results: { index: number; relevance_score: number }[];
  usage: { prompt_tokens: number; total_tokens: number };
}
function rerank(body: unknown): Promise<Response> {
  return srv.post("/v1/rerank", body, { key: key });
}
const query = "What is the capital of France?";
const documents = ["The cat sat on the mat.", "France is a country in Europe.", "Paris is the capital of France.", "Dogs eat meat."];

test("§4.5 ONNX cross-encoder rerank: Paris first, sigmoid of the single logit, indices into documents", async () => {
  const res = await rerank({ model: "rerank-onnx", query, documents });
  assert.equal(res.status, 200);
  const body = (await res.json()) as RerankBody;
  assert.equal(body.model, "rerank-onnx");
  assert.equal(body.results[0].index, 2);
  assert.equal(documents[body.results[0].index], "Paris is the capital of France.");
  assert.equal(body.results.length, 4);
  // logit = shared content words (capital, france -> 2; france -> 1; none -> 0), score = sigmoid(logit).
  const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
  assert.ok(Math.abs(body.results[0].relevance_score - sigmoid(2)) < 1e-4, String(body.results[0].relevance_score));
  assert.equal(body.results[1].index, 1);
  assert.ok(Math.abs(body.results[1].relevance_score - sigmoid(1)) < 1e-4);
  for (let i = 1; i < body.results.length; i++) assert.ok(body.results[i - 1].relevance_score >= body.results[i].relevance_score);
  assert.deepEqual(
    body.results.map((r) => r.index).sort(),
    [0, 1, 2, 3],
  );
  assert.ok(body.usage.prompt_tokens > 0);
});

test("§4.5 top_n keeps the highest-scoring documents; a long document is 400 documents[i]", async () => {
  const body = (await (await rerank({ model: "rerank-onnx", query, documents, top_n: 2 })).json()) as RerankBody;
  assert.deepEqual(
    body.results.map((r) => r.index),
    [2, 1],
  );
  const res = await rerank({ model: "rerank-onnx", query, documents: ["Paris.", "france ".repeat(600)] });
  const err = (await res.json()) as { error: { code: string; param: string } };
  assert.equal(res.status, 400);
  assert.equal(err.error.code, "invalid_parameter");
  assert.equal(err.error.param, "documents[1]");
});

test("§4.5 one request's 100 documents are scored in one worker call and keep their order", async () => {
  const many = Array.from({ length: 100 }, (_, i) => (i === 73 ? "Paris is the capital of France." : `Document number ${i} about nothing.`));
  const body = (await (await rerank({ model: "rerank-onnx", query, documents: many, top_n: 3 })).json()) as RerankBody;
  assert.equal(body.results[0].index, 73);
  assert.equal(body.results.length, 3);
});
