// Issue 44.2: POST /v1/completions (legacy completions) on the in-process llama engine, with the official openai
// client: raw prompts (no chat template), logprobs, echo with the prompt's own logprobs, fill-in-the-middle from the
// model's own FIM tokens (a forged GGUF), n and several prompts, the §7 errors, and the same admission as chat.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import type OpenAI from "openai";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";
import { fimFirstPiece, fimTokens, forgedFimModel } from "../harness/forged-fim.ts";
import { apiErrorOf, errorOf } from "./helpers/errors.ts";
import { testConfig } from "../harness/config.ts";
import { ConfigError } from "../src/config/load-config.ts";
import { usageRows } from "./helpers/usage.ts";

let srv: TestServer;
let key: string;
let client: OpenAI;

const llama = (id: string, source: string, capabilities: string[]) => ({ id, engine: "llama", source, capabilities, contextSize: 256, parallel: 2, threads: 1 });

before(async () => {
  srv = await startServer({
    plans: { metered: { tokenLimit: { tokens: 100, window: "1h" } } },
    models: [
      llama("stories", path.join(modelsDir, "stories260K.gguf"), ["chat", "logprobs"]),
      { ...llama("no-logprobs", path.join(modelsDir, "stories260K.gguf"), ["chat"]), limits: { maxCompletionChoices: 2 } },
      llama("chatml", path.join(modelsDir, "forged/stories260K-chatml-tools.gguf"), ["chat"]),
      llama("fim", await forgedFimModel(), ["chat", "logprobs"]),
      { id: "embed", engine: "llama", source: path.join(modelsDir, "forged/bert-embed-tiny.gguf"), capabilities: ["embeddings"], threads: 1 },
      { id: "llava", engine: "onnx", source: path.join(modelsDir, "forged/llava-tiny"), capabilities: ["chat", "vision"], load: "lazy" },
    ],
  });
  key = (await srv.createKey()).key;
  client = srv.openai(key);
});

after(async () => {
  await srv?.close();
});

const prompt = "Once upon a time";

test("issue 44.2: completions.create continues the raw prompt (no chat template: the prompt is the prompt), as a text_completion with usage", async () => {
  const res = await client.completions.create({ model: "chatml", prompt, max_tokens: 12, temperature: 0 });
  assert.equal(res.object, "text_completion");
  assert.match(res.id, /^cmpl-/);
  assert.equal(res.model, "chatml");
  assert.equal(res.choices.length, 1);
  assert.equal(res.choices[0]!.index, 0);
  assert.equal(res.choices[0]!.finish_reason, "length");
  assert.equal(res.choices[0]!.logprobs, null);
  assert.equal(res.usage!.completion_tokens, 12);
  // The prompt's tokens are the text's own (the start token and 4 pieces), not a chat turn's: the chat template of
  // this model (ChatML) would wrap it in <|im_start|> markup, tens of tokens more.
  const text = (await (await srv.post("/v1/tokenize", { model: "chatml", prompt }, { key })).json()) as { count: number };
  const chat = (await (await srv.post("/v1/tokenize", { model: "chatml", messages: [{ role: "user", content: prompt }] }, { key })).json()) as { count: number };
  assert.equal(res.usage!.prompt_tokens, text.count);
  assert.ok(chat.count > text.count + 5, `${chat.count} chat tokens vs ${text.count}`);
  // stories260K continues a story from its opening words.
  assert.match(res.choices[0]!.text, /^, there was a little/);
  // Default length: 16 tokens.
  const defaulted = await client.completions.create({ model: "stories", prompt, temperature: 0 });
  assert.equal(defaulted.usage!.completion_tokens, 16);
});

