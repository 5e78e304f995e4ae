import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { generateText, streamText } from "ai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { anthropicClient } from "../harness/anthropic-client.ts";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import Fastify from "fastify";
import { usageRows } from "./helpers/usage.ts";
import { SseStream } from "../src/http/sse.ts";
import { AppError } from "../src/errors/app-error.ts";
import { Accumulator } from "../src/features/generation/accumulator.ts";
import { MessageStreamWriter } from "../src/features/messages/message-stream.ts";
import { parseNamedSse } from "./helpers/sse.ts";

let srv: TestServer;
let key: string;
let keyId: string;
let accountId: string;
let client: Anthropic;

const forged = path.join(modelsDir, "forged/stories260K-chatml-tools.gguf");

before(async () => {
  srv = await startServer({
    models: [
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1 },
      { id: "tools", engine: "llama", source: forged, capabilities: ["chat", "tools"], contextSize: 2048, parallel: 1, threads: 1 },
      { id: "think", engine: "llama", source: forged, capabilities: ["chat", "reasoning"], contextSize: 2048, parallel: 1, threads: 1 },
      { id: "lazy", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1, load: "lazy" },
    ],
    plans: { tiny: { rateLimit: { requests: 2, window: "1h" }, tokenLimit: { tokens: 100_000, window: "1h" } } },
  });
  ({ key, id: keyId, accountId } = await srv.createKey());
  client = anthropicClient(srv, key);
});

after(async () => {
  await srv?.close();
});

const anthropicHeaders = { "anthropic-version": "2023-06-01" };
const post = (target: string, body: Record<string, unknown>, headers: Record<string, string> = { "x-api-key": key }) =>
  srv.post(target, body, { headers: { ...anthropicHeaders, ...headers } });

/** Anthropic's envelope of an error answer, with its status. */
async function anthropicErrorOf(res: Response): Promise<{ status: number; type: string; message: string }> {
  const body = (await res.json()) as { type: string; error: { type: string; message: string } };
  assert.equal(body.type, "error", JSON.stringify(body));
  assert.equal(typeof body.error.message, "string");
  return { status: res.status, type: body.error.type, message: body.error.message };
}

test("issue 44.1 messages.create (@anthropic-ai/sdk): a message object with text, stop_reason and usage, recorded as chat", async () => {
  const message = await client.messages.create({ model: "stories", max_tokens: 20, system: "You tell stories.", messages: [{ role: "user", content: "Once upon a time" }] });
  assert.match(message.id, /^msg_/);
  assert.equal(message.type, "message");
  assert.equal(message.role, "assistant");
  assert.equal(message.model, "stories");
  assert.equal(message.content[0]!.type, "text");
  assert.ok(["end_turn", "max_tokens"].includes(message.stop_reason!));
  assert.equal(message.stop_sequence, null);
  assert.ok(message.usage.input_tokens > 0 && message.usage.output_tokens > 0);
  assert.equal(typeof message.usage.cache_read_input_tokens, "number");
  assert.equal(message.usage.cache_creation_input_tokens, 0);
  if (message.usage.output_tokens === 20) assert.equal(message.stop_reason, "max_tokens");
  const rows = await usageRows(srv.server, srv.config, accountId, keyId);
  assert.ok(rows.some(([model, endpoint]) => model === "stories" && endpoint === "chat"), JSON.stringify(rows));
});

test("issue 44.1 stream: Anthropic's event order, and the deltas add up to the final text", async () => {
  const res = await post("/v1/messages?beta=true", { model: "stories", max_tokens: 12, stream: true, messages: [{ role: "user", content: [{ type: "text", text: "Tell me a story", cache_control: { type: "ephemeral" } }] }] }, { "x-api-key": key, "anthropic-beta": "interleaved-thinking-2025-05-14" });
  assert.equal(res.status, 200);
  assert.ok(res.headers.get("request-id"));
  const events = parseNamedSse(await res.text()).filter((e) => e.type !== "ping");
  const types = events.map((e) => e.type);
  const deltas = types.filter((t) => t === "content_block_delta").length;
  assert.ok(deltas >= 1);
  assert.deepEqual(types, ["message_start", "content_block_start", ...Array(deltas).fill("content_block_delta"), "content_block_stop", "message_delta", "message_stop"]);
  assert.ok(events[0]!.message.usage.input_tokens > 0);
  assert.deepEqual(events[1]!.content_block, { type: "text", text: "" });
  assert.equal(events.at(-2)!.delta.stop_reason, "max_tokens");
  assert.equal(events.at(-2)!.usage.output_tokens, 12);
});

