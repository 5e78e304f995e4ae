import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { usageRows } from "./helpers/usage.ts";
import { apiErrorOf } from "./helpers/errors.ts";

let srv: TestServer;
let key: string;
let client: OpenAI;

const stories = path.join(modelsDir, "stories260K.gguf");

before(async () => {
  srv = await startServer({
    plans: { capped: { maxOutputTokens: 8 } },
    models: [
      { id: "stories", engine: "llama", source: stories, capabilities: ["chat", "json"], contextSize: 256, parallel: 4, threads: 1 },
      { id: "stories-warm", engine: "llama", source: stories, capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1, defaults: { temperature: 0 } },
    ],
  });
  key = (await srv.createKey()).key;
  client = srv.openai(key);
});

after(async () => {
  await srv?.close();
});

const once = [{ role: "user" as const, content: "Once upon a time" }];


test("§2.3 non-stream completion object: shape, usage from the model tokenizer, finish_reason length at max_tokens", async () => {
  const res = await client.chat.completions.create({ model: "stories", messages: once, max_tokens: 12, temperature: 0 });
  assert.match(res.id, /^chatcmpl-/);
  assert.equal(res.object, "chat.completion");
  assert.equal(res.model, "stories");
  assert.ok(Number.isInteger(res.created) && Math.abs(res.created - Date.now() / 1000) < 60);
  assert.equal(res.choices.length, 1);
  assert.equal(res.choices[0].index, 0);
  assert.equal(res.choices[0].message.role, "assistant");
  assert.equal(typeof res.choices[0].message.content, "string");
  // stories260K has no chat template: the plain-text fallback lets the story model continue the user's text.
  assert.match(res.choices[0].message.content!, /^, there was a little/);
  assert.equal(res.choices[0].finish_reason, "length");
  assert.equal(res.usage!.completion_tokens, 12);
  // BOS + "Once upon a time" in the 512-piece vocabulary.
  assert.ok(res.usage!.prompt_tokens >= 4 && res.usage!.prompt_tokens <= 10, String(res.usage!.prompt_tokens));
  assert.equal(res.usage!.total_tokens, res.usage!.prompt_tokens + res.usage!.completion_tokens);
});

test("§4.2 stop: the stop text is excluded and finish_reason is stop; multi-token stops work", async () => {
  const full = await client.chat.completions.create({ model: "stories", messages: once, max_tokens: 30, temperature: 0 });
  const text = full.choices[0].message.content!;
  const at = text.indexOf("little girl");
  assert.ok(at > 0, text);
  const res = await client.chat.completions.create({ model: "stories", messages: once, max_tokens: 30, temperature: 0, stop: ["zzz", "little girl"] });
  assert.equal(res.choices[0].message.content, text.slice(0, at));
  assert.equal(res.choices[0].finish_reason, "stop");
});

test("§4.2 seed: same seed at temperature 1 gives the same text, different seeds differ", async () => {
  const run = (seed: number) =>
    client.chat.completions.create({ model: "stories", messages: once, max_tokens: 40, temperature: 1, seed }).then((r) => r.choices[0].message.content);
  const [a, b, c] = await Promise.all([run(7), run(7), run(8)]);
  assert.equal(a, b);
  assert.notEqual(a, c);
});

test("§4.2 temperature omitted uses the model's default (temperature 0 configured: deterministic)", async () => {
  const run = () => client.chat.completions.create({ model: "stories-warm", messages: once, max_tokens: 20 }).then((r) => r.choices[0].message.content);
  const greedy = await client.chat.completions.create({ model: "stories", messages: once, max_tokens: 20, temperature: 0 });
  assert.equal(await run(), greedy.choices[0].message.content);
  assert.equal(await run(), greedy.choices[0].message.content);
});

test("§4.2 rule 5 prompt + max_tokens over the context is 400 context_length_exceeded, param messages", async () => {
  const err = await apiErrorOf(client.chat.completions.create({ model: "stories", messages: once, max_tokens: 250 }));
  assert.equal(err.status, 400);
  assert.equal(err.code, "context_length_exceeded");
  assert.equal(err.type, "invalid_request_error");
  assert.equal(err.param, "messages");
  const long = [{ role: "user" as const, content: "Once upon a time there was a cat. ".repeat(60) }];
  const err2 = await apiErrorOf(client.chat.completions.create({ model: "stories", messages: long }));
  assert.equal(err2.code, "context_length_exceeded");
});