test("issue 44.2: logprobs returns OpenAI's legacy shape: tokens, token_logprobs, top_logprobs (the chosen token among them), text_offset", async () => {
  const res = await client.completions.create({ model: "stories", prompt, max_tokens: 8, temperature: 0, logprobs: 3 });
  const choice = res.choices[0]!;
  const lp = choice.logprobs!;
  assert.equal(lp.tokens!.length, 8);
  assert.equal(lp.tokens!.join(""), choice.text);
  let offset = 0;
  lp.tokens!.forEach((token, i) => {
    assert.equal(lp.text_offset![i], offset);
    offset += token.length;
    const logprob = lp.token_logprobs![i]!;
    assert.ok(logprob <= 0);
    const top = lp.top_logprobs![i]!;
    assert.ok(Object.keys(top).length >= 1 && Object.keys(top).length <= 4, `at most logprobs + 1 entries: ${JSON.stringify(top)}`);
    // Greedy: the chosen token is the most likely one.
    assert.equal(top[token], logprob);
    assert.equal(Math.max(...Object.values(top)), logprob);
  });
  // The same text as without logprobs.
  const plain = await client.completions.create({ model: "stories", prompt, max_tokens: 8, temperature: 0 });
  assert.equal(plain.choices[0]!.text, choice.text);
});

test("issue 44.2: echo + logprobs + max_tokens 0 scores the prompt: its own tokens and logprobs, the first one null, each the model's probability of it", async () => {
  const scored = await client.completions.create({ model: "stories", prompt, max_tokens: 0, echo: true, logprobs: 2 });
  const choice = scored.choices[0]!;
  assert.equal(choice.text, prompt);
  assert.equal(choice.finish_reason, "length");
  assert.deepEqual(scored.usage, { prompt_tokens: 5, completion_tokens: 0, total_tokens: 5 });
  const lp = choice.logprobs!;
  assert.deepEqual(lp.tokens, ["Once", " upon", " a", " time"]);
  assert.deepEqual(lp.text_offset, [0, 4, 9, 11]);
  assert.equal(lp.token_logprobs![0], null);
  assert.equal(lp.top_logprobs![0], null);
  // Each prompt token's logprob is what the model gives it after the tokens before it: the same number the
  // generation reports when it produces that token from the shorter prompt.
  const before = ["Once upon", "Once upon a", "Once upon a time"];
  for (let i = 1; i < 4; i++) {
    const generated = await client.completions.create({ model: "stories", prompt: before[i - 1]!, max_tokens: 1, temperature: 0, logprobs: 2 });
    const glp = generated.choices[0]!.logprobs!;
    if (glp.tokens![0] !== lp.tokens![i]) continue;
    assert.ok(Math.abs(glp.token_logprobs![0]! - lp.token_logprobs![i]!) < 1e-3, `${lp.tokens![i]}: ${glp.token_logprobs![0]} vs ${lp.token_logprobs![i]}`);
  }
  for (let i = 1; i < 4; i++) {
    assert.ok(lp.token_logprobs![i]! < 0);
    assert.equal(lp.top_logprobs![i]![lp.tokens![i]!], lp.token_logprobs![i]);
  }
});

test("issue 44.2: echo + logprobs streamed (openai client): the prompt and its logprobs first, then the generated tokens, offsets over the whole text", async () => {
  const stream = await client.completions.create({ model: "stories", prompt, max_tokens: 6, temperature: 0, echo: true, logprobs: 1, stream: true, stream_options: { include_usage: true } });
  let text = "";
  const tokens: string[] = [];
  const offsets: number[] = [];
  const logprobs: (number | null)[] = [];
  let finish: string | null = null;
  let usage: OpenAI.CompletionUsage | undefined;
  const events: OpenAI.Completion[] = [];
  for await (const event of stream) {
    events.push(event);
    if (event.usage) usage = event.usage;
    for (const choice of event.choices) {
      text += choice.text;
      tokens.push(...(choice.logprobs?.tokens ?? []));
      offsets.push(...(choice.logprobs?.text_offset ?? []));
      logprobs.push(...(choice.logprobs?.token_logprobs ?? []));
      finish = choice.finish_reason ?? finish;
    }
  }
  assert.equal(events[0]!.choices[0]!.text, prompt);
  assert.deepEqual(events[0]!.choices[0]!.logprobs!.tokens, ["Once", " upon", " a", " time"]);
  assert.ok(text.startsWith(prompt) && text.length > prompt.length);
  assert.equal(tokens.length, 4 + 6);
  assert.equal(tokens.join(""), text);
  let offset = 0;
  tokens.forEach((token, i) => {
    assert.equal(offsets[i], offset);
    offset += token.length;
  });
  assert.equal(logprobs[0], null);
  assert.equal(finish, "length");
  assert.deepEqual(usage, { prompt_tokens: 5, completion_tokens: 6, total_tokens: 11 });
  // The same answer as the non-streamed one.
  const whole = await client.completions.create({ model: "stories", prompt, max_tokens: 6, temperature: 0, echo: true, logprobs: 1 });
  assert.equal(whole.choices[0]!.text, text);
  assert.deepEqual(whole.choices[0]!.logprobs!.tokens, tokens);
});