test("issue 44.1 messages.stream (@anthropic-ai/sdk): finalMessage() matches the streamed text", async () => {
  const stream = client.messages.stream({ model: "stories", max_tokens: 40, messages: [{ role: "user", content: "The dog" }] });
  let streamed = "";
  stream.on("text", (text) => (streamed += text));
  const final = await stream.finalMessage();
  assert.equal(final.content[0]!.type === "text" && final.content[0]!.text, streamed);
  assert.ok(final.usage.output_tokens > 0);
});

// A forced call sampled at random may run past max_tokens before its JSON closes; greedy decoding does not. (temperature is
// Anthropic's parameter, though this SDK's types no longer list it.)
const greedy = { temperature: 0 };

const weather = {
  name: "get_weather",
  description: "Current weather for a city",
  input_schema: { type: "object" as const, properties: { city: { type: "string", maxLength: 20 } }, required: ["city"], additionalProperties: false },
  cache_control: { type: "ephemeral" as const },
};

test("issue 44.1 tools (@anthropic-ai/sdk): a forced call is a tool_use block with a parsed input, and its tool_result comes back into the prompt", async () => {
  const first = await client.messages.create({ model: "tools", max_tokens: 60, ...greedy, tools: [weather], tool_choice: { type: "tool", name: "get_weather" }, messages: [{ role: "user", content: "Weather in Paris?" }] });
  assert.equal(first.stop_reason, "tool_use");
  const call = first.content.find((b) => b.type === "tool_use");
  assert.ok(call && call.type === "tool_use", JSON.stringify(first.content));
  assert.equal(call.name, "get_weather");
  assert.equal(typeof (call.input as { city: unknown }).city, "string");

  const conversation: Anthropic.MessageParam[] = [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: first.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: [{ type: "text", text: '{"temperature": 21}' }] }] },
  ];
  const second = await client.messages.create({ model: "tools", max_tokens: 10, tools: [weather], tool_choice: { type: "none" }, messages: conversation });
  assert.ok(second.content.some((b) => b.type === "text"));
  const counted = await client.messages.countTokens({ model: "tools", tools: [weather], tool_choice: { type: "none" }, messages: conversation });
  assert.equal(counted.input_tokens, second.usage.input_tokens + second.usage.cache_read_input_tokens!, "count_tokens counts what the message's prompt was");
  const alone = await client.messages.countTokens({ model: "tools", tools: [weather], tool_choice: { type: "none" }, messages: [{ role: "user", content: "Weather in Paris?" }] });
  assert.ok(counted.input_tokens > alone.input_tokens + 10, "the call and its result are in the prompt");

  const stream = await post("/v1/messages", { model: "tools", max_tokens: 60, ...greedy, stream: true, tools: [weather], tool_choice: { type: "any" }, messages: [{ role: "user", content: "Weather in Paris?" }] });
  const events = parseNamedSse(await stream.text()).filter((e) => e.type !== "ping");
  const start = events.find((e) => e.type === "content_block_start" && e.content_block.type === "tool_use")!;
  assert.equal(start.content_block.name, "get_weather");
  assert.match(start.content_block.id, /\S/);
  assert.deepEqual(start.content_block.input, {});
  const json = events.filter((e) => e.type === "content_block_delta" && e.index === start.index).map((e) => e.delta.partial_json).join("");
  assert.equal(typeof JSON.parse(json).city, "string");
  assert.equal(events.find((e) => e.type === "message_delta")!.delta.stop_reason, "tool_use");
});

test("issue 44.1 thinking: a reasoning model's thought is a thinking block with a signature, streamed as thinking_delta then signature_delta", async () => {
  const body = { model: "think", max_tokens: 40, temperature: 0, thinking: { type: "enabled" as const, budget_tokens: 1024 }, messages: [{ role: "user" as const, content: "Why is the sky blue?" }] };
  const message = await client.messages.create(body);
  const thinking = message.content[0]!;
  assert.equal(thinking.type, "thinking");
  assert.ok(thinking.type === "thinking" && thinking.thinking.length > 0 && !thinking.thinking.includes("<think>") && thinking.signature.length > 0);

  const stream = client.messages.stream(body);
  let thought = "";
  stream.on("thinking", (delta) => (thought += delta));
  const final = await stream.finalMessage();
  assert.equal(thought, thinking.type === "thinking" && thinking.thinking, "at temperature 0 the streamed thought is the non-stream one");
  assert.deepEqual(final.content[0], thinking);

  // thinking: disabled switches the thought off (the llama engine renders the turn without an open thought).
  const plain = await client.messages.create({ ...body, thinking: { type: "disabled" } });
  assert.ok(plain.content.every((b) => b.type !== "thinking"), JSON.stringify(plain.content));
  assert.equal(plain.content[0]!.type, "text");

  // Given back in a later turn, with a redacted one, the thought is accepted (and left out of the prompt).
  const next = await client.messages.countTokens({ ...body, messages: [body.messages[0]!, { role: "assistant", content: [thinking, { type: "redacted_thinking", data: "xyz" }, { type: "text", text: "Because." }] }, { role: "user", content: "Why?" }] });
  assert.ok(next.input_tokens > 0);
});

