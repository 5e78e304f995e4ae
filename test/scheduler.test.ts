import { test, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import pino from "pino";
import type { FastifyBaseLogger } from "fastify";
import { ModelRunner } from "../src/scheduler/model-runner.ts";
import type { ModelEntry } from "../src/config/app-config.ts";
import type { Engine } from "../src/engines/engine.ts";
import { llamaChatSupport } from "../src/engines/llama/llama.support.ts";
import { AppError } from "../src/errors/app-error.ts";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { modelEntry } from "./helpers/model-entry.ts";
import { holdSlot } from "./helpers/runner.ts";
import { until, waitFor } from "./helpers/wait-for.ts";

const log = pino({ level: "silent" }) as unknown as FastifyBaseLogger;

function entry(over: Partial<ModelEntry> = {}): ModelEntry {
  // path null: no files to find, so the runner starts "unloaded" rather than "missing".
  return modelEntry({ id: "m", engine: "llama", source: "x", capabilities: ["chat"], parallel: 1, queueSize: 8 }, { path: null, ...over });
}

const idleEngine = async (): Promise<Engine> => ({
  support: llamaChatSupport,
  contextSize: 16,
  load: async () => {},
  unload: async () => {},
});

test("model runner: with no service charged, waiting accounts are served least recently served first; a full queue pushes out the heaviest account's newest waiter", async () => {
  const runner = new ModelRunner(entry({ parallel: 1, queueSize: 3 }), llamaChatSupport, idleEngine, log);
  await runner.load();
  const first = holdSlot(runner, "a");
  await first.running;
  const served: string[] = [];
  const wait = (key: string) => {
    const request = holdSlot(runner, key);
    void request.running.then(() => {
      served.push(key);
      request.release();
    });
    return request.done;
  };
  const waiting = [wait("a"), wait("b")];
  const pushedOut = wait("a");
  await until(() => runner.stats().queueDepth === 3, "three requests queued");
  // c holds nothing, below its share of the queue: a (2 of 3 waiting) loses its newest waiter instead.
  waiting.push(wait("c"));
  await assert.rejects(pushedOut, (err: unknown) => err instanceof AppError && err.code === "overloaded" && (err.retryAfterMs ?? 0) >= 1000);
  // d arrives at a full queue where nobody holds more than its share: d is refused.
  await assert.rejects(holdSlot(runner, "d").done, (err: unknown) => err instanceof AppError && err.code === "overloaded");
  first.release();
  await Promise.all(waiting);
  assert.deepEqual(served, ["b", "c", "a"]);
  assert.equal(runner.stats().active, 0);
});

test("model runner: an aborted waiter leaves the queue at once", async () => {
  const runner = new ModelRunner(entry({ parallel: 1 }), llamaChatSupport, idleEngine, log);
  await runner.load();
  const running = holdSlot(runner, "a");
  await running.running;
  const controller = new AbortController();
  const waiting = holdSlot(runner, "b", { signal: controller.signal });
  await until(() => runner.stats().queueDepth === 1, "the request queued");
  controller.abort(new Error("gone"));
  await assert.rejects(waiting.done, /gone/);
  assert.equal(runner.stats().queueDepth, 0);
  running.release();
  await running.done;
});

let srv: TestServer | undefined;
after(async () => {
  await srv?.close();
});

test("keepAlive: an idle model is unloaded, then reloaded on demand (503 model_loading meanwhile)", async () => {
  srv = await startServer({
    models: [
      { id: "idle", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 128, threads: 1, keepAlive: "300ms" },
      { id: "slow", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 2048, threads: 1, requestTimeout: "150ms" },
    ],
  });
  const { key } = await srv.createKey();
  const post = (body: Record<string, unknown>) => srv!.post("/v1/chat/completions", { messages: [{ role: "user", content: "Once upon a time" }], ...body }, { key });
  const runner = srv.server.ctx.catalog.get("idle");
  // Used once: on a busy machine it may have idled out already while the key was created (503 model_loading).
  await waitFor(async () => {
    const first = await post({ model: "idle", max_tokens: 2 });
    await first.text();
    return first.status;
  }, (status) => status === 200, "a first answer from the idle model");
  const deadline = Date.now() + 5000;
  while (runner.stats().state !== "unloaded" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal(runner.stats().state, "unloaded");
  const res = await post({ model: "idle", max_tokens: 2 });
  assert.equal(res.status, 503);
  assert.equal(((await res.json()) as { error: { code: string } }).error.code, "model_loading");
  assert.ok(Number(res.headers.get("retry-after")) >= 1);
  let status = 503;
  while (status === 503 && Date.now() < deadline + 20_000) {
    await new Promise((r) => setTimeout(r, 50));
    const again = await post({ model: "idle", max_tokens: 2 });
    status = again.status;
    await again.text();
  }
  assert.equal(status, 200);

  // requestTimeout: a generation cut by the deadline ends as if max_tokens had been reached, and frees its slot.
  const cut = await post({ model: "slow", max_tokens: 2000, temperature: 1, seed: 1 });
  assert.equal(cut.status, 200);
  const body = (await cut.json()) as { choices: { finish_reason: string; message: { content: string } }[]; usage: { completion_tokens: number } };
  assert.equal(body.choices[0].finish_reason, "length");
  assert.ok(body.usage.completion_tokens < 2000);
  assert.equal(srv.server.ctx.catalog.get("slow").stats().active, 0);
});