test("issue 44.2: echo without logprobs puts the prompt in front of the text; stop ends the text before the stop string", async () => {
  const echoed = await client.completions.create({ model: "stories", prompt, max_tokens: 6, temperature: 0, echo: true });
  const plain = await client.completions.create({ model: "stories", prompt, max_tokens: 6, temperature: 0 });
  assert.equal(echoed.choices[0]!.text, prompt + plain.choices[0]!.text);
  // The text continues the prompt: its first piece keeps the space the tokenizer gives it (" time" after "a").
  const continued = await client.completions.create({ model: "stories", prompt: "Once upon a", max_tokens: 2, temperature: 0 });
  assert.equal(continued.choices[0]!.text, " time,");
  const stopped = await client.completions.create({ model: "stories", prompt, max_tokens: 12, temperature: 0, stop: " little" });
  assert.equal(stopped.choices[0]!.text, ", there was a");
  assert.equal(stopped.choices[0]!.finish_reason, "stop");
});

test("issue 44.2: several prompts times n make prompts × n choices, indexed prompt × n + sample; a prompt's tokens count once; a seed repeats them", async () => {
  const ask = { model: "stories", prompt: [prompt, "Lily"], n: 2, max_tokens: 24, temperature: 1.5, seed: 7 };
  const res = await client.completions.create(ask);
  assert.deepEqual(res.choices.map((c) => c.index), [0, 1, 2, 3]);
  assert.equal(res.usage!.prompt_tokens, 5 + 2);
  assert.equal(res.usage!.completion_tokens, 4 * 24);
  assert.notEqual(res.choices[0]!.text, res.choices[1]!.text, "the samples of one prompt differ");
  const again = await client.completions.create(ask);
  assert.deepEqual(again.choices.map((c) => c.text), res.choices.map((c) => c.text));
  // Streamed, the choices' events interleave, each naming its index, and each ends with its finish_reason.
  const stream = await client.completions.create({ ...ask, stream: true });
  const texts = ["", "", "", ""];
  const finished = new Set<number>();
  for await (const event of stream) {
    for (const choice of event.choices) {
      texts[choice.index] += choice.text;
      if (choice.finish_reason) finished.add(choice.index);
    }
  }
  assert.deepEqual(texts, res.choices.map((c) => c.text));
  assert.equal(finished.size, 4);
});

test("issue 44.2: logit_bias -100 bans a token; presence and frequency penalties change what is generated", async () => {
  const greedy = await client.completions.create({ model: "stories", prompt, max_tokens: 1, temperature: 0 });
  const first = greedy.choices[0]!.text;
  const ids = async (text: string) => ((await (await srv.post("/v1/tokenize", { model: "stories", prompt: text }, { key })).json()) as { tokens: number[] }).tokens;
  const [before, withFirst] = [await ids(prompt), await ids(prompt + first)];
  assert.deepEqual(withFirst.slice(0, -1), before);
  const banned = await client.completions.create({ model: "stories", prompt, max_tokens: 1, temperature: 0, logit_bias: { [String(withFirst.at(-1))]: -100 } });
  assert.notEqual(banned.choices[0]!.text, first);
  const long = { model: "stories", prompt, max_tokens: 60, temperature: 0 };
  const plain = await client.completions.create(long);
  const penalised = await client.completions.create({ ...long, frequency_penalty: 2, presence_penalty: 2 });
  assert.notEqual(penalised.choices[0]!.text, plain.choices[0]!.text);
});

