import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";

/**
 * KV prefix reuse across turns: the llama engine lends the free sequence whose cache shares the longest prefix
 * with the prompt (weighed against what it would throw away), so a conversation's second turn evaluates only its
 * new tokens, even after more other requests than there are sequences; the admin view shows the hit ratio.
 */
let srv: TestServer;
let client: OpenAI;
const adminToken = "6zkHOfOlzRYr97DOn-jHhxYagDA1DjOEDXS3g9Ysd5M";

before(async () => {
  srv = await startServer({
    adminToken,
    models: [{ id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat", "logprobs"], contextSize: 512, parallel: 2, threads: 1 }],
  });
  client = srv.openai((await srv.createKey()).key);
});

after(async () => {
  await srv?.close();
});

interface CacheView {
  promptTokens: number;
  reusedTokens: number;
  hitRatio: number | null;
}

async function cache(): Promise<CacheView> {
  const res = await srv.get("/admin/v1/models/stories", { headers: { authorization: `Bearer ${adminToken}` } });
  assert.equal(res.status, 200);
  return ((await res.json()) as { promptCache: CacheView }).promptCache;
}

const story = "Once upon a time there was a little girl named Lily who loved to play in the park with her dog. ".repeat(6);

test("a conversation's second turn reuses its cached prefix after parallel + 1 other requests ran in between", async () => {
  const history: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: story }];
  const first = await client.chat.completions.create({ model: "stories", messages: history, max_tokens: 8, temperature: 0 });
  const firstPrompt = first.usage!.prompt_tokens;

  // Three other one-off requests (parallel is 2): a most-recently-freed choice would have handed one of them the
  // conversation's sequence.
  for (const other of ["The cat sat.", "A dog ran.", "The sun is hot."]) {
    await client.chat.completions.create({ model: "stories", messages: [{ role: "user", content: other }], max_tokens: 4, temperature: 0 });
  }

  const before = await cache();
  history.push({ role: "assistant", content: first.choices[0]!.message.content! }, { role: "user", content: "What happened next?" });
  const second = await client.chat.completions.create({ model: "stories", messages: history, max_tokens: 8, temperature: 0 });
  const after = await cache();
  const reused = after.reusedTokens - before.reusedTokens;
  assert.equal(after.promptTokens - before.promptTokens, second.usage!.prompt_tokens);
  assert.ok(reused >= firstPrompt - 2, `reused ${reused} of the first turn's ${firstPrompt} prompt tokens`);
  assert.ok(after.hitRatio !== null && after.hitRatio > 0);
});

test("the logprobs loop keeps a sequence's matching prefix too, and answers as a cold sequence would", async () => {
  const messages = [{ role: "user" as const, content: story + "Then" }];
  const cold = await client.chat.completions.create({ model: "stories", messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2 });
  const before = await cache();
  const warm = await client.chat.completions.create({ model: "stories", messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2 });
  const after = await cache();
  assert.ok(after.reusedTokens - before.reusedTokens >= warm.usage!.prompt_tokens - 1, "all but the last prompt token came from the cache");
  assert.equal(warm.choices[0]!.message.content, cold.choices[0]!.message.content);
  const tokens = (r: OpenAI.ChatCompletion) => r.choices[0]!.logprobs!.content!.map((t) => t.token);
  assert.deepEqual(tokens(warm), tokens(cold));
  for (const [i, t] of warm.choices[0]!.logprobs!.content!.entries()) {
    assert.ok(Math.abs(t.logprob - cold.choices[0]!.logprobs!.content![i]!.logprob) < 1e-3, `token ${i}: same distribution from the cached prefix`);
  }
});
