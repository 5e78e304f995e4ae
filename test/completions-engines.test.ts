// Issue 44.2 and 44.3 on the engines that relay: `engine: llama-server` (a real llama-server built from the llama.cpp
// node-llama-cpp ships: /v1/completions, /infill for fill-in-the-middle, /tokenize and /detokenize) and `engine:
// upstream` in front of a real Modelgate node (protocol modelgate: /v1/completions passed through). Each answer is
// compared with the in-process llama engine's on the same model (the same llama.cpp: greedy answers are the same).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import type OpenAI from "openai";
import { llamaServerBinary } from "../harness/llama-server.ts";
import { fimFirstPiece, forgedFimModel } from "../harness/forged-fim.ts";
import { modelsDir, startServer, tempDir, type TestServer } from "../harness/server.ts";
import { apiErrorOf, errorOf } from "./helpers/errors.ts";

const stories = path.join(modelsDir, "stories260K.gguf");
let back: TestServer;
let front: TestServer;
let backClient: OpenAI;
let frontClient: OpenAI;
let frontKey: string;

before(async () => {
  const fim = await forgedFimModel();
  const binary = llamaServerBinary();
  const llama = (id: string, source: string) => ({ id, engine: "llama", source, capabilities: ["chat", "logprobs"], contextSize: 256, parallel: 2, threads: 1 });
  back = await startServer({ models: [llama("stories", stories), llama("fim", fim)] });
  const backKey = await back.createKey();
  backClient = back.openai(backKey.key);
  const caFile = path.join(tempDir("completions-engines-"), "back-ca.pem");
  writeFileSync(caFile, back.ca);
  const upstream = (model: string) => ({ engine: "upstream", protocol: "modelgate", upstreams: [{ url: back.baseURL, apiKey: backKey.key, model, ca: caFile }] });
  const managed = (id: string, source: string) => ({ id, engine: "llama-server", binary, source, capabilities: ["chat", "logprobs"], contextSize: 256, parallel: 2, threads: 1 });
  front = await startServer({
    models: [
      { id: "up-stories", capabilities: ["chat", "logprobs"], ...upstream("stories") },
      { id: "up-fim", capabilities: ["chat", "logprobs"], ...upstream("fim") },
      managed("ls-stories", stories),
      managed("ls-fim", fim),
    ],
  });
  frontKey = (await front.createKey()).key;
  frontClient = front.openai(frontKey);
});

after(async () => {
  await front?.close();
  await back?.close();
});

const prompt = "Once upon a time";
const suffix = " They played all day.";

test("issue 44.2 llama-server engine: completions through its /v1/completions, streamed and not, with logprobs: the in-process engine's answer", async () => {
  const ask = { prompt, max_tokens: 10, temperature: 0, logprobs: 2 };
  const inProcess = await backClient.completions.create({ model: "stories", ...ask });
  const relayed = await frontClient.completions.create({ model: "ls-stories", ...ask });
  assert.equal(relayed.model, "ls-stories");
  assert.equal(relayed.choices[0]!.text, inProcess.choices[0]!.text);
  assert.deepEqual(relayed.usage, inProcess.usage);
  assert.equal(relayed.choices[0]!.finish_reason, "length");
  const lp = relayed.choices[0]!.logprobs!;
  assert.deepEqual(lp.tokens, inProcess.choices[0]!.logprobs!.tokens);
  lp.token_logprobs!.forEach((logprob, i) => assert.ok(Math.abs(logprob! - inProcess.choices[0]!.logprobs!.token_logprobs![i]!) < 1e-3));
  const stream = await frontClient.completions.create({ model: "ls-stories", ...ask, stream: true, stream_options: { include_usage: true } });
  let text = "";
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const event of stream) {
    text += event.choices.map((c) => c.text).join("");
    usage = event.usage ?? usage;
  }
  assert.equal(text, inProcess.choices[0]!.text);
  assert.deepEqual(usage, inProcess.usage);
});

test("issue 44.2 llama-server engine FIM: a suffix goes to its /infill, which builds the same FIM prompt from the GGUF's tokens: the same middle and usage", async () => {
  const ask = { prompt, suffix, max_tokens: 10, temperature: 0 };
  const inProcess = await backClient.completions.create({ model: "fim", ...ask });
  const relayed = await frontClient.completions.create({ model: "ls-fim", ...ask });
  assert.ok(inProcess.choices[0]!.text.startsWith(fimFirstPiece));
  assert.equal(relayed.choices[0]!.text, inProcess.choices[0]!.text);
  assert.deepEqual(relayed.usage, inProcess.usage);
  const stream = await frontClient.completions.create({ model: "ls-fim", ...ask, stream: true });
  let text = "";
  for await (const event of stream) text += event.choices.map((c) => c.text).join("");
  assert.equal(text, inProcess.choices[0]!.text);
});