test("issue 44.2 FIM: a suffix builds the model's FIM prompt from its GGUF's FIM tokens: exactly the tokens of the prompt spelled out with them", async () => {
  const suffix = " They played all day.";
  const fim = await client.completions.create({ model: "fim", prompt, suffix, max_tokens: 10, temperature: 0 });
  // The forged model's first piece after <|fim_middle|> is scripted: the FIM prompt reached the model and ended there.
  assert.ok(fim.choices[0]!.text.startsWith(fimFirstPiece), JSON.stringify(fim.choices[0]!.text));
  // The same answer as the FIM prompt written out with the special tokens' text (read as the tokens themselves)...
  const spelled = await client.completions.create({ model: "fim", prompt: `${fimTokens.prefix}${prompt}${fimTokens.suffix}${suffix}${fimTokens.middle}`, max_tokens: 10, temperature: 0 });
  assert.equal(fim.choices[0]!.text, spelled.choices[0]!.text);
  assert.deepEqual(fim.usage, spelled.usage);
  // ...which is BOS, <|fim_prefix|>, the prompt's pieces, <|fim_suffix|>, the suffix's pieces, <|fim_middle|>.
  const pieces = async (text: string) => ((await (await srv.post("/v1/tokenize", { model: "fim", prompt: text, add_special_tokens: false }, { key })).json()) as { count: number }).count;
  assert.equal(fim.usage!.prompt_tokens, 1 + 1 + (await pieces(prompt)) + 1 + (await pieces(suffix)) + 1);
  // Streamed, the same middle.
  const stream = await client.completions.create({ model: "fim", prompt, suffix, max_tokens: 10, temperature: 0, stream: true });
  let streamed = "";
  for await (const event of stream) streamed += event.choices.map((c) => c.text).join("");
  assert.equal(streamed, fim.choices[0]!.text);
});

test("issue 44.2 FIM: a model without FIM tokens in its GGUF refuses suffix with 400 invalid_parameter naming it", async () => {
  const err = await errorOf(await srv.post("/v1/completions", { model: "stories", prompt, suffix: "The end." }, { key }));
  assert.deepEqual(err, { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "suffix" });
});

test("issue 44.2 §7: bad input is 400 with the parameter named, before any generation", async () => {
  const cases: [Record<string, unknown>, string, string?][] = [
    [{ logprobs: 6 }, "logprobs"],
    [{ logprobs: -1 }, "logprobs"],
    [{ n: 0 }, "n"],
    [{ n: 9, prompt: [prompt, prompt] }, "n"],
    [{ prompt: Array.from({ length: 17 }, () => "x") }, "prompt"],
    [{ prompt: [1, 2, 3] }, "prompt[0]"],
    [{ max_tokens: -1 }, "max_tokens"],
    [{ max_tokens: 0 }, "max_tokens"],
    [{ echo: true, suffix: "x" }, "echo"],
    [{ best_of: 2 }, "best_of"],
    [{ temperature: 3 }, "temperature"],
    [{ presence_penalty: 2.5 }, "presence_penalty"],
    [{ logit_bias: { abc: 1 } }, "logit_bias"],
    [{ logit_bias: { "1": 101 } }, "logit_bias[1]"],
    [{ logit_bias: { "512": 5 } }, "logit_bias"],
    [{ max_tokens: 300 }, "prompt", "context_length_exceeded"],
    [{ prompt: [prompt, "x ".repeat(300)] }, "prompt[1]", "context_length_exceeded"],
    [{ model: "no-logprobs", logprobs: 1 }, "logprobs"],
    [{ model: "no-logprobs", echo: true, logprobs: 1, max_tokens: 0 }, "logprobs"],
    [{ model: "embed" }, "model"],
    [{ model: "llava" }, "model"],
  ];
  for (const [fields, param, code = "invalid_parameter"] of cases) {
    const res = await srv.post("/v1/completions", { model: "stories", prompt, ...fields }, { key });
    assert.equal(res.status, 400, JSON.stringify(fields));
    assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code, param }, JSON.stringify(fields));
  }
  const missing = await errorOf(await srv.post("/v1/completions", { model: "nope", prompt }, { key }));
  assert.deepEqual([missing.status, missing.code], [404, "model_not_found"]);
  // The ONNX VLM has no raw-prompt path: the capability error names the model and says so, and nothing loads.
  const vlm = await apiErrorOf(client.completions.create({ model: "llava", prompt }));
  assert.match(vlm.message, /does not support text completions on its engine \(onnx\)/);
  assert.equal(srv.server.ctx.catalog.get("llava").state, "unloaded");
});

