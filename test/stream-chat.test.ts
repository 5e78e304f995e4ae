import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { recordingEngines } from "./helpers/engines.ts";
import type { LlamaEngine } from "../src/engines/llama/llama-engine.ts";
import { parseSse, sseFrames } from "./helpers/sse.ts";

let srv: TestServer;
let key: string;
const engines = recordingEngines();

const stories = path.join(modelsDir, "stories260K.gguf");

before(async () => {
  srv = await startServer({
    models: [
      // 200 streams queue at once in the abort test: on a loaded machine the last may wait past the default
      // maxQueueWait (30 s), which is not what that test is about.
      { id: "stories", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 256, parallel: 4, threads: 1, queueSize: 256, maxQueueWait: "10m" },
      { id: "single", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1, queueSize: 1 },
      { id: "batching", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 256, parallel: 4, threads: 1 },
      // The placement test counts on exactly 4 sequences.
      { id: "neighbours", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 256, parallel: 4, threads: 1, fairShareReserve: 0 },
      { id: "fair", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 256, parallel: 2, threads: 1 },
      { id: "lazy", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1, load: "lazy" },
      { id: "doomed", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 2048, parallel: 1, threads: 1 },
    ],
  }, { engines: engines.registry });
  key = (await srv.createKey()).key;
});

after(async () => {
  await srv?.close();
});

const once = [{ role: "user", content: "Once upon a time" }];

const post = (body: Record<string, unknown>, signal?: AbortSignal) => srv.post("/v1/chat/completions", body, { key, signal });

