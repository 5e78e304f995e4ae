import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { toFile } from "openai";
import { apiErrorOf, errorOf } from "./helpers/errors.ts";
import { usageRows } from "./helpers/usage.ts";
import { modelsDir, startServer, tempDir, type TestServer } from "../harness/server.ts";
import { shapedModel } from "../harness/shaped-model.ts";
import { assertChatFraming, readSse, sseFrames } from "./helpers/sse.ts";

/**
 * The upstream engine in front of a real Modelgate node (protocol: modelgate), all five endpoints, over real HTTPS
 * with the back node's self-signed certificate given as the upstream's `ca`. The front node holds a key of the
 * back node; clients use keys of the front node.
 */
const stories = path.join(modelsDir, "stories260K.gguf");
const adminToken = "BUFDDF-D5DlTxDUOCq3RJTR6HYRO2-tNh1g_dfchZC0";

let back: TestServer;
let front: TestServer;
let backKey: { key: string; id: string; accountId: string };
let frontKey: { key: string; id: string; accountId: string };
let caFile: string;

before(async () => {
  const dir = tempDir("upstream-test-");
  back = await startServer({
    adminToken,
    models: [
      { id: "stories", engine: "llama", source: stories, capabilities: ["chat", "json"], contextSize: 256, parallel: 2, threads: 1 },
      { id: "bert-embed", engine: "llama", source: path.join(modelsDir, "forged/bert-embed-tiny.gguf"), capabilities: ["embeddings"], threads: 1 },
      { id: "bert-rerank", engine: "llama", source: path.join(modelsDir, "forged/bert-rerank-tiny.gguf"), capabilities: ["rerank"], threads: 1 },
      { id: "whisper", engine: "onnx", source: path.join(modelsDir, "forged/whisper-scripted"), capabilities: ["transcriptions"], threads: 1 },
      { id: "shaped", engine: "llama", source: shapedModel(), capabilities: ["chat"], contextSize: 1024, parallel: 1, threads: 1 },
    ],
  });
  backKey = await back.createKey();
  caFile = path.join(dir, "back-ca.pem");
  writeFileSync(caFile, back.ca);
  process.env.MG_TEST_BACK_KEY = backKey.key;
  const upstream = (model: string, extra: Record<string, unknown> = {}) => ({
    engine: "upstream",
    protocol: "modelgate",
    upstreams: [{ url: back.baseURL, apiKey: backKey.key, model, ca: caFile }],
    ...extra,
  });
  front = await startServer({
    models: [
      { id: "up-stories", capabilities: ["chat", "json"], ...upstream("stories") },
      { id: "up-stories-mapped", capabilities: ["chat"], ...upstream("stories", { tokenize: "none" }) },
      { id: "up-embed", capabilities: ["embeddings"], ...upstream("bert-embed") },
      { id: "up-rerank", capabilities: ["rerank"], ...upstream("bert-rerank") },
      { id: "up-whisper", capabilities: ["transcriptions"], ...upstream("whisper") },
      { id: "up-shaped", capabilities: ["chat"], ...upstream("shaped") },
      // Its health checks fail too (the same TLS refusal): rare ones, so that a slow run's request still reaches it
      // rather than finding it ejected (503).
      { id: "up-untrusted", capabilities: ["chat"], engine: "upstream", protocol: "modelgate", upstreams: [{ url: back.baseURL, apiKey: backKey.key, model: "stories" }], health: { interval: "1h" } },
      { id: "up-wrong-key", capabilities: ["chat"], ...upstream("stories"), upstreams: [{ url: back.baseURL, apiKey: "mg-not-a-key", model: "stories", ca: caFile }] },
    ],
  });
  frontKey = await front.createKey();
});

after(async () => {
  await front?.close();
  await back?.close();
});

const once = [{ role: "user" as const, content: "Once upon a time" }];

test("upstream chat (non-stream, openai client) answers what the back node answers, under the front's id and model", async () => {
  const direct = await back.openai(backKey.key).chat.completions.create({ model: "stories", messages: once, max_tokens: 16, temperature: 0 });
  const viaFront = await front.openai(frontKey.key).chat.completions.create({ model: "up-stories", messages: once, max_tokens: 16, temperature: 0 });
  assert.equal(viaFront.model, "up-stories");
  assert.match(viaFront.id, /^chatcmpl-/);
  assert.notEqual(viaFront.id, direct.id);
  assert.equal(viaFront.choices[0].message.content, direct.choices[0].message.content);
  assert.equal(viaFront.choices[0].finish_reason, "length");
  assert.deepEqual(viaFront.usage, direct.usage);
});

test("§6 framing byte for byte over a Modelgate node's stream; the text and usage are the back node's", async () => {
  const body = { messages: once, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true } };
  const direct = assertChatFraming(await readSse(await back.post("/v1/chat/completions", { model: "stories", ...body }, { key: backKey.key })), "stories");
  const res = await front.post("/v1/chat/completions", { model: "up-stories", ...body }, { key: frontKey.key });
  assert.equal(res.status, 200);
  const viaFront = assertChatFraming(await readSse(res), "up-stories");
  assert.ok(direct.content.length > 0);
  assert.equal(viaFront.content, direct.content);
  assert.equal(viaFront.finishReason, "length");
  assert.deepEqual(viaFront.usage, direct.usage);

  // The official client reads the same stream.
  const stream = await front.openai(frontKey.key).chat.completions.create({ model: "up-stories", messages: once, max_tokens: 24, temperature: 0, stream: true });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
  assert.equal(text, direct.content);
});

