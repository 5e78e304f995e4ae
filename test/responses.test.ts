import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import Fastify from "fastify";
import OpenAI from "openai";
import { generateText, streamText } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";
import { usageRows } from "./helpers/usage.ts";
import { parseNamedSse } from "./helpers/sse.ts";
import { SseStream } from "../src/http/sse.ts";
import { AppError } from "../src/errors/app-error.ts";
import { ResponseStreamWriter } from "../src/features/responses/response-stream.ts";
import { ResponseHead } from "../src/features/responses/response-object.ts";

let srv: TestServer;
let key: string;
let keyId: string;
let accountId: string;
let client: OpenAI;

const forged = path.join(modelsDir, "forged/stories260K-chatml-tools.gguf");

before(async () => {
  srv = await startServer({
    models: [
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat", "json"], contextSize: 1024, parallel: 2, threads: 1 },
      { id: "tools", engine: "llama", source: forged, capabilities: ["chat", "tools"], contextSize: 2048, parallel: 1, threads: 1 },
      { id: "think", engine: "llama", source: forged, capabilities: ["chat", "reasoning"], contextSize: 2048, parallel: 1, threads: 1 },
      { id: "tools-capped", engine: "llama", source: forged, capabilities: ["chat", "tools"], contextSize: 2048, parallel: 1, threads: 1, load: "lazy", limits: { maxTools: 1, maxToolSchemaNodes: 3 } },
    ],
  });
  ({ key, id: keyId, accountId } = await srv.createKey());
  client = srv.openai(key);
});

after(async () => {
  await srv?.close();
});

const post = (body: Record<string, unknown>) => srv.post("/v1/responses", body, { key });

test("responses.create (openai-node): a string input with instructions gives a completed response with a message item and usage", async () => {
  const res = await client.responses.create({ model: "stories", instructions: "You tell stories.", input: "Once upon a time", max_output_tokens: 30 });
  assert.match(res.id, /^resp_[0-9a-f]{32}$/);
  assert.equal(res.object, "response");
  assert.equal(res.model, "stories");
  const message = res.output.find((item) => item.type === "message");
  assert.ok(message && message.type === "message" && message.role === "assistant");
  assert.equal(message.content[0]!.type, "output_text");
  assert.ok(res.output_text.length > 0, "openai-node's output_text joins the message text");
  assert.ok(res.usage && res.usage.input_tokens > 0 && res.usage.output_tokens > 0);
  assert.equal(res.usage.total_tokens, res.usage.input_tokens + res.usage.output_tokens);
  if (res.usage.output_tokens === 30) {
    assert.equal(res.status, "incomplete");
    assert.deepEqual(res.incomplete_details, { reason: "max_output_tokens" });
  } else assert.equal(res.status, "completed");

  const rows = await usageRows(srv.server, srv.config, accountId, keyId);
  assert.ok(rows.some(([model, endpoint, requests]) => model === "stories" && endpoint === "chat" && requests >= 1), "usage is recorded under the chat endpoint");
});

test("responses stream: the documented event order, sequence numbers, and the deltas add up to the final text", async () => {
  const res = await post({ model: "stories", input: [{ role: "user", content: [{ type: "input_text", text: "Tell me a story" }] }], max_output_tokens: 12, stream: true });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
  const events = parseNamedSse(await res.text());
  assert.deepEqual(
    events.map((e) => e.sequence_number),
    events.map((_, i) => i),
  );
  const types = events.map((e) => e.type);
  const deltas = types.filter((t) => t === "response.output_text.delta").length;
  assert.ok(deltas >= 1);
  assert.deepEqual(types, [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    ...Array(deltas).fill("response.output_text.delta"),
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.incomplete",
  ]);
  assert.equal(events[0]!.response.status, "in_progress");
  const text = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("");
  const last = events.at(-1)!.response;
  assert.equal(last.status, "incomplete");
  assert.equal(last.output[0].content[0].text, text);
  assert.equal(events.find((e) => e.type === "response.output_text.done")!.text, text);
  assert.equal(last.usage.output_tokens, 12);
});

test("responses stream through openai-node: finalResponse() matches the streamed text", async () => {
  const stream = client.responses.stream({ model: "stories", input: "The dog", max_output_tokens: 200 });
  let streamed = "";
  stream.on("response.output_text.delta", (e) => (streamed += e.delta));
  const final = await stream.finalResponse();
  assert.ok(final.status === "completed" || final.status === "incomplete");
  assert.equal(final.output_text, streamed);
});

