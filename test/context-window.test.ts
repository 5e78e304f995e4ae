// §4.2 and issue 30: a chat's completion budget is worked out in one place (fitCompletion), from the client's
// max_tokens, the plan's output cap and the context window; what an upstream is asked for comes from the same place.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fitCompletion } from "../src/engines/context-window.ts";
import { AppError } from "../src/errors/app-error.ts";

const window = 100;
const prompt = 40; // leaves 60

test("§4.2 budget: explicit max_tokens is the budget and what an upstream is asked, whatever the cap", () => {
  assert.deepEqual(fitCompletion(window, prompt, { maxTokens: 10, outputCap: null }), { budget: 10, asked: 10 });
  assert.deepEqual(fitCompletion(window, prompt, { maxTokens: 10, outputCap: 20 }), { budget: 10, asked: 10 });
  assert.deepEqual(fitCompletion(null, prompt, { maxTokens: 10, outputCap: 20 }), { budget: 10, asked: 10 });
});

test("§4.2 budget: omitted max_tokens gets what the window leaves, lowered to the plan's cap; the cap is asked only below the room", () => {
  assert.deepEqual(fitCompletion(window, prompt, { maxTokens: null, outputCap: null }), { budget: 60, asked: null });
  assert.deepEqual(fitCompletion(window, prompt, { maxTokens: null }), { budget: 60, asked: null });
  assert.deepEqual(fitCompletion(window, prompt, { maxTokens: null, outputCap: 20 }), { budget: 20, asked: 20 });
  assert.deepEqual(fitCompletion(window, prompt, { maxTokens: null, outputCap: 60 }), { budget: 60, asked: null });
  assert.deepEqual(fitCompletion(window, prompt, { maxTokens: null, outputCap: 500 }), { budget: 60, asked: null });
});

test("§4.2 budget: an unknown window checks nothing; the cap bounds and is asked, else nothing is", () => {
  assert.deepEqual(fitCompletion(null, 5000, { maxTokens: null, outputCap: 20 }), { budget: 20, asked: 20 });
  assert.deepEqual(fitCompletion(null, 5000, { maxTokens: null, outputCap: null }), { budget: Number.MAX_SAFE_INTEGER, asked: null });
});

test("§4.2 context_length_exceeded: prompt plus max_tokens over the window, or no room left for an omitted one", () => {
  const exceeded = (err: unknown) => err instanceof AppError && err.code === "context_length_exceeded" && err.param === "messages";
  assert.throws(() => fitCompletion(window, prompt, { maxTokens: 61, outputCap: null }), exceeded);
  assert.deepEqual(fitCompletion(window, prompt, { maxTokens: 60, outputCap: null }), { budget: 60, asked: 60 });
  assert.throws(() => fitCompletion(window, window, { maxTokens: null, outputCap: 20 }), exceeded);
  assert.throws(() => fitCompletion(window, 30, { maxTokens: 80 }, { param: "messages", takes: "The messages take", note: "including 1 image" }), (err: unknown) => exceeded(err) && /\(including 1 image\)/.test((err as Error).message));
});
