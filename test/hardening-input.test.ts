// Issue 15: hostile input gets the spec's error (type, code, param), never a 5xx or a model held for seconds.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import sharp from "sharp";
import { errorOf } from "./helpers/errors.ts";
import { modelsDir, runCli, startServer, tempDir, writeConfig, type TestServer } from "../harness/server.ts";

let srv: TestServer;
let key: string;
const adminToken = "Ca-uxLa54KhylWQ6LuYUp-QCh1vF_nnF7-QCqI_nFMU";

before(async () => {
  srv = await startServer({
    adminToken,
    plans: { big: { rateLimit: { requests: 100000, window: "1m" } } },
    models: [
      { id: "tools", engine: "llama", source: path.join(modelsDir, "forged/stories260K-chatml-tools.gguf"), capabilities: ["chat", "tools"], contextSize: 2048, parallel: 2, threads: 1 },
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 512, parallel: 4, threads: 1 },
      {
        id: "llava",
        engine: "onnx",
        source: path.join(modelsDir, "forged/llava-tiny"),
        capabilities: ["chat", "vision"],
        threads: 1,
        limits: { maxImages: 2, maxImagePixels: 1_000_000, maxImageAspectRatio: 10 },
      },
      { id: "rerank", engine: "llama", source: path.join(modelsDir, "forged/bert-rerank-tiny.gguf"), capabilities: ["rerank"], threads: 1, limits: { maxRerankDocuments: 50, maxRerankChars: 5000 } },
      { id: "embed", engine: "llama", source: path.join(modelsDir, "forged/bert-embed-tiny.gguf"), capabilities: ["embeddings"], threads: 1, limits: { maxEmbeddingInputs: 8 } },
    ],
  });
  key = (await srv.createKey({ plan: "big" })).key;
});

after(async () => {
  await srv?.close();
});

test("issue 15.6 a plan named like an Object.prototype member is an unknown plan: 400 naming plan (admin API and CLI)", async () => {
  for (const plan of ["constructor", "__proto__", "toString", "hasOwnProperty"]) {
    const res = await srv.post("/admin/v1/accounts", { name: `acct-${plan.replace(/_/g, "")}`, plan }, { key: adminToken });
    assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "plan" }, plan);
  }
  const dir = tempDir();
  const file = writeConfig(dir, { dataDir: path.join(dir, "data"), models: [] });
  const cli = await runCli(["accounts", "create", "proto-acct", "--plan", "constructor", "--config", file]);
  assert.equal(cli.code, 1);
  assert.match(cli.stderr, /unknown plan "constructor"/);
});

const forcedTool = (parameters: unknown) => ({
  model: "tools",
  messages: [{ role: "user", content: "Call it." }],
  tools: [{ type: "function", function: { name: "f", parameters } }],
  tool_choice: { type: "function", function: { name: "f" } },
  max_tokens: 20,
});

function nested(depth: number, wrap: (inner: unknown) => unknown): unknown {
  let schema: unknown = { type: "string" };
  for (let i = 0; i < depth; i++) schema = wrap(schema);
  return schema;
}

const hostileSchemas: [string, unknown, RegExp][] = [
  ["a self-referencing $ref", { type: "object", properties: { a: { $ref: "#/$defs/a" } }, $defs: { a: { $ref: "#/$defs/a" } } }, /^tools\[0\]\.function\.parameters\.\$defs\.a$/],
  ["minLength 2000", { type: "object", properties: { s: { type: "string", minLength: 2000 } } }, /properties\.s\.minLength$/],
  ["minItems 3000", { type: "object", properties: { s: { type: "array", items: { type: "integer" }, minItems: 3000 } } }, /properties\.s\.minItems$/],
  ["properties nested 1,000 deep", nested(1000, (inner) => ({ type: "object", properties: { x: inner } })), /^tools\[0\]\.function\.parameters(\.properties\.x)+$/],
  ["items nested 1,000 deep", { type: "object", properties: { a: nested(1000, (inner) => ({ type: "array", items: inner })) } }, /(\.items)+$/],
  ["anyOf nested 1,000 deep", { type: "object", properties: { a: nested(1000, (inner) => ({ anyOf: [inner, { type: "null" }] })) } }, /anyOf\[0\]$/],
];

