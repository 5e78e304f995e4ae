// Issue 13: one admission path (prepare → admit → run → release) owned by the scheduler, capabilities as data.
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { Writable } from "node:stream";
import sharp from "sharp";
import { Type } from "@sinclair/typebox";
import type { ModelEntry } from "../src/config/app-config.ts";
import { ConfigError } from "../src/config/load-config.ts";
import type { ChatDelta, Engine, EngineSupport } from "../src/engines/engine.ts";
import type { EngineKind } from "../src/engines/engine-kind.ts";
import { builtInEngines } from "../src/engines/registry.ts";
import type { OnnxWhisperEngine } from "../src/engines/onnx/whisper-engine.ts";
import { repeatedJfk } from "../harness/audio.ts";
import { testConfig } from "../harness/config.ts";
import { modelsDir, runCli, startServer, tempDir, writeConfig } from "../harness/server.ts";
import { recordingEngines } from "./helpers/engines.ts";
import { holdSlot } from "./helpers/runner.ts";
import { until } from "./helpers/wait-for.ts";

const whisperDir = path.join(modelsDir, "forged/whisper-scripted");
const llava = path.join(modelsDir, "forged/llava-tiny");

test("issue 13 a 64 s recording on whisper with parallel 2 never has more than 2 windows in the worker pool, alone or beside a second transcription", async () => {
  const engines = recordingEngines();
  const srv = await startServer({
    models: [{ id: "whisper", engine: "onnx", source: whisperDir, capabilities: ["transcriptions"], threads: 1, parallel: 2 }],
  }, { engines: engines.registry });
  try {
    const { key } = await srv.createKey();
    const recording = repeatedJfk(4, 5);
    assert.equal((recording.length - 44) / 32000, 64);
    const transcribe = async () => {
      const form = new FormData();
      form.set("model", "whisper");
      form.set("language", "en");
      form.set("file", new Blob([new Uint8Array(recording)], { type: "audio/wav" }), "long.wav");
      const res = await srv.post("/v1/audio/transcriptions", form, { key });
      assert.equal(res.status, 200, await res.clone().text());
      return (await res.json()) as { text: string };
    };
    const engine = engines.loaded(srv, "whisper") as OnnxWhisperEngine;

    await transcribe();
    assert.equal(engine.poolStats().peakInFlight, 2, "alone, the recording's windows run two at once");

    const both = await Promise.all([transcribe(), transcribe()]);
    assert.equal(both[0].text, both[1].text);
    assert.equal(engine.poolStats().peakInFlight, 2, "beside a second transcription, still never more than parallel windows in the pool");
    assert.equal(engine.poolStats().inFlight, 0);
  } finally {
    await srv.close();
  }
});

/** A PNG of one colour; a large one makes the VLM's prepare (decoding and processing the image) slow. */
async function pngDataUrl(size: number): Promise<string> {
  const bytes = await sharp({ create: { width: size, height: size, channels: 3, background: { r: 200, g: 10, b: 10 } } }).png().toBuffer();
  return `data:image/png;base64,${bytes.toString("base64")}`;
}