test("issue 44.1 errors in Anthropic's envelope and statuses, with request-id, Retry-After and the anthropic-ratelimit headers", async () => {
  const badKey = await post("/v1/messages", { model: "stories", max_tokens: 5, messages: [{ role: "user", content: "Hi" }] }, { "x-api-key": "mg-not-a-key" });
  assert.deepEqual(await anthropicErrorOf(badKey), { status: 401, type: "authentication_error", message: "Malformed API key." });
  for (const name of ["request-id", "x-request-id", "retry-after", "anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset", "x-ratelimit-limit-requests"]) {
    assert.ok(badKey.headers.get(name) !== null, `401 carries ${name}`);
  }
  assert.match(badKey.headers.get("anthropic-ratelimit-requests-reset")!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  const sdkError = await client.messages.create({ model: "nope", max_tokens: 5, messages: [{ role: "user", content: "Hi" }] }).catch((err: unknown) => err);
  assert.ok(sdkError instanceof Anthropic.NotFoundError, String(sdkError));
  assert.equal((sdkError.error as { error: { type: string } }).error.type, "not_found_error");

  const cases: [Record<string, unknown>, string][] = [
    [{ model: "stories", messages: [{ role: "user", content: "Hi" }] }, "max_tokens"],
    [{ model: "stories", max_tokens: 5, messages: [] }, "messages"],
    [{ model: "stories", max_tokens: 5, temperature: 1.5, messages: [{ role: "user", content: "Hi" }] }, "temperature"],
    [{ model: "stories", max_tokens: 5, messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: "https://example.com/a.png" } }] }] }, "source.url"],
    [{ model: "stories", max_tokens: 5, messages: [{ role: "user", content: [{ type: "tool_use", id: "t", name: "f", input: {} }] }] }, "tool_use"],
    [{ model: "stories", max_tokens: 5, tool_choice: { type: "tool", name: "f" }, messages: [{ role: "user", content: "Hi" }] }, "tool_choice"],
    [{ model: "stories", max_tokens: 5, messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: {} }] }, { role: "user", content: "Hi" }] }, "messages[1].content[0]"],
    [{ model: "stories", max_tokens: 5, messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t9", content: "x" }] }] }, "messages[0].content[0].tool_use_id"],
    [{ model: "stories", max_tokens: 5, messages: [{ role: "user", content: [{ type: "document", source: { type: "text", data: "x" } }] }] }, "messages[0].content[0]"],
  ];
  for (const [body, mentions] of cases) {
    const res = await post("/v1/messages", body);
    const error = await anthropicErrorOf(res);
    assert.equal(error.status, 400, JSON.stringify(body));
    assert.equal(error.type, "invalid_request_error");
    assert.ok(error.message.includes(mentions), `${error.message} names ${mentions}`);
    assert.equal(res.headers.get("retry-after"), "0");
  }
  const unknownPath = await post("/v1/messages/batches", { requests: [] });
  assert.equal((await anthropicErrorOf(unknownPath)).status, 404);
  assert.equal(unknownPath.headers.get("request-id"), unknownPath.headers.get("x-request-id"));
  const wrongMethod = await srv.get("/v1/messages", { headers: { "x-api-key": key } });
  assert.deepEqual(await anthropicErrorOf(wrongMethod), { status: 405, type: "invalid_request_error", message: "Method GET is not allowed on /v1/messages; use POST." });
  assert.ok(wrongMethod.headers.get("request-id") && wrongMethod.headers.get("retry-after"));

  const loading = await anthropicClient(srv, key).messages.create({ model: "lazy", max_tokens: 2, messages: [{ role: "user", content: "Hi" }] }).catch((err: unknown) => err);
  assert.ok(loading instanceof Anthropic.APIError && loading.status === 529, String(loading));
  assert.equal((loading.error as { error: { type: string } }).error.type, "overloaded_error");
  assert.ok(Number(loading.headers?.get("retry-after")) >= 1);
});