const weather = {
  type: "function" as const,
  name: "get_weather",
  description: "Current weather for a city",
  parameters: { type: "object", properties: { city: { type: "string", maxLength: 20 } }, required: ["city"], additionalProperties: false },
  strict: true,
};

test("responses: a function-tool round trip (function_call item out, function_call_output in), stream and non-stream", async () => {
  const first = await client.responses.create({ model: "tools", input: "Weather in Paris?", tools: [weather], tool_choice: { type: "function", name: "get_weather" }, temperature: 0, max_output_tokens: 60 });
  const call = first.output.find((item) => item.type === "function_call");
  assert.ok(call && call.type === "function_call", JSON.stringify(first.output));
  assert.equal(call.name, "get_weather");
  assert.match(call.id!, /^fc_/);
  assert.equal(typeof JSON.parse(call.arguments).city, "string");

  const second = await client.responses.create({
    model: "tools",
    input: [
      { role: "user", content: "Weather in Paris?" },
      { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
      { type: "function_call_output", call_id: call.call_id, output: '{"temperature": 21}' },
    ],
    tools: [weather],
    tool_choice: "none",
    max_output_tokens: 20,
  });
  assert.ok(second.output.some((item) => item.type === "message"));
  const alone = await client.responses.create({ model: "tools", input: "Weather in Paris?", tools: [weather], tool_choice: "none", max_output_tokens: 1 });
  assert.ok(second.usage!.input_tokens > alone.usage!.input_tokens + 10, "the call and its output are in the prompt");

  const res = await post({ model: "tools", input: "Weather in Paris?", tools: [weather], tool_choice: "required", max_output_tokens: 60, temperature: 0, stream: true });
  const events = parseNamedSse(await res.text());
  const added = events.find((e) => e.type === "response.output_item.added" && e.item.type === "function_call")!;
  assert.equal(added.item.name, "get_weather");
  const args = events.filter((e) => e.type === "response.function_call_arguments.delta").map((e) => e.delta).join("");
  const done = events.find((e) => e.type === "response.function_call_arguments.done")!;
  assert.equal(done.arguments, args);
  assert.equal(typeof JSON.parse(args).city, "string");
  assert.equal(events.at(-1)!.type, "response.completed");
  assert.equal(events.at(-1)!.response.output.find((o: { type: string }) => o.type === "function_call").arguments, args);
});

test("responses: a reasoning model's thought is a reasoning item (reasoning_text), before the message", async () => {
  const res = await client.responses.create({ model: "think", input: "Why is the sky blue?", max_output_tokens: 40, temperature: 0 });
  const reasoning = res.output[0]!;
  assert.equal(reasoning.type, "reasoning");
  assert.ok(reasoning.type === "reasoning" && reasoning.content && reasoning.content[0]!.text.length > 0);
  assert.ok(!reasoning.content![0]!.text.includes("<think>"));
  assert.ok(res.usage!.output_tokens_details.reasoning_tokens > 0);

  const stream = await post({ model: "think", input: "Why is the sky blue?", max_output_tokens: 40, temperature: 0, stream: true });
  const events = parseNamedSse(await stream.text());
  assert.equal(events[2]!.type, "response.output_item.added");
  assert.equal(events[2]!.item.type, "reasoning");
  const thought = events.filter((e) => e.type === "response.reasoning_text.delta").map((e) => e.delta).join("");
  assert.equal(thought, reasoning.content![0]!.text, "at temperature 0 the streamed thought is the non-stream one");
});

test("responses: text.format json_schema gives JSON that parses", async () => {
  const res = await client.responses.create({
    model: "stories",
    input: "A colour",
    max_output_tokens: 60,
    text: { format: { type: "json_schema", name: "colour", schema: { type: "object", properties: { colour: { type: "string", enum: ["red", "blue"] } }, required: ["colour"], additionalProperties: false }, strict: true } },
  });
  assert.equal(res.status, "completed");
  assert.ok(["red", "blue"].includes((JSON.parse(res.output_text) as { colour: string }).colour));
});

test("AI SDK default provider (@ai-sdk/openai openai(model), the Responses API): generateText and streamText", async () => {
  const openai = createOpenAI({ baseURL: srv.baseURL, apiKey: key, fetch: srv.fetch as typeof fetch });
  const generated = await generateText({ model: openai("stories"), prompt: "Once upon a time", maxOutputTokens: 20, maxRetries: 0 });
  assert.ok(generated.text.length > 0);
  assert.ok((generated.usage.outputTokens ?? 0) > 0);

  const streamed = streamText({ model: openai("stories"), prompt: "Once upon a time", maxOutputTokens: 20, maxRetries: 0 });
  let text = "";
  for await (const piece of streamed.textStream) text += piece;
  assert.ok(text.length > 0);
  assert.equal(text, await streamed.text);
});

test("responses: what needs stored state, and built-in tools, are 400 invalid_parameter naming the field", async () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ previous_response_id: "resp_1" }, "previous_response_id"],
    [{ store: true }, "store"],
    [{ background: true }, "background"],
    [{ tools: [{ type: "web_search" }] }, "tools[0].type"],
    [{ tools: [{ type: "function" }] }, "tools[0].name"],
    [{ input: [{ type: "item_reference", id: "msg_1" }] }, "input[0]"],
    [{ text: { format: { type: "json_schema", schema: {} } } }, "text.format.name"],
    [{ max_output_tokens: 0 }, "max_output_tokens"],
    [{ tool_choice: "required" }, "tool_choice"],
    [{ input: [{ role: "user", content: [{ type: "input_image", image_url: "https://example.com/a.png" }] }] }, "input[0].content[0].image_url"],
  ];
  for (const [patch, param] of cases) {
    const error = await errorOf(await post({ model: "stories", input: "hi", ...patch }));
    assert.deepEqual(error, { status: 400, type: "invalid_request_error", code: "invalid_parameter", param }, JSON.stringify(patch));
  }
  const noKey = await srv.post("/v1/responses", { model: "stories", input: "hi" });
  assert.equal(noKey.status, 401);
  const chatless = (await srv.createKey({ endpoints: ["embeddings"] })).key;
  const scoped = await errorOf(await srv.post("/v1/responses", { model: "stories", input: "hi" }, { key: chatless }));
  assert.equal(scoped.status, 403, "the chat endpoint scope covers /v1/responses");
});

