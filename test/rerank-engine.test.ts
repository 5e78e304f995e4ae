// test: alone (an abort returns in under 0.6 of the whole list's time)
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import type { ModelEntry } from "../src/config/app-config.ts";
import { LlamaRerankEngine } from "../src/engines/llama/llama-rerank-engine.ts";
import { AppError } from "../src/errors/app-error.ts";
import { modelEntry } from "./helpers/model-entry.ts";

const models = path.resolve(import.meta.dirname, "../../shared/models");

function rerankEntry(overrides: Partial<ModelEntry> = {}): ModelEntry {
  const source = path.join(models, "forged/bert-rerank-tiny.gguf");
  return modelEntry({ id: "bert-rerank-tiny", engine: "llama", source, capabilities: ["rerank"], parallel: 1, threads: 1 }, overrides);
}

const query = "What is the capital of France?";
const documents = ["The cat sat on the mat.", "Paris is the capital of France.", "France is a country in Europe."];

let engine: LlamaRerankEngine;
before(async () => {
  engine = new LlamaRerankEngine(rerankEntry());
  await engine.load();
});
after(async () => {
  await engine.unload();
});

/** The engine's two steps, as the scheduler runs them: prepare (checks and counts), then the work. */
const rank = (req: { query: string; documents: string[] }, signal: AbortSignal) => engine.rerank(req, engine.prepareRerank(req), signal);

test("§4.5 GGUF rerank scores each document in request order (models README values)", async () => {
  const result = await rank({ query, documents }, new AbortController().signal);
  assert.equal(result.scores.length, 3);
  assert.ok(Math.abs(result.scores[0] - 0.119) < 0.01, `cat: ${result.scores[0]}`);
  assert.ok(Math.abs(result.scores[1] - 0.845) < 0.01, `paris: ${result.scores[1]}`);
  assert.ok(Math.abs(result.scores[2] - 0.49) < 0.01, `france: ${result.scores[2]}`);
  assert.ok(result.promptTokens > 0);
  assert.equal(result.promptTokens, engine.prepareRerank({ query, documents }).promptTokens);
});

test("engine capabilities are data: a GGUF reranker serves rerank only", () => {
  assert.deepEqual(engine.support.endpoints, ["rerank"]);
  assert.deepEqual(engine.support.features, []);
  assert.ok((engine.contextSize ?? 0) > 0);
});

test("§4.5 a document longer than the model's input names documents[i]", () => {
  const limit = engine.maxInputTokens!;
  const long = "Paris is the capital of France. ".repeat(limit);
  assert.throws(
    () => engine.prepareRerank({ query, documents: ["short", long] }),
    (err: unknown) => err instanceof AppError && err.code === "invalid_parameter" && err.param === "documents[1]",
  );
  assert.throws(
    () => engine.prepareRerank({ query: long, documents: ["short"] }),
    (err: unknown) => err instanceof AppError && err.code === "invalid_parameter" && err.param === "query",
  );
});

test("an aborted signal stops rerank", async () => {
  const controller = new AbortController();
  controller.abort(new Error("gone"));
  await assert.rejects(rank({ query, documents }, controller.signal), /gone/);
});

test("an abort during a long request stops it between slices", async () => {
  const many = Array.from({ length: 400 }, (_, i) => `Paris is the capital of France ${i}.`);
  const controller = new AbortController();
  const started = Date.now();
  const full = rank({ query, documents: many.slice(0, 40) }, new AbortController().signal);
  await full;
  const perDoc = (Date.now() - started) / 40;
  setTimeout(() => controller.abort(new Error("client went away")), 50);
  const t0 = Date.now();
  await assert.rejects(rank({ query, documents: many }, controller.signal), /client went away/);
  assert.ok(Date.now() - t0 < perDoc * 400 * 0.6, `abort took ${Date.now() - t0} ms; the whole list takes about ${Math.round(perDoc * 400)} ms`);
});