test("issue 44.2 front door: a token limit refuses a completion as it refuses chat, and usage is recorded as chat's, on the chat endpoint", async () => {
  const metered = await srv.createKey({ plan: "metered" });
  // The same reservation rule decides at both doors: the prompt's tokens + max_tokens, here over the 100 of the plan.
  const chat = await srv.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: prompt }], max_tokens: 200 }, { key: metered.key });
  const completion = await srv.post("/v1/completions", { model: "stories", prompt, max_tokens: 200 }, { key: metered.key });
  const messages: string[] = [];
  for (const res of [chat, completion]) {
    assert.equal(res.status, 429);
    assert.equal(res.headers.get("x-ratelimit-remaining-tokens"), "100");
    const error = ((await res.json()) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, "rate_limit_exceeded");
    messages.push(error.message);
  }
  assert.match(messages[0]!, /Rate limit of 100 tokens per 1h0m0s for this key exceeded: this request reserves \d+ tokens/);
  assert.match(messages[1]!, /Rate limit of 100 tokens per 1h0m0s for this key exceeded: this request reserves 205 tokens/);
  // One that fits is admitted and settled to its usage, as a chat is.
  const fits = await srv.post("/v1/completions", { model: "stories", prompt, max_tokens: 10, temperature: 0 }, { key: metered.key });
  assert.equal(fits.status, 200);
  assert.equal(fits.headers.get("x-ratelimit-remaining-tokens"), String(100 - 5 - 10));

  const plain = await srv.createKey();
  const done = await srv.openai(plain.key).completions.create({ model: "stories", prompt, max_tokens: 7, temperature: 0 });
  const chatted = await srv.openai(plain.key).chat.completions.create({ model: "stories", messages: [{ role: "user", content: prompt }], max_tokens: 3, temperature: 0 });
  const rows = await usageRows(srv.server, srv.config, plain.accountId, plain.id);
  assert.deepEqual(rows, [["stories", "chat", 2, done.usage!.prompt_tokens + chatted.usage!.prompt_tokens, 7 + 3]]);
});

test("issue 44.2 limits.maxCompletionChoices bounds prompts × n per model; a bad value is a startup error naming it", async () => {
  const few = await errorOf(await srv.post("/v1/completions", { model: "no-logprobs", prompt, n: 3, max_tokens: 1 }, { key }));
  assert.deepEqual(few, { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "n" });
  assert.equal((await client.completions.create({ model: "no-logprobs", prompt, n: 2, max_tokens: 1 })).choices.length, 2);
  const model = { id: "m", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], limits: { maxCompletionChoices: 0 } };
  assert.throws(() => testConfig({ models: [model] }, null), (err: unknown) => err instanceof ConfigError && /models\[0\]\.limits\.maxCompletionChoices/.test(err.message));
});