test("issue 44.1 429: rate_limit_error with Retry-After, anthropic-ratelimit requests and tokens headers beside ours", async () => {
  const tiny = await srv.createKey({ plan: "tiny" });
  const body = { model: "stories", max_tokens: 2, messages: [{ role: "user", content: "Hi" }] };
  const ok = await post("/v1/messages", body, { "x-api-key": tiny.key });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get("anthropic-ratelimit-requests-limit"), "2");
  assert.equal(ok.headers.get("anthropic-ratelimit-requests-remaining"), "1");
  assert.equal(ok.headers.get("anthropic-ratelimit-tokens-limit"), "100000");
  assert.equal(ok.headers.get("retry-after"), "0");
  const last = await post("/v1/messages", { ...body, stream: true }, { authorization: `Bearer ${tiny.key}` });
  assert.equal(last.status, 200);
  assert.equal(last.headers.get("anthropic-ratelimit-requests-remaining"), "0");
  assert.ok(Number(last.headers.get("retry-after")) >= 1, "the window is spent: Retry-After says when it frees");
  await last.text();
  const refused = await post("/v1/messages", body, { "x-api-key": tiny.key });
  const error = await anthropicErrorOf(refused);
  assert.equal(error.status, 429);
  assert.equal(error.type, "rate_limit_error");
  assert.ok(Number(refused.headers.get("retry-after")) >= 1);
  assert.equal(refused.headers.get("anthropic-ratelimit-requests-remaining"), "0");
  assert.ok(refused.headers.get("x-ratelimit-remaining-requests") !== null);
  assert.ok(refused.headers.get("anthropic-ratelimit-tokens-remaining") !== null);
});

test("issue 44.1 max_tokens over the window is capped to what fits; a prompt alone over it is 'prompt is too long: N tokens > M maximum'", async () => {
  const message = await client.messages.create({ model: "stories", max_tokens: 32_000, messages: [{ role: "user", content: "Once upon a time" }] });
  assert.ok(message.usage.input_tokens + message.usage.output_tokens <= 256, JSON.stringify(message.usage));
  const long = "the cat sat on the mat and ".repeat(60);
  const res = await post("/v1/messages", { model: "stories", max_tokens: 5, messages: [{ role: "user", content: long }] });
  const error = await anthropicErrorOf(res);
  assert.equal(error.status, 400);
  assert.equal(error.type, "invalid_request_error");
  assert.match(error.message, /^prompt is too long: \d+ tokens > 256 maximum$/);
});

test("issue 44.1 GET /v1/models with anthropic-version: Anthropic's list shape (its SDK's models.list), ours without", async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  assert.ok(ids.includes("stories"));
  const stories = page.data.find((m) => m.id === "stories")!;
  assert.equal(stories.type, "model");
  assert.equal(stories.display_name, "stories");
  assert.ok(!Number.isNaN(Date.parse(stories.created_at)));
  assert.equal((await client.models.retrieve("stories")).type, "model");
  const ours = (await (await srv.get("/v1/models", { key })).json()) as { object: string };
  assert.equal(ours.object, "list");
});

test("issue 44.1 AI SDK (@ai-sdk/anthropic): generateText and streamText", async () => {
  const anthropic = createAnthropic({ baseURL: srv.baseURL, apiKey: key, fetch: srv.fetch as typeof fetch });
  const generated = await generateText({ model: anthropic("stories"), prompt: "Once upon a time", maxOutputTokens: 20, maxRetries: 0 });
  assert.ok(generated.text.length > 0);
  assert.ok((generated.usage.outputTokens ?? 0) > 0 && (generated.usage.inputTokens ?? 0) > 0);

  const streamed = streamText({ model: anthropic("stories"), prompt: "Once upon a time", maxOutputTokens: 20, maxRetries: 0 });
  let text = "";
  for await (const piece of streamed.textStream) text += piece;
  assert.ok(text.length > 0);
  assert.equal(text, await streamed.text);
});