test("usage is recorded per key on the front node, and on the back node under the front's key", async () => {
  const { key, id, accountId } = await front.createKey();
  const res = await front.openai(key).chat.completions.create({ model: "up-stories", messages: once, max_tokens: 10, temperature: 0 });
  const rows = await usageRows(front.server, front.config, accountId, id);
  assert.deepEqual(rows, [["up-stories", "chat", 1, res.usage!.prompt_tokens, res.usage!.completion_tokens]]);
  assert.equal(res.usage!.completion_tokens, 10);
  const backRows = await usageRows(back.server, back.config, backKey.accountId, backKey.id);
  assert.ok(backRows.some(([model, endpoint]) => model === "stories" && endpoint === "chat"));
});

test("embeddings through the upstream: float and base64 carry the back node's vectors", async () => {
  const input = ["The cat sat on the mat.", "Paris is the capital of France."];
  const direct = await back.openai(backKey.key).embeddings.create({ model: "bert-embed", input, encoding_format: "float" });
  const client = front.openai(frontKey.key);
  const floats = await client.embeddings.create({ model: "up-embed", input, encoding_format: "float" });
  assert.equal(floats.model, "up-embed");
  assert.equal(floats.data.length, 2);
  for (const [i, d] of floats.data.entries()) {
    assert.equal(d.index, i);
    assert.deepEqual(d.embedding.map((x) => Math.fround(x)), direct.data[i].embedding.map((x) => Math.fround(x)));
  }
  assert.deepEqual(floats.usage, direct.usage);
  // The openai client asks for base64 by default and decodes it.
  const decoded = await client.embeddings.create({ model: "up-embed", input });
  assert.deepEqual(decoded.data[1].embedding.map((x) => Math.fround(x)), direct.data[1].embedding.map((x) => Math.fround(x)));
});

test("transcription through the upstream: the file goes up undecoded and the scripted transcript comes back", async () => {
  const scripted = JSON.parse(readFileSync(path.join(modelsDir, "forged/whisper-scripted/scripted.json"), "utf8")) as { transcribe: { text: string } };
  const bytes = readFileSync(path.join(modelsDir, "jfk.mp3"));
  const client = front.openai(frontKey.key);
  const json = await client.audio.transcriptions.create({ model: "up-whisper", file: await toFile(bytes, "jfk.mp3") });
  assert.equal(json.text, scripted.transcribe.text.trim());
  const verbose = await client.audio.transcriptions.create({ model: "up-whisper", file: await toFile(bytes, "jfk.mp3"), response_format: "verbose_json" });
  const direct = await back.openai(backKey.key).audio.transcriptions.create({ model: "whisper", file: await toFile(bytes, "jfk.mp3"), response_format: "verbose_json" });
  assert.deepEqual(verbose, direct, "language, duration, segments and text as the back node reports them");
  assert.ok(verbose.segments!.length > 0);
  const text = await front.post("/v1/audio/transcriptions", formOf(bytes, "up-whisper", "text"), { key: frontKey.key });
  assert.equal(await text.text(), scripted.transcribe.text.trim());
  // Not audio: the back node's 400 on `file` reaches the client as such.
  const bad = await front.post("/v1/audio/transcriptions", formOf(Buffer.from("not audio at all"), "up-whisper", "json"), { key: frontKey.key });
  assert.deepEqual(await errorOf(bad), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "file" });
});

function formOf(bytes: Buffer, model: string, responseFormat: string): FormData {
  const form = new FormData();
  form.append("file", new Blob([new Uint8Array(bytes)]), "jfk.mp3");
  form.append("model", model);
  form.append("response_format", responseFormat);
  return form;
}

test("rerank through the upstream (plain HTTP): the back node's scores, top_n applied here", async () => {
  const body = { query: "What is the capital of France?", documents: ["The cat sat on the mat.", "Paris is the capital of France.", "France is a country in Europe."] };
  const direct = (await (await back.post("/v1/rerank", { model: "bert-rerank", ...body }, { key: backKey.key })).json()) as { results: unknown[] };
  const res = await front.post("/v1/rerank", { model: "up-rerank", ...body, top_n: 2 }, { key: frontKey.key });
  assert.equal(res.status, 200);
  const viaFront = (await res.json()) as { model: string; results: unknown[] };
  assert.equal(viaFront.model, "up-rerank");
  assert.deepEqual(viaFront.results, direct.results.slice(0, 2));
});