test("issue 29.17 responses: tools over the model's limits.maxTools (default 128) or limits.maxToolSchemaNodes are 400 invalid_parameter naming tools", async () => {
  const fn = (name: string, properties: Record<string, unknown> = {}) => ({ type: "function", name, parameters: { type: "object", properties } });
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ model: "tools", tools: Array.from({ length: 129 }, (_, i) => fn(`f${i}`)) }, /tools has 129 items; .* at most 128/],
    [{ model: "tools-capped", tools: [fn("a"), fn("b")] }, /tools has 2 items; .* at most 1/],
    [{ model: "tools-capped", tools: [fn("a", { x: { type: "string" }, y: { type: "object", properties: { z: { type: "string" } } } })] }, /more than 3 subschemas/],
  ];
  for (const [patch, message] of cases) {
    const res = await post({ input: "hi", max_output_tokens: 16, ...patch });
    const body = (await res.json()) as { error: { code: string; param: string | null; message: string } };
    assert.deepEqual([res.status, body.error.code, body.error.param], [400, "invalid_parameter", "tools"], JSON.stringify(body));
    assert.match(body.error.message, message);
  }
});

/** The real writer on a real SSE stream: an error after the first event is `response.failed` with the §7 error object. */
test("responses stream: an error after the first event is response.failed carrying the §7 error, then the stream closes", async () => {
  const app = Fastify();
  app.get("/s", async (_request, reply) => {
    const writer = new ResponseStreamWriter(new ResponseHead({ model: "m", input: "hi" }));
    const sse = new SseStream(reply, 15_000, null, writer.failureFrame);
    writer.attach(sse);
    writer.start();
    writer.delta({ type: "content", text: "Once" });
    writer.fail(new AppError("overloaded", { message: "The server is shutting down; retry the request." }));
    return reply;
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  try {
    const res = await fetch(`http://127.0.0.1:${(app.server.address() as { port: number }).port}/s`);
    const events = parseNamedSse(await res.text());
    assert.deepEqual(
      events.map((e) => e.type),
      ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.failed"],
    );
    const failed = events.at(-1)!.response;
    assert.equal(failed.status, "failed");
    assert.deepEqual(Object.keys(failed.error).sort(), ["code", "message", "param", "type"]);
    assert.equal(failed.error.code, "overloaded");
    assert.equal(failed.output[0].type, "message");
  } finally {
    await app.close();
  }
});
