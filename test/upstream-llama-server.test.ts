import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import { apiErrorOf } from "./helpers/errors.ts";
import { startLlamaServer, type LlamaServer } from "../harness/llama-server.ts";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";
import { shapedModel } from "../harness/shaped-model.ts";
import { assertChatFraming, parseSse, readSse, sseFrames } from "./helpers/sse.ts";

/**
 * A real third-party upstream: llama.cpp's llama-server (built from the source node-llama-cpp ships), serving
 * stories260K and the SmolLM2-shaped model, behind a real Modelgate node.
 */
let peer: LlamaServer;
let slowPeer: LlamaServer;
let front: TestServer;
let key: string;

before(async () => {
  [peer, slowPeer] = await Promise.all([
    startLlamaServer(path.join(modelsDir, "stories260K.gguf"), ["-c", "256", "-np", "1", "-t", "1"]),
    startLlamaServer(shapedModel(), ["-c", "1024", "-np", "1", "-t", "1"]),
  ]);
  const upstream = (server: LlamaServer, extra: Record<string, unknown> = {}) => ({
    engine: "upstream",
    protocol: "openai",
    upstreams: [{ url: `${server.origin}/v1`, model: "stories260K" }],
    ...extra,
  });
  front = await startServer({
    models: [
      { id: "ls", capabilities: ["chat"], ...upstream(peer, { tokenize: "llama-server" }) },
      { id: "ls-mapped", capabilities: ["chat"], ...upstream(peer) },
      { id: "ls-slow", capabilities: ["chat"], ...upstream(slowPeer) },
    ],
  });
  key = (await front.createKey()).key;
});

after(async () => {
  await front?.close();
  await Promise.all([peer?.stop(), slowPeer?.stop()]);
});

const once = [{ role: "user" as const, content: "Once upon a time" }];

test("§6 framing byte for byte over llama-server's stream; the text and usage are llama-server's", async () => {
  const ask = { messages: once, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true } };
  const direct = await peer.fetch("/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "x", ...ask }) });
  const directBody = parseSse(await direct.text());
  const directText = directBody.events.map((e) => e.choices[0]?.delta?.content ?? "").join("");
  const directUsage = directBody.events.at(-1).usage;

  const res = await front.post("/v1/chat/completions", { model: "ls", ...ask }, { key });
  assert.equal(res.status, 200);
  const viaFront = assertChatFraming(await readSse(res), "ls");
  assert.ok(directText.length > 0);
  assert.equal(viaFront.content, directText);
  assert.equal(viaFront.finishReason, "length");
  assert.deepEqual(viaFront.usage, { prompt_tokens: directUsage.prompt_tokens, completion_tokens: 24, total_tokens: directUsage.prompt_tokens + 24 });
  assert.doesNotMatch(JSON.stringify(viaFront), /system_fingerprint|timings/);
});

test("non-stream chat through llama-server with the openai client", async () => {
  const res = await front.openai(key).chat.completions.create({ model: "ls", messages: once, max_tokens: 12, temperature: 0 });
  assert.equal(res.model, "ls");
  assert.equal(res.choices[0].finish_reason, "length");
  assert.equal(res.usage!.completion_tokens, 12);
  assert.ok(res.choices[0].message.content!.length > 0);
});

test("context_length_exceeded counted with llama-server's /apply-template + /tokenize, its window read from /props", async () => {
  const long = [{ role: "user" as const, content: "Once upon a time there was a girl. ".repeat(40) }];
  const err = await apiErrorOf(front.openai(key).chat.completions.create({ model: "ls", messages: long, max_tokens: 8 }));
  assert.equal(err.status, 400);
  assert.equal(err.code, "context_length_exceeded");
  assert.equal(err.param, "messages");
  assert.match(err.message, /context window is 256 tokens/);
});

test("context_length_exceeded mapped from llama-server's own exceed_context_size_error (tokenize: none)", async () => {
  const long = [{ role: "user" as const, content: "Once upon a time there was a girl. ".repeat(40) }];
  const err = await apiErrorOf(front.openai(key).chat.completions.create({ model: "ls-mapped", messages: long, max_tokens: 8 }));
  assert.equal(err.status, 400);
  assert.equal(err.code, "context_length_exceeded");
  assert.equal(err.param, "messages");
  // Our own words: the upstream's error text goes to the log only (issue 29.12).
  assert.match(err.message, /exceed the model's context window/);
  assert.doesNotMatch(err.message, /exceeds the available context size/);
});

test("a client disconnect mid-stream stops llama-server's generation: its slot is idle again within 1 s", async () => {
  const controller = new AbortController();
  const res = await front.post("/v1/chat/completions", { model: "ls-slow", messages: once, max_tokens: 900, stream: true }, { key, signal: controller.signal });
  const processing = async () => ((await (await slowPeer.fetch("/slots")).json()) as { is_processing: boolean }[])[0].is_processing;
  let frames = 0;
  for await (const frame of sseFrames(res)) {
    if (frame !== "[DONE]" && frame.choices?.[0]?.delta?.content) frames++;
    if (frames === 3) break;
  }
  assert.equal(await processing(), true, "llama-server is generating");
  const aborted = Date.now();
  controller.abort();
  let busy = true;
  while (busy && Date.now() - aborted < 1000) {
    await new Promise((r) => setTimeout(r, 25));
    busy = await processing();
  }
  assert.equal(busy, false, `llama-server's slot is idle ${Date.now() - aborted} ms after the disconnect`);
});