interface Chunk {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: { index: number; delta: Record<string, unknown>; finish_reason: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}

/** The shared SSE reader (it checks the `data: <json>\n\n` framing byte for byte), typed for this file. */
function parseEvents(raw: string): { chunks: Chunk[]; done: boolean } {
  const { events, done } = parseSse(raw);
  return { chunks: events as Chunk[], done };
}

test("§6 stream framing: role chunk first, null finish_reason in the middle, empty final delta, [DONE], one id and created", async () => {
  const res = await post({ model: "stories", messages: once, max_tokens: 20, temperature: 0, stream: true });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type")!, /^text\/event-stream/);
  assert.ok(res.headers.get("x-request-id"));
  const { chunks, done } = parseEvents(await res.text());
  assert.ok(done, "terminated by data: [DONE]");
  assert.ok(chunks.length >= 3);
  assert.deepEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" });
  assert.equal(chunks[0].choices[0].finish_reason, null);
  for (const c of chunks.slice(1, -1)) {
    assert.equal(c.choices[0].finish_reason, null);
    assert.deepEqual(Object.keys(c.choices[0].delta), ["content"]);
  }
  const last = chunks.at(-1)!;
  assert.deepEqual(last.choices[0].delta, {});
  assert.equal(last.choices[0].finish_reason, "length");
  assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
  assert.equal(new Set(chunks.map((c) => c.created)).size, 1);
  for (const c of chunks) {
    assert.equal(c.object, "chat.completion.chunk");
    assert.equal(c.model, "stories");
    assert.equal(c.choices[0].index, 0);
    assert.equal("usage" in c, false, "no usage field unless stream_options.include_usage");
  }
  const streamed = chunks.map((c) => c.choices[0].delta.content ?? "").join("");
  const plain = await post({ model: "stories", messages: once, max_tokens: 20, temperature: 0 });
  const body = (await plain.json()) as { choices: { message: { content: string } }[] };
  assert.equal(streamed, body.choices[0].message.content);
});

test("§6 stream_options.include_usage adds the usage chunk with empty choices before [DONE]", async () => {
  const res = await post({ model: "stories", messages: once, max_tokens: 9, temperature: 0, stream: true, stream_options: { include_usage: true } });
  const { chunks, done } = parseEvents(await res.text());
  assert.ok(done);
  const usageChunk = chunks.at(-1)!;
  assert.deepEqual(usageChunk.choices, []);
  assert.equal(usageChunk.usage!.completion_tokens, 9);
  assert.equal(usageChunk.usage!.total_tokens, usageChunk.usage!.prompt_tokens + 9);
  for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
  assert.equal(chunks.at(-2)!.choices[0].finish_reason, "length");
});

test("§4.2 stop streamed: a multi-token stop is excluded and text that may begin it is held back", async () => {
  const full = await post({ model: "stories", messages: once, max_tokens: 30, temperature: 0 });
  const text = ((await full.json()) as { choices: { message: { content: string } }[] }).choices[0].message.content;
  const at = text.indexOf("little girl");
  assert.ok(at > 0);
  const res = await post({ model: "stories", messages: once, max_tokens: 30, temperature: 0, stream: true, stop: "little girl" });
  const { chunks } = parseEvents(await res.text());
  const pieces = chunks.map((c) => (c.choices[0]?.delta.content as string | undefined) ?? "");
  assert.equal(pieces.join(""), text.slice(0, at));
  assert.ok(!pieces.some((p) => p.includes("little")), "the start of the stop string never went out");
  assert.equal(chunks.at(-1)!.choices[0].finish_reason, "stop");
});

test("§6 the official client streams the same text", async () => {
  const client = srv.openai(key);
  const stream = await client.chat.completions.create({ model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 15, temperature: 0, stream: true });
  let text = "";
  let finish: string | null = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.match(text, /^, there was a little/);
  assert.equal(finish, "length");
});

test("§4.2 rule 4 an error before the first token is a normal JSON error, not a stream", async () => {
  const res = await post({ model: "stories", messages: once, max_tokens: 500, stream: true });
  assert.equal(res.status, 400);
  assert.match(res.headers.get("content-type")!, /application\/json/);
  const body = (await res.json()) as { error: { code: string; param: string } };
  assert.equal(body.error.code, "context_length_exceeded");
  assert.equal(body.error.param, "messages");
});

/**
 * Records the sequence id of every token of each llama_decode of the model's context (node-llama-cpp 3.21.1's addon,
 * wrapped): its length is the decode's size, and llama.cpp computes it in one pass only where the ids run
 * consecutively upward (one KV stream per sequence: llama_batch_allocr::split_equal).
 */
function decodes(engine: LlamaEngine): number[][] {
  const holder = (engine as unknown as { context: { _ctx: Record<string, (...a: unknown[]) => unknown> } }).context;
  const addon = holder._ctx;
  assert.equal(typeof addon.addToBatch, "function", "node-llama-cpp's context addon has initBatch/addToBatch/decodeBatch");
  const batches: number[][] = [];
  let batch: number[] = [];
  holder._ctx = new Proxy(addon, {
    get: (target, key) => {
      if (key === "initBatch") return (n: number) => ((batch = []), target.initBatch!(n));
      if (key === "addToBatch")
        return (sequenceId: number, first: number, tokens: Uint32Array, logits: Uint32Array) => {
          for (let i = 0; i < tokens.length; i++) batch.push(sequenceId);
          return target.addToBatch!(sequenceId, first, tokens, logits);
        };
      if (key === "decodeBatch") return () => (batches.push(batch), target.decodeBatch!());
      const value = target[key as string];
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return batches;
}

async function fourStreams(): Promise<{ events: { stream: number; t: number }[]; finished: number[] }> {
  const events: { stream: number; t: number }[] = [];
  const finished: number[] = [];
  await Promise.all(
    [0, 1, 2, 3].map(async (n) => {
      const res = await post({ model: "batching", messages: once, max_tokens: 120, temperature: 1, seed: n, stream: true });
      for await (const frame of sseFrames(res)) if (frame.choices?.[0]?.delta?.content) events.push({ stream: n, t: performance.now() });
      finished.push(n);
    }),
  );
  return { events, finished };
}

test("continuous batching: 4 concurrent streams on parallel 4 interleave, on fresh sequences and again on the same ones", async () => {
  for (const round of [1, 2]) {
    const { events, finished } = await fourStreams();
    // Before the first stream finished, every stream had already received content.
    const firstDone = events.filter((e) => e.stream === finished[0]).at(-1)!.t;
    for (const n of [0, 1, 2, 3]) {
      const before = events.filter((e) => e.stream === n && e.t < firstDone).length;
      assert.ok(before >= 2, `round ${round}: stream ${n} got ${before} frames before stream ${finished[0]} ended`);
    }
  }
});

test("continuous batching: while 4 streams generate, each llama_decode carries the next token of all 4, in one pass", async () => {
  const engine = engines.loaded(srv, "batching") as LlamaEngine;
  const batches = decodes(engine);
  const tokens = await Promise.all(
    [0, 1, 2, 3].map(async () => {
      const res = await post({ model: "batching", messages: once, max_tokens: 60, temperature: 0 });
      return ((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens;
    }),
  );
  // Same prompt, temperature 0: the four generate the same number of tokens. After the decode where all four first
  // meet (their prompts, in the order they arrived) and up to the last, every decode carries all four, in one pass
  // (ids ascending by one); before and after, requests that arrived earlier or later run alone.
  assert.equal(new Set(tokens).size, 1);
  const full = batches.map((ids, i) => (ids.length === 4 && new Set(ids).size === 4 ? i : -1)).filter((i) => i >= 0);
  assert.ok(full.length >= tokens[0]! / 2, `${full.length} decodes carried all 4 streams (sizes ${batches.map((b) => b.length).join(",")})`);
  const steady = batches.slice(full[1], full.at(-1)! + 1);
  assert.ok(
    steady.every((ids) => ids.length === 4 && ids.every((id, i) => i === 0 || id === ids[i - 1]! + 1)),
    `sequence ids per decode while all 4 generate: ${steady.map((ids) => ids.join("")).join(" ")}`,
  );
  assert.ok(batches.length <= tokens[0]! + 8, `${batches.length} llama_decode calls for 4 x ${tokens[0]} tokens`);
});

test("continuous batching: a second concurrent request takes the free sequence next to the busy one, so each decode stays one pass", async () => {
  const engine = engines.loaded(srv, "neighbours") as LlamaEngine;
  const complete = async (content: string, max_tokens: number) => {
    const res = await post({ model: "neighbours", messages: [{ role: "user", content }], max_tokens, temperature: 0 });
    assert.equal(res.status, 200);
    await res.json();
  };
  // One after another on fresh sequences: 3 gets about 20 tokens, 2 and 1 about 60 each; 0 stays empty.
  await complete("The cat sat", 16);
  await complete("A dog ran", 56);
  await complete("The sun is hot", 56);
  const batches = decodes(engine);
  // A stream takes the empty sequence 0. The next request would throw away least on 3 (about 5 tokens' worth less
  // than on 1, well within what the engine treats as equal), but 1 keeps the busy ids consecutive.
  const frames = sseFrames(await post({ model: "neighbours", messages: once, max_tokens: 200, temperature: 0, stream: true }));
  while (!(await frames.next()).value?.choices?.[0]?.delta?.content);
  await complete("Tom had two dogs", 20);
  while (!(await frames.next()).done);
  const both = batches.filter((ids) => ids.length === 2 && ids[0] !== ids[1]);
  assert.ok(both.length >= 10, `${both.length} decodes carried both requests`);
  assert.ok(both.every((ids) => ids.join() === "0,1"), `sequence ids per decode: ${both.map((ids) => ids.join("")).join(" ")}`);
});

test("fair share in-process: while A's generations hold both slots, B's request starts at once on the reserve sequence and decodes alone; A's go on after it", async () => {
  const engine = engines.loaded(srv, "fair") as LlamaEngine;
  const a = await srv.createKey();
  const b = await srv.createKey();
  const streamA = async () => sseFrames(await srv.post("/v1/chat/completions", { model: "fair", messages: once, max_tokens: 200, temperature: 0, stream: true }, { key: a.key }));
  const [a1, a2] = await Promise.all([streamA(), streamA()]);
  for (const frames of [a1, a2]) while (!(await frames.next()).value?.choices?.[0]?.delta?.content);
  const batches = decodes(engine);
  const res = await srv.post("/v1/chat/completions", { model: "fair", messages: [{ role: "user", content: "The cat sat" }], max_tokens: 24, temperature: 0 }, { key: b.key });
  assert.equal(res.status, 200);
  const { usage } = (await res.json()) as { usage: { completion_tokens: number } };
  const during = batches.splice(0);
  // A's generations are still open: B did not wait for one of their slots.
  assert.ok(engine.lockstepStats.generations >= 2, `A's generations are open (${engine.lockstepStats.generations})`);
  // Every decode while B generated carried B's token alone (no decode carried all three).
  const alone = during.filter((ids) => ids.length === 1);
  assert.ok(alone.length >= usage.completion_tokens - 2, `decodes while B ran: ${during.map((ids) => ids.join("")).join(" ")}`);
  assert.ok(during.every((ids) => new Set(ids).size < 3), `decodes while B ran: ${during.map((ids) => ids.join("")).join(" ")}`);
  for (const frames of [a1, a2]) {
    let done = false;
    for await (const frame of frames) done = frame === "[DONE]";
    assert.ok(done, "A's stream ends normally");
  }
});

test("abort: 200 streams aborted mid-generation free every sequence; the next request is served at once", async () => {
  const runner = srv.server.ctx.catalog.get("stories");
  let aborted = 0;
  await Promise.all(
    Array.from({ length: 200 }, async (_, n) => {
      const controller = new AbortController();
      const res = await post({ model: "stories", messages: once, max_tokens: 200, temperature: 1, seed: n, stream: true }, controller.signal);
      // Not `assert.equal(res.status, 200, await res.clone().text())`: its message is read first, and reading a
      // clone of a stream waits for its end, so every stream ran to max_tokens before this test aborted it.
      if (res.status !== 200) assert.fail(`status ${res.status}: ${await res.text()}`);
      let seen = 0;
      for await (const frame of sseFrames(res)) {
        assert.notEqual(frame, "[DONE]", "stream ended before it was aborted");
        if (frame.choices?.[0]?.delta?.content) seen++;
        if (seen >= 2) break;
      }
      assert.equal(seen, 2, "stream ended before it was aborted");
      controller.abort();
      aborted++;
    }),
  );
  assert.equal(aborted, 200);
  const deadline = Date.now() + 5000;
  while ((runner.stats().active > 0 || runner.stats().queueDepth > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  assert.equal(runner.stats().active, 0);
  assert.equal(runner.stats().queueDepth, 0);
  const engine = engines.loaded(srv, "stories") as LlamaEngine;
  assert.equal(engine.sequencesLeft, 5, "every llama sequence is free (parallel 4 and the fair-share reserve)");
  assert.equal(engine.lockstepStats.generations, 0, "no generation is left open in the lockstep gate");
  const started = performance.now();
  const res = await post({ model: "stories", messages: once, max_tokens: 5, temperature: 0 });
  assert.equal(res.status, 200);
  assert.ok(performance.now() - started < 1000, `served in ${performance.now() - started} ms`);
});

test("§7 a full queue is 503 overloaded with Retry-After and retry-after-ms", async () => {
  const responses = await Promise.all(Array.from({ length: 6 }, () => post({ model: "single", messages: once, max_tokens: 200 })));
  const overloaded = responses.filter((r) => r.status === 503);
  assert.ok(overloaded.length >= 1, responses.map((r) => r.status).join(","));
  const body = (await overloaded[0].json()) as { error: { type: string; code: string; param: null } };
  assert.equal(body.error.type, "server_error");
  assert.equal(body.error.code, "overloaded");
  assert.equal(body.error.param, null);
  assert.ok(Number(overloaded[0].headers.get("retry-after")) >= 1);
  assert.ok(Number(overloaded[0].headers.get("retry-after-ms")) >= 1000);
  for (const r of responses) if (r.status === 200) await r.json();
});

test("§7 a lazily loaded model answers 503 model_loading with Retry-After until it is ready", async () => {
  const res = await post({ model: "lazy", messages: once, max_tokens: 3 });
  assert.equal(res.status, 503);
  const body = (await res.json()) as { error: { code: string } };
  assert.equal(body.error.code, "model_loading");
  assert.ok(Number(res.headers.get("retry-after")) >= 1);
  assert.ok(res.headers.get("retry-after-ms"));
  const deadline = Date.now() + 30_000;
  let status = 503;
  while (status === 503 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    const again = await post({ model: "lazy", messages: once, max_tokens: 3 });
    status = again.status;
    await again.body?.cancel();
  }
  assert.equal(status, 200);
});

test("§4.2 the openai client raises APIError for a 503 and honours no retries when told", async () => {
  const client = srv.openai(key);
  const errs = await Promise.allSettled(Array.from({ length: 6 }, () => client.chat.completions.create({ model: "single", messages: [{ role: "user", content: "Once" }], max_tokens: 200 })));
  const rejected = errs.filter((e) => e.status === "rejected") as PromiseRejectedResult[];
  assert.ok(rejected.length >= 1);
  assert.ok(rejected[0].reason instanceof OpenAI.APIError);
  assert.equal((rejected[0].reason as InstanceType<typeof OpenAI.APIError>).status, 503);
});

test("decisions.md: an error after the first token is one error event, then the stream closes without [DONE]", async () => {
  const engine = engines.loaded(srv, "doomed")!;
  const res = await post({ model: "doomed", messages: once, max_tokens: 2000, temperature: 1, seed: 3, stream: true });
  assert.equal(res.status, 200);
  const events: any[] = [];
  for await (const frame of sseFrames(res)) {
    events.push(frame);
    if (events.length === 2 && frame.choices?.[0]?.delta?.content !== undefined) {
      // The model's context goes away under the running generation: a genuine engine failure mid-stream.
      void engine.unload();
    }
  }
  assert.ok(!events.includes("[DONE]"), "no [DONE] after an error");
  const last = events.at(-1) as { error: { type: string; code: string; message: string; param: null } };
  assert.equal(last.error.type, "server_error");
  assert.equal(last.error.code, "internal_error");
  assert.equal(last.error.param, null);
  assert.deepEqual(events[0].choices[0].delta, { role: "assistant", content: "" });
});