test("issue 44.1 nothing differs by door: a message is charged as the same chat completion", async () => {
  const a = await srv.createKey();
  const b = await srv.createKey();
  // temperature is Anthropic's parameter, though this SDK's types no longer list it.
  const body = { model: "stories", max_tokens: 15, temperature: 0, system: "Be brief.", messages: [{ role: "user" as const, content: "Once upon a time" }] };
  const message = await anthropicClient(srv, a.key).messages.create(body);
  const chat = await srv.openai(b.key).chat.completions.create({ model: "stories", max_tokens: 15, temperature: 0, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Once upon a time" }] });
  // As on Anthropic, the prompt is input_tokens plus the cache reads: the same prompt as chat's.
  assert.equal(message.usage.input_tokens + message.usage.cache_read_input_tokens!, chat.usage!.prompt_tokens);
  assert.equal(message.usage.output_tokens, chat.usage!.completion_tokens);
  assert.equal(message.content[0]!.type === "text" && message.content[0]!.text, chat.choices[0]!.message.content);
  const rowsA = await usageRows(srv.server, srv.config, a.accountId, a.id);
  const rowsB = await usageRows(srv.server, srv.config, b.accountId, b.id);
  assert.deepEqual(rowsA, rowsB);
  assert.deepEqual(rowsA, [["stories", "chat", 1, chat.usage!.prompt_tokens, chat.usage!.completion_tokens]]);

  // The same prompt again: the engine reuses its KV cache, and says so; the usage row still counts the whole prompt.
  const again = await anthropicClient(srv, a.key).messages.create(body);
  assert.ok(again.usage.cache_read_input_tokens! > 0, JSON.stringify(again.usage));
  assert.equal(again.usage.input_tokens + again.usage.cache_read_input_tokens!, chat.usage!.prompt_tokens);
  const [row] = await usageRows(srv.server, srv.config, a.accountId, a.id);
  assert.equal(row![3], 2 * chat.usage!.prompt_tokens);
});

test("issue 44.1 stream: pings while waiting, then an error after the start is one error event in Anthropic's envelope; a call that does not parse is that error, not half a block", async () => {
  const app = Fastify();
  app.get("/s", async (request, reply) => {
    const writer = new MessageStreamWriter("msg_1", () => "m");
    const sse = new SseStream(reply, 20, null, writer.failureFrame, MessageStreamWriter.ping);
    writer.attach(sse);
    sse.keepAliveUntilFirstFrame();
    await new Promise((resolve) => setTimeout(resolve, 70));
    writer.start(5);
    writer.delta({ type: "content", text: "Once" });
    writer.delta({ type: "tool_call", index: 0, id: "call_1", name: "get_weather", arguments: '{"city": ' });
    try {
      writer.finish("tool_calls", new Accumulator());
      assert.fail("finish must refuse the call");
    } catch (err) {
      assert.ok(err instanceof AppError);
      writer.fail(err);
    }
    return reply;
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  try {
    const res = await fetch(`http://127.0.0.1:${(app.server.address() as { port: number }).port}/s`);
    const events = parseNamedSse(await res.text());
    const types = events.map((e) => e.type);
    const pings = types.indexOf("message_start");
    assert.ok(pings >= 1 && types.slice(0, pings).every((t) => t === "ping"), types.join());
    assert.deepEqual(types.slice(pings), [
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "error",
    ]);
    assert.equal(events[pings]!.message.usage.input_tokens, 5);
    assert.deepEqual(events.at(-1), { type: "error", error: { type: "api_error", message: "The model's call to 'get_weather' did not produce a JSON object of arguments." } });
  } finally {
    await app.close();
  }
});

test("issue 44.1 stop_sequences: the one that ended the message is stop_reason stop_sequence with its text, streamed and not", async () => {
  const body = { model: "stories", max_tokens: 60, temperature: 0, stop_sequences: ["zzz", "little"], messages: [{ role: "user" as const, content: "Once upon a time" }] };
  const message = await client.messages.create(body);
  assert.equal(message.stop_reason, "stop_sequence", JSON.stringify(message));
  assert.equal(message.stop_sequence, "little");
  assert.ok(message.content[0]!.type === "text" && !message.content[0]!.text.includes("little"));
  const final = await client.messages.stream(body).finalMessage();
  assert.equal(final.stop_reason, "stop_sequence");
  assert.equal(final.stop_sequence, "little");
});

test("issue 44.1 a model without tools answers Claude Code's requests (its tools left out, the calls in its history kept); a forced call is still the capability 400", async () => {
  const conversation: Anthropic.MessageParam[] = [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "21 degrees", is_error: false }, { type: "text", text: "And then?" }] },
  ];
  const message = await client.messages.create({ model: "stories", max_tokens: 5, tools: [weather], messages: conversation });
  assert.equal(message.content[0]!.type, "text");
  const counted = await client.messages.countTokens({ model: "stories", tools: [weather], messages: conversation });
  assert.equal(counted.input_tokens, message.usage.input_tokens + message.usage.cache_read_input_tokens!);
  const forced = await post("/v1/messages", { model: "stories", max_tokens: 5, tools: [weather], tool_choice: { type: "any" }, messages: conversation });
  const error = await anthropicErrorOf(forced);
  assert.equal(error.status, 400);
  assert.match(error.message, /^tools: /);
});

test("issue 44.1 a tool's input_schema guides the call unless strict: keywords the grammar cannot enforce are dropped, and refused naming them with strict: true", async () => {
  const bounded = { name: "set_volume", input_schema: { type: "object" as const, properties: { level: { type: "integer", minimum: 0, maximum: 10 }, unit: { type: "string", pattern: "^db$" } }, required: ["level"] } };
  const call = await client.messages.create({ model: "tools", max_tokens: 100, ...greedy, tools: [bounded], tool_choice: { type: "tool", name: "set_volume" }, messages: [{ role: "user", content: "Louder" }] });
  const use = call.content.find((b) => b.type === "tool_use");
  assert.ok(use && use.type === "tool_use" && Number.isInteger((use.input as { level: number }).level), JSON.stringify(call.content));
  const strict = await post("/v1/messages/count_tokens", { model: "tools", tools: [{ ...bounded, strict: true }], tool_choice: { type: "any" }, messages: [{ role: "user", content: "Louder" }] });
  const error = await anthropicErrorOf(strict);
  assert.equal(error.status, 400);
  assert.match(error.message, /^tools\[0\]\.input_schema\.properties\.level\.minimum: /);
});

test("issue 44.1 a call that max_tokens cuts short: left out of the message (stop_reason max_tokens), streamed as far as it went", async () => {
  const body = { model: "tools", max_tokens: 3, tools: [weather], tool_choice: { type: "tool" as const, name: "get_weather" }, messages: [{ role: "user" as const, content: "Weather in Paris?" }] };
  const message = await client.messages.create(body);
  assert.equal(message.stop_reason, "max_tokens");
  assert.ok(message.content.every((b) => b.type !== "tool_use"), JSON.stringify(message.content));
  const events = parseNamedSse(await (await post("/v1/messages", { ...body, stream: true })).text()).filter((e) => e.type !== "ping");
  assert.deepEqual(events.slice(-3).map((e) => e.type), ["content_block_stop", "message_delta", "message_stop"]);
  assert.equal(events.at(-2)!.delta.stop_reason, "max_tokens");
});

test("issue 44.1 a role: system message in messages joins the system prompt, and unknown fields are ignored", async () => {
  const withSystem = await post("/v1/messages/count_tokens?beta=true", {
    model: "stories",
    system: [{ type: "text", text: "You tell stories.", cache_control: { type: "ephemeral" } }],
    messages: [{ role: "user", content: "Hi" }],
  });
  const folded = await post("/v1/messages/count_tokens", {
    model: "stories",
    messages: [{ role: "system", content: "You tell stories." }, { role: "user", content: "Hi" }],
    context_management: { edits: [] },
    output_config: { effort: "low" },
    tools: [{ name: "Read", input_schema: { type: "object" }, defer_loading: true }, { type: "web_search_20250305", name: "web_search", max_uses: 2 }],
    metadata: { user_id: "user_1" },
  });
  assert.equal(withSystem.status, 200);
  assert.equal(folded.status, 200);
  assert.deepEqual(await folded.json(), await withSystem.json());
});

test("issue 44.1 a last assistant message (a prefill) is continued on llama models: the answer is the new text only", async () => {
  const prefill = "Once upon a time, there was";
  const body = { model: "stories", max_tokens: 8, temperature: 0, messages: [{ role: "user" as const, content: "Tell me a story" }, { role: "assistant" as const, content: prefill }] };
  const message = await client.messages.create(body);
  const text = message.content[0]!.type === "text" ? message.content[0]!.text : "";
  assert.ok(text.length > 0 && !text.startsWith(prefill), JSON.stringify(text));
  const counted = await client.messages.countTokens({ model: "stories", messages: body.messages });
  assert.equal(counted.input_tokens, message.usage.input_tokens + message.usage.cache_read_input_tokens!);
});