test("issue 44.2 llama-server engine: echo with logprobs is the capability 400 naming echo; a model without FIM tokens refuses suffix", async () => {
  const echo = await errorOf(await front.post("/v1/completions", { model: "ls-stories", prompt, max_tokens: 0, echo: true, logprobs: 1 }, { key: frontKey }));
  assert.deepEqual(echo, { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "echo" });
  // Echo alone is ours to add.
  const echoed = await frontClient.completions.create({ model: "ls-stories", prompt, max_tokens: 3, temperature: 0, echo: true });
  assert.ok(echoed.choices[0]!.text.startsWith(prompt));
  // llama-server answers 501 for /infill on a model without FIM tokens: a 400 naming suffix, not a 503.
  const err = await apiErrorOf(frontClient.completions.create({ model: "ls-stories", prompt, suffix, max_tokens: 3 }));
  assert.deepEqual([err.status, (err.error as { code: string; param: string }).code, (err.error as { param: string }).param], [400, "invalid_parameter", "suffix"]);
});

test("issue 44.2 upstream engine: /v1/completions passed through to a Modelgate node: echo + logprobs streamed and not, and FIM, as the back node answers", async () => {
  for (const ask of [
    { model: "stories", prompt, max_tokens: 0, echo: true, logprobs: 2 },
    { model: "stories", prompt, max_tokens: 6, temperature: 0, echo: true, logprobs: 1 },
    { model: "fim", prompt, suffix, max_tokens: 8, temperature: 0 },
  ]) {
    const direct = await backClient.completions.create(ask);
    const relayed = await frontClient.completions.create({ ...ask, model: `up-${ask.model}` });
    assert.equal(relayed.choices[0]!.text, direct.choices[0]!.text, JSON.stringify(ask));
    assert.deepEqual(relayed.choices[0]!.logprobs, direct.choices[0]!.logprobs, JSON.stringify(ask));
    assert.deepEqual(relayed.usage, direct.usage);
    const stream = await frontClient.completions.create({ ...ask, model: `up-${ask.model}`, stream: true });
    let text = "";
    const tokens: string[] = [];
    for await (const event of stream) {
      for (const choice of event.choices) {
        text += choice.text;
        tokens.push(...(choice.logprobs?.tokens ?? []));
      }
    }
    assert.equal(text, direct.choices[0]!.text);
    assert.deepEqual(tokens, direct.choices[0]!.logprobs?.tokens ?? []);
  }
});

test("issue 44.3 tokenize and detokenize through llama-server and a Modelgate upstream: the in-process engine's ids and text", async () => {
  const expected = (await (await back.post("/v1/tokenize", { model: "stories", prompt }, { key: (await back.createKey()).key })).json()) as { tokens: number[] };
  for (const model of ["ls-stories", "up-stories"]) {
    const res = await front.post("/v1/tokenize", { model, prompt }, { key: frontKey });
    assert.equal(res.status, 200, await res.clone().text());
    const answer = (await res.json()) as { count: number; tokens: number[]; max_model_len: number | null };
    assert.deepEqual(answer.tokens, expected.tokens, model);
    assert.equal(answer.count, expected.tokens.length);
    const text = (await (await front.post("/v1/detokenize", { model, tokens: expected.tokens.slice(1) }, { key: frontKey })).json()) as { prompt: string };
    assert.equal(text.prompt.trim(), prompt, model);
    const outside = await errorOf(await front.post("/v1/detokenize", { model, tokens: [1, 600] }, { key: frontKey }));
    assert.deepEqual(outside, { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "tokens[1]" }, model);
  }
  // Messages through llama-server: its own template and tokenizer, counted as its chat usage counts them.
  const messages = [{ role: "user" as const, content: prompt }];
  const counted = (await (await front.post("/v1/tokenize", { model: "ls-stories", messages }, { key: frontKey })).json()) as { count: number };
  const chat = await frontClient.chat.completions.create({ model: "ls-stories", messages, max_tokens: 1 });
  assert.equal(counted.count, chat.usage!.prompt_tokens);
});