for (const [name, schema, param] of hostileSchemas) {
  test(`issue 15.5 a tool schema with ${name} is 400 invalid_parameter naming its path (tool_choice named and required)`, async () => {
    for (const choice of [{ type: "function", function: { name: "f" } }, "required"]) {
      const res = await srv.post("/v1/chat/completions", { ...forcedTool(schema), tool_choice: choice }, { key });
      const error = await errorOf(res);
      assert.equal(error.status, 400, JSON.stringify(error));
      assert.equal(error.code, "invalid_parameter");
      assert.match(String(error.param), param);
    }
  });
}

test("issue 15.5 a recursive schema with a way out (through an array) is still accepted", async () => {
  const tree = { type: "object", properties: { root: { $ref: "#/$defs/node" } }, $defs: { node: { type: "object", properties: { kids: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 2 } } } } };
  const res = await srv.post("/v1/chat/completions", forcedTool(tree), { key });
  assert.equal(res.status, 200, await res.clone().text());
});

test("issue 15.7 unseeded sampling does not repeat: 8 concurrent requests at temperature 1 give at least 6 texts; equal seeds give equal texts", async () => {
  const ask = (seed?: number) =>
    srv.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 24, temperature: 1, ...(seed === undefined ? {} : { seed }) }, { key }).then(async (r) => {
      assert.equal(r.status, 200);
      return ((await r.json()) as { choices: { message: { content: string } }[] }).choices[0].message.content;
    });
  const texts = await Promise.all(Array.from({ length: 8 }, () => ask()));
  assert.ok(new Set(texts).size >= 6, `${new Set(texts).size} distinct of 8: ${JSON.stringify(texts)}`);
  const [a, b] = await Promise.all([ask(1234), ask(1234)]);
  assert.equal(a, b);
});

async function png(width: number, height: number): Promise<string> {
  const bytes = await sharp({ create: { width, height, channels: 3, background: { r: 200, g: 0, b: 0 } } }).png().toBuffer();
  return `data:image/png;base64,${bytes.toString("base64")}`;
}

const imageRequest = (urls: string[]) => ({
  model: "llava",
  messages: [{ role: "user", content: [{ type: "text", text: "Colour?" }, ...urls.map((url) => ({ type: "image_url", image_url: { url } }))] }],
});

test("issue 15.9 images over the model's limits are 400 naming the image part, before the model spends time on them", async () => {
  const started = Date.now();
  const thin = await errorOf(await srv.post("/v1/chat/completions", imageRequest([await png(1, 100_000)]), { key }));
  assert.deepEqual(thin, { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "messages[0].content[1]" });
  assert.ok(Date.now() - started < 3000, "refused from the header, without decoding 100,000 rows");
  const big = await errorOf(await srv.post("/v1/chat/completions", imageRequest([await png(1200, 1000)]), { key }));
  assert.equal(big.param, "messages[0].content[1]");
  const many = await errorOf(await srv.post("/v1/chat/completions", imageRequest(await Promise.all([png(8, 8), png(8, 8), png(8, 8)])), { key }));
  assert.equal(many.param, "messages[0].content[3]");
  const ok = await srv.post("/v1/chat/completions", imageRequest([await png(900, 900)]), { key });
  assert.equal(ok.status, 200, await ok.clone().text());
});

test("issue 15.9 rerank documents and characters, and embedding inputs, are bounded per model with a 400 naming the parameter", async () => {
  const docs = (n: number, text = "Paris is the capital of France.") => Array.from({ length: n }, () => text);
  const tooMany = await errorOf(await srv.post("/v1/rerank", { model: "rerank", query: "capital", documents: docs(51) }, { key }));
  assert.deepEqual(tooMany, { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "documents" });
  const tooLong = await errorOf(await srv.post("/v1/rerank", { model: "rerank", query: "capital", documents: docs(10, "x".repeat(600)) }, { key }));
  assert.equal(tooLong.param, "documents");
  assert.equal((await srv.post("/v1/rerank", { model: "rerank", query: "capital", documents: docs(50) }, { key })).status, 200);

  const res = await srv.post("/v1/embeddings", { model: "embed", input: Array.from({ length: 9 }, (_, i) => `text ${i}`) }, { key });
  const body = (await res.json()) as { error: { param: string; message: string } };
  assert.equal(res.status, 400);
  assert.equal(body.error.param, "input");
  assert.match(body.error.message, /9 items/, "the message names the array's length");
  const over = await srv.post("/v1/embeddings", { model: "embed", input: Array.from({ length: 3000 }, () => "a") }, { key });
  assert.match(((await over.json()) as { error: { message: string } }).error.message, /3000 items/);
});
