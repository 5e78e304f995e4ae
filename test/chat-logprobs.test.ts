import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { scanStops } from "../src/engines/stop-text.ts";

let srv: TestServer;
let key: string;
let client: OpenAI;

before(async () => {
  srv = await startServer({
    models: [
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat", "logprobs", "json"], contextSize: 256, parallel: 2, threads: 1 },
      { id: "plain", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1 },
    ],
  });
  key = (await srv.createKey()).key;
  client = srv.openai(key);
});

after(async () => {
  await srv?.close();
});

const once = [{ role: "user" as const, content: "Once upon a time" }];

test("stop matcher: finds the first stop, holds back a possible beginning, excludes the stop", () => {
  const stops = ["little girl", "END"];
  assert.deepEqual(scanStops("there was a litt", 0, stops), { safeEnd: 12, stopped: false });
  assert.deepEqual(scanStops("there was a little girl named", 12, stops), { safeEnd: 12, stopped: true });
  assert.deepEqual(scanStops("abc", 0, stops), { safeEnd: 3, stopped: false });
  assert.deepEqual(scanStops("abcE", 0, stops), { safeEnd: 3, stopped: false });
});

test("logprobs: true returns choices[].logprobs.content with token, logprob <= 0, bytes and sorted top_logprobs", async () => {
  const res = await client.chat.completions.create({ model: "stories", messages: once, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 5 });
  const content = res.choices[0].logprobs!.content!;
  assert.equal(content.length, 12);
  assert.equal(res.usage!.completion_tokens, 12);
  assert.equal(content.map((c) => c.token).join(""), res.choices[0].message.content);
  for (const entry of content) {
    assert.ok(entry.logprob <= 0);
    assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, "utf8")]);
    assert.equal(entry.top_logprobs.length, 5);
    for (let i = 1; i < entry.top_logprobs.length; i++) assert.ok(entry.top_logprobs[i - 1].logprob >= entry.top_logprobs[i].logprob);
    // Greedy: the chosen token is the most likely one.
    assert.equal(entry.top_logprobs[0].token, entry.token);
    assert.equal(entry.top_logprobs[0].logprob, entry.logprob);
    const mass = entry.top_logprobs.reduce((sum, t) => sum + Math.exp(t.logprob), 0);
    assert.ok(mass <= 1 + 1e-6 && mass > 0);
  }
  // The greedy text is the same as without logprobs.
  const plain = await client.chat.completions.create({ model: "stories", messages: once, max_tokens: 12, temperature: 0 });
  assert.equal(res.choices[0].message.content, plain.choices[0].message.content);
});

test("logprobs streamed: each content chunk carries the logprobs of its tokens; same seed same text at temperature 1", async () => {
  const read = async () => {
    const stream = await client.chat.completions.create({ model: "stories", messages: once, max_tokens: 20, temperature: 1, seed: 11, logprobs: true, top_logprobs: 2, stream: true });
    let text = "";
    let tokens = 0;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (!choice) continue;
      text += choice.delta.content ?? "";
      for (const entry of choice.logprobs?.content ?? []) {
        assert.ok(entry.logprob <= 0);
        assert.equal(entry.top_logprobs.length, 2);
        tokens++;
      }
    }
    return { text, tokens };
  };
  const a = await read();
  const b = await read();
  assert.equal(a.tokens, 20);
  assert.equal(a.text, b.text);
});

test("logprobs with stop: the stop text is excluded; with top_logprobs 0 the list is empty", async () => {
  const res = await client.chat.completions.create({ model: "stories", messages: once, max_tokens: 30, temperature: 0, logprobs: true, stop: ["little girl"] });
  assert.equal(res.choices[0].finish_reason, "stop");
  assert.ok(!res.choices[0].message.content!.includes("little"));
  assert.ok(res.choices[0].logprobs!.content!.every((c) => c.top_logprobs.length === 0));
});

test("decisions.md: logprobs on a model without the logprobs capability is 400; with json_object it is 400 (documented)", async () => {
  const post = (body: Record<string, unknown>) => srv.post("/v1/chat/completions", { messages: once, ...body }, { key });
  const a = await post({ model: "plain", logprobs: true });
  assert.equal(a.status, 400);
  assert.equal(((await a.json()) as { error: { param: string } }).error.param, "logprobs");
  const b = await post({ model: "stories", logprobs: true, response_format: { type: "json_object" } });
  assert.equal(b.status, 400);
  assert.equal(((await b.json()) as { error: { param: string } }).error.param, "logprobs");
});
