import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Writable } from "node:stream";
import { apiErrorOf, errorOf } from "./helpers/errors.ts";
import { json, sse, startReplay, type Replay } from "./helpers/replay-upstream.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { assertChatFraming, readSse } from "./helpers/sse.ts";

/**
 * How the upstream engine maps the wire of the servers that cannot run here. The upstream is a REPLAY SERVER
 * (test/helpers/replay-upstream.ts) answering with the response and error shapes vLLM, SGLang, TGI/TEI and Ollama
 * document; the Modelgate node in front of it is real. Real upstreams (Modelgate nodes, llama-server) have their
 * own tests.
 */
let replay: Replay;
let front: TestServer;
let key: string;
/** The node's log lines: upstream details go here, never to clients (issue 29.12). */
const logLines: string[] = [];
const vllmModel = "meta-llama/Llama-3.3-70B-Instruct";

before(async () => {
  replay = await startReplay();
  replay.on("/health", json(200, {}));
  const upstream = (extra: Record<string, unknown> = {}) => ({
    engine: "upstream",
    upstreams: [{ url: replay.url, apiKey: "replay-secret", model: vllmModel }],
    timeouts: { firstByte: "500ms", idle: "300ms" },
    // One attempt and no ejection: these tests look at how one answer is mapped (pools have their own tests).
    retry: { attempts: 1 },
    breaker: { failures: 1000 },
    ...extra,
  });
  front = await startServer({
    models: [
      { id: "vllm", capabilities: ["chat", "tools", "json", "logprobs", "reasoning", "embeddings", "rerank"], contextSize: 4096, ...upstream({ tokenize: "vllm" }) },
      { id: "vllm-mapped", capabilities: ["chat"], ...upstream() },
      { id: "tgi", capabilities: ["chat", "embeddings", "rerank"], ...upstream({ protocol: "tgi" }) },
      { id: "down", capabilities: ["chat"], engine: "upstream", upstreams: [{ url: "http://127.0.0.1:1/v1", model: "x" }] },
      { id: "fragile", capabilities: ["chat"], ...upstream({ breaker: { failures: 1, cooldown: "60s" } }) },
      { id: "bounded", capabilities: ["chat"], ...upstream({ timeouts: { firstByte: "500ms", idle: "300ms", total: "700ms" } }) },
      {
        id: "patient",
        capabilities: ["chat"],
        requestTimeout: "1000h",
        maxQueueWait: "1000h",
        keepAlive: "1000h",
        ...upstream({ timeouts: { connect: "1000h", firstByte: "1000h", idle: "1000h", total: "1000h" }, breaker: { failures: 1000, cooldown: "1000h" }, health: { interval: "1000h" } }),
      },
    ],
  }, {
    logger: {
      level: "info",
      stream: new Writable({
        write(chunk: Buffer, _enc, done) {
          logLines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
          done();
        },
      }),
    },
  });
  key = (await front.createKey()).key;
});

after(async () => {
  await front?.close();
  await replay?.close();
});

const once = [{ role: "user" as const, content: "Hello" }];
const chat = (model: string, extra: Record<string, unknown> = {}) => front.post("/v1/chat/completions", { model, messages: once, ...extra }, { key });
const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
  id: "chatcmpl-upstream",
  object: "chat.completion.chunk",
  created: 1,
  model: vllmModel,
  choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
});

test("vLLM (replay): a non-stream client's logprobs are the upstream's, one per token in order, beside the joined text", async () => {
  replay.on("/tokenize", json(200, { count: 3, max_model_len: 8192, tokens: [] }));
  const logprob = (token: string, value: number) => ({ token, logprob: value, bytes: [...Buffer.from(token)], top_logprobs: [{ token, logprob: value, bytes: [...Buffer.from(token)] }] });
  const withLogprobs = (content: string, value: number) => ({ ...chunk({ content }), choices: [{ index: 0, delta: { content }, logprobs: { content: [logprob(content, value)] }, finish_reason: null }] });
  replay.on("/v1/chat/completions", sse([chunk({ role: "assistant", content: "" }), withLogprobs("Hi", -0.5), withLogprobs(" there", -1.25), withLogprobs(".", -2), chunk({}, "stop")]));
  const res = await front.openai(key).chat.completions.create({ model: "vllm", messages: once, logprobs: true, top_logprobs: 1 });
  assert.equal(res.choices[0].message.content, "Hi there.");
  assert.deepEqual(res.choices[0].logprobs?.content, [logprob("Hi", -0.5), logprob(" there", -1.25), logprob(".", -2)]);
});