test("context_length_exceeded: counted with the back node's /v1/tokenize, answered by the front before any generation", async () => {
  const long = [{ role: "user" as const, content: "Once upon a time there was a little girl. ".repeat(40) }];
  const err = await apiErrorOf(front.openai(frontKey.key).chat.completions.create({ model: "up-stories", messages: long, max_tokens: 8 }));
  assert.equal(err.status, 400);
  assert.equal(err.code, "context_length_exceeded");
  assert.equal(err.param, "messages");
  assert.match(err.message, /context window is 256 tokens/);

  // Room for the prompt, not for max_tokens: only the front can know (the back's tokenize saw no max_tokens).
  const count = (await (await back.post("/v1/tokenize", { model: "stories", messages: once }, { key: backKey.key })).json()) as { count: number; max_model_len: number };
  assert.equal(count.max_model_len, 256);
  assert.ok(count.count > 0);
  const over = await apiErrorOf(front.openai(frontKey.key).chat.completions.create({ model: "up-stories", messages: once, max_tokens: 256 - count.count + 1 }));
  assert.equal(over.code, "context_length_exceeded");
  assert.match(over.message, new RegExp(`take ${count.count} tokens and max_tokens asks for ${256 - count.count + 1} more`));
});

test("context_length_exceeded without counting (tokenize: none): the back node's own 400 is mapped", async () => {
  const long = [{ role: "user" as const, content: "Once upon a time there was a little girl. ".repeat(40) }];
  const err = await apiErrorOf(front.openai(frontKey.key).chat.completions.create({ model: "up-stories-mapped", messages: long, max_tokens: 8 }));
  assert.equal(err.status, 400);
  assert.equal(err.code, "context_length_exceeded");
  assert.equal(err.param, "messages");
});

test("a client disconnect mid-stream frees the back node's slot within 1 s", async () => {
  const controller = new AbortController();
  const res = await front.post(
    "/v1/chat/completions",
    { model: "up-shaped", messages: once, max_tokens: 900, stream: true },
    { key: frontKey.key, signal: controller.signal },
  );
  assert.equal(res.status, 200);
  const activeOnBack = async () => {
    const list = (await (await back.get("/admin/v1/models", { key: adminToken })).json()) as { data: { id: string; active: number }[] };
    return list.data.find((m) => m.id === "shaped")!.active;
  };
  let frames = 0;
  try {
    for await (const frame of sseFrames(res)) {
      if (frame !== "[DONE]" && frame.choices?.[0]?.delta?.content) frames++;
      if (frames === 3) break;
    }
  } catch {
    // the abort below ends the read
  }
  assert.equal(frames, 3, "the stream was running");
  assert.equal(await activeOnBack(), 1, "the back node is generating");
  const aborted = Date.now();
  controller.abort();
  let active = 1;
  while (Date.now() - aborted < 1000 && active !== 0) {
    await new Promise((r) => setTimeout(r, 25));
    active = await activeOnBack();
  }
  assert.equal(active, 0, `the back node's slot is free ${Date.now() - aborted} ms after the disconnect`);
});

test("/v1/models lists upstream models like local ones", async () => {
  const list = await front.openai(frontKey.key).models.list();
  const ids = list.data.map((m) => m.id);
  for (const id of ["up-stories", "up-embed", "up-rerank", "up-whisper"]) assert.ok(ids.includes(id), id);
  const model = list.data.find((m) => m.id === "up-stories")!;
  assert.equal(model.object, "model");
  assert.equal(model.owned_by, "modelgate");
});

test("our configuration's faults are 500 internal_error, with nothing of the upstream's answer shown", async () => {
  // TLS stays verified: the back node's self-signed certificate without its `ca` is refused.
  const untrusted = await apiErrorOf(front.openai(frontKey.key).chat.completions.create({ model: "up-untrusted", messages: once, max_tokens: 4 }));
  assert.equal(untrusted.status, 500);
  assert.equal(untrusted.code, "internal_error");
  assert.doesNotMatch(untrusted.message, /cert|TLS|127\.0\.0\.1/i);
  // The back node refuses the front's key (401 there): our config is wrong, not the client's request.
  const refused = await apiErrorOf(front.openai(frontKey.key).chat.completions.create({ model: "up-wrong-key", messages: once, max_tokens: 4 }));
  assert.equal(refused.status, 500);
  assert.equal(refused.code, "internal_error");
  assert.doesNotMatch(refused.message, /api key|401|invalid/i);
});

test("auth, scope and validation happen on the front: a bad request never reaches the back node", async () => {
  const before = (await usageRows(back.server, back.config, backKey.accountId, backKey.id)).reduce((n, r) => n + r[2], 0);
  const noKey = await front.post("/v1/chat/completions", { model: "up-stories", messages: once });
  assert.equal(noKey.status, 401);
  const chatOnly = await front.createKey({ endpoints: ["chat"] });
  const scoped = await front.post("/v1/embeddings", { model: "up-embed", input: "x" }, { key: chatOnly.key });
  assert.deepEqual(await errorOf(scoped), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });
  const invalid = await front.post("/v1/chat/completions", { model: "up-stories", messages: once, temperature: 7 }, { key: frontKey.key });
  assert.deepEqual(await errorOf(invalid), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "temperature" });
  const after = (await usageRows(back.server, back.config, backKey.accountId, backKey.id)).reduce((n, r) => n + r[2], 0);
  assert.equal(after, before);
});