/** Six image requests at once on a VLM with parallel 1 and queueSize 2, counting what the runner holds meanwhile. */
async function burst(size: number, images: number, slotTaken: boolean): Promise<{ statuses: number[]; max: { active: number; queued: number; preparing: number } }> {
  const srv = await startServer({
    models: [{ id: "llava", engine: "onnx", source: llava, capabilities: ["chat", "vision"], threads: 1, parallel: 1, queueSize: 2 }],
  });
  try {
    const { key } = await srv.createKey();
    const url = await pngDataUrl(size);
    const runner = srv.server.ctx.catalog.get("llava");
    // Open six connections first, so the burst arrives together instead of behind six TLS handshakes.
    await Promise.all(Array.from({ length: 6 }, () => srv.get("/v1/models", { key }).then((r) => r.arrayBuffer())));
    // The running request: the model's only slot, held by a request of another key through the scheduler.
    const held = slotTaken ? holdSlot(runner, "another-key") : null;
    if (held) await held.running;
    const max = { active: 0, queued: 0, preparing: 0 };
    const watch = setInterval(() => {
      const s = runner.stats();
      max.active = Math.max(max.active, s.active);
      max.queued = Math.max(max.queued, s.queueDepth);
      max.preparing = Math.max(max.preparing, s.preparing);
    }, 1);
    const body = { model: "llava", messages: [{ role: "user", content: [{ type: "text", text: "What colour?" }, ...Array(images).fill({ type: "image_url", image_url: { url } })] }] };
    const pending = Array.from({ length: 6 }, () => srv.post("/v1/chat/completions", body, { key }));
    if (held) {
      // Release the running request once every other request is decided: queued, or answered.
      let answered = 0;
      for (const p of pending) void p.then(() => answered++, () => answered++);
      const deadline = Date.now() + 10_000;
      while (answered + runner.stats().queueDepth < 6 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      held.release();
    }
    const responses = await Promise.all(pending);
    await held?.done;
    clearInterval(watch);
    for (const res of responses) {
      const json = (await res.json()) as { error?: { code: string; type: string } };
      if (res.status !== 503) continue;
      assert.deepEqual(json.error && { code: json.error.code, type: json.error.type }, { code: "overloaded", type: "server_error" });
      assert.ok(Number(res.headers.get("retry-after")) >= 1, "503 overloaded carries Retry-After");
    }
    const s = runner.stats();
    assert.equal(s.active + s.queueDepth + s.preparing, 0, "everything is released");
    return { statuses: responses.map((r) => r.status).sort(), max };
  } finally {
    await srv.close();
  }
}

test("issue 13 a VLM with parallel 1 and queueSize 2: with its slot busy, 2 image requests wait and the other 4 get 503 overloaded with Retry-After", async () => {
  const { statuses, max } = await burst(48, 2, true);
  assert.deepEqual(statuses, [200, 200, 503, 503, 503, 503]);
  assert.equal(max.active, 1, "one request runs at a time");
  assert.equal(max.queued, 2, "two wait in the queue");
});

test("issue 13 the same under a slow image prepare (4 images of 2400×2400): 1 runs, 2 wait, 3 get 503 overloaded from the bounded prepare stage", async () => {
  const { statuses, max } = await burst(2400, 4, false);
  assert.deepEqual(statuses, [200, 200, 200, 503, 503, 503]);
  assert.equal(max.active, 1);
  assert.ok(max.queued <= 2, `at most 2 wait (saw ${max.queued})`);
  assert.equal(max.preparing, 3, "the prepare stage holds parallel + queueSize requests");
});

test("issue 13 a model entry claiming a capability its engine cannot do fails at start, naming the model and the capability", async () => {
  const raw = { models: [{ id: "encoder-with-tools", engine: "onnx", source: path.join(modelsDir, "forged/bert-embed-tiny"), capabilities: ["embeddings", "tools"] }] };
  assert.throws(() => testConfig(raw, null), (err: unknown) => err instanceof ConfigError && /encoder-with-tools/.test(err.message) && /"tools"/.test(err.message));

  const dir = tempDir();
  const file = writeConfig(dir, { dataDir: path.join(dir, "data"), ...raw });
  const serve = await runCli(["serve", "--config", file, "--port", "0"]);
  assert.equal(serve.code, 1);
  assert.match(serve.stderr, /encoder-with-tools.*cannot do "tools"/);
});

test("issue 13 an engine's own config fields are validated by the schema it declares: an unknown one is named by path", () => {
  const model = { id: "s", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"] };
  assert.throws(() => testConfig({ models: [{ ...model, threds: 1 }] }, null), /unknown key "threds" at models\[0\]\.threds/);
  assert.throws(() => testConfig({ models: [{ ...model, threads: 0 }] }, null), /models\[0\]\.threads/);
  assert.throws(() => testConfig({ models: [{ ...model, engine: "nope" }] }, null), /unknown engine "nope" \(known: llama, onnx, upstream, llama-server\)/);
  assert.equal(testConfig({ models: [model] }, null).models[0].options.threads, 1, "the engine schema's default");
});

/**
 * A test engine registered the same way the built-in ones are (an EngineKind in the registry): it streams one
 * token, then fails the way an engine crash would.
 */
const faultySupport: EngineSupport = { endpoints: ["chat"], features: [], refuses: [] };
const faultyKind: EngineKind = {
  name: "faulty",
  options: Type.Object({}, { additionalProperties: false }),
  localFiles: false,
  defaultParallel: () => 1,
  support: () => faultySupport,
  async create(): Promise<Engine> {
    return {
      support: faultySupport,
      contextSize: 4096,
      load: async () => {},
      unload: async () => {},
      prepareChat: async () => ({ promptTokens: 3, maxTokens: 16 }),
      async *chat(): AsyncIterable<ChatDelta[]> {
        yield [{ type: "content", text: "Once" }];
        await new Promise((resolve) => setTimeout(resolve, 20));
        throw new Error("injected engine crash: CUDA device lost");
      },
    };
  },
};

function logCapture(): { stream: Writable; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { stream, lines };
}

test("issue 13 an engine failure after the first token is logged exactly once at error level with the request id and cause; a disconnect logs no error", async () => {
  const engines = builtInEngines().register(faultyKind);
  const { stream, lines } = logCapture();
  const srv = await startServer(
    {
      models: [
        { id: "faulty", engine: "faulty", capabilities: ["chat"] } satisfies Partial<ModelEntry> & Record<string, unknown>,
        { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 2048, threads: 1, parallel: 1 },
      ],
    },
    { engines, logger: { level: "debug", stream } },
  );
  try {
    const { key } = await srv.createKey();
    const post = (body: Record<string, unknown>, signal?: AbortSignal) =>
      srv.post("/v1/chat/completions", { messages: [{ role: "user", content: "Once upon a time" }], stream: true, ...body }, {
        key,
        signal,
        headers: { "x-request-id": body.model === "faulty" ? "req-faulty-1" : "req-gone-1" },
      });

    const res = await post({ model: "faulty" });
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.match(text, /"content":"Once"/);
    assert.match(text, /data: \{"error":\{"message":"The server had an unexpected error\.","type":"server_error","code":"internal_error","param":null\}\}/);
    assert.doesNotMatch(text, /\[DONE\]/);
    assert.doesNotMatch(text, /CUDA/, "the cause is logged, never sent");

    // A client that goes away mid-stream, and one that goes away before its first token (queued behind it).
    const first = new AbortController();
    const streaming = await post({ model: "stories", max_tokens: 1500, temperature: 1, seed: 1 }, first.signal);
    const reader = streaming.body!.getReader();
    await reader.read();
    const queued = new AbortController();
    const waiting = post({ model: "stories", max_tokens: 10 }, queued.signal).catch((err: unknown) => err);
    await new Promise((resolve) => setTimeout(resolve, 50));
    queued.abort();
    first.abort();
    await waiting;
    await reader.read().catch(() => {});
    const runner = srv.server.ctx.catalog.get("stories");
    const deadline = Date.now() + 5000;
    while ((runner.stats().active > 0 || runner.stats().queueDepth > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await until(() => lines.some((l) => l.reqId === "req-gone-1" && /disconnect/.test(String(l.msg))), "the disconnect's log line", 5000);

    const errors = lines.filter((l) => Number(l.level) >= 50);
    assert.equal(errors.length, 1, JSON.stringify(errors));
    assert.equal(errors[0].reqId, "req-faulty-1");
    assert.match(JSON.stringify(errors[0].err), /injected engine crash: CUDA device lost/);
    assert.ok(lines.some((l) => l.level === 20 && l.reqId === "req-gone-1" && /disconnect/.test(String(l.msg))), "the disconnect is logged at debug level");
  } finally {
    await srv.close();
  }
});

test("issue 13 one capability check, in decisions.md order: endpoint (param model), image part, tools, response_format, logprobs, then refused combinations", async () => {
  const { checkCapabilities } = await import("../src/engines/capabilities.ts");
  const { llamaChatSupport } = await import("../src/engines/llama/llama.support.ts");
  const { AppError } = await import("../src/errors/app-error.ts");
  const entry = (capabilities: string[]) => ({ id: "m", capabilities }) as unknown as ModelEntry;
  const base = { messages: [{ role: "user" as const, content: "hi" }], maxTokens: null, temperature: null, topP: null, seed: null, stop: [], tools: [], toolChoice: "none" as const, responseFormat: "text" as const, topLogprobs: null };
  const tools = [{ name: "f", parameters: { type: "object" } }];
  const image = { role: "user" as const, content: [{ type: "text" as const, text: "x" }, { type: "image" as const, data: new Uint8Array(), mime: "image/png" as const, param: "messages[0].content[1]", urlParam: "messages[0].content[1].image_url.url" }] };
  const paramOf = (fn: () => void) => {
    try {
      fn();
      return "ok";
    } catch (err) {
      assert.ok(err instanceof AppError && err.code === "invalid_parameter");
      return err.param;
    }
  };
  const all = ["chat", "tools", "json", "logprobs"];
  assert.equal(paramOf(() => checkCapabilities(entry(["embeddings"]), llamaChatSupport, "chat", base)), "model");
  assert.equal(paramOf(() => checkCapabilities(entry(["chat"]), llamaChatSupport, "chat", { ...base, messages: [image], tools, responseFormat: "json_object" })), "messages[0].content[1]");
  assert.equal(paramOf(() => checkCapabilities(entry(["chat"]), llamaChatSupport, "chat", { ...base, tools, responseFormat: "json_object" })), "tools");
  assert.equal(paramOf(() => checkCapabilities(entry(["chat", "tools"]), llamaChatSupport, "chat", { ...base, tools, toolChoice: "auto", responseFormat: "json_object" })), "response_format");
  assert.equal(paramOf(() => checkCapabilities(entry(["chat", "json"]), llamaChatSupport, "chat", { ...base, responseFormat: "json_object", topLogprobs: 0 })), "logprobs");
  assert.equal(paramOf(() => checkCapabilities(entry(all), llamaChatSupport, "chat", { ...base, tools, toolChoice: "auto", responseFormat: "json_object" })), "response_format", "tools + JSON mode is refused by the llama engine");
  assert.equal(paramOf(() => checkCapabilities(entry(all), llamaChatSupport, "chat", { ...base, tools, toolChoice: "auto", topLogprobs: 2 })), "logprobs");
  assert.equal(paramOf(() => checkCapabilities(entry(all), llamaChatSupport, "chat", { ...base, responseFormat: "json_object", topLogprobs: 2 })), "logprobs");
  assert.equal(paramOf(() => checkCapabilities(entry(all), llamaChatSupport, "chat", { ...base, tools, toolChoice: "none", responseFormat: "json_object" })), "ok", "tool_choice none leaves tools out of generation");
});
