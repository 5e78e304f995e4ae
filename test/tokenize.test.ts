// Issue 44.3: POST /v1/tokenize and /v1/detokenize in vLLM's shapes, with the model's own tokenizer and template,
// on the in-process llama engine: who may call them, how they are metered, and their §7 errors. (Through upstreams
// and llama-server: test/completions-engines.test.ts.)
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";
import { usageRows } from "./helpers/usage.ts";

let srv: TestServer;
let key: string;

before(async () => {
  srv = await startServer({
    plans: { counted: { rateLimit: { requests: 4, window: "1m" }, tokenLimit: { tokens: 10, window: "1h" } } },
    models: [
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1 },
      { id: "chatml", engine: "llama", source: path.join(modelsDir, "forged/stories260K-chatml-tools.gguf"), capabilities: ["chat", "tools"], contextSize: 2048, parallel: 1, threads: 1 },
      { id: "embed", engine: "llama", source: path.join(modelsDir, "forged/bert-embed-tiny.gguf"), capabilities: ["embeddings"], threads: 1 },
      // An upstream whose tokenizer is not reachable (tokenize: none): nothing listens there, and nothing is called.
      { id: "dark", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: "http://127.0.0.1:9/v1", model: "m" }], tokenize: "none" },
    ],
  });
  key = (await srv.createKey()).key;
});

after(async () => {
  await srv?.close();
});

const tokenize = async (body: Record<string, unknown>, k = key) => {
  const res = await srv.post("/v1/tokenize", body, { key: k });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as { object: string; model: string; count: number; max_model_len: number | null; tokens: number[] };
};
const detokenize = async (body: Record<string, unknown>, k = key) => {
  const res = await srv.post("/v1/detokenize", body, { key: k });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as { prompt: string };
};

test("issue 44.3: {model, prompt} answers vLLM's {count, max_model_len, tokens}; {model, tokens} gives the text back", async () => {
  const answer = await tokenize({ model: "stories", prompt: "Once upon a time" });
  assert.deepEqual(answer, { object: "tokenize", model: "stories", count: 5, max_model_len: 256, tokens: answer.tokens });
  assert.equal(answer.tokens[0], 1, "the start token first (add_special_tokens defaults to true)");
  const bare = await tokenize({ model: "stories", prompt: "Once upon a time", add_special_tokens: false });
  assert.deepEqual(bare.tokens, answer.tokens.slice(1));
  assert.equal((await detokenize({ model: "stories", tokens: bare.tokens })).prompt, "Once upon a time");
  // Special-token text is the token itself, as vLLM and llama-server read it; detokenize writes it back.
  const special = await tokenize({ model: "stories", prompt: "</s>", add_special_tokens: false });
  assert.deepEqual(special.tokens, [2]);
  assert.equal((await detokenize({ model: "stories", tokens: [1, ...bare.tokens, 2] })).prompt, "<s> Once upon a time</s>");
  // The openai client has no method for them; its generic post does (the docs' snippet).
  const client = srv.openai(key);
  const counted = await client.post<{ count: number; tokens: number[] }>("/tokenize", { body: { model: "stories", prompt: "Once upon a time" } });
  assert.deepEqual(counted.tokens, answer.tokens);
  assert.equal((await client.post<{ prompt: string }>("/detokenize", { body: { model: "stories", tokens: bare.tokens } })).prompt, "Once upon a time");
  // An embeddings model's tokenizer answers too.
  const embed = await tokenize({ model: "embed", prompt: "the cat" });
  assert.equal(embed.count, embed.tokens.length);
  assert.ok(embed.count >= 2);
});

test("issue 44.3: {model, messages} counts the prompt after the model's chat template, as a chat completion's usage counts it (the chat body still works)", async () => {
  const messages = [
    { role: "system", content: "You tell stories." },
    { role: "user", content: "Once upon a time" },
  ];
  const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
  for (const extra of [{}, { tools }]) {
    const counted = await tokenize({ model: "chatml", messages, ...extra });
    assert.equal(counted.count, counted.tokens.length);
    const chat = await srv.openai(key).chat.completions.create({ model: "chatml", messages: messages as never, max_tokens: 1, ...extra } as never);
    assert.equal(counted.count, (chat as { usage: { prompt_tokens: number } }).usage.prompt_tokens);
    // The template's own markup is in the ids: <|im_start|> spelled with the 512 pieces.
    assert.match((await detokenize({ model: "chatml", tokens: counted.tokens })).prompt, /<\|im_start\|>system\nYou tell stories\./);
  }
});

