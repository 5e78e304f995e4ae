import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer, type Server as NetServer } from "node:net";
import path from "node:path";
import OpenAI from "openai";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { recordingEngines } from "./helpers/engines.ts";
import { llamaServerBinary } from "../harness/llama-server.ts";
import { apiErrorOf, errorOf } from "./helpers/errors.ts";
import { readSse } from "./helpers/sse.ts";
import type { ManagedLlamaServerEngine } from "../src/engines/llama-server/managed-llama-server-engine.ts";

/**
 * `engine: llama-server`: Modelgate runs a real llama-server (built by ../shared/tools/peers/build-llama-server.sh)
 * per model and relays to it; the whole contract holds on top.
 */
let srv: TestServer;
let key: string;
let client: OpenAI;
const engines = recordingEngines();

const stories = path.join(modelsDir, "stories260K.gguf");
const forged = path.join(modelsDir, "forged/stories260K-chatml-tools.gguf");

before(async () => {
  const binary = llamaServerBinary();
  srv = await startServer({
    models: [
      { id: "managed", engine: "llama-server", binary, source: stories, capabilities: ["chat"], contextSize: 256, parallel: 2, threads: 1, load: "lazy" },
      { id: "managed-json", engine: "llama-server", binary, source: forged, capabilities: ["chat", "json"], contextSize: 2048, parallel: 1, threads: 1 },
      { id: "managed-embed", engine: "llama-server", binary, source: path.join(modelsDir, "forged/bert-embed-tiny.gguf"), capabilities: ["embeddings"], parallel: 1 },
    ],
  }, { engines: engines.registry });
  key = (await srv.createKey()).key;
  client = srv.openai(key, { maxRetries: 0 });
});

after(async () => {
  await srv?.close();
});

const engineOf = (id: string) => engines.loaded(srv, id) as ManagedLlamaServerEngine | null;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test("llama-server engine: 503 model_loading while the process starts, then chat, streamed and not, with usage", async () => {
  const first = await srv.post("/v1/chat/completions", { model: "managed", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 8 }, { key });
  const error = await errorOf(first);
  assert.equal(error.status, 503);
  assert.equal(error.code, "model_loading");
  assert.ok(Number(first.headers.get("retry-after")) >= 1);

  for (let i = 0; i < 100 && !engineOf("managed"); i++) await sleep(100);
  const res = await client.chat.completions.create({ model: "managed", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 12, temperature: 0 });
  assert.equal(res.object, "chat.completion");
  assert.ok(res.choices[0]!.message.content!.length > 0);
  assert.equal(res.usage!.completion_tokens, 12);
  assert.ok(res.usage!.prompt_tokens > 0);

  const stream = await srv.post("/v1/chat/completions", { model: "managed", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 12, temperature: 0, stream: true }, { key });
  const { events, done } = await readSse(stream);
  assert.ok(done);
  const text = events.map((e) => e.choices?.[0]?.delta?.content ?? "").join("");
  assert.equal(text, res.choices[0]!.message.content, "temperature 0: the stream says what the completion said");
});

test("llama-server engine: context_length_exceeded counted before the call (contextSize is per sequence)", async () => {
  const long = "Once upon a time there was a little girl. ".repeat(40);
  const err = await apiErrorOf(client.chat.completions.create({ model: "managed", messages: [{ role: "user", content: long }], max_tokens: 8 }));
  assert.equal(err.status, 400);
  assert.equal(err.code, "context_length_exceeded");
});

test("llama-server engine: response_format json_schema is enforced by llama-server's grammar", async () => {
  const json = await client.chat.completions.create({
    model: "managed-json",
    messages: [{ role: "user", content: "A colour" }],
    // The grammar lets up to about 20 whitespace tokens stand at each of the object's gaps, and the process samples
    // the whole distribution: a cap of 60 cut about one answer in 25 before its closing brace (finish_reason
    // "length", as OpenAI's cut JSON). 256 leaves room for the longest object the grammar allows; the seed makes
    // the run the same each time.
    max_tokens: 256,
    seed: 7,
    response_format: { type: "json_schema", json_schema: { name: "c", schema: { type: "object", properties: { colour: { type: "string", enum: ["red", "blue"] } }, required: ["colour"] } } },
  });
  assert.equal(json.choices[0]!.finish_reason, "stop");
  assert.ok(["red", "blue"].includes((JSON.parse(json.choices[0]!.message.content!) as { colour: string }).colour));
});