test("§4.2 parameter validation: 400 invalid_parameter with the param path", async () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ temperature: 2.5 }, "temperature"],
    [{ temperature: -0.1 }, "temperature"],
    [{ top_p: 1.5 }, "top_p"],
    [{ max_tokens: 0 }, "max_tokens"],
    [{ stop: ["a", "b", "c", "d", "e"] }, "stop"],
    [{ n: 2 }, "n"],
    [{ frequency_penalty: 0.5 }, "frequency_penalty"],
    [{ presence_penalty: 1 }, "presence_penalty"],
    [{ logit_bias: { "1": 5 } }, "logit_bias"],
    [{ top_logprobs: 3 }, "top_logprobs"],
    [{ logprobs: true, top_logprobs: 21 }, "top_logprobs"],
    [{ response_format: { type: "json_schema" } }, "response_format.json_schema"],
    [{ messages: [{ role: "user", content: [{ type: "text", text: "hi" }, { type: "image_url", image_url: { url: "https://example.com/a.png" } }] }] }, "messages[0].content[1].image_url.url"],
    [{ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }] }] }, "messages[0].content[0].image_url.url"],
    [{ messages: [{ role: "tool", content: "x" }] }, "messages[0].tool_call_id"],
    [{ messages: [] }, "messages"],
    [{ messages: [{ role: "wizard", content: "x" }] }, "messages[0].role"],
  ];
  for (const [patch, param] of cases) {
    const res = await srv.post("/v1/chat/completions", { model: "stories", messages: once, ...patch }, { key: key });
    const body = (await res.json()) as { error: { code: string; param: string; type: string } };
    assert.equal(res.status, 400, `${JSON.stringify(patch)} -> ${JSON.stringify(body)}`);
    assert.equal(body.error.code, "invalid_parameter", JSON.stringify(patch));
    assert.equal(body.error.param, param, JSON.stringify(patch));
  }
});

test("decisions.md: user, metadata and store are ignored", async () => {
  const res = await srv.post("/v1/chat/completions", { model: "stories", messages: once, max_tokens: 3, user: "u1", metadata: { a: "b" }, store: false, n: 1, frequency_penalty: 0 }, { key: key });
  assert.equal(res.status, 200);
});

test("decisions.md: an image part sent to a text-only model is 400 invalid_parameter naming the part", async () => {
  const png = "data:image/png;base64," + Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]).toString("base64");
  const err = await apiErrorOf(
    client.chat.completions.create({
      model: "stories",
      messages: [{ role: "user", content: [{ type: "text", text: "What colour?" }, { type: "image_url", image_url: { url: png } }] }],
    }),
  );
  assert.equal(err.status, 400);
  assert.equal(err.code, "invalid_parameter");
  assert.equal(err.param, "messages[0].content[1]");
});

test("§4.2 rule 6: tools on a model without the tools capability is 400 param tools", async () => {
  const err = await apiErrorOf(
    client.chat.completions.create({
      model: "stories",
      messages: once,
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }],
    }),
  );
  assert.equal(err.status, 400);
  assert.equal(err.param, "tools");
});

test("plan maxOutputTokens: max_tokens above it is 400 param max_tokens; omitted max_tokens is capped", async () => {
  const capped = srv.openai((await srv.createKey({ plan: "capped" })).key);
  const err = await apiErrorOf(capped.chat.completions.create({ model: "stories", messages: once, max_tokens: 9 }));
  assert.equal(err.status, 400);
  assert.equal(err.param, "max_tokens");
  const res = await capped.chat.completions.create({ model: "stories", messages: once, temperature: 0 });
  assert.equal(res.usage!.completion_tokens, 8);
  assert.equal(res.choices[0].finish_reason, "length");
});

test("§7 unknown model is 404 model_not_found param model, before parameter-free checks", async () => {
  const err = await apiErrorOf(client.chat.completions.create({ model: "nope", messages: once }));
  assert.equal(err.status, 404);
  assert.equal(err.param, "model");
});

test("usage is recorded per key and model under the chat endpoint, streamed or not", async () => {
  const { key: usageKey, id, accountId } = await srv.createKey();
  const own = srv.openai(usageKey);
  const plain = await own.chat.completions.create({ model: "stories", messages: once, max_tokens: 5, temperature: 0 });
  const stream = await own.chat.completions.create({ model: "stories", messages: once, max_tokens: 7, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let streamedUsage: { prompt_tokens: number; completion_tokens: number } | undefined;
  for await (const chunk of stream) if (chunk.usage) streamedUsage = chunk.usage;
  assert.equal(streamedUsage!.completion_tokens, 7);
  assert.deepEqual(await usageRows(srv.server, srv.config, accountId, id), [["stories", "chat", 2, plain.usage!.prompt_tokens + streamedUsage!.prompt_tokens, 12]]);
});