test("issue 44.3 scopes: messages need a chat key; a prompt or token ids any endpoint of the model; a key without the model is 403", async () => {
  const embeddingsKey = (await srv.createKey({ endpoints: ["embeddings"] })).key;
  assert.equal((await tokenize({ model: "embed", prompt: "the cat" }, embeddingsKey)).count, (await tokenize({ model: "embed", prompt: "the cat" })).count);
  assert.equal((await detokenize({ model: "embed", tokens: [2, 3] }, embeddingsKey)).prompt.length > 0, true);
  const refused = [
    await srv.post("/v1/tokenize", { model: "stories", prompt: "hi" }, { key: embeddingsKey }),
    await srv.post("/v1/detokenize", { model: "stories", tokens: [1] }, { key: embeddingsKey }),
    await srv.post("/v1/tokenize", { model: "stories", messages: [{ role: "user", content: "hi" }] }, { key: embeddingsKey }),
  ];
  for (const res of refused) assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });
  const otherModel = (await srv.createKey({ models: ["embed"] })).key;
  assert.deepEqual(await errorOf(await srv.post("/v1/tokenize", { model: "stories", prompt: "hi" }, { key: otherModel })), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });
});

test("issue 44.3 metering: tokenize and detokenize count as requests against the key's rate limit, never against its token limit, and record no usage", async () => {
  const counted = await srv.createKey({ plan: "counted" });
  const long = "Once upon a time ".repeat(10);
  // Each answer holds more tokens than the plan's 10-token window: none are reserved or charged.
  assert.ok((await tokenize({ model: "stories", prompt: long }, counted.key)).count > 10);
  assert.ok((await tokenize({ model: "stories", messages: [{ role: "user", content: long }] }, counted.key)).count > 10);
  const ids = (await tokenize({ model: "stories", prompt: long }, counted.key)).tokens;
  const back = await srv.post("/v1/detokenize", { model: "stories", tokens: ids }, { key: counted.key });
  assert.equal(back.status, 200);
  assert.equal(back.headers.get("x-ratelimit-remaining-tokens"), "10");
  assert.equal(back.headers.get("x-ratelimit-remaining-requests"), "0");
  const fifth = await srv.post("/v1/tokenize", { model: "stories", prompt: "hi" }, { key: counted.key });
  assert.deepEqual(await errorOf(fifth), { status: 429, type: "rate_limit_error", code: "rate_limit_exceeded", param: null });
  assert.deepEqual(await usageRows(srv.server, srv.config, counted.accountId, counted.id), []);
});

test("issue 44.3 §7: bad input is 400 naming the parameter; a model without a reachable tokenizer is the capability 400", async () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ["/v1/tokenize", { model: "stories" }, "prompt"],
    ["/v1/tokenize", { model: "stories", prompt: "hi", messages: [{ role: "user", content: "hi" }] }, "prompt"],
    ["/v1/tokenize", { model: "stories", prompt: 5 }, "prompt"],
    ["/v1/tokenize", { model: "stories", messages: [{ role: "user", content: "hi" }], add_generation_prompt: false }, "add_generation_prompt"],
    ["/v1/tokenize", { model: "stories", messages: [{ role: "user", content: "hi" }], continue_final_message: true }, "continue_final_message"],
    ["/v1/tokenize", { model: "stories", messages: [{ role: "user", content: "hi" }], add_special_tokens: true }, "add_special_tokens"],
    ["/v1/tokenize", { model: "embed", messages: [{ role: "user", content: "hi" }] }, "model"],
    ["/v1/tokenize", { model: "dark", prompt: "hi" }, "model"],
    ["/v1/tokenize", { model: "stories", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==" } }] }] }, "messages[0].content[0]"],
    ["/v1/detokenize", { model: "stories", tokens: [1, 512] }, "tokens[1]"],
    ["/v1/detokenize", { model: "stories", tokens: [-1] }, "tokens[0]"],
    ["/v1/detokenize", { model: "stories", tokens: "1 2" }, "tokens"],
    ["/v1/detokenize", { model: "embed", tokens: [1_000_000] }, "tokens[0]"],
    ["/v1/detokenize", { model: "dark", tokens: [1] }, "model"],
  ];
  for (const [route, body, param] of cases) {
    const res = await srv.post(route, body, { key });
    assert.equal(res.status, 400, `${route} ${JSON.stringify(body)}: ${await res.clone().text()}`);
    assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param }, JSON.stringify(body));
  }
  assert.deepEqual(await errorOf(await srv.post("/v1/detokenize", { model: "nope", tokens: [1] }, { key })), { status: 404, type: "invalid_request_error", code: "model_not_found", param: "model" });
});