test("llama-server engine: embeddings from a --embeddings process; image inputs are the capability 400", async () => {
  const res = await client.embeddings.create({ model: "managed-embed", input: ["a cat and a dog", "the park"] });
  assert.equal(res.data.length, 2);
  assert.equal(res.data[0]!.embedding.length, 64);
  const png = "data:image/png;base64," + Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).toString("base64");
  const error = await errorOf(
    await srv.post("/v1/chat/completions", { model: "managed", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: png } }] }] }, { key }),
  );
  assert.deepEqual([error.status, error.code, error.param], [400, "invalid_parameter", "messages[0].content[0]"]);
});

/** The key a managed llama-server took from its environment (readable by our own user only). */
function keyOf(pid: number): string | undefined {
  const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
  return environ.find((v) => v.startsWith("LLAMA_API_KEY="))?.slice("LLAMA_API_KEY=".length);
}

test("issue 29.13 the managed llama-server refuses a request without its per-run key, and the key is not on its command line", async () => {
  const { pid, port } = engineOf("managed-json")!.processInfo!;
  const ask = (headers: Record<string, string> = {}) =>
    fetch(`http://127.0.0.1:${port}/tokenize`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ content: "hi" }) });
  const anonymous = await ask();
  assert.equal(anonymous.status, 401, "another local user cannot use the loopback port");
  await anonymous.arrayBuffer();
  const key = keyOf(pid!);
  assert.ok(key && key.length >= 40, "a random key, given in the environment");
  assert.equal((await ask({ authorization: `Bearer ${key}` })).status, 200);
  const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  assert.ok(!cmdline.includes(key), "the key is not on the command line, which every local user can read");
  assert.doesNotMatch(cmdline, /api-key/);
  assert.notEqual(keyOf(engineOf("managed-embed")!.processInfo!.pid!), key, "each process has its own key");
});

test("llama-server engine: the process samples as the in-process engine does (temperature and top_p 1, top-k and min-p off), not with llama-server's defaults", async () => {
  const { pid, port } = engineOf("managed-json")!.processInfo!;
  const props = await fetch(`http://127.0.0.1:${port}/props`, { headers: { authorization: `Bearer ${keyOf(pid!)}` } });
  assert.equal(props.status, 200);
  const { params } = ((await props.json()) as { default_generation_settings: { params: Record<string, number> } }).default_generation_settings;
  assert.deepEqual({ temperature: params.temperature, top_k: params.top_k, top_p: params.top_p, min_p: params.min_p }, { temperature: 1, top_k: 0, top_p: 1, min_p: 0 });
});

test("llama-server engine: a crashed process gets 503 model_loading, is restarted with backoff on a port of its own, and serves again", async (t) => {
  const engine = engineOf("managed")!;
  const before = engine.processInfo!;
  process.kill(before.pid!, "SIGKILL");
  // Another local process takes the port the crashed one had: the restart must neither need it nor talk to it.
  const seen: string[] = [];
  const impostor: NetServer = createServer((socket) => socket.once("data", (d) => seen.push(d.toString("latin1").split("\r\n")[0])).on("error", () => undefined));
  t.after(() => impostor.close());
  for (let i = 0; i < 50; i++) {
    const bound = await new Promise<boolean>((resolve) => {
      impostor.once("error", () => resolve(false));
      impostor.listen(before.port, "127.0.0.1", () => resolve(true));
    });
    if (bound) break;
    await sleep(20);
  }
  assert.ok(impostor.listening, "the old port is free once the process is gone");
  for (let i = 0; i < 50 && engine.processInfo!.pid === before.pid && (await srv.get("/healthz")).ok; i++) {
    const res = await srv.post("/v1/chat/completions", { model: "managed", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }, { key });
    if (res.status === 503) {
      const error = await errorOf(res);
      assert.equal(error.code, "model_loading");
      break;
    }
    await res.arrayBuffer();
    await sleep(20);
  }
  let answered = false;
  for (let i = 0; i < 100 && !answered; i++) {
    const res = await srv.post("/v1/chat/completions", { model: "managed", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }, { key });
    answered = res.status === 200;
    await res.arrayBuffer();
    if (!answered) await sleep(100);
  }
  assert.ok(answered, "the model serves again after the restart");
  const after = engine.processInfo!;
  assert.equal(after.restarts, 1);
  assert.notEqual(after.pid, before.pid);
  assert.notEqual(after.port, before.port, "the restart bound a port of its own");
  assert.deepEqual(seen, [], "nothing (health checks included) was sent to the port's new holder");
});