test("vLLM (replay): the prompt is counted with its /tokenize and context_length_exceeded answered here", async () => {
  replay.requests.length = 0;
  replay.on("/tokenize", json(200, { count: 5000, max_model_len: 8192, tokens: [] }));
  const res = await chat("vllm", { max_tokens: 8 });
  assert.deepEqual(await errorOf(res), { status: 400, type: "invalid_request_error", code: "context_length_exceeded", param: "messages" });
  assert.deepEqual(replay.requests.map((r) => r.path), ["/tokenize"], "no generation was asked for");
  assert.deepEqual(replay.requests[0].body, { model: vllmModel, messages: once, add_generation_prompt: true });
});

test("vLLM (replay): reasoning, tool calls and usage re-framed to §6; the upstream gets a translated body", async () => {
  replay.requests.length = 0;
  replay.on("/tokenize", json(200, { count: 12, max_model_len: 8192, tokens: [] }));
  replay.on(
    "/v1/chat/completions",
    sse([
      chunk({ role: "assistant", content: "" }),
      chunk({ reasoning: "The user " }),
      chunk({ reasoning: "wants weather." }),
      chunk({ tool_calls: [{ index: 0, id: "chatcmpl-tool-1", type: "function", function: { name: "get_weather", arguments: "" } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city": ' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
      chunk({}, "tool_calls"),
      { id: "chatcmpl-upstream", object: "chat.completion.chunk", created: 1, model: vllmModel, choices: [], usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 } },
    ]),
  );
  const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
  const res = await chat("vllm", { tools, stream: true, stream_options: { include_usage: true }, user: "someone", temperature: 0.5 });
  assert.equal(res.status, 200);
  const streamed = assertChatFraming(await readSse(res), "vllm");
  assert.equal(streamed.reasoning, "The user wants weather.");
  assert.deepEqual(streamed.toolCalls, [{ id: "chatcmpl-tool-1", name: "get_weather", arguments: '{"city": "Paris"}' }]);
  assert.equal(streamed.finishReason, "tool_calls");
  assert.deepEqual(streamed.usage, { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 });

  const sent = replay.requests.find((r) => r.path === "/v1/chat/completions")!.body as Record<string, unknown>;
  assert.deepEqual(sent, {
    model: vllmModel,
    messages: once,
    stream: true,
    stream_options: { include_usage: true },
    temperature: 0.5,
    tools,
    tool_choice: "auto",
  });
});

test("vLLM (replay): a non-stream client gets the collected message from the upstream's stream", async () => {
  replay.on("/tokenize", json(200, { count: 3, max_model_len: 8192, tokens: [] }));
  replay.on("/v1/chat/completions", sse([chunk({ role: "assistant", content: "" }), chunk({ content: "Hi " }), chunk({ content: "there." }), chunk({}, "stop")]));
  const res = await front.openai(key).chat.completions.create({ model: "vllm", messages: once, max_tokens: 5 });
  assert.equal(res.choices[0].message.content, "Hi there.");
  assert.equal(res.choices[0].finish_reason, "stop");
  // No usage from the upstream: the prompt as counted by its /tokenize, one completion token per piece.
  assert.deepEqual(res.usage, { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 });
  const sent = replay.requests.at(-1)!.body as Record<string, unknown>;
  assert.equal(sent.max_tokens, 5);
});

for (const [name, status, body] of [
  ["vLLM", 400, { object: "error", message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4990 in the messages, 10 in the completion).", type: "BadRequestError", param: null, code: 400 }],
  ["SGLang", 400, { object: "error", message: "The input (5000 tokens) is longer than the model's context length (4096 tokens).", type: "BadRequestError", param: null, code: 400 }],
  ["TGI", 422, { error: "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 5000 `inputs` tokens and 16 `max_new_tokens`", error_type: "validation" }],
] as const) {
  test(`${name} (replay): its context-window 400 is mapped to context_length_exceeded`, async () => {
    replay.on("/v1/chat/completions", json(status, body));
    assert.deepEqual(await errorOf(await chat("vllm-mapped")), { status: 400, type: "invalid_request_error", code: "context_length_exceeded", param: "messages" });
  });
}

test("vLLM (replay): a 400 about a parameter stays invalid_parameter with its param", async () => {
  replay.on("/v1/chat/completions", json(400, { error: { message: "top_p must be in (0, 1], got 0.", type: "BadRequestError", param: "top_p", code: 400 } }));
  assert.deepEqual(await errorOf(await chat("vllm-mapped")), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "top_p" });
});

test("upstream 401/403/404 are our configuration's fault: 500 internal_error, the upstream's words never shown", async () => {
  for (const status of [401, 403, 404]) {
    replay.on("/v1/chat/completions", json(status, { error: { message: "Invalid API key replay-secret", type: "AuthenticationError", code: status } }));
    const res = await chat("vllm-mapped");
    const text = await res.text();
    assert.equal(res.status, 500, `upstream ${status}: ${text}`);
    assert.equal(JSON.parse(text).error.code, "internal_error");
    assert.doesNotMatch(text, /replay-secret|Invalid API key/);
  }
});

test("upstream 429 and 503 are 503 overloaded with the upstream's Retry-After; 5xx and refused connections too", async () => {
  replay.on("/v1/chat/completions", json(429, { error: { message: "Too many requests" } }, { "retry-after": "7" }));
  let res = await chat("vllm-mapped");
  assert.equal(res.headers.get("retry-after"), "7");
  assert.deepEqual(await errorOf(res), { status: 503, type: "server_error", code: "overloaded", param: null });

  replay.on("/v1/chat/completions", json(503, { error: { message: "Service Unavailable" } }, { "retry-after": "3" }));
  res = await chat("vllm-mapped");
  assert.equal(res.headers.get("retry-after"), "3");
  assert.deepEqual(await errorOf(res), { status: 503, type: "server_error", code: "overloaded", param: null });

  replay.on("/v1/chat/completions", json(500, { error: { message: "CUDA out of memory" } }));
  res = await chat("vllm-mapped");
  assert.ok(Number(res.headers.get("retry-after")) >= 1);
  const body = await res.text();
  assert.equal(JSON.parse(body).error.code, "overloaded");
  assert.doesNotMatch(body, /CUDA/);

  assert.deepEqual(await errorOf(await chat("down")), { status: 503, type: "server_error", code: "overloaded", param: null });
});

test("an error event inside the upstream's stream ends ours with one error event and no [DONE]", async () => {
  replay.on(
    "/v1/chat/completions",
    sse([chunk({ role: "assistant", content: "" }), chunk({ content: "Partial" }), { error: { message: "engine died", type: "InternalServerError", code: 500 } }], { done: false }),
  );
  const body = await readSse(await chat("vllm-mapped", { stream: true }));
  assert.equal(body.done, false);
  assert.equal(body.events.at(-1).error.code, "overloaded");
  assert.equal(body.events.filter((e) => e.error).length, 1);
  assert.equal(body.events.map((e) => e.choices?.[0]?.delta?.content ?? "").join(""), "Partial");
});

test("a non-stream client whose upstream stream fails part-way (error event, malformed event, early end, stall) gets 503 overloaded, never a half answer", async () => {
  const failures: [string, Parameters<Replay["on"]>[1]][] = [
    ["error event", sse([chunk({ role: "assistant", content: "" }), chunk({ content: "Partial" }), { error: { message: "engine died", code: 500 } }], { done: false })],
    ["malformed event", sse([chunk({ role: "assistant", content: "Once" }), "{not json"], { done: false })],
    ["early end", sse([chunk({ role: "assistant", content: "Once" })], { done: true })],
    [
      "stall",
      (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(`data: ${JSON.stringify(chunk({ role: "assistant", content: "Once" }))}\n\n`);
      },
    ],
  ];
  for (const [what, answer] of failures) {
    replay.on("/v1/chat/completions", answer);
    const res = await chat("vllm-mapped");
    assert.deepEqual(await errorOf(res), { status: 503, type: "server_error", code: "overloaded", param: null }, what);
  }
  // The same upstream answering whole again: the collected message.
  replay.on("/v1/chat/completions", sse([chunk({ role: "assistant", content: "Once" }), chunk({ content: " upon" }, "stop")]));
  const done = (await (await chat("vllm-mapped")).json()) as { choices: { message: { content: string }; finish_reason: string }[] };
  assert.equal(done.choices[0]!.message.content, "Once upon");
  assert.equal(done.choices[0]!.finish_reason, "stop");
});

test("an upstream that stalls after its headers hits the idle timeout: an error event, never a hang", async () => {
  replay.on("/v1/chat/completions", (_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(`data: ${JSON.stringify(chunk({ role: "assistant", content: "" }))}\n\n`);
    res.write(`data: ${JSON.stringify(chunk({ content: "Once" }))}\n\n`);
    // ...and nothing more, the connection held open.
  });
  const started = Date.now();
  const body = await readSse(await chat("vllm-mapped", { stream: true }));
  assert.ok(Date.now() - started < 3000, `ended after ${Date.now() - started} ms`);
  assert.equal(body.done, false);
  const last = body.events.at(-1);
  assert.equal(last.error.code, "overloaded");
  assert.match(last.error.message, /stalled/);
});

test("an upstream that keeps streaming past the total timeout is cut there: 503, or an error event once streaming", async () => {
  replay.on("/v1/chat/completions", (_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(`data: ${JSON.stringify(chunk({ role: "assistant", content: "" }))}\n\n`);
    // A token every 100 ms, never a finish: within the idle bound, past the total one.
    const timer = setInterval(() => res.write(`data: ${JSON.stringify(chunk({ content: " more" }))}\n\n`), 100);
    res.on("close", () => clearInterval(timer));
  });
  const logged = logLines.length;
  const started = Date.now();
  const err = await apiErrorOf(front.openai(key).chat.completions.create({ model: "bounded", messages: once }));
  assert.equal(err.status, 503);
  assert.equal(err.code, "overloaded");
  const body = await readSse(await chat("bounded", { stream: true }));
  assert.ok(Date.now() - started < 4000, `ended after ${Date.now() - started} ms`);
  assert.equal(body.done, false);
  assert.match(body.events.map((e) => e.choices?.[0]?.delta?.content ?? "").join(""), /^( more)+$/);
  assert.equal(body.events.at(-1).error.code, "overloaded");
  assert.ok(logLines.slice(logged).some((line) => line.includes("total timeout")), "the node logs which bound cut the call");
});

test("durations past what a Node timer holds (1000h > 2^31 - 1 ms) wait, rather than cut every request at once", async () => {
  replay.on("/v1/chat/completions", sse([chunk({ role: "assistant", content: "" }), chunk({ content: "Patient." }), chunk({}, "stop")]));
  const res = await front.openai(key).chat.completions.create({ model: "patient", messages: once });
  assert.equal(res.choices[0].message.content, "Patient.");
  let streamed = "";
  for await (const part of await front.openai(key).chat.completions.create({ model: "patient", messages: once, stream: true })) streamed += part.choices[0]?.delta.content ?? "";
  assert.equal(streamed, "Patient.");
});

test("an upstream that never answers hits the first-byte timeout: 503 overloaded", async () => {
  replay.on("/v1/chat/completions", () => {
    // no headers, ever
  });
  const started = Date.now();
  const err = await apiErrorOf(front.openai(key).chat.completions.create({ model: "vllm-mapped", messages: once }));
  assert.equal(err.status, 503);
  assert.equal(err.code, "overloaded");
  assert.ok(Date.now() - started < 3000);
});

test("Ollama (replay): its OpenAI-compatible stream is re-framed to §6, its extra fields dropped", async () => {
  const ollama = (delta: Record<string, unknown>, finish: string | null = null) => ({
    id: "chatcmpl-123",
    object: "chat.completion.chunk",
    created: 1,
    model: "llama3.2",
    system_fingerprint: "fp_ollama",
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  replay.on(
    "/v1/chat/completions",
    sse([ollama({ role: "assistant", content: "The" }), ollama({ role: "assistant", content: " sky" }), ollama({ role: "assistant", content: "" }, "stop"),
      { id: "chatcmpl-123", object: "chat.completion.chunk", created: 1, model: "llama3.2", system_fingerprint: "fp_ollama", choices: [], usage: { prompt_tokens: 26, completion_tokens: 2, total_tokens: 28 } }]),
  );
  const res = await chat("vllm-mapped", { stream: true, stream_options: { include_usage: true } });
  const body = await readSse(res);
  const streamed = assertChatFraming(body, "vllm-mapped");
  assert.equal(streamed.content, "The sky");
  assert.deepEqual(streamed.usage, { prompt_tokens: 26, completion_tokens: 2, total_tokens: 28 });
  assert.doesNotMatch(body.raw, /fp_ollama|chatcmpl-123/);
});

test("embeddings: an upstream that answers base64 is converted for a float request, and usage kept", async () => {
  const vector = Float32Array.from([0.25, -0.5, 1]);
  const b64 = Buffer.from(vector.buffer).toString("base64");
  replay.on("/v1/embeddings", json(200, { object: "list", data: [{ object: "embedding", index: 0, embedding: b64 }], model: vllmModel, usage: { prompt_tokens: 4, total_tokens: 4 } }));
  const res = await front.post("/v1/embeddings", { model: "vllm", input: "hi", encoding_format: "float" }, { key });
  const body = (await res.json()) as { data: { embedding: number[] }[]; usage: unknown };
  assert.deepEqual(body.data[0].embedding, [0.25, -0.5, 1]);
  assert.deepEqual(body.usage, { prompt_tokens: 4, total_tokens: 4 });
  assert.deepEqual(replay.requests.at(-1)!.body, { model: vllmModel, input: ["hi"], encoding_format: "float" });
});

test("TEI (replay, protocol tgi): /embed and /rerank with texts, mapped to §2.5 and §2.7", async () => {
  replay.on("/embed", json(200, [[0.5, 0.5], [1, 0]]));
  const emb = (await (await front.post("/v1/embeddings", { model: "tgi", input: ["a", "b"] }, { key })).json()) as { data: { index: number; embedding: number[] }[] };
  assert.deepEqual(emb.data.map((d) => d.embedding), [[0.5, 0.5], [1, 0]]);
  assert.deepEqual(replay.requests.at(-1), { path: "/embed", body: { inputs: ["a", "b"], truncate: false } });

  replay.on("/rerank", json(200, [{ index: 1, score: 0.9 }, { index: 0, score: 0.1 }, { index: 2, score: 0.5 }]));
  const res = await front.post("/v1/rerank", { model: "tgi", query: "q", documents: ["a", "b", "c"], top_n: 2 }, { key });
  const reranked = (await res.json()) as { results: unknown[] };
  assert.deepEqual(reranked.results, [{ index: 1, relevance_score: 0.9 }, { index: 2, relevance_score: 0.5 }]);
  assert.deepEqual(replay.requests.at(-1), { path: "/rerank", body: { query: "q", texts: ["a", "b", "c"], raw_scores: false } });
});

test("an upstream answer that does not fit the request (wrong number of vectors) is 503, not a half answer", async () => {
  replay.on("/v1/embeddings", json(200, { object: "list", data: [{ object: "embedding", index: 0, embedding: [1, 2] }] }));
  assert.deepEqual(await errorOf(await front.post("/v1/embeddings", { model: "vllm", input: ["a", "b"] }, { key })), {
    status: 503,
    type: "server_error",
    code: "overloaded",
    param: null,
  });
});

test("issue 29.12 no client-visible message carries the upstream's address or its words, on every failure path; the log keeps them", async () => {
  const { host, port } = new URL(replay.url);
  const words = "SECRET-UPSTREAM-WORDS";
  const leaks = ["127.0.0.1", `:${port}`, words, "ECONNREFUSED"];
  const seen: string[] = [];
  const leaked: string[] = [];
  const check = async (what: string, res: Response, status: number) => {
    const text = await res.text();
    seen.push(what);
    assert.equal(res.status, status, `${what}: ${text}`);
    assert.match(text, /"code":"(overloaded|invalid_parameter|context_length_exceeded)"/, `${what}: ${text}`);
    for (const leak of leaks) if (text.includes(leak)) leaked.push(`${what} shows ${leak}: ${text}`);
  };
  const hold = () => undefined;

  await check("refused connection", await chat("down"), 503);
  replay.on("/v1/chat/completions", hold);
  await check("first-byte timeout", await chat("vllm-mapped"), 503);
  replay.on("/v1/chat/completions", (_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(`data: ${JSON.stringify(chunk({ role: "assistant", content: "Once" }))}\n\n`);
  });
  await check("stalled stream", await chat("vllm-mapped", { stream: true }), 200);
  replay.on("/v1/chat/completions", json(500, { error: { message: `CUDA out of memory ${words}`, type: "InternalServerError" } }));
  await check("5xx with a JSON body", await chat("vllm-mapped"), 503);
  replay.on("/v1/chat/completions", (_req, res) => void res.writeHead(502, { "content-type": "text/plain" }).end(`bad gateway ${words}`));
  await check("5xx with a text body", await chat("vllm-mapped"), 503);
  replay.on("/v1/chat/completions", json(400, { error: { message: `top_p is wrong for ${words}`, type: "BadRequestError", param: "top_p", code: 400 } }));
  await check("a 400 about a parameter", await chat("vllm-mapped"), 400);
  replay.on("/v1/chat/completions", json(400, { object: "error", message: `This model's maximum context length is 4096 tokens. ${words}`, type: "BadRequestError" }));
  await check("a context-window 400", await chat("vllm-mapped"), 400);
  replay.on("/v1/chat/completions", sse([chunk({ role: "assistant", content: "" }), chunk({ content: "Partial" }), { error: { message: `engine died ${words}`, code: 500 } }], { done: false }));
  await check("an error event in the stream", await chat("vllm-mapped", { stream: true }), 200);
  replay.on("/v1/chat/completions", sse([chunk({ role: "assistant", content: "Once" }), `{not json ${words}`], { done: false }));
  await check("a malformed stream event", await chat("vllm-mapped", { stream: true }), 200);
  replay.on("/v1/chat/completions", sse([chunk({ role: "assistant", content: "Once" })], { done: true }));
  await check("a stream that ends before it finished", await chat("vllm-mapped", { stream: true }), 200);
  replay.on("/v1/embeddings", json(200, { object: "list", data: [{ object: "embedding", index: 0, embedding: [1, 2] }] }));
  await check("a malformed embeddings answer", await front.post("/v1/embeddings", { model: "vllm", input: ["a", "b"] }, { key }), 503);
  replay.on("/v1/embeddings", (_req, res) => void res.writeHead(200, { "content-type": "application/json" }).end(`{"data": ${words}`));
  await check("an embeddings answer that is not JSON", await front.post("/v1/embeddings", { model: "vllm", input: ["a"] }, { key }), 503);
  replay.on("/rerank", json(200, [{ index: 7, score: 0.9 }]));
  await check("a malformed rerank answer", await front.post("/v1/rerank", { model: "tgi", query: "q", documents: ["a"] }, { key }), 503);

  replay.on("/v1/chat/completions", json(500, { error: { message: `down ${words}` } }));
  await check("the failure that ejects the upstream", await chat("fragile"), 503);
  await check("every upstream ejected", await chat("fragile"), 503);
  await check("every upstream ejected, streaming", await chat("fragile", { stream: true }), 503);

  assert.equal(seen.length, 16);
  assert.deepEqual(leaked, []);
  const log = logLines.join("\n");
  assert.ok(log.includes(host), "the log names the upstream");
  assert.ok(log.includes("127.0.0.1:1"), "the log names the refused upstream");
  assert.ok(log.includes(`CUDA out of memory ${words}`) && log.includes(`engine died ${words}`), "the log keeps the upstream's words");
});
